#!/usr/bin/env bash
# Benchmark reading checkpoints from S3 (issue 11) against a local MinIO.
#
#   bench/objstore.sh [PARENT_DIR] [SIZE_GB] [ROUNDS]
#
# Starts the minio binary ($CKPT_MINIO, minio on $PATH, or ~/go/bin/minio) on
# 127.0.0.1 with a temporary directory under PARENT_DIR (default /tmp), writes
# a SIZE_GB (default 4) torch zip of float32 tensors (256 MiB each) with
# /usr/bin/python3 torch, uploads it, then runs ROUNDS (default 3) interleaved
# rounds of:
#   s3get single     one GET streamed to a local file (single-stream client)
#   s3get parallel   8 parallel 8 MiB ranged GETs written to a local file
#   s3get memory     the same into memory (the best parallel download)
#   ckpt convert s3://... OUT.safetensors
#   ckpt convert --sync s3://... OUT.safetensors  (on the disk at exit; the
#                    peers' downloads are not: the default is compared)
#   ckpt convert LOCAL OUT.safetensors      (the same from the local file)
#   ckpt load --map-location cpu s3://...
#   ckpt load --map-location cpu LOCAL
#   rclone copyto s3://... (N streams) to /dev/shm and to local disk, for N
#                    in $RCLONE_STREAMS (default "4 8 16"; the best is the peer)
#   aws s3 cp s3://... to /dev/shm and to local disk (Debian's awscli)
# and 10 runs of `ckpt inspect --json s3://...` (time and the reported request
# count). rclone and the AWS CLI are the tools users would pick instead
# (issue 24); s3get stays as the floor of what minio-go can do. Prints a markdown table: median/min/max wall time, GB/s, ratios, and
# peak RSS (/usr/bin/time -v). Everything it creates is deleted at the end.
#
# ONLY=write measures writing instead (convert to s3://, issue: no local
# staging): ROUNDS interleaved rounds of
#   s3get putpar     the plain parallel upload (8 workers x 64 MiB parts) of
#                    the safetensors file the local convert writes
#   ckpt convert --force LOCAL s3://bench/out.safetensors   (streamed)
#   ckpt convert --force LOCAL OUT.safetensors              (local disk)
#   rclone copyto OUT.safetensors s3://... (--s3-upload-concurrency N)
#   aws s3 cp OUT.safetensors s3://...
# with the same table, and the ratios convert to s3:// / parallel upload and
# / the fastest peer upload.
#
# Environment: WARM=1 keeps the page cache between commands (MinIO then
# serves from memory: what is measured is the network path and the client,
# not the disk); CKPT_BEFORE=BINARY adds `BINARY load --map-location cpu s3://`
# to each round (another build of ckpt, e.g. before a change, compared in the
# same run); ONLY=load runs just the parallel download into memory and the
# loads (and skips inspect).
set -euo pipefail
PARENT=${1:-/tmp}
SIZE_GB=${2:-4}
ROUNDS=${3:-3}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
MINIO=${CKPT_MINIO:-$(command -v minio || echo "$HOME/go/bin/minio")}
WORK=$(mktemp -d "$PARENT/ckpt-bench-objstore.XXXXXX")
SHM=$(mktemp -d /dev/shm/ckpt-bench-objstore.XXXXXX)
MPID=
cleanup() { [ -n "$MPID" ] && kill "$MPID" 2>/dev/null; wait 2>/dev/null; rm -rf "$WORK" "$SHM"; }
trap cleanup EXIT

go build -o "$WORK/ckpt" "$ROOT/cmd/ckpt"
go build -o "$WORK/s3get" "$ROOT/bench/s3get"

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
CPORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
export AWS_ACCESS_KEY_ID=bench$RANDOM$RANDOM AWS_SECRET_ACCESS_KEY=secret$RANDOM$RANDOM$RANDOM
export AWS_ENDPOINT_URL=http://127.0.0.1:$PORT AWS_REGION=us-east-1 AWS_EC2_METADATA_DISABLED=true
MINIO_ROOT_USER=$AWS_ACCESS_KEY_ID MINIO_ROOT_PASSWORD=$AWS_SECRET_ACCESS_KEY MINIO_BROWSER=off \
  "$MINIO" server --quiet --address "127.0.0.1:$PORT" --console-address "127.0.0.1:$CPORT" "$WORK/minio" >"$WORK/minio.log" 2>&1 &
