#!/usr/bin/env bash
# GPU load benchmark for issue 5, in one command on a machine with an NVIDIA
# GPU, PyTorch 2.x with CUDA, and safetensors:
#
#   bench/gpu_load.sh [SIZE_GB] [DIR]        (defaults: 8, /tmp/ckpt-gpu-bench)
#
# It generates a SIZE_GB checkpoint of float32/bfloat16 tensors twice (torch.save
# .pt and safetensors), then times, cold (page cache dropped for the file with
# posix_fadvise DONTNEED, or drop_caches when root) and warm:
#   ckpt load --map-location cuda:0 (with and without --no-verify),
#   torch.load(map_location='cuda:0'), safetensors.torch.load_file(device='cuda:0'),
# and once a pinned host-to-device copy of the same number of bytes (the PCIe
# limit). Each timing is the median of RUNS runs (default 3), of the whole call
# including CUDA context creation. Prints a markdown table to stdout; logs go to
# DIR/log.txt. Needs go (or a prebuilt bin/ckpt) and ~2x SIZE_GB of free disk.
set -euo pipefail
cd "$(dirname "$0")/.."
GB=${1:-8}
DIR=${2:-/tmp/ckpt-gpu-bench}
PY=${PYTHON:-python3}
RUNS=${RUNS:-3}
mkdir -p "$DIR"
LOG=$DIR/log.txt
: >"$LOG"
if command -v go >/dev/null 2>&1; then
  go build -o bin/ckpt ./cmd/ckpt
elif [ ! -x bin/ckpt ]; then
  echo "need go, or a prebuilt bin/ckpt" >&2; exit 1
fi
nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.current,pcie.link.width.current --format=csv,noheader >>"$LOG" 2>&1 || true

PT=$DIR/model.pt ST=$DIR/model.safetensors
"$PY" - "$GB" "$PT" "$ST" >>"$LOG" 2>&1 <<'PYEOF'
import os, sys, torch
from safetensors.torch import save_file
gb, pt, st = float(sys.argv[1]), sys.argv[2], sys.argv[3]
if os.path.exists(pt) and os.path.exists(st) and abs(os.path.getsize(st) - gb * 1e9) < 0.05 * gb * 1e9:
    print("reusing", pt, st); sys.exit()
g = torch.Generator().manual_seed(0)
sd, total, i = {}, 0, 0
while total < gb * 1e9:
    dt = torch.bfloat16 if i % 3 == 2 else torch.float32
    n = [4096 * 4096, 4096 * 11008, 4096, 11008 * 4096][i % 4]
    sd[f"layers.{i // 4}.w{i % 4}"] = torch.randn(n, generator=g).to(dt)
    total += n * sd[f"layers.{i // 4}.w{i % 4}"].element_size(); i += 1
torch.save(sd, pt); save_file(sd, st)
print("wrote", len(sd), "tensors,", total, "bytes")
PYEOF
BYTES=$(stat -c %s "$ST")

drop() { # drop the page cache for the files named
  if [ -w /proc/sys/vm/drop_caches ]; then sync; echo 3 >/proc/sys/vm/drop_caches
  else "$PY" -c 'import os,sys
for p in sys.argv[1:]:
    fd = os.open(p, os.O_RDONLY); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED); os.close(fd)' "$@"; fi
}
warm() { cat "$@" >/dev/null; }

# seconds CMD...: wall time of one run.
seconds() { local t0 t1; t0=$(date +%s.%N); "$@" >>"$LOG" 2>&1; t1=$(date +%s.%N); calc "$t1 - $t0"; }
calc() { awk "BEGIN { print $1 }"; }
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

TORCH="import sys, torch; sd = torch.load(sys.argv[1], map_location='cuda:0', weights_only=True); torch.cuda.synchronize()"
SAFE="import sys, torch; from safetensors.torch import load_file; sd = load_file(sys.argv[1], device='cuda:0'); torch.cuda.synchronize()"
# Python's interpreter and torch import time is measured separately and subtracted.
IMPORT="import torch, safetensors.torch"

row() { # label cache file cmd...
  local label=$1 cache=$2 file=$3; shift 3
  local ts=() i
  for ((i = 0; i < RUNS; i++)); do
    if [ "$cache" = cold ]; then drop "$file"; else warm "$file"; fi
    ts+=("$(seconds "$@")")
  done
  local s; s=$(median "${ts[@]}")
  case $label in torch.load*|safetensors*) s=$(calc "$s - $IMPORT_S") ;; esac
  printf '| %s | %s | %.2f | %.2f |\n' "$label" "$cache" "$s" "$(calc "$BYTES / $s / 1e9")"
}

IMPORT_S=$(median "$(seconds "$PY" -c "$IMPORT")" "$(seconds "$PY" -c "$IMPORT")" "$(seconds "$PY" -c "$IMPORT")")
PINNED=$("$PY" - "$BYTES" 2>>"$LOG" <<'PYEOF'
import sys, time, torch
n = int(sys.argv[1]); x = torch.empty(n, dtype=torch.uint8, pin_memory=True); x.fill_(1)
y = torch.empty(n, dtype=torch.uint8, device="cuda:0"); y.copy_(x, non_blocking=True); torch.cuda.synchronize()
best = 1e9
for _ in range(3):
    t = time.perf_counter(); y.copy_(x, non_blocking=True); torch.cuda.synchronize(); best = min(best, time.perf_counter() - t)
print(best)
PYEOF
)

echo "GPU load benchmark: $(head -1 "$LOG"), $BYTES bytes, median of $RUNS runs, $(date -u +%Y-%m-%d)"
echo
echo "| method | page cache | seconds | GB/s |"
echo "|---|---|---|---|"
for cache in cold warm; do
  row "ckpt load (verify)" $cache "$PT" bin/ckpt load "$PT" --map-location cuda:0 --json
  row "ckpt load --no-verify" $cache "$PT" bin/ckpt load "$PT" --map-location cuda:0 --no-verify --json
  row "ckpt load safetensors (verify)" $cache "$ST" bin/ckpt load "$ST" --map-location cuda:0 --json
  row "torch.load(map_location='cuda:0')" $cache "$PT" "$PY" -c "$TORCH" "$PT"
  row "safetensors load_file(device='cuda:0')" $cache "$ST" "$PY" -c "$SAFE" "$ST"
done
printf '| pinned H2D copy (cudaMemcpy, physical limit) | - | %.2f | %.2f |\n' "$PINNED" "$(calc "$BYTES / $PINNED / 1e9")"
echo
echo "ckpt's own report of the last warm run (read/upload/verify GB/s):"
bin/ckpt load "$PT" --map-location cuda:0 --json | "$PY" -c 'import json,sys; u=json.load(sys.stdin)["uploaded"]; print({k: u[k] for k in ("bytes","read_gb_per_s","upload_gb_per_s","verify_seconds","verify_gb_per_s","verified")})'
