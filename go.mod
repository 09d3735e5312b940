module github.com/ckpt-dev/ckpt

go 1.26.8

require (
	github.com/cespare/xxhash/v2 v2.3.0
	github.com/ebitengine/purego v0.11.3
	github.com/klauspost/compress v1.20.3
	github.com/nlpodyssey/gopickle v0.2.0
	github.com/spf13/cobra v1.10.2
)

require (
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/spf13/pflag v1.0.9 // indirect
)
