#!/usr/bin/env bash
# Benchmark loading a checkpoint into host memory: the library's one call
# (ckpt.Load, bench/hostload) against the CLI (ckpt load --map-location cpu)
# and a plain read of the file into one buffer (os.ReadFile), same run.
#
#   bench/host_load.sh [PARENT_DIR] [SIZE_GB] [ROUNDS]
#
# Generates WORKDIR/big.pt (a fresh temporary directory under PARENT_DIR,
# deleted at the end) with /usr/bin/python3 torch: float32 tensors of 256 MiB,
# at least SIZE_GB (default 4) decimal gigabytes. Runs ROUNDS (default 3)
# interleaved rounds with the file in the page cache and prints a markdown
# table: median, min and max wall time, GB/s of the median, ratio to the
# plain read, peak RSS (/usr/bin/time -v) and peak RSS minus the tensor bytes
# (the overhead, which must stay bounded, not grow with the checkpoint).
set -euo pipefail
PARENT=${1:-/tmp}
SIZE_GB=${2:-4}
ROUNDS=${3:-3}
PY=${PYTHON:-/usr/bin/python3}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/bench/lib.sh"
mkdir -p "$PARENT"
WORK=$(mktemp -d "$PARENT/ckpt-bench-host.XXXXXX")   # only this is deleted at the end
trap 'rm -rf "$WORK"' EXIT

go build -o "$WORK/ckpt" "$ROOT/cmd/ckpt"
go build -o "$WORK/hostload" "$ROOT/bench/hostload"
bench_gen_pt "$PY" "$WORK/big.pt" "$SIZE_GB"
IN="$WORK/big.pt"
SIZE=$(stat -c %s "$IN")
TENSOR_BYTES=$("$WORK/ckpt" inspect --json "$IN" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["summary"]["storage_bytes"])')
cat "$IN" > /dev/null   # warm the page cache for every command alike


for ((r = 1; r <= ROUNDS; r++)); do
  bench_run "plain read (os.ReadFile)" "$WORK/hostload" readfile "$IN"
  bench_run "ckpt.Load (library, map cpu)" "$WORK/hostload" ckpt "$IN"
  bench_run "ckpt load --map-location cpu (CLI)" "$WORK/ckpt" load --map-location cpu --json "$IN"
done

READ=$(echo "${WALLS[plain read (os.ReadFile)]}" | bench_median)
echo "input: $SIZE bytes ($(echo "$SIZE / 1000000000" | bc -l | cut -c1-5) GB), tensor bytes $TENSOR_BYTES, $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB RAM, $ROUNDS rounds, warm page cache, $(date -u +%Y-%m-%d)"
echo
echo "| command | median s | min s | max s | GB/s (median) | median / plain read | peak RSS MiB | RSS - tensor bytes MiB |"
echo "|---|---|---|---|---|---|---|---|"
for label in "${LABELS[@]}"; do
  w=${WALLS[$label]}
  med=$(echo "$w" | bench_median)
  lo=$(echo "$w" | bench_min)
  hi=$(echo "$w" | bench_max)
  printf '| %s | %.2f | %.2f | %.2f | %.2f | %.2fx | %.0f | %.0f |\n' "$label" "$med" "$lo" "$hi" \
    "$(echo "$SIZE / $med / 1000000000" | bc -l)" "$(echo "$med / $READ" | bc -l)" "$(echo "${RSS[$label]} / 1024" | bc -l)" \
    "$(echo "(${RSS[$label]} * 1024 - $TENSOR_BYTES) / 1048576" | bc -l)"
done
