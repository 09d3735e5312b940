// Package torchzip writes PyTorch's zip checkpoint format, the one
// torch.save has used since 1.6, so that torch.load(f, weights_only=True)
// reads the result on torch 1.13 and 2.x.
//
// It owns two things: the zip container as torch's PyTorchStreamWriter
// lays it out (every record stored uncompressed under one top folder,
// "archive/" by default, payloads starting on 64-byte boundaries thanks to
// an "FB" extra field, CRC32 and sizes in a data descriptor after each
// payload and in the central directory, ZIP64 records where sizes or
// offsets need them, a "version" record holding "3\n"), and a small
// protocol-2 pickle emitter for flat state dicts: a collections.OrderedDict
// whose values are tensors rebuilt by torch._utils._rebuild_tensor_v2
// (wrapped in _rebuild_parameter for parameters) over storages named by
// persistent ids ('storage', torch.<X>Storage, key, location, numel), or
// plain values (None, bool, int, str).
//
// The pickle uses only opcodes and globals that torch 1.13's weights_only
// unpickler accepts. That unpickler has no float opcode, so EncodeStateDict
// refuses float values (ErrUnsupportedValue); callers report them as
// dropped. Dtypes without a classic typed storage class (float8, uint16,
// ...) cannot be written either (ErrUnsupportedDType).
//
// Writer streams: the data of each record is copied from an io.Reader as
// it is written, with its CRC32 computed on the way, so memory stays
// bounded whatever the record sizes.
package torchzip
