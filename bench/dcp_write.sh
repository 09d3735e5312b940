#!/usr/bin/env bash
# Benchmark writing a torch.distributed.checkpoint (DCP) directory from Hugging
# Face-style sharded safetensors: ckpt against torch doing the same.
#
#   bench/dcp_write.sh [PARENT_DIR] [SIZE_MB] [ROUNDS]
#
# Needs torch 2.x with safetensors: scripts/torch2-python (the Debian trixie chroot
# of scripts/torch2-chroot.sh) or REF_PYTHON. In a fresh temporary directory under
# PARENT_DIR (default /tmp; deleted at the end) it writes SIZE_MB (default 400) MB of
# bfloat16 and float32 tensors as model-0000i-of-0000n.safetensors shards of 100 MB
# with an index.json (safetensors' save_file), then ROUNDS rounds (default 3),
# interleaved, input in the page cache, each command after a sync:
#   ckpt convert IDX OUT --to dcp                    one __0_0.distcp
#   ckpt convert IDX OUT --to dcp --dcp-ranks 4      four files, as 4 ranks would write
#   2 x ckpt convert ... --dcp-ranks 4 --part I/2    two processes at once (--part)
#   4 x ckpt convert ... --dcp-ranks 4 --part I/4    four processes at once
#   ckpt convert IDX OUT --to dcp --dcp-format safetensors   torch >= 2.8's layout
#   python startup alone (the import of torch and safetensors, in the reference's time)
#   reference: safetensors load_file of every shard + torch.distributed.checkpoint.save
#              (one process, no process group: FileSystemWriter, one file)
# and prints a markdown table of median/min/max wall time, ratio to the reference,
# peak RSS (/usr/bin/time -v; for the two --part processes, the larger of the two).
# ckpt verify checks ckpt's outputs against torch's tensor for tensor, and the --part
# union is compared byte for byte with the single-process output.
set -euo pipefail
PARENT=${1:-/tmp}
SIZE_MB=${2:-400}
ROUNDS=${3:-3}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/bench/lib.sh"
REF_PYTHON=${REF_PYTHON:-$ROOT/scripts/torch2-python}
mkdir -p "$PARENT"
WORK=$(mktemp -d "$PARENT/ckpt-bench-dcpw.XXXXXX")   # only this is deleted at the end
trap 'rm -rf "$WORK"' EXIT

go build -o "$WORK/ckpt" "$ROOT/cmd/ckpt"
IN="$WORK/in"
mkdir -p "$IN"
"$REF_PYTHON" - "$IN" "$SIZE_MB" <<'PYEOF'
import json, os, sys, torch
from safetensors.torch import save_file
out, mb = sys.argv[1], int(sys.argv[2])
g = torch.Generator().manual_seed(0)
tensors, total = {}, 0
i = 0
while total < mb * 1_000_000:
    dt = torch.bfloat16 if i % 2 == 0 else torch.float32
    t = torch.randn(2048, 2048 if dt == torch.bfloat16 else 1024, generator=g).to(dt)   # 8 MiB
    tensors[f"model.layers.{i // 4}.w{i % 4}.weight"] = t
    total += t.numel() * t.element_size()
    i += 1
names = list(tensors)
shard_bytes, shards, cur, size = 100_000_000, [], {}, 0
for n in names:
    b = tensors[n].numel() * tensors[n].element_size()
    if cur and size + b > shard_bytes:
        shards.append(cur); cur, size = {}, 0
    cur[n] = tensors[n]; size += b
shards.append(cur)
wm = {}
for k, s in enumerate(shards):
    fn = f"model-{k + 1:05d}-of-{len(shards):05d}.safetensors"
    save_file(s, os.path.join(out, fn), metadata={"format": "pt"})
    wm.update({n: fn for n in s})
