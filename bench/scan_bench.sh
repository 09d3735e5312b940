#!/usr/bin/env bash
# Benchmark `ckpt scan` against a blocklist pickle scanner in Python on the same files.
#
#   bench/scan_bench.sh [PARENT_DIR] [SIZE_GB] [ROUNDS]
#
# No blocklist scanner is packaged by Debian (bookworm or trixie: `apt-cache search picklescan`
# finds nothing) and PyPI is not reachable here, so the peer is bench/scan_ref.py: a
# stdlib-only scanner built the way picklescan works (zipfile + pickletools.genops over every
# .pkl record or the bare pickle stream, GLOBAL/INST names and STACK_GLOBAL resolved from the
# two preceding string opcodes, matched against a module blocklist).
# Files: a torch.save zip checkpoint of SIZE_GB (default 10) decimal GB generated in a fresh
# temporary directory under PARENT_DIR (deleted at the end; tensors are torch.empty, whose
# untouched pages cost no memory), the same as a legacy (magic-number) file, and the
# testdata/fixtures tree (about 60 small files). Each command runs ROUNDS times (default 5),
# interleaved, warm page cache; the table shows the median wall time and the peak RSS
# (/usr/bin/time -v) of the median run's command.
set -euo pipefail
PARENT=${1:-/tmp}
SIZE_GB=${2:-10}
ROUNDS=${3:-5}
PY=${PYTHON:-/usr/bin/python3}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$PARENT"
WORK=$(mktemp -d "$PARENT/ckpt-bench-scan.XXXXXX")   # only this is deleted at the end
trap 'rm -rf "$WORK"' EXIT

go build -o "$WORK/ckpt" "$ROOT/cmd/ckpt"
"$PY" - "$WORK" "$SIZE_GB" <<'PYEOF'
import sys, torch
work, gb = sys.argv[1], float(sys.argv[2])
per = 256 << 20
n = int(gb * 1e9 / per) + 1
sd = {f"layers.{i}.weight": torch.empty(per // 4) for i in range(n)}
torch.save(sd, f"{work}/big.pt")
torch.save(sd, f"{work}/big_legacy.pt", _use_new_zipfile_serialization=False)
PYEOF

run() { # label cmd... -> appends "label wall_s rss_kib" to $WORK/times
  local label=$1; shift
  /usr/bin/time -f "%e %M" -o "$WORK/t" "$@" >/dev/null 2>&1 || true
  echo "$label $(cat "$WORK/t")" >> "$WORK/times"
}
for r in $(seq "$ROUNDS"); do
  for f in big.pt big_legacy.pt fixtures; do
    p="$WORK/$f"; [ "$f" = fixtures ] && p="$ROOT/testdata/fixtures"
    run "ckpt:$f" "$WORK/ckpt" scan --json "$p"
    run "ref:$f" "$PY" "$ROOT/bench/scan_ref.py" "$p"
  done
done
echo "Machine: $(uname -m), $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB RAM, $(uname -r); $(date -u +%F); median of $ROUNDS runs"
echo "big.pt: $(stat -c %s "$WORK/big.pt") bytes; big_legacy.pt: $(stat -c %s "$WORK/big_legacy.pt") bytes"
echo
echo "| files | ckpt scan --json | ckpt peak RSS | Python blocklist scan (scan_ref.py) | its peak RSS | ref / ckpt |"
echo "|---|---|---|---|---|---|"
for f in big.pt big_legacy.pt fixtures; do
  c=$(awk -v k="ckpt:$f" '$1==k{print $2, $3}' "$WORK/times" | sort -n | awk '{a[NR]=$0} END{print a[int((NR+1)/2)]}')
  p=$(awk -v k="ref:$f" '$1==k{print $2, $3}' "$WORK/times" | sort -n | awk '{a[NR]=$0} END{print a[int((NR+1)/2)]}')
  set -- $c $p
  echo "| $f | $1 s | $(( $2 / 1024 )) MiB | $3 s | $(( $4 / 1024 )) MiB | $(awk -v a="$3" -v b="$1" 'BEGIN{printf "%.1fx", (b>0)?a/b:0}') |"
done