MPID=$!
# The peers: rclone through an environment-defined remote named "bench",
# the AWS CLI through --endpoint-url. Either is skipped when not installed
# (apt-get install rclone awscli).
export RCLONE_CONFIG_BENCH_TYPE=s3 RCLONE_CONFIG_BENCH_PROVIDER=Minio RCLONE_CONFIG_BENCH_ENDPOINT=$AWS_ENDPOINT_URL \
  RCLONE_CONFIG_BENCH_ACCESS_KEY_ID=$AWS_ACCESS_KEY_ID RCLONE_CONFIG_BENCH_SECRET_ACCESS_KEY=$AWS_SECRET_ACCESS_KEY \
  RCLONE_CONFIG_BENCH_REGION=us-east-1
# MinIO is plain http on loopback: a CA bundle from the environment only
# breaks rclone's S3 client (LoadCustomCABundleError with its own transport).
unset AWS_CA_BUNDLE
RCLONE_STREAMS=${RCLONE_STREAMS:-4 8 16}
RCLONE=$(command -v rclone || true)
AWS=$(command -v aws || true)
for _ in $(seq 300); do curl -sf "$AWS_ENDPOINT_URL/minio/health/ready" >/dev/null && break; sleep 0.1; done

/usr/bin/python3 - "$WORK/big.pt" "$SIZE_GB" <<'PYEOF'
import sys, torch
path, gb = sys.argv[1], float(sys.argv[2])
per = 256 << 20
n = int(gb * 1e9 / per) + 1
g = torch.Generator().manual_seed(0)
torch.save({f"layers.{i}.weight": torch.randn(per // 4, generator=g) for i in range(n)}, path)
PYEOF
SIZE=$(stat -c %s "$WORK/big.pt")
"$WORK/s3get" put s3://bench/big.pt "$WORK/big.pt"
SRC=s3://bench/big.pt
echo "checkpoint: $SIZE bytes, $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)" >&2

declare -A T RSS
if [ "${ONLY:-}" = write ]; then
  # The bytes convert writes, uploaded by the plain parallel uploader.
  "$WORK/ckpt" convert "$WORK/big.pt" "$WORK/ref.safetensors" >/dev/null
  OSIZE=$(stat -c %s "$WORK/ref.safetensors")
fi
run() { # name command...
  local name=$1; shift
  if [ -z "${WARM:-}" ]; then sync; echo 1 > /proc/sys/vm/drop_caches 2>/dev/null || true; fi
  local s e
  s=$(date +%s.%N)
  /usr/bin/time -v -o "$WORK/time.txt" "$@" >"$WORK/out.txt" 2>"$WORK/err.txt" || { echo "$name failed:" >&2; cat "$WORK/err.txt" >&2; exit 1; }
  e=$(date +%s.%N)
  T[$name]+="$(echo "$e - $s" | bc) "
  RSS[$name]=$(awk '/Maximum resident/ {print $6}' "$WORK/time.txt")
  rm -f "$WORK/dl.bin" "$WORK/out.safetensors" "$SHM/dl.bin"
}
# The peers' downloads of $SRC: to RAM (/dev/shm, what a load is compared
# with) and to local disk (what a convert from s3:// is compared with).
peer_downloads() {
  local key=${SRC#s3://} n
  for n in $RCLONE_STREAMS; do
    [ -n "$RCLONE" ] || break
    run "rclone copyto -> RAM ($n streams)" "$RCLONE" copyto "bench:$key" "$SHM/dl.bin" --multi-thread-streams "$n" --ignore-times
    run "rclone copyto -> file ($n streams)" "$RCLONE" copyto "bench:$key" "$WORK/dl.bin" --multi-thread-streams "$n" --ignore-times
  done
  if [ -n "$AWS" ]; then
    run "aws s3 cp -> RAM" "$AWS" --endpoint-url "$AWS_ENDPOINT_URL" s3 cp --only-show-errors "$SRC" "$SHM/dl.bin"
    run "aws s3 cp -> file" "$AWS" --endpoint-url "$AWS_ENDPOINT_URL" s3 cp --only-show-errors "$SRC" "$WORK/dl.bin"
  fi
}
# The peers' uploads of the bytes convert writes.
peer_uploads() {
  local n
  for n in $RCLONE_STREAMS; do
    [ -n "$RCLONE" ] || break
    run "rclone copyto upload ($n parts in flight)" "$RCLONE" copyto "$WORK/ref.safetensors" bench:bench/up.safetensors --s3-upload-concurrency "$n" --ignore-times
  done
  if [ -n "$AWS" ]; then
    run "aws s3 cp upload" "$AWS" --endpoint-url "$AWS_ENDPOINT_URL" s3 cp --only-show-errors "$WORK/ref.safetensors" s3://bench/up.safetensors
  fi
}
# best PREFIX: the smallest median among the labels starting with PREFIX
# (after the table has filled MED).
best() {
  local k b=
  for k in "${!MED[@]}"; do
    [[ $k == "$1"* ]] || continue
    if [ -z "$b" ] || [ "$(echo "${MED[$k]} < $b" | bc -l)" = 1 ]; then b=${MED[$k]}; fi
  done
  echo "$b"
}
ratio() { # label a, median a, label b, median b
  [ -n "$2" ] && [ -n "$4" ] || return 0
  printf '%s / %s: %.2fx\n' "$1" "$3" "$(echo "$2 / $4" | bc -l)"
}
# The parallel download into memory and the load from s3://, side by side,
# the one first in odd rounds, the other in even ones.
download_and_load() {
  local dl=("s3get memory (8 x 8 MiB -> RAM)" "$WORK/s3get" memory $SRC)
  local ld=("ckpt load --map-location cpu s3://" "$WORK/ckpt" load --map-location cpu $SRC)
  if [ $(($1 % 2)) = 1 ]; then run "${dl[@]}"; run "${ld[@]}"; else run "${ld[@]}"; run "${dl[@]}"; fi
}
ONLY=${ONLY:-}
for r in $(seq "$ROUNDS"); do
  if [ -n "${CKPT_BEFORE:-}" ]; then
    run "ckpt load (before) --map-location cpu s3://" "$CKPT_BEFORE" load --map-location cpu $SRC
  fi
  if [ "$ONLY" = write ]; then
    run "s3get putpar (8 x 64 MiB parts)" "$WORK/s3get" putpar s3://bench/up.safetensors "$WORK/ref.safetensors"
    run "ckpt convert local -> s3:// safetensors" "$WORK/ckpt" convert --force "$WORK/big.pt" s3://bench/out.safetensors
    run "ckpt convert local -> local safetensors" "$WORK/ckpt" convert --force "$WORK/big.pt" "$WORK/out.safetensors"
    peer_uploads
    continue
  fi
  if [ "$ONLY" = load ]; then
    download_and_load "$r"
    peer_downloads
    continue
  fi
  run "s3get single (1 stream -> file)" "$WORK/s3get" single $SRC "$WORK/dl.bin"
  run "s3get parallel (8 x 8 MiB -> file)" "$WORK/s3get" parallel $SRC "$WORK/dl.bin"
  # The load and the download it is compared with run side by side, in
  # turn first (each round after a command that wrote and removed 4 GB: on
  # a file system mounted with discard the disk is still busy with it).
  download_and_load "$r"
  # The convert from s3:// follows commands that wrote only to memory, as
  # the peers' downloads to a file do (each after its download to
  # /dev/shm): following the removal of a 4 GB file it ran 1.03-1.06x of
  # rclone in this script against 0.90-0.94x in alternating A/B runs.
  run "ckpt convert s3:// -> local safetensors" "$WORK/ckpt" convert $SRC "$WORK/out.safetensors"
  run "ckpt convert --sync s3:// -> local safetensors" "$WORK/ckpt" convert --sync $SRC "$WORK/out.safetensors"
  run "ckpt convert local -> local safetensors" "$WORK/ckpt" convert "$WORK/big.pt" "$WORK/out.safetensors"
  run "ckpt load --map-location cpu local" "$WORK/ckpt" load --map-location cpu "$WORK/big.pt"
  peer_downloads
done

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)], a[1], a[NR]}'; }
if [ "$ONLY" = write ]; then
  echo
  echo "output: $OSIZE bytes; load after: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "| command | median s | min s | max s | GB/s (output) | peak RSS MB |"
  echo "|---|---|---|---|---|---|"
  declare -A MED
  for name in "${!T[@]}"; do
    read -r med lo hi < <(echo "${T[$name]}" | median)
    MED[$name]=$med
    printf '| %s | %.2f | %.2f | %.2f | %.2f | %d |\n' "$name" "$med" "$lo" "$hi" "$(echo "$OSIZE / $med / 1000000000" | bc -l)" "$((RSS[$name] / 1024))"
  done
  echo
  printf 'convert to s3:// / parallel upload: %.2fx\n' "$(echo "${MED["ckpt convert local -> s3:// safetensors"]} / ${MED["s3get putpar (8 x 64 MiB parts)"]}" | bc -l)"
  printf 'convert to s3:// / convert to local disk: %.2fx\n' "$(echo "${MED["ckpt convert local -> s3:// safetensors"]} / ${MED["ckpt convert local -> local safetensors"]}" | bc -l)"
  ratio "convert to s3://" "${MED["ckpt convert local -> s3:// safetensors"]}" "best rclone upload" "$(best "rclone copyto upload")"
  ratio "convert to s3://" "${MED["ckpt convert local -> s3:// safetensors"]}" "aws s3 cp upload" "$(best "aws s3 cp upload")"
  exit 0
fi
echo
echo "| command | median s | min s | max s | GB/s | peak RSS MB |"
echo "|---|---|---|---|---|---|"
declare -A MED
names=("s3get single (1 stream -> file)" "s3get parallel (8 x 8 MiB -> file)" "s3get memory (8 x 8 MiB -> RAM)"
  "ckpt convert s3:// -> local safetensors" "ckpt convert --sync s3:// -> local safetensors" "ckpt convert local -> local safetensors"
  "ckpt load (before) --map-location cpu s3://" "ckpt load --map-location cpu s3://" "ckpt load --map-location cpu local")
mapfile -t peers < <(for k in "${!T[@]}"; do case $k in rclone*|aws*) echo "$k";; esac; done | sort)
for name in "${names[@]}" "${peers[@]}"; do
  [ -n "${T[$name]:-}" ] || continue
  read -r med lo hi < <(echo "${T[$name]}" | median)
  MED[$name]=$med
  printf '| %s | %.2f | %.2f | %.2f | %.2f | %d |\n' "$name" "$med" "$lo" "$hi" "$(echo "$SIZE / $med / 1000000000" | bc -l)" "$((RSS[$name] / 1024))"
