#!/usr/bin/env bash
# `ckpt load s3://` and `ckpt convert s3://` with MinIO serving from memory
# (its files in the page cache), against rclone (issue 35): the client's
# wall and CPU seconds, its minor page faults, and MinIO's CPU seconds
# meanwhile, every command alternated with the others, ROUNDS rounds.
#
#   bench/s3hot.sh [DIR] [ROUNDS]
#
# DIR (default /var/tmp/ckpt-s3hot) keeps the generated torch.save inputs
# (SIZES, GB, default "1 4") between runs; MinIO's data and the outputs go
# under it too and are removed at the end (the inputs too with CLEAN=1).
# CKPTS lists "label=binary" pairs to compare (default: this tree's build,
# labelled ckpt); WHAT picks "load", "convert" or both (default both).
# DROP=1 (root) drops the page cache before each command, as bench/guard.sh
# does, so that every command starts from the same free memory.
# Prints one line per command and round, then a table of medians.
set -euo pipefail
DIR=${1:-/var/tmp/ckpt-s3hot}
ROUNDS=${2:-3}
SIZES=${SIZES:-1 4}
WHAT=${WHAT:-load convert}
PY=${PYTHON:-/usr/bin/python3}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/bench/lib.sh"
mkdir -p "$DIR"
WORK=$(mktemp -d "$DIR/run.XXXXXX")
SHM=$(mktemp -d /dev/shm/ckpt-s3hot.XXXXXX)
MPID=
cleanup() {
  [ -n "$MPID" ] && kill "$MPID" 2>/dev/null
  wait 2>/dev/null
  rm -rf "$WORK" "$SHM"
  [ "${CLEAN:-0}" = 1 ] && rm -f "$DIR"/big-*.pt
  return 0
}
trap cleanup EXIT

if [ -z "${CKPTS:-}" ]; then
  go build -o "$WORK/ckpt" "$ROOT/cmd/ckpt"
  CKPTS="ckpt=$WORK/ckpt"
fi
go build -o "$WORK/s3get" "$ROOT/bench/s3get"
for g in $SIZES; do
  [ -s "$DIR/big-$g.pt" ] || bench_gen_pt "$PY" "$DIR/big-$g.pt" "$g"
done

bench_minio_start "$PY" "$WORK/minio"
for g in $SIZES; do "$WORK/s3get" put "s3://bench/big-$g.pt" "$DIR/big-$g.pt" >/dev/null; done

# Pages the kernel scanned to reclaim memory (kswapd and direct): a 4 GB
# load on a machine whose page cache fills the memory reclaims as it goes.
reclaim_scanned() { awk '/^pgscan_(kswapd|direct) / {s += $2} END {print s + 0}' /proc/vmstat; }
minio_cpu() { awk -v t="$(getconf CLK_TCK)" '{print ($14 + $15) / t}' "/proc/$MPID/stat" 2>/dev/null || { echo "MinIO (pid $MPID) is gone" >&2; echo 0; }; }
OUT=$WORK/out
KEY=
prep() {
  rm -rf "$OUT" "$SHM"/*; mkdir -p "$OUT"
  if [ "${DROP:-0}" = 1 ]; then sync; echo 1 >/proc/sys/vm/drop_caches; fi
  find "$WORK/minio" -type f -path "*$KEY*" -exec cat {} + >/dev/null
}
declare -A W C F M
ORDER=()
# sample LABEL CMD...: one timed run after prep.
sample() {
  local label=$1 m0 m1 w u s f; shift
  prep
  m0=$(minio_cpu) free0=$(awk '/^MemFree/ {print int($2 / 1024)}' /proc/meminfo) scan0=$(reclaim_scanned)
  /usr/bin/time -f '%e %U %S %R' -o "$WORK/time.txt" "$@" >/dev/null 2>"$WORK/err.txt" ||
    { echo "$label failed:" >&2; cat "$WORK/err.txt" >&2; exit 1; }
  m1=$(minio_cpu) scan1=$(reclaim_scanned)
  # Freeing what the command left (rclone's file in /dev/shm; a load
  # frees its memory file before it exits, inside its own figures).
  /usr/bin/time -f '%U %S' -o "$WORK/rm.txt" rm -rf "$OUT" "$SHM"/dl.bin
  read -r w u s f <"$WORK/time.txt"
  [[ -v "W[$label]" ]] || ORDER+=("$label")
  W[$label]+="$w " C[$label]+="$(echo "$u + $s" | bc -l) " F[$label]+="$f " M[$label]+="$(echo "$m1 - $m0" | bc -l) "
  printf '%s: wall %s user %s sys %s minflt %s minio %.2f rm %s CPU-s (load %s; MemFree %s MiB before, reclaim scanned %s MiB)\n' "$label" "$w" "$u" "$s" "$f" \
    "$(echo "$m1 - $m0" | bc -l)" "$(awk '{print $1 + $2}' "$WORK/rm.txt")" "$(cut -d' ' -f1 /proc/loadavg)" "$free0" "$(((scan1 - scan0) / 256))" >&2
}
RC=(rclone copyto --multi-thread-streams 8 --ignore-checksum --ignore-times)
echo "start: $(uptime)" >&2
for g in $SIZES; do
  KEY=big-$g.pt
  for ((r = 1; r <= ROUNDS; r++)); do
    cmds=()
    for what in $WHAT; do
      for kv in $CKPTS; do
        if [ "$what" = load ]; then cmds+=("load $g GB, ${kv%%=*}|${kv#*=} load --map-location cpu s3://bench/$KEY")
        else cmds+=("convert $g GB, ${kv%%=*}|${kv#*=} convert s3://bench/$KEY $OUT/out.safetensors"); fi
      done
      if [ "$what" = load ]; then cmds+=("load $g GB, rclone -> /dev/shm|${RC[*]} bench:bench/$KEY $SHM/dl.bin")
      else cmds+=("convert $g GB, rclone -> file|${RC[*]} bench:bench/$KEY $OUT/dl.bin"); fi
    done
    # Rotate the order each round.
    n=${#cmds[@]}
    for ((i = 0; i < n; i++)); do
      c=${cmds[$(((i + r) % n))]}
      # shellcheck disable=SC2086
      sample "${c%%|*}" ${c#*|}
    done
  done
done
echo "end: $(uptime)" >&2
echo "| command | wall s | CPU-s (user+sys) | minor faults | MinIO CPU-s |"
echo "|---|---|---|---|---|"
for l in "${ORDER[@]}"; do
  printf '| %s | %.2f | %.2f | %.0f | %.2f |\n' "$l" "$(echo "${W[$l]}" | bench_median)" "$(echo "${C[$l]}" | bench_median)" \
    "$(echo "${F[$l]}" | bench_median)" "$(echo "${M[$l]}" | bench_median)"
done
