#!/usr/bin/env bash
# Start-up cost of every command (issue 35): `ckpt --version` of two builds,
# alternated, ROUNDS rounds each.
#
#   bench/startup.sh BEFORE_BINARY AFTER_BINARY [ROUNDS]
#
# Prints, per build: wall, user+sys CPU seconds and minor page faults
# (/usr/bin/time -f '%e %U %S %R'; min / median / max of ROUNDS), the
# task-clock and page faults of `perf stat -r ROUNDS` (when perf runs), and
# the packages with an init, their summed init clocks (min / median) and
# allocations (GODEBUG=inittrace=1). The load average is printed at the
# start and the end: on a shared machine read the CPU time and the faults,
# not the wall time.
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 BEFORE_BINARY AFTER_BINARY [ROUNDS]" >&2; exit 2; }
declare -A BIN=([before]=$1 [after]=$2)
N=${3:-20}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
for b in before after; do "${BIN[$b]}" --version >/dev/null; done
echo "start: $(uptime)"
for _ in $(seq "$N"); do
  for b in before after; do
    /usr/bin/time -f "$b %e %U %S %R" "${BIN[$b]}" --version >/dev/null 2>>"$T/time"
    GODEBUG=inittrace=1 "${BIN[$b]}" --version 2>&1 >/dev/null |
      awk -v b="$b" '/^init / {ms += $5; by += $8; n++} END {printf "%s %d %.2f %.3f\n", b, n, ms, by / 1e6}' >>"$T/init"
  done
done
stats() { sort -n | awk '{a[NR] = $1} END {printf "min %s / median %s / max %s", a[1], a[int((NR + 1) / 2)], a[NR]}'; }
for b in before after; do
  echo "$b (${BIN[$b]}):"
  echo "  wall s:        $(awk -v b="$b" '$1 == b {print $2}' "$T/time" | stats)"
  echo "  CPU-s:         $(awk -v b="$b" '$1 == b {print $3 + $4}' "$T/time" | stats)"
  echo "  minor faults:  $(awk -v b="$b" '$1 == b {print $5}' "$T/time" | stats)"
  echo "  init ms (sum): $(awk -v b="$b" '$1 == b {print $3}' "$T/init" | stats)"
  awk -v b="$b" '$1 == b {printf "  inits:         %d packages, %s MB allocated\n", $2, $4; exit}' "$T/init"
  if command -v perf >/dev/null && perf stat -e task-clock -r "$N" "${BIN[$b]}" --version >/dev/null 2>"$T/perf"; then
    awk '/task-clock/ {tc = $1} /page-faults/ {pf = $1} END {printf "  perf:          task-clock %s ms", tc}' "$T/perf"
    perf stat -e page-faults -r "$N" "${BIN[$b]}" --version 2>&1 >/dev/null | awk '/page-faults/ {printf ", %s page faults\n", $1}'
  fi
done
echo "end: $(uptime)"