done
echo
printf 'load s3:// / parallel download into memory: %.2fx\n' "$(echo "${MED["ckpt load --map-location cpu s3://"]} / ${MED["s3get memory (8 x 8 MiB -> RAM)"]}" | bc -l)"
if [ -n "${CKPT_BEFORE:-}" ]; then
  printf 'load s3:// before / parallel download into memory: %.2fx\n' "$(echo "${MED["ckpt load (before) --map-location cpu s3://"]} / ${MED["s3get memory (8 x 8 MiB -> RAM)"]}" | bc -l)"
fi
ratio "load s3://" "${MED["ckpt load --map-location cpu s3://"]}" "best rclone -> RAM" "$(best "rclone copyto -> RAM")"
ratio "load s3://" "${MED["ckpt load --map-location cpu s3://"]}" "aws s3 cp -> RAM" "$(best "aws s3 cp -> RAM")"
[ "$ONLY" = load ] && exit 0
fastest=$(printf '%s\n' "${MED["s3get single (1 stream -> file)"]}" "${MED["s3get parallel (8 x 8 MiB -> file)"]}" | sort -g | head -1)
echo
printf 'convert s3:// / fastest download to disk: %.2fx\n' "$(echo "${MED["ckpt convert s3:// -> local safetensors"]} / $fastest" | bc -l)"
ratio "convert s3://" "${MED["ckpt convert s3:// -> local safetensors"]}" "best rclone -> file" "$(best "rclone copyto -> file")"
ratio "convert s3://" "${MED["ckpt convert s3:// -> local safetensors"]}" "aws s3 cp -> file" "$(best "aws s3 cp -> file")"
ratio "convert --sync s3://" "${MED["ckpt convert --sync s3:// -> local safetensors"]}" "best rclone -> file" "$(best "rclone copyto -> file")"
printf 'convert s3:// / convert local: %.2fx\n' "$(echo "${MED["ckpt convert s3:// -> local safetensors"]} / ${MED["ckpt convert local -> local safetensors"]}" | bc -l)"

# inspect: 10 runs, wall time and the request count it reports.
ts=""
for _ in $(seq 10); do
  s=$(date +%s%N)
  "$WORK/ckpt" inspect --json $SRC >"$WORK/inspect.json"
  e=$(date +%s%N)
  ts+="$(( (e - s) / 1000000 )) "
done
read -r med lo hi < <(echo "$ts" | median)
req=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["requests"])' "$WORK/inspect.json")
echo "inspect s3://: median ${med} ms (min ${lo}, max ${hi}) over 10 runs, ${req} requests; full download (single stream): ${MED["s3get single (1 stream -> file)"]} s"
