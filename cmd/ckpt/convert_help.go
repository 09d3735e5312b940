package main

// convertLong is `ckpt convert --help`'s description.
const convertLong = `Convert writes IN (anything inspect reads) to OUT as safetensors or a PyTorch zip,
tensor by tensor, in memory bounded by a few buffers plus IN's pickle, at disk
speed: past the share the page cache takes (see below) the output is written
behind on Linux (each few MiB handed to the disk at once and dropped from the
page cache once there), so it does not fill the page cache, and it is renamed
into place only when complete.

OUT's format comes from --to or its extension (.safetensors; .pt .pth .bin .ckpt).
OUT may be a directory (created if missing) or a *.index.json path; with --max-shard-size the output
is split into model-0000i-of-0000n.safetensors (or pytorch_model-...bin) shards
plus an index.json in the Hugging Face layout.

To safetensors, tied weights are stored once (dropped aliases are recorded in
__metadata__), views are copied out contiguous (an output past
--max-materialized, by default 64x IN's storage bytes and at least 1 GiB, is
refused before anything is written: a broadcast view made by expand() would
be written at its full size), non-tensor values go to
__metadata__ ("ckpt.objects") and each tensor's xxh64c digest to "ckpt.digests"
for 'ckpt verify'. To .pth, tied weights stay tied and location tags follow
--map-location (default: as saved; "cpu" fixes "Attempting to deserialize
object on a CUDA device"). A .pth output from a PyTorch input keeps the
input's structure (nested dicts, int keys, lists, tuples, floats: a training
checkpoint's ckpt["model"] and ckpt["optimizer"] load as before) unless
--strip-prefix, --rename, --only or --max-shard-size change names, which
give a flat state dict of dotted names. torch.load(weights_only=True) reads
floats on torch >= 2.0; --drop-floats leaves them out for torch 1.13.
Anything the output cannot carry is listed.

` + tpHelp + `

--to dcp writes OUT as a torch.distributed.checkpoint directory (.metadata and
__R_0.distcp files, torch 2.6's FileSystemWriter layout) that dcp.load reads in
any world size: --dcp-ranks R writes it as R ranks would, --split RULES chunks
the matching tensors over the ranks; a nested input ({"model": ..., "optim":
...}) keeps the nesting dcp.save gives it; --dcp-format safetensors writes torch
>= 2.8's HuggingFaceStorageWriter layout instead (safetensors files whose header
says where each chunk lies). --part I/N (or auto: torchrun, Slurm, an
Indexed Job) writes only process I's files of a DCP or sharded safetensors
output, to a directory or an s3://, gs:// or az:// prefix; part 0 writes the
index once the others' files exist with their planned sizes (docs/dcp-write.md).

OUT is written to a temporary file beside it and renamed into place when
complete: an interrupted convert never leaves a partial OUT (on Linux the
temporary file is unnamed, so even kill -9 leaves nothing). An existing OUT
is replaced only with --force, and only if it is a regular file: a device
(/dev/null), FIFO or socket is refused. A symbolic link at OUT is written
through, as cp does: its target is replaced and the link kept. OUT may be an
s3://, gs:// or az:// URL, in every mode: the output is streamed to the bucket
with no local copy, each object appearing only when complete (a prefix ending
in "/" takes directory, sharded and tensor-parallel outputs); any other URL is
refused before anything is written.

A local OUT is not synced, as cp's is not: its first bytes, as many as the
kernel takes without slowing a writer down (half way between
vm.dirty_background_* and vm.dirty_*, less what is dirty already), are left in
the page cache for the kernel to write out, and the rest is written behind,
which is faster past that point. Where fresh page cache proves slow (a VM whose
host has taken its free memory back, a cgroup at its limit), the first bytes
are written behind too. --sync writes every OUT behind and has it on the disk
before ckpt exits; --json says which was done ("synced").`

// convertExample is `ckpt convert --help`'s examples.
const convertExample = `  ckpt convert model.pt model.safetensors
  ckpt convert --map-location cpu gpu_run.pt cpu_run.pt
  ckpt convert --dtype bf16 --strip-prefix module. ddp.pt model.safetensors
  ckpt convert --max-shard-size 5GB big.pt out/model.safetensors.index.json
  ckpt convert --compress zstd model.safetensors model.safetensors.zst
  ckpt convert --sync model.pt /mnt/ckpt/model.safetensors   # on the disk when ckpt exits
  ckpt convert ./dcp_checkpoint/ model.safetensors      # torch.distributed.checkpoint directory
  ckpt convert model.safetensors.index.json s3://bucket/dcp/ --to dcp --dcp-ranks 8 --part auto   # under torchrun/srun
  ckpt convert model.pt hf_dcp/ --to dcp --dcp-format safetensors --dcp-ranks 4 --split '*=0'
  ckpt convert model.safetensors tp4/ --tensor-parallel 4 \
      --split '*.q_proj.weight=0,*.k_proj.weight=0,*.v_proj.weight=0,*.o_proj.weight=1'`
