// Package convert owns checkpoint conversion: the pipeline behind
// `ckpt convert` (select, strip prefixes, rename, cast, retag devices,
// deduplicate tied weights, shard, compress, and write the output
// atomically). The checks behind `ckpt verify` are package verify's.
//
// Conversion streams: each tensor's bytes are read from the input straight
// into the output's write buffers (through a cast, when asked), hashed on
// the way, and written by a second goroutine, so memory is bounded by a
// few buffers plus the input's pickle, whatever the checkpoint's size, and
// reading overlaps with writing. The first bytes of a conversion's
// outputs, up to the kernel's free-run ceiling (half way between the
// background and the dirty thresholds, less the pages dirty already), go
// through the page cache and are left to the kernel's write-back, as cp
// leaves them; on Linux the rest is written behind (each window handed to
// the disk at once and dropped from the page cache once there), which past
// that point is faster than buffered writes (docs/benchmarks.md). WithSync
// writes everything behind and syncs each output before naming it
// (Summary.Synced).
//
// WithDestination writes elsewhere than the file system (ckpt.Convert
// passes a bucket of s3://, gs:// or az://): the same pipeline writes into
// the Destination's Outputs, which stream the bytes with no local copy; a
// safetensors header is rewritten at the end within the Output's held
// head. Outputs are committed at the end, shards first and the index
// last, and taken back on failure, as local temporary files are. DCP
// outputs go there too (the .distcp objects, then .metadata), and so do
// WithPart's shares when the Destination is a SizeDestination: part 0
// polls the other parts' outputs for their planned sizes (part.go).
//
// # Input checks
//
// Conversion checks the checksums the input carries while it streams: the
// CRC32 of each zip record holding a storage, and each tensor's xxh64c
// digest recorded by ckpt in a safetensors file. A mismatch fails the
// conversion with ErrDamaged, naming the tensor and record, and nothing
// is written: damaged bytes are never passed on under fresh digests. A
// tensor whose bytes are its storage's, in file order (the usual case), is
// checked on the bytes being converted, without a second read; a storage
// seen only through views, or swapped from big-endian, is read once more
// for its check.
//
// # Safetensors output
//
// The header follows the format's rules (package safetensors). Tensors
// that view the same bytes of one storage with the same dtype, offset,
// shape and strides (tied weights) are stored once under the first name
// in sorted order, and every dropped alias is recorded in __metadata__ as
// {"alias": "kept"}, as the reference converter does; other views are
// copied out contiguous under their own names. __metadata__ also holds
// {"format": "pt"}, the non-tensor values that JSON can carry under
// ObjectsKey (a JSON object of name to value), and each stored tensor's
// xxh64c digest (package digest) under digest.MetadataKey (a JSON object of name
// to "xxh64c:..."), computed over the bytes as written.
//
// float8_e8m0fnu is written as F8_E8M0 and float4_e2m1fn_x2 as F4, whose
// shape counts 4-bit values: a torch [N, M] float4_e2m1fn_x2 tensor (one
// byte of two values per element) is F4 [N, 2M] over the same bytes, as
// the reference library's torch bindings write it; reading halves the last
// dimension back (dtype.SafetensorsShape, dtype.TorchShape).
//
// # PyTorch output
//
// The zip is written by package torchzip: storages keep their sharing
// (tied weights stay tied, views keep offsets and strides), their location
// tags follow the remap rules (default: as saved), and big-endian inputs
// are written little-endian. Tensors of dtypes torch 1.13 lacks (float8,
// uint16-64) are written as torch 2.x writes them and listed in
// Summary.Torch2DTypes: such an output loads on torch 2.x only.
//
// From a PyTorch input, and unless WithStripPrefix, WithRename, WithOnly
// or WithMaxShardSize change the names, the output keeps the input's object
// tree (Summary.Structure "tree"): a training checkpoint {"model": ...,
// "optimizer": {"state": {0: ...}, "param_groups": [...]}, "epoch": 7}
// loads as it was saved, int keys, tuples, OrderedDicts and a state dict's
// _metadata included, each tensor converted (retagged, cast) in place and
// tensors shared in the input shared in the output. Opaque and foreign
// objects (argparse.Namespace, numpy values, user classes) are left out
// and listed, as are frozensets, sparse, quantized and meta tensors; a
// list or tuple holding such an item is left out whole, since removing an
// item would move the others, while a dict loses only that key. When
// leaving something out would lose a tensor the flat state dict carries
// (a whole pickled nn.Module), or the input has no tree (safetensors), the
// output is a flat state dict of dotted names instead.
//
// Floats are written (BINFLOAT): torch.load(weights_only=True) reads them
// on torch 2.0 and later, not on 1.13; Summary.Floats counts them.
// WithDropFloats leaves them out, with the bytes, sets, complex numbers
// and torch.device values 1.13's loader cannot read either, so that the
// output loads with weights_only=True on torch 1.13. An optimizer's
// param_groups then lack lr, betas and eps, which must be set again before
// optimizer.step().
//
// # Casts
//
// WithDType casts floating storages to float64, float32, float16 or
// bfloat16 the way torch's Tensor.to does on the CPU: through float32,
// rounding to nearest even, NaN and Inf preserved. Integer, bool and
// complex tensors, and optimizer step counters, are left as they are.
//
// # Atomic output
//
// Every output file is written to a temporary file in its destination
// directory (synced with WithSync) and put in place only when complete, so an
// interrupted conversion never leaves a partial output; an existing output
// is replaced only with WithForce. For sharded output the index is put in
// place last. On Linux the temporary file is unnamed (O_TMPFILE) and
// linked into place when complete, so that even a conversion killed with
// SIGKILL leaves nothing behind; on filesystems without O_TMPFILE (and on
// other systems) it is a hidden ".NAME.tmp-*" file beside the output, held
// under an flock while its conversion lives, and the next conversion to
// the same output removes such files that no live process holds.
//
// Only a regular file is ever replaced: an output path naming a device
// (/dev/null), a FIFO, a socket or a directory fails with ErrNotRegular
// before anything is written, force or not. A symbolic link at an output
// path is written through, as cp does: its target, which must be a
// regular file, is replaced atomically (the temporary file goes in the
// target's directory) and the link is kept; a dangling link is refused.
package convert
