// Package statedict opens PyTorch checkpoints without Python: torch.save
// zip archives, the legacy and tar formats, gzip/zstd-wrapped files,
// TorchScript archives, safetensors (single and sharded), GGUF and
// torch.distributed.checkpoint (DCP) directories. Open reads every
// container's metadata (unpickling, never executing, the pickles torch
// would load) into a Checkpoint of Tensors and Storages; tensor bytes are
// read on demand, in file order, through each Storage's readers.
//
// Which file holds what:
//
//   - model.go, checkpoint.go, view.go, dtype.go, summary.go: the model
//     (Format, Tensor, Storage, Checkpoint, View, DType, Summary).
//   - open.go, limits.go, errors.go: Open and its options, the limits of
//     untrusted input, the *Error type and sentinel errors.
//   - routes.go: torch's loader paths, shared with package scan: which
//     containers a file parses as, and which records each path unpickles.
//   - zip.go, legacy.go, tar.go, compressed.go, source.go, pickleat.go:
//     the torch.save containers and where their storages' bytes lie
//     (zip.go adapts a torchzip.Reader, which owns the zip container:
//     records, their bytes and CRC32s; data.pkl and the storages it
//     references are read here).
//   - build.go, module.go, packed.go, torchscript.go, dtensor.go,
//     sparse.go: turning an unpickled tree into Tensors (nn.Module state,
//     quantized packed weights, TorchScript classes, DTensor, sparse).
//   - safetensors.go, sharded.go, gguf.go: the other single-file formats
//     and index.json sharding.
//   - dcp.go: the adapter of package dcp, which owns the DCP format
//     (.metadata, tiling, where each item lies, DCP_SHARDING_INFO): it
//     opens a dcp.Reader as a Checkpoint of global tensors assembled
//     lazily from their chunks (FormatDCP), decoding each chunk's
//     torch.save zip here, and likewise torch >= 2.8's safetensors-backed
//     DCP (per-rank safetensors files whose DCP_SHARDING_INFO places their
//     chunks, and .distcp files holding a safetensors blob).
//   - data.go, gather.go, slice.go: reading tensor bytes: whole storages,
//     pieces assembled into a logical tensor (a DCP tensor's Chunks and
//     VerifyChunks), slices of a tensor.
//   - stats.go: per-tensor statistics.
//   - regular_unix.go, regular_other.go: platform-specific file checks.
package statedict
