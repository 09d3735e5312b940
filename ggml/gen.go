package ggml

//go:generate go run ./internal/gen -o tables.go
