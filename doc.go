// Package ckpt loads PyTorch and safetensors checkpoints in one call, for Go
// services that ingest trained weights.
//
//	m, err := ckpt.Load(ctx, "model.pt", ckpt.WithMapLocation("cpu"))
//	if err != nil {
//		return err // errors.Is(err, pickle.ErrUnsafe), devicecopy.ErrCRC, ckpt.ErrStray, ...
//	}
//	defer m.Close()
//	w, _ := m.Tensor("fc.weight")
//	f32, err := ckpt.View[float32](w) // zero-copy []float32 over the loaded bytes
//
// The package owns the orchestration that the ckpt command also uses:
// Open turns a source (a file or a directory today; URLs plug in at the same
// place) into a lazy *statedict.Checkpoint; Load plans where every tensor
// goes (remap, like torch.load's map_location), runs the pre-flight
// (devicecopy.Preflight) before a byte is copied, reads the CPU tensors into
// host memory (checking zip CRC32s and computing xxh64c digests) and uploads
// the GPU tensors with on-device verification. Digests recorded at save time
// by `ckpt convert` are compared with what was read. One Close frees the
// host and the device memory.
//
// The reports are the library's too: Model.Report (a LoadReport) and
// Inspect (an InspectReport) marshal to exactly what `ckpt load --json` and
// `ckpt inspect --json` print, docs/cli-json.md being their schema, so a
// service can return the report the command line shows.
//
// Nothing in a checkpoint is executed. Errors of the packages underneath
// (statedict, pickle, remap, devicecopy, convert) are returned wrapped, so
// errors.Is and errors.As see their sentinels and types.
package ckpt
