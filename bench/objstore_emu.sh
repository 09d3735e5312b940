#!/usr/bin/env bash
# gs:// and az:// against their emulators (issue 24 item 4): a REGRESSION
# CHECK, NOT A SPEED CLAIM. fake-gcs-server and Azurite are test servers
# (fake-gcs-server keeps objects in memory; Azurite is Node.js), so their
# figures say nothing about Google Cloud Storage or Azure Blob Storage; they
# show that loading and converting from and to gs:// and az:// keeps working
# at size, in bounded memory, and does not get slower from one build to the
# next, next to a peer (rclone) against the same emulator.
#
#   bench/objstore_emu.sh [PARENT_DIR] [SIZE_GB] [ROUNDS]
#
# Starts fake-gcs-server and azurite-blob (on $PATH or in ~/go/bin; see
# internal/cloudemu for the same flags in the tests) on 127.0.0.1, random
# ports, their files in a temporary directory under PARENT_DIR (default
# /tmp); writes a SIZE_GB (default 1) torch zip of float32 tensors (256 MiB
# each, bench_gen_pt with /usr/bin/python3 torch), uploads its bytes to
# gs://bench/big.pt and az://bench/big.pt (bench/emuput, not ckpt), then
# runs ROUNDS (default 3) interleaved rounds of:
#   ckpt load --map-location cpu gs://... / az://... / LOCAL
#   ckpt convert gs://... / az://... / LOCAL  OUT.safetensors
#   ckpt convert --force LOCAL gs://bench/out.safetensors / az://... / OUT.safetensors
#   rclone copyto gs:bench/big.pt /dev/shm/... (google cloud storage backend,
#                 anonymous, endpoint http://HOST/storage/v1/)
#   rclone copyto az:bench/big.pt /dev/shm/... (azureblob backend, a
#                 container SAS URL signed with the emulator's key)
#                 (both --multi-thread-streams 8 --ignore-times)
# Both rclone peers work against the emulators (rclone 1.60.1: gs anonymous
# with --gcs-endpoint; az through a SAS URL, see below).
# Known emulator artefact: fake-gcs-server 1.56.1 recomputes the CRC32C and
# MD5 of the whole object received so far on every chunk of a resumable
# upload (fakestorage/upload.go, uploadFileContent), so `convert ... gs://`
# costs the emulator time quadratic in the size (0.27 GB: 12 s, 0.54 GB:
# 39 s on the 2-core VM; expect minutes per round at 1 GB). That row is the
# emulator's hashing, not ckpt's upload; it still fails if the upload does.
# Prints a markdown table: median/min/max wall time, GB/s, the ratio to
# the same command on the local file (loads and peers: to the local load;
# converts: to the local convert), peak RSS (/usr/bin/time -v).
# Environment: WARM=1 keeps the page cache (by default it is dropped before
# each command, where allowed); CKPT_BEFORE=BINARY adds `BINARY load
# --map-location cpu` of gs:// and az:// to each round (another build of
# ckpt, compared in the same run). A peer is timed only if one copy through
# it gives the uploaded bytes back (checked first); without rclone, none.
# Everything it creates (servers, files, /dev/shm copies) goes at the end.
set -euo pipefail
PARENT=${1:-/tmp}
SIZE_GB=${2:-1}
ROUNDS=${3:-3}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/bench/lib.sh"
bin() { command -v "$1" || { [ -x "$HOME/go/bin/$1" ] && echo "$HOME/go/bin/$1"; } || { echo "objstore_emu: $1 not found (see internal/cloudemu)" >&2; exit 1; }; }
GCS_BIN=$(bin fake-gcs-server)
AZ_BIN=$(bin azurite-blob)
RCLONE=$(command -v rclone || true)
mkdir -p "$PARENT"
WORK=$(mktemp -d "$PARENT/ckpt-bench-emu.XXXXXX")
SHM=$(mktemp -d /dev/shm/ckpt-bench-emu.XXXXXX)
GPID= APID=
cleanup() {
  for p in $GPID $APID; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK" "$SHM"
}
trap cleanup EXIT

go build -o "$WORK/ckpt" "$ROOT/cmd/ckpt"
go build -o "$WORK/emuput" "$ROOT/bench/emuput"
freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# fake-gcs-server: objects in memory, plain http.
GPORT=$(freeport)
GADDR=127.0.0.1:$GPORT
mkdir -p "$WORK/gcs"
(cd "$WORK/gcs" && exec "$GCS_BIN" -scheme http -host 127.0.0.1 -port "$GPORT" -backend memory \
  -public-host "$GADDR" -external-url "http://$GADDR" -log-level error) >"$WORK/gcs.log" 2>&1 &
GPID=$!
export STORAGE_EMULATOR_HOST=$GADDR GOOGLE_APPLICATION_CREDENTIALS=/nonexistent

# Azurite: a random account and key, blobs under $WORK/azurite.
APORT=$(freeport)
AADDR=127.0.0.1:$APORT
ACCOUNT=bench$RANDOM$RANDOM
AKEY=$(head -c 64 /dev/urandom | base64 -w0)
mkdir -p "$WORK/azurite"
AZURITE_ACCOUNTS="$ACCOUNT:$AKEY" HOME="$WORK/azurite" "$AZ_BIN" --blobHost 127.0.0.1 --blobPort "$APORT" \
  --location "$WORK/azurite" --skipApiVersionCheck --silent --disableTelemetry >"$WORK/azurite.log" 2>&1 &
