#!/usr/bin/env bash
# Benchmark `ckpt convert` against `cp` on a generated checkpoint of at least 4 GB.
#
#   bench/convert.sh [PARENT_DIR] [SIZE_GB]   (works in a fresh temporary directory under PARENT_DIR)
#
# Generates WORKDIR/big.pt with /usr/bin/python3 torch (float32 tensors of 256 MiB each),
# then, in the same run and with the input in the page cache for every command, measures
# wall time and peak RSS (/usr/bin/time -v) of:
#   cp IN OUT                      the floor: read once, write once
#   cp IN OUT && sync OUT          the floor with the fsync ckpt convert does before renaming
#   cat IN > OUT && sync OUT       the same through user space (read + write calls), as ckpt does
#   ckpt convert IN OUT.safetensors
#   ckpt convert IN OUT.pt         (zip -> zip; --map-location cpu)
# and prints a markdown table. The temporary directory and everything in it is deleted at the end.
# cp uses copy_file_range (no user-space copy at all); ckpt convert reads and writes through
# user space and fsyncs before its atomic rename, so "cp && sync" is the fair floor.
set -euo pipefail
PARENT=${1:-/tmp}
SIZE_GB=${2:-4}
PY=${PYTHON:-/usr/bin/python3}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$PARENT"
WORK=$(mktemp -d "$PARENT/ckpt-bench-convert.XXXXXX")   # only this is deleted at the end
trap 'rm -rf "$WORK"' EXIT

go build -o "$WORK/ckpt" "$ROOT/cmd/ckpt"
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
cat "$IN" > /dev/null   # warm the page cache for every command alike

measure() { # label, command...
  local label=$1; shift
  rm -f "$WORK"/out.*
  sync  # start each command with no dirty pages left by the previous one
  /usr/bin/time -v -o "$WORK/time.txt" "$@" > /dev/null
  local wall rss
  wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$WORK/time.txt" |
    awk -F: '{ if (NF == 3) print $1*3600 + $2*60 + $3; else print $1*60 + $2 }')
  rss=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$WORK/time.txt")
  printf '| %s | %.2f | %.2f | %.0f |\n' "$label" "$wall" "$(echo "$SIZE / $wall / 1000000000" | bc -l)" "$(echo "$rss / 1024" | bc -l)"
}

echo "input: $SIZE bytes ($(echo "$SIZE / 1000000000" | bc -l | cut -c1-5) GB), $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB RAM, $(df -h "$WORK" | awk 'NR==2 {print $1}'), $(date -u +%Y-%m-%d)"
echo
echo "| command | wall s | GB/s | peak RSS MiB |"
echo "|---|---|---|---|"
measure "cp IN OUT" cp "$IN" "$WORK/out.copy"
measure "cp IN OUT && sync OUT" sh -c "cp '$IN' '$WORK/out.copy' && sync '$WORK/out.copy'"
measure "cat IN > OUT && sync OUT" sh -c "cat '$IN' > '$WORK/out.copy' && sync '$WORK/out.copy'"
measure "ckpt convert IN OUT.safetensors" "$WORK/ckpt" convert "$IN" "$WORK/out.safetensors"
measure "ckpt convert --map-location cpu IN OUT.pt" "$WORK/ckpt" convert --map-location cpu "$IN" "$WORK/out.pt"
