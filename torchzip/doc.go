// Package torchzip reads and writes the container of PyTorch's zip
// checkpoint format, the one torch.save has used since 1.6; what it
// writes, torch.load(f, weights_only=True) reads on torch 1.13 and 2.x.
//
// Reading (Reader, read.go) is the container only: the zip directory,
// the records under the one top folder, looked up as torch's zip reader
// looks them up (RecordKey: ASCII case folded, two records of one key
// refused), where each record's bytes lie (Record.Data, Span; records
// sharing bytes refused: CheckOverlaps, SpanGuard), their CRC32s, and
// bounded reads of whole records (Record.ReadAll). Unpickling data.pkl
// and building tensors over the storages it references is the model's,
// package statedict's: it is the same for the legacy and tar containers,
// whereas the records and their bytes are this format's alone.
//
// Writing owns two things: the zip container as torch's PyTorchStreamWriter
// lays it out (every record stored uncompressed under one top folder,
// "archive/" by default, payloads starting on 64-byte boundaries thanks to
// an "FB" extra field, CRC32 and sizes in a data descriptor after each
// payload and in the central directory, ZIP64 records where sizes or
// offsets need them, a "version" record holding "3\n"), and a small
// protocol-2 pickle emitter: EncodeStateDict writes a flat state dict (a
// collections.OrderedDict of names to tensors and plain values), EncodeTree
// any tree of dicts, OrderedDicts, lists, tuples, sets and plain values (a
// training checkpoint as saved: {"model": ..., "optimizer": {"state": {0:
// ...}, "param_groups": [...]}, "epoch": 7}). Tensors are rebuilt by
// torch._utils._rebuild_tensor_v2 (wrapped in _rebuild_parameter for
// parameters) over storages named by persistent ids ('storage',
// torch.<X>Storage, key, location, numel); see below for newer dtypes.
//
// Tensors, dicts, OrderedDicts, lists, tuples, None, bools, ints and
// strings use only opcodes and globals that torch 1.13's weights_only
// unpickler accepts. Floats use BINFLOAT, which that unpickler lacks and
// torch 2.0's has; bytes, sets, complex numbers and torch.device values use
// the globals torch 2.x's weights_only allowlist names (_codecs.encode,
// builtins.set, builtins.complex, torch.device). Every one of them loads
// with weights_only=False on any torch. Dtypes without a classic typed
// storage class (float8, uint16, ...) are written as torch 2.x writes
// them: _rebuild_tensor_v3 over an UntypedStorage, with the dtype as a
// global (Torch2DType); torch 1.13 has no such dtypes, torch 2.x loads them
// with weights_only=True.
//
// Writer streams: the data of each record is copied from an io.Reader as
// it is written, with its CRC32 computed on the way, so memory stays
// bounded whatever the record sizes.
package torchzip
