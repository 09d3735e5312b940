#!/usr/bin/env bash
# Benchmark consolidating a torch.distributed.checkpoint (DCP) directory, and a
# tensor-parallel rank's read, on a generated checkpoint of at least 4 GiB.
#
#   bench/dcp.sh [PARENT_DIR] [SIZE_GIB] [ROUNDS]
#
# Needs torch 2.x with safetensors: scripts/torch2-python (the Debian trixie chroot
# of scripts/torch2-chroot.sh) or REF_PYTHON. In a fresh temporary directory under
# PARENT_DIR (default /tmp; deleted at the end) it writes WORK/dcp with
# scripts/gen_dcp_fixtures.py --big: 4 processes (gloo, CPU), float32 4096x4096
# tensors of 64 MiB placed in turn as [Shard(0), Shard(1)] on a 2x2 mesh, Shard(0)
# and Shard(1) on 4 ranks, and [Shard(1), Replicate()] on the 2x2 mesh. Then ROUNDS
# rounds (default 3), interleaved, input in the page cache, each command after a sync:
#   cp -r DCP OUT                  the same bytes copied (the floor)
#   ckpt convert DCP OUT.safetensors
#   reference: dcp_to_torch_save(DCP, OUT.pt), torch.load, safetensors save_file
# and prints a markdown table of median/min/max wall time, ratio to cp, peak RSS
# (/usr/bin/time -v). Last, bench/rankread reads rank 1 of 4 with every tensor split
# on dim 0 (what `ckpt load --rank 1 --world-size 4 --split 'layers.*=0'` reads) and
# reports the bytes the process read (rchar of /proc/self/io) against the total.
set -euo pipefail
PARENT=${1:-/tmp}
SIZE_GIB=${2:-4}
ROUNDS=${3:-3}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/bench/lib.sh"
REF_PYTHON=${REF_PYTHON:-$ROOT/scripts/torch2-python}
mkdir -p "$PARENT"
WORK=$(mktemp -d "$PARENT/ckpt-bench-dcp.XXXXXX")   # only this is deleted at the end
trap 'rm -rf "$WORK"' EXIT

go build -o "$WORK/ckpt" "$ROOT/cmd/ckpt"
go build -o "$WORK/rankread" "$ROOT/bench/rankread"
"$REF_PYTHON" "$ROOT/scripts/gen_dcp_fixtures.py" --out "$WORK" --big "$SIZE_GIB" --port 29533 2>/dev/null
IN="$WORK/big"
SIZE=$(du -sb "$IN" | cut -f1)
REF_VERSION=$("$REF_PYTHON" -c 'import torch, safetensors; print(f"torch {torch.__version__}, safetensors {safetensors.__version__}")' 2>/dev/null)
cat > "$WORK/ref.py" <<'PYEOF'
import sys, torch
from torch.distributed.checkpoint.format_utils import dcp_to_torch_save
from safetensors.torch import save_file
src, tmp, dst = sys.argv[1], sys.argv[2], sys.argv[3]
dcp_to_torch_save(src, tmp)
sd = torch.load(tmp, map_location="cpu", weights_only=True)
save_file({k: v.contiguous() for k, v in sd.items()}, dst, metadata={"format": "pt"})
PYEOF
cat "$IN"/* > /dev/null   # warm the page cache for every command alike

bench_before() {
  rm -rf "$WORK"/out.*
  sync
}

for ((r = 1; r <= ROUNDS; r++)); do
  bench_run "cp -r DCP OUT" cp -r "$IN" "$WORK/out.copy"
  bench_run "cp -r DCP OUT && sync" sh -c "cp -r '$IN' '$WORK/out.copy' && sync"
  bench_run "ckpt convert DCP OUT.safetensors" "$WORK/ckpt" convert "$IN" "$WORK/out.safetensors"
  bench_run "reference: dcp_to_torch_save + torch.load + save_file" "$REF_PYTHON" "$WORK/ref.py" "$IN" "$WORK/out.pt" "$WORK/out.safetensors"
done
# The two outputs agree (last round's reference output against the DCP input).
"$WORK/ckpt" verify "$IN" "$WORK/out.safetensors" > /dev/null

echo "reference: $REF_VERSION"
echo "input: DCP directory of $SIZE bytes ($(ls "$IN" | wc -l) files), $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB RAM, $ROUNDS rounds, $(date -u +%Y-%m-%d)"
echo
echo "| command | median s | min s | max s | GB/s (median) | median / cp's | peak RSS MiB |"
echo "|---|---|---|---|---|---|---|"
bench_table "cp -r DCP OUT" "$SIZE"
echo
echo "rank 1 of 4, every tensor split on dim 0:"
/usr/bin/time -f '%e s, peak RSS %M KiB' "$WORK/rankread" "$IN" 1 4 'layers.*=0'
