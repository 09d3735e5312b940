#!/usr/bin/env bash
# The regression guard (issue 35): ckpt against its peers in one run, the
# figures written on top of docs/benchmarks.md ("Latest guard run") and each
# ratio compared with the previous run's there.
#
#   bench/guard.sh [PARENT_DIR] [ROUNDS]
#
# Tables (medians of ROUNDS rounds, default 3; each pair alternates which
# command goes first; wall seconds and user+sys CPU seconds of the command's
# process tree, /usr/bin/time):
#   convert  local convert vs cp, for SIZES (GB, default "1 4") of a torch.save
#            file of float32 tensors (torch: /usr/bin/python3) and the
#            safetensors file ckpt makes of it:
#              pth -> safetensors, safetensors -> safetensors --dtype bf16,
#              pth -> sharded safetensors (--max-shard-size 256MB); each
#            in three regimes, prepared alike before every command:
#              warm   outputs removed, input read once (the previous output is
#                     still being written back: back to back, as in a script)
#              idle   outputs removed, sync, 2 s idle, input read once
#              cold   outputs removed, sync, page cache dropped (root);
#                     ckpt convert --sync against cp && sync
#   s3       a local MinIO serving the same torch.save file from its page
#            cache: ckpt load --map-location cpu s3:// against rclone copyto
#            to /dev/shm, ckpt convert s3:// local.safetensors against rclone
#            copyto to a local file (rclone: --multi-thread-streams 8
#            --ignore-checksum), with MinIO's own CPU seconds (/proc/PID/stat);
#            before each command the page cache is dropped (root) and the
#            object read back into it, so every command starts from the same
#            free memory (from 2026-11-28 08:10; before, the local part's
#            inputs and the previous command's pages were still cached)
#   gguf     safetensors -> GGUF Q8_0 against the C loop over ggml's
#            quantize_row_q8_0_ref (bench/gguf.sh), 1 GiB, both synced
# PARTS picks tables (default "convert s3 gguf"). The block (machine, load
# average before and after, commit) is printed, and with GUARD_DOC (default
# docs/benchmarks.md; empty: print only) replaces the previous one there
# (bench/guardcmp): every ratio more than 15% above the previous run's is a
# line "REGRESSION: ..." in the doc and on stdout, and the exit status is 3.
# Inputs are generated under PARENT_DIR (default /var/tmp) and deleted at
# the end, with everything else. Needs root for the cold regime.
set -euo pipefail
PARENT=${1:-/var/tmp}
ROUNDS=${2:-3}
SIZES=${SIZES:-1 4}
PARTS=${PARTS:-convert s3 gguf}
PY=${PYTHON:-/usr/bin/python3}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
GUARD_DOC=${GUARD_DOC-$ROOT/docs/benchmarks.md}
. "$ROOT/bench/lib.sh"
mkdir -p "$PARENT"
WORK=$(mktemp -d "$PARENT/ckpt-guard.XXXXXX")
SHM=$(mktemp -d /dev/shm/ckpt-guard.XXXXXX)
MPID=
cleanup() { [ -n "$MPID" ] && kill "$MPID" 2>/dev/null; wait 2>/dev/null; rm -rf "$WORK" "$SHM"; }
trap cleanup EXIT
has() { [[ " $PARTS " == *" $1 "* ]]; }

go build -o "$WORK/ckpt" "$ROOT/cmd/ckpt"
CK=$WORK/ckpt
OUT=$WORK/out
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
ROWS=()

