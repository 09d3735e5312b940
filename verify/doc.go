// Package verify owns the checks behind `ckpt verify`: Check recomputes
// every checksum a checkpoint carries (the CRC32 of each zip record and
// DCP chunk, the xxh64c digests ckpt convert records in safetensors
// metadata under digest.MetadataKey) and reports each mismatch by tensor
// name; Compare compares two checkpoints tensor by tensor, by name, dtype,
// shape and value, bitwise or within a tolerance, resolving the tied
// weights a safetensors conversion dropped (Aliases).
//
// Both read through package statedict and report mismatches in their
// reports; their errors are for failures to read. The root package ckpt
// (ckpt.Check, ckpt.Compare) is the door the CLI uses.
package verify
