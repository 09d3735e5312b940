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
#
# COLD=1 (root; issue 24 item 3) drops the page cache before every command
# (CKPT_BEFORE=BINARY adds that build's cold load, compared in the same run)
# (sync; echo 3 > /proc/sys/vm/drop_caches) and compares ckpt load and ckpt
# convert (to a safetensors file on the same disk; also with --sync, the
# output on the disk at exit) with the best cold
# sequential reads of the same file: dd iflag=direct bs=16M and cat.
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
if [ -n "${COLD:-}" ]; then
  bench_before() { rm -f "$WORK/out.safetensors"; sync; echo 3 > /proc/sys/vm/drop_caches; }
  for ((r = 1; r <= ROUNDS; r++)); do
    bench_run "dd iflag=direct bs=16M (cold)" dd if="$IN" of=/dev/null iflag=direct bs=16M status=none
    bench_run "cat > /dev/null (cold)" sh -c 'cat "$1" > /dev/null' sh "$IN"
    bench_run "ckpt load --map-location cpu (cold)" "$WORK/ckpt" load --map-location cpu "$IN"
    bench_run "ckpt load --map-location cpu --no-mmap (cold)" "$WORK/ckpt" load --map-location cpu --no-mmap "$IN"
    if [ -n "${CKPT_BEFORE:-}" ]; then
      bench_run "ckpt load (before) --map-location cpu (cold)" "$CKPT_BEFORE" load --map-location cpu "$IN"
    fi
    bench_run "ckpt convert -> safetensors (cold)" "$WORK/ckpt" convert "$IN" "$WORK/out.safetensors"
    bench_run "ckpt convert --sync -> safetensors (cold)" "$WORK/ckpt" convert --sync "$IN" "$WORK/out.safetensors"
  done
  DD=$(echo "${WALLS[dd iflag=direct bs=16M (cold)]}" | bench_median)
  CAT=$(echo "${WALLS[cat > /dev/null (cold)]}" | bench_median)
  BEST=$(printf '%s\n%s\n' "$DD" "$CAT" | sort -g | head -1)
  BASE="dd iflag=direct bs=16M (cold)"
  [ "$BEST" = "$DD" ] || BASE="cat > /dev/null (cold)"
  echo "input: $SIZE bytes, $(nproc) cores, $ROUNDS rounds, cold page cache before every command, $(date -u +%Y-%m-%d)"
  echo
  echo "| command | median s | min s | max s | GB/s | / best cold read | peak RSS MiB |"
  echo "|---|---|---|---|---|---|---|"
  bench_table "$BASE" "$SIZE"
  exit 0
fi
cat "$IN" > /dev/null   # warm the page cache for every command alike


for ((r = 1; r <= ROUNDS; r++)); do
  bench_run "plain read (os.ReadFile)" "$WORK/hostload" readfile "$IN"
  bench_run "ckpt.Load (library, map cpu)" "$WORK/hostload" ckpt "$IN"
  bench_run "ckpt.Load (library, map cpu, WithFileMapping)" "$WORK/hostload" ckpt-mmap "$IN"
  bench_run "ckpt load --map-location cpu (CLI, maps the file)" "$WORK/ckpt" load --map-location cpu --json "$IN"
  bench_run "ckpt load --map-location cpu --no-mmap (CLI, copies)" "$WORK/ckpt" load --map-location cpu --no-mmap --json "$IN"
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