# sample LABEL PREP CMD...: PREP (a shell function), then CMD timed; its
# wall and user+sys seconds are appended to WALLS and CPUS, and MinIO's CPU
# seconds meanwhile to MCPUS when MinIO runs.
declare -A MCPUS
minio_cpu() { [ -n "$MPID" ] && awk -v t="$(getconf CLK_TCK)" '{print ($14 + $15) / t}' "/proc/$MPID/stat" || echo 0; }
sample() {
  local label=$1 prep=$2 m0 m1; shift 2
  "$prep"
  m0=$(minio_cpu)
  /usr/bin/time -f '%e %U %S' -o "$WORK/time.txt" "$@" >/dev/null 2>"$WORK/err.txt" ||
    { echo "$label failed:" >&2; cat "$WORK/err.txt" >&2; exit 1; }
  m1=$(minio_cpu)
  read -r w u s < "$WORK/time.txt"
  WALLS[$label]+="$w "
  CPUS[$label]+="$(echo "$u + $s" | bc -l) "
  MCPUS[$label]+="$(echo "$m1 - $m0" | bc -l) "
}
med() { echo "$1" | bench_median; }
# pair NAME PREP PEER_LABEL -- CKPT_CMD... -- PEER_CMD...: ROUNDS rounds,
# ckpt first in odd rounds, the peer first in even ones; one table row.
pair() {
  local name=$1 prep=$2 peer=$3 r; shift 4
  local -a ck=() pe=()
  while [ "$1" != -- ]; do ck+=("$1"); shift; done
  shift; pe=("$@")
  for ((r = 1; r <= ROUNDS; r++)); do
    if ((r % 2)); then sample "$name/ckpt" "$prep" "${ck[@]}"; sample "$name/peer" "$prep" "${pe[@]}"
    else sample "$name/peer" "$prep" "${pe[@]}"; sample "$name/ckpt" "$prep" "${ck[@]}"; fi
  done
  local cw pw cc pc
  cw=$(med "${WALLS[$name/ckpt]}"); pw=$(med "${WALLS[$name/peer]}")
  cc=$(med "${CPUS[$name/ckpt]}"); pc=$(med "${CPUS[$name/peer]}")
  local row
  row=$(printf '| %s | %.2f | %s | %.2f | %.2fx | %.2f | %.2f | %.2fx |' "$name" "$cw" "$peer" "$pw" \
    "$(echo "$cw / $pw" | bc -l)" "$cc" "$pc" "$(echo "$cc / $pc" | bc -l)")
  if [ -n "$MPID" ]; then
    row+=$(printf ' %.2f / %.2f |' "$(med "${MCPUS[$name/ckpt]}")" "$(med "${MCPUS[$name/peer]}")")
  fi
  ROWS+=("$row")
  echo "$row" >&2
}

declare -A GB
for g in $SIZES; do
  has convert || has s3 || break
  bench_gen_pt "$PY" "$WORK/big-$g.pt" "$g"
  "$CK" convert "$WORK/big-$g.pt" "$WORK/big-$g.safetensors" >/dev/null
  GB[$g]=$(printf %.2f "$(echo "$(stat -c %s "$WORK/big-$g.pt") / 1000000000" | bc -l)")
done
sync