json.dump({"metadata": {"total_size": total}, "weight_map": wm}, open(os.path.join(out, "model.safetensors.index.json"), "w"))
PYEOF
IDX="$IN/model.safetensors.index.json"
SIZE=$(du -cb "$IN"/*.safetensors | tail -1 | cut -f1)
REF_VERSION=$("$REF_PYTHON" -c 'import torch, safetensors; print(f"torch {torch.__version__}, safetensors {safetensors.__version__}")' 2>/dev/null)
cat > "$WORK/ref.py" <<'PYEOF'
import glob, os, sys, warnings
import torch.distributed.checkpoint as dcp
from safetensors.torch import load_file
warnings.simplefilter("ignore")
src, dst = sys.argv[1], sys.argv[2]
sd = {}
for f in sorted(glob.glob(os.path.join(src, "*.safetensors"))):
    sd.update(load_file(f))
dcp.save(sd, checkpoint_id=dst)
PYEOF
cat "$IN"/* > /dev/null   # warm the page cache for every command alike

bench_before() {
  rm -rf "$WORK"/out.*
  sync
}

for ((r = 1; r <= ROUNDS; r++)); do
  bench_run "python startup: import torch.distributed.checkpoint, safetensors" "$REF_PYTHON" -c 'import torch.distributed.checkpoint, safetensors.torch'
  bench_run "reference: load_file + dcp.save" "$REF_PYTHON" "$WORK/ref.py" "$IN" "$WORK/out.ref"
  # --sync: torch's FileSystemWriter fsyncs every file (sync_files=True), so ckpt does too.
  bench_run "ckpt convert --to dcp" "$WORK/ckpt" convert --sync "$IDX" "$WORK/out.one" --to dcp
  bench_run "ckpt convert --to dcp --dcp-ranks 4" "$WORK/ckpt" convert --sync "$IDX" "$WORK/out.four" --to dcp --dcp-ranks 4
  bench_run "2 x ckpt convert --dcp-ranks 4 --part I/2 (max RSS of the two)" sh -c "
    /usr/bin/time -f %M -o '$WORK/rss1' '$WORK/ckpt' convert --sync '$IDX' '$WORK/out.part' --to dcp --dcp-ranks 4 --part 1/2 2>/dev/null &
    '$WORK/ckpt' convert --sync '$IDX' '$WORK/out.part' --to dcp --dcp-ranks 4 --part 0/2 2>/dev/null; wait"
  bench_run "4 x ckpt convert --dcp-ranks 4 --part I/4" sh -c "
    for i in 1 2 3; do '$WORK/ckpt' convert --sync '$IDX' '$WORK/out.part4' --to dcp --dcp-ranks 4 --part \$i/4 >/dev/null 2>&1 & done
    '$WORK/ckpt' convert --sync '$IDX' '$WORK/out.part4' --to dcp --dcp-ranks 4 --part 0/4 >/dev/null 2>&1; wait"
  bench_run "ckpt convert --to dcp --dcp-format safetensors" "$WORK/ckpt" convert --sync "$IDX" "$WORK/out.hf" --to dcp --dcp-format safetensors
done
# Untimed: the outputs agree (each timed run removed the one before).
"$REF_PYTHON" "$WORK/ref.py" "$IN" "$WORK/out.ref"
"$WORK/ckpt" convert "$IDX" "$WORK/out.four" --to dcp --dcp-ranks 4 > /dev/null
"$WORK/ckpt" verify "$WORK/out.ref" "$WORK/out.four" > /dev/null
for i in 1 2 3 0; do "$WORK/ckpt" convert "$IDX" "$WORK/out.part4" --to dcp --dcp-ranks 4 --part $i/4 > /dev/null 2>&1 & done; wait
for i in 1 0; do "$WORK/ckpt" convert "$IDX" "$WORK/out.part" --to dcp --dcp-ranks 4 --part $i/2 > /dev/null 2>&1 & done; wait
for f in "$WORK"/out.four/* "$WORK"/out.four/.metadata; do cmp "$f" "$WORK/out.part/${f##*/}"; cmp "$f" "$WORK/out.part4/${f##*/}"; done
"$WORK/ckpt" verify "$WORK/out.ref" "$WORK/out.part" > /dev/null

echo "reference: $REF_VERSION"
echo "input: $(ls "$IN"/*.safetensors | wc -l) safetensors shards, $SIZE bytes, $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB RAM, $ROUNDS rounds, $(date -u +%Y-%m-%d)"
echo
echo "| command | median s | min s | max s | GB/s (median) | median / reference's | peak RSS MiB |"
echo "|---|---|---|---|---|---|---|"
bench_table "reference: load_file + dcp.save" "$SIZE"
echo "(the --part row's RSS is the sh + part 0 process; part 1's peak was $(( $(cat "$WORK/rss1") / 1024 )) MiB)"
