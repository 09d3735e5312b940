#!/usr/bin/env bash
# Start-up cost of every command (issue 35): `ckpt --version`, `ckpt inspect`
# of a small torch.save file and `ckpt convert` of a tiny one to
# safetensors, of two builds, alternated, ROUNDS rounds each.
#
#   bench/startup.sh BEFORE_BINARY AFTER_BINARY [ROUNDS]
#
# Prints, per command and build: wall, user+sys CPU seconds and minor page
# faults (/usr/bin/time -f '%e %U %S %R'; min / median / max of ROUNDS), the
# task-clock and page faults of `perf stat -r ROUNDS` (when perf runs), and
# for --version the packages with an init, their summed init clocks (min /
# median) and allocations (GODEBUG=inittrace=1). The load average is
# printed at the start and the end: on a shared machine read the CPU time
# and the faults, not the wall time.
#
# The inputs: SMALL (default: 50 float32 64x64 tensors that torch, under
# PYTHON (default /usr/bin/python3), saves into the temporary directory;
# without torch the repository's testdata/fixtures/zip_archive.pt) and
# TINY (default testdata/fixtures/zip_archive.pt: one 4-element tensor),
# converted with --force over the same output each time.
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 BEFORE_BINARY AFTER_BINARY [ROUNDS]" >&2; exit 2; }
declare -A BIN=([before]=$1 [after]=$2)
N=${3:-20}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TINY=${TINY:-$ROOT/testdata/fixtures/zip_archive.pt}
if [ -z "${SMALL:-}" ]; then
  SMALL=$T/small.pt
  "${PYTHON:-/usr/bin/python3}" -c "import torch; torch.save({'l%d' % i: torch.randn(64, 64) for i in range(50)}, '$SMALL')" 2>/dev/null ||
    SMALL=$TINY
fi
declare -A ARGS=([version]="--version" [inspect]="inspect $SMALL" [convert]="convert --force $TINY $T/out.safetensors")
CMDS="version inspect convert"
for b in before after; do "${BIN[$b]}" --version >/dev/null; done
echo "start: $(uptime)"
echo "inputs: small $SMALL ($(stat -c %s "$SMALL") B), tiny $TINY ($(stat -c %s "$TINY") B)"
for _ in $(seq "$N"); do
  for c in $CMDS; do
    for b in before after; do
      # shellcheck disable=SC2086
      /usr/bin/time -f "$c $b %e %U %S %R" "${BIN[$b]}" ${ARGS[$c]} >/dev/null 2>>"$T/time"
    done
  done
  for b in before after; do
    GODEBUG=inittrace=1 "${BIN[$b]}" --version 2>&1 >/dev/null |
      awk -v b="$b" '/^init / {ms += $5; by += $8; n++} END {printf "%s %d %.2f %.3f\n", b, n, ms, by / 1e6}' >>"$T/init"
  done
done
stats() { sort -n | awk '{a[NR] = $1} END {printf "min %s / median %s / max %s", a[1], a[int((NR + 1) / 2)], a[NR]}'; }
for c in $CMDS; do
  for b in before after; do
    echo "$c, $b (${BIN[$b]} ${ARGS[$c]}):"
    echo "  wall s:        $(awk -v c="$c" -v b="$b" '$1 == c && $2 == b {print $3}' "$T/time" | stats)"
    echo "  CPU-s:         $(awk -v c="$c" -v b="$b" '$1 == c && $2 == b {print $4 + $5}' "$T/time" | stats)"
    echo "  minor faults:  $(awk -v c="$c" -v b="$b" '$1 == c && $2 == b {print $6}' "$T/time" | stats)"
    if [ "$c" = version ]; then
      echo "  init ms (sum): $(awk -v b="$b" '$1 == b {print $3}' "$T/init" | stats)"
      awk -v b="$b" '$1 == b {printf "  inits:         %d packages, %s MB allocated\n", $2, $4; exit}' "$T/init"
    fi
    # shellcheck disable=SC2086
    if command -v perf >/dev/null && perf stat -e task-clock,page-faults -r "$N" "${BIN[$b]}" ${ARGS[$c]} >/dev/null 2>"$T/perf"; then
      awk '/task-clock/ {tc = $1} /page-faults/ {pf = $1} END {printf "  perf:          task-clock %s ms, %s page faults (mean of %d)\n", tc, pf, n}' n="$N" "$T/perf"
    fi
  done
done
echo "end: $(uptime)"