APID=$!
export AZURE_STORAGE_CONNECTION_STRING="DefaultEndpointsProtocol=http;AccountName=$ACCOUNT;AccountKey=$AKEY;BlobEndpoint=http://$AADDR/$ACCOUNT;"
unset AZURE_STORAGE_ACCOUNT AZURE_STORAGE_KEY

# rclone's remotes, from the environment (no config file): "gs" (google
# cloud storage, anonymous, the emulator's JSON API as the endpoint) and
# "az" (azureblob through a container SAS URL that emuput signs with the
# emulator's key, set after the upload: rclone 1.60's endpoint option is a
# host suffix (https://ACCOUNT.ENDPOINT) and --azureblob-use-emulator means
# Azurite's default account on port 10000, neither fits a random port).
: >"$WORK/rclone.conf"
export RCLONE_CONFIG=$WORK/rclone.conf
export RCLONE_CONFIG_GS_TYPE="google cloud storage" RCLONE_CONFIG_GS_ANONYMOUS=true \
  RCLONE_CONFIG_GS_ENDPOINT=http://$GADDR/storage/v1/
export RCLONE_CONFIG_AZ_TYPE=azureblob

up=
for _ in $(seq 300); do
  if curl -sf "http://$GADDR/storage/v1/b" >/dev/null && (exec 3<>"/dev/tcp/127.0.0.1/$APORT") 2>/dev/null; then up=1; break; fi
  sleep 0.1
done
[ -n "$up" ] || { echo "objstore_emu: the emulators did not start:" >&2; cat "$WORK/gcs.log" "$WORK/azurite.log" >&2; exit 1; }

IN=$WORK/big.pt
bench_gen_pt /usr/bin/python3 "$IN" "$SIZE_GB"
SIZE=$(stat -c %s "$IN")
"$WORK/emuput" gs://bench/big.pt "$IN"
"$WORK/emuput" az://bench/big.pt "$IN"
RCLONE_CONFIG_AZ_SAS_URL=$("$WORK/emuput" sas az://bench)
export RCLONE_CONFIG_AZ_SAS_URL
# A peer is timed only where one copy of it gives the uploaded bytes back.
PEERS=
if [ -n "$RCLONE" ]; then
  for s in gs az; do
    if "$RCLONE" copyto "$s:bench/big.pt" "$SHM/dl.bin" --multi-thread-streams 8 --ignore-times 2>"$WORK/rclone.err" &&
      cmp -s "$IN" "$SHM/dl.bin"; then
      PEERS+=" $s"
    else
      echo "rclone from $s:// does not work against the emulator, left out:" >&2
      tail -3 "$WORK/rclone.err" >&2
    fi
    rm -f "$SHM/dl.bin"
  done
fi
echo "checkpoint: $SIZE bytes, $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)" >&2

bench_before() {
  rm -f "$WORK/out.safetensors" "$SHM/dl.bin"
  if [ -z "${WARM:-}" ]; then sync; echo 1 > /proc/sys/vm/drop_caches 2>/dev/null || true; fi
}
# A command that fails stops the script (set -e; its stderr is not hidden).
LOADS=() CONVS=()
load() { LOADS+=("$1"); bench_run "$@"; }
conv() { CONVS+=("$1"); bench_run "$@"; }
C=$WORK/ckpt OUT=$WORK/out.safetensors
for r in $(seq "$ROUNDS"); do
  # Odd rounds gs:// first, even rounds az:// first.
  if [ $((r % 2)) = 1 ]; then order="gs az"; else order="az gs"; fi
  for s in $order; do
    load "ckpt load --map-location cpu $s://" "$C" load --map-location cpu "$s://bench/big.pt"
    if [ -n "${CKPT_BEFORE:-}" ]; then
      load "ckpt load (before) --map-location cpu $s://" "$CKPT_BEFORE" load --map-location cpu "$s://bench/big.pt"
    fi
  done
  load "ckpt load --map-location cpu local" "$C" load --map-location cpu "$IN"
  for s in $order; do
    conv "ckpt convert $s:// -> local safetensors" "$C" convert "$s://bench/big.pt" "$OUT"
  done
  conv "ckpt convert local -> local safetensors" "$C" convert "$IN" "$OUT"
  for s in $order; do
    conv "ckpt convert local -> $s:// safetensors" "$C" convert --force "$IN" "$s://bench/out.safetensors"
  done
  for s in $order; do
    [[ " $PEERS " == *" $s "* ]] || continue
    load "rclone copyto $s: -> RAM (8 streams)" "$RCLONE" copyto "$s:bench/big.pt" "$SHM/dl.bin" --multi-thread-streams 8 --ignore-times
  done
done
bench_before

uniq_labels() { printf '%s\n' "$@" | awk '!seen[$0]++'; }
ALL=("${LABELS[@]}")
echo
echo "EMULATORS (fake-gcs-server, Azurite) on loopback: a regression check, not a speed claim."
echo "input: $SIZE bytes, $(nproc) cores, $ROUNDS rounds, $([ -n "${WARM:-}" ] && echo warm || echo "page cache dropped before each command"), load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%Y-%m-%d)"
echo
echo "| command | median s | min s | max s | GB/s (input) | / same on local file | peak RSS MiB |"
echo "|---|---|---|---|---|---|---|"
mapfile -t LABELS < <(uniq_labels "${LOADS[@]}")
bench_table "ckpt load --map-location cpu local" "$SIZE"
mapfile -t LABELS < <(uniq_labels "${CONVS[@]}")
bench_table "ckpt convert local -> local safetensors" "$SIZE"
LABELS=("${ALL[@]}")
