// Package ckpt reads machine-learning checkpoints without Python and
// without running any code from them, for Go services that ingest trained
// weights; the ckpt command is built on it. It reads PyTorch files (zip,
// legacy and tar, gzip/zstd wrapped), safetensors (sharded ones through
// their Hugging Face index.json included), GGUF and
// torch.distributed.checkpoint (DCP) directories, from local files and
// directories and from s3://, gs://, az:// and http(s):// URLs, and
// writes safetensors, PyTorch zip, GGUF and DCP, locally or to s3://, gs://
// and az://.
//
//	m, err := ckpt.Load(ctx, "model.pt", ckpt.WithMapLocation("cpu"))
//	if err != nil {
//		return err // errors.Is(err, pickle.ErrUnsafe), devicecopy.ErrCRC, ckpt.ErrStray, ...
//	}
//	defer m.Close()
//	w, _ := m.Tensor("fc.weight")
//	f32, err := ckpt.View[float32](w) // zero-copy []float32 over the loaded bytes
//
// The package is the one door of the library, the one the ckpt command
// goes through. Open turns a source (a file, a directory or a URL) into a
// lazy *statedict.Checkpoint; Load plans where every tensor goes (remap,
// like torch.load's map_location), runs the pre-flight
// (devicecopy.Preflight) before a byte is copied, reads the CPU tensors
// into host memory (checking zip CRC32s and computing xxh64c digests) and
// uploads the GPU tensors with on-device verification. Digests recorded at
// save time by `ckpt convert` are compared with what was read. One Close
// frees the host and the device memory. Convert writes a checkpoint in
// another format; Scan audits files for the globals their pickles import,
// running nothing; Devices reports the NVIDIA driver and the GPUs this
// process can use (package cuda).
//
// The reports are the library's too: Model.Report (a LoadReport) and
// Inspect (an InspectReport) marshal to exactly what `ckpt load --json` and
// `ckpt inspect --json` print, docs/cli-json.md being their schema, so a
// service can return the report the command line shows.
//
// Nothing in a checkpoint is executed. Errors of the packages underneath
// (statedict, pickle, remap, cuda, devicecopy, convert) are returned wrapped, so
// errors.Is and errors.As see their sentinels and types.
package ckpt