fresh() { rm -rf "$OUT" "$SHM"/*; mkdir -p "$OUT"; }
IN=
prep_warm() { fresh; cat "$IN" >/dev/null; }
prep_idle() { fresh; sync; sleep 2; cat "$IN" >/dev/null; }
prep_cold() { fresh; sync; echo 3 > /proc/sys/vm/drop_caches; }
cp_sync() { cp "$1" "$2" && sync "$2"; }
export -f cp_sync

if has convert; then
  for g in $SIZES; do
    for regime in warm idle cold; do
      sync=() cp=(cp) peer=cp
      if [ $regime = cold ]; then sync=(--sync) cp=(bash -c 'cp_sync "$@"' _) peer="cp && sync"; fi
      IN=$WORK/big-$g.pt
      pair "pth -> safetensors, ${GB[$g]} GB, $regime" prep_$regime "$peer" -- \
        "$CK" convert "${sync[@]}" "$IN" "$OUT/out.safetensors" -- "${cp[@]}" "$IN" "$OUT/copy"
      pair "pth -> sharded (256MB), ${GB[$g]} GB, $regime" prep_$regime "$peer" -- \
        "$CK" convert "${sync[@]}" --max-shard-size 256MB "$IN" "$OUT/shards/" -- "${cp[@]}" "$IN" "$OUT/copy"
      IN=$WORK/big-$g.safetensors
      pair "safetensors -> bf16, ${GB[$g]} GB, $regime" prep_$regime "$peer" -- \
        "$CK" convert "${sync[@]}" --dtype bf16 "$IN" "$OUT/out.safetensors" -- "${cp[@]}" "$IN" "$OUT/copy"
    done
  done
  CONVERT_ROWS=("${ROWS[@]}")
  ROWS=()
fi

if has s3; then
  go build -o "$WORK/s3get" "$ROOT/bench/s3get"
  bench_minio_start "$PY" "$WORK/minio"
  for g in $SIZES; do
    "$WORK/s3get" put "s3://bench/big-$g.pt" "$WORK/big-$g.pt" >/dev/null
  done
  IN=
  # The same memory for every command: outputs removed, written back, the
  # page cache dropped (the local inputs and the previous command's pages
  # out), then the object read into it again (the hot server).
  prep_s3() { fresh; sync; echo 1 > /proc/sys/vm/drop_caches; find "$WORK/minio" -type f -path "*$KEY*" -exec cat {} + >/dev/null; }
  RC=(rclone copyto --multi-thread-streams 8 --ignore-checksum --ignore-times)
  for g in $SIZES; do
    KEY=big-$g.pt
    pair "load s3://, ${GB[$g]} GB, hot server" prep_s3 "rclone -> /dev/shm" -- \
      "$CK" load --map-location cpu "s3://bench/$KEY" -- "${RC[@]}" "bench:bench/$KEY" "$SHM/dl.bin"
    pair "convert s3:// -> local, ${GB[$g]} GB, hot server" prep_s3 "rclone -> file" -- \
      "$CK" convert "s3://bench/$KEY" "$OUT/out.safetensors" -- "${RC[@]}" "bench:bench/$KEY" "$OUT/dl.bin"
  done
  kill "$MPID"; wait "$MPID" 2>/dev/null || true; MPID=
  S3_ROWS=("${ROWS[@]}")
  ROWS=()
fi

if has gguf; then
  bench_build_ggufref "$PY" "$WORK"
  bench_gen_st "$PY" "$WORK/in.safetensors" 1024
  IN=$WORK/in.safetensors
  off=$(( 8 + $(od -An -tu8 -N8 "$IN" | tr -d ' ') ))
  prep_gguf() { fresh; sync; cat "$IN" >/dev/null; }
  pair "safetensors -> GGUF Q8_0, 1.07 GB of float32" prep_gguf "C quantize_row_q8_0_ref loop" -- \
    "$CK" convert --sync "$IN" "$OUT/out.gguf" --gguf-type q8_0 --gguf-meta general.architecture=llama -- \
    "$WORK/ggufref" q q8_0 "$IN" "$off" "$OUT/out.q8"
  # Each prep removed the other's output: both once more, then compared.
  fresh
  "$CK" convert "$IN" "$OUT/out.gguf" --gguf-type q8_0 --gguf-meta general.architecture=llama >/dev/null
  "$WORK/ggufref" q q8_0 "$IN" "$off" "$OUT/out.q8"
  goff=$("$CK" inspect --json "$OUT/out.gguf" | "$PY" -c 'import json, sys; print(json.load(sys.stdin)["gguf"]["data_offset"])')
  cmp -s -i "$goff:0" "$OUT/out.gguf" "$OUT/out.q8" || { echo "Q8_0: ckpt's data differs from the C loop's" >&2; exit 1; }
  GGUF_ROWS=("${ROWS[@]}")
fi

HEAD='| benchmark | ckpt s | peer | peer s | wall ratio | ckpt CPU-s | peer CPU-s | CPU ratio |'
SEP='|---|---|---|---|---|---|---|---|'
{
  echo "$(date -u '+%Y-%m-%d %H:%M') UTC, commit $(git -C "$ROOT" rev-parse --short HEAD)$(git -C "$ROOT" diff --quiet HEAD -- . ':!docs' || echo ' (with uncommitted changes)'), \`bench/guard.sh $PARENT $ROUNDS\` (SIZES=\"$SIZES\"); $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB, $(uname -r); load average $LOAD0 at the start, $(cut -d' ' -f1-3 /proc/loadavg) at the end. Medians of $ROUNDS rounds, each pair alternating which goes first; CPU-s: user+sys of the command."
  if [ -n "${CONVERT_ROWS+x}" ]; then
    echo; echo "Local convert against cp (cold: \`--sync\` against \`cp && sync\`):"; echo
    echo "$HEAD"; echo "$SEP"; printf '%s\n' "${CONVERT_ROWS[@]}"
  fi
  if [ -n "${S3_ROWS+x}" ]; then
    echo; echo "Object storage, MinIO on loopback serving from its page cache (rclone: 8 streams, --ignore-checksum):"; echo
    echo "${HEAD} MinIO CPU-s (ckpt / peer) |"; echo "${SEP}---|"; printf '%s\n' "${S3_ROWS[@]}"
  fi
  if [ -n "${GGUF_ROWS+x}" ]; then
    echo; echo "GGUF quantization (identical bytes, cmp):"; echo
    echo "$HEAD"; echo "$SEP"; printf '%s\n' "${GGUF_ROWS[@]}"
  fi
} > "$WORK/block.md"
cat "$WORK/block.md"
if [ -n "$GUARD_DOC" ]; then
  (cd "$ROOT" && go run ./bench/guardcmp "$GUARD_DOC" "$WORK/block.md")
fi
