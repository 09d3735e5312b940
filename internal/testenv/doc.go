// Package testenv owns what the interop tests of every package share: the
// Python interpreter, with torch, numpy and safetensors, that they run to
// check ckpt against real PyTorch.
//
// By default that is /usr/bin/python3 (on the CI machine, Debian's torch
// 1.13). CKPT_PYTHON names another: scripts/torch2-python runs torch 2.x
// from a Debian trixie chroot (scripts/torch2-chroot.sh), so the same
// tests check torch 2.x too.
package testenv
