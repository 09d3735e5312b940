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
mkdir -p "$PARENT"
WORK=$(mktemp -d "$PARENT/ckpt-bench-host.XXXXXX")   # only this is deleted at the end
trap 'rm -rf "$WORK"' EXIT

go build -o "$WORK/ckpt" "$ROOT/cmd/ckpt"
go build -o "$WORK/hostload" "$ROOT/bench/hostload"
"$PY" - "$WORK/big.pt" "$SIZE_GB" <<'PYEOF'
import sys, torch
path, gb = sys.argv[1], float(sys.argv[2])
per = 256 << 20                      # bytes per tensor
n = int(gb * 1e9 / per) + 1          # at least SIZE_GB decimal gigabytes
g = torch.Generator().manual_seed(0)
sd = {f"layers.{i}.weight": torch.randn(per // 4, generator=g) for i in range(n)}
torch.save(sd, path)
PYEOF
IN="$WORK/big.pt"
SIZE=$(stat -c %s "$IN")
TENSOR_BYTES=$("$WORK/ckpt" inspect --json "$IN" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["summary"]["storage_bytes"])')
cat "$IN" > /dev/null   # warm the page cache for every command alike

LABELS=()
declare -A WALLS RSS
run() { # label, command...
  local label=$1; shift
  /usr/bin/time -v -o "$WORK/time.txt" "$@" > /dev/null
  local wall rss
  wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$WORK/time.txt" |
    awk -F: '{ if (NF == 3) print $1*3600 + $2*60 + $3; else print $1*60 + $2 }')
  rss=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$WORK/time.txt")
  [[ -v "WALLS[$label]" ]] || LABELS+=("$label")
  WALLS[$label]+="$wall "
  if (( ${RSS[$label]:-0} < rss )); then RSS[$label]=$rss; fi
}

for ((r = 1; r <= ROUNDS; r++)); do
  run "plain read (os.ReadFile)" "$WORK/hostload" readfile "$IN"
  run "ckpt.Load (library, map cpu)" "$WORK/hostload" ckpt "$IN"
  run "ckpt load --map-location cpu (CLI)" "$WORK/ckpt" load --map-location cpu --json "$IN"
done

median() { tr ' ' '\n' | grep . | sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
READ=$(echo "${WALLS[plain read (os.ReadFile)]}" | median)
echo "input: $SIZE bytes ($(echo "$SIZE / 1000000000" | bc -l | cut -c1-5) GB), tensor bytes $TENSOR_BYTES, $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB RAM, $ROUNDS rounds, warm page cache, $(date -u +%Y-%m-%d)"
echo
echo "| command | median s | min s | max s | GB/s (median) | median / plain read | peak RSS MiB | RSS - tensor bytes MiB |"
echo "|---|---|---|---|---|---|---|---|"
for label in "${LABELS[@]}"; do
  w=${WALLS[$label]}
  med=$(echo "$w" | median)
  lo=$(echo "$w" | tr ' ' '\n' | grep . | sort -g | head -1)
  hi=$(echo "$w" | tr ' ' '\n' | grep . | sort -g | tail -1)
  printf '| %s | %.2f | %.2f | %.2f | %.2f | %.2fx | %.0f | %.0f |\n' "$label" "$med" "$lo" "$hi" \
    "$(echo "$SIZE / $med / 1000000000" | bc -l)" "$(echo "$med / $READ" | bc -l)" "$(echo "${RSS[$label]} / 1024" | bc -l)" \
    "$(echo "(${RSS[$label]} * 1024 - $TENSOR_BYTES) / 1048576" | bc -l)"
done
