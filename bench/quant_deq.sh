#!/usr/bin/env bash
# Dequantization and quantization speed (issue 32, item 7): a block-FP8
# shard and a gpt-oss MXFP4 expert shard to BF16 safetensors with `ckpt
# convert`, against torch 2.6 on the CPU doing the upstream dequantization
# (bench/quant_deq.py: DeepSeek's weight_dequant, transformers'
# convert_moe_packed_tensors) and against `cp` of a file of the output's
# size; then a BF16 model quantized with `--quantize fp8-block` and
# `--quantize nvfp4` against cp of each output's size. Page cache warm,
# interleaved rounds; wall seconds, CPU seconds (user + sys), minor page
# faults and peak RSS from /usr/bin/time -v, the load average beside them.
#
#   bench/quant_deq.sh [GB] [ROUNDS] [QGB]
#     GB:   size of the FP8 shard (default 1); the MXFP4 shard is one layer
#     QGB:  size of the BF16 model quantized (default 1; 0: no quantize runs)
#   TORCH=N runs torch in the first N rounds only (default: every round;
#   0: none; at 4 GB torch holds ~20 GB). Its last output is kept for the
#   bitwise check against ckpt's.
#   KINDS (default "fp8 mxfp4") picks the dequantization runs. MXFP4_LAYERS=N
#   (read when the inputs are made) makes the MXFP4 shard N gpt-oss-20b layers
#   (0.42 GB each; 10 is a shard of gpt-oss's size).
#   WORK (default /tmp/ckpt-quant-bench) must be under /tmp: the chroot sees it.
#   BASE=PATH: also time the ckpt binary at PATH (an earlier build), same
#   rounds, for a before/after in one run.
#   CP_FROM_INPUT=1: the cp baseline copies the input file as many times as
#   the output is larger (twice for FP8 -> BF16), one command, instead of
#   copying a file of the output's size: the same bytes copied, without a
#   second output-sized file on the disk (the 4 GB shard needs 12 GB, not 20).
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
GB=${1:-1}
ROUNDS=${2:-3}
QGB=${3:-1}
TORCH=${TORCH:-$ROUNDS}
WORK=${WORK:-/tmp/ckpt-quant-bench}
mkdir -p "$WORK"
PY=${CKPT_PYTHON:-$PWD/scripts/torch2-python}
go build -o "$WORK/ckpt" ./cmd/ckpt
# The chroot sees /tmp, not every worktree: the script runs from $WORK.
cp bench/quant_deq.py "$WORK/"
printf '#!/bin/sh\ncd "%s" && exec "%s" quant_deq.py "$@"\n' "$WORK" "$PY" > "$WORK/torchpy"
chmod +x "$WORK/torchpy"
torchpy() { "$WORK/torchpy" "$@"; }
[[ -f $WORK/in/fp8/model.safetensors ]] || torchpy gen "$WORK/in" "$GB"
if [[ $QGB != 0 && ! -f $WORK/in/bf16/model.safetensors ]]; then torchpy genbf16 "$WORK/in" "$QGB"; fi
bench_before() { rm -f "$WORK"/out.safetensors "$WORK"/cp*.bin; sync; }
# cpout KIND: the cp baseline of KIND's output.
cpout() {
  if [[ ${CP_FROM_INPUT:-0} == 1 ]]; then
    local in=$WORK/in/$1/model.safetensors
    local k=$(( (size + $(stat -c %s "$in") - 1) / $(stat -c %s "$in") ))
    run "cp of the output's size" sh -c 'for i in $(seq "$1"); do cp "$2" "$3/cp$i.bin"; done' sh "$k" "$in" "$WORK"
  else
    run "cp of the output's size" cp "$WORK/size.safetensors" "$WORK/cp.bin"
  fi
}
declare -A CPU LOADS FAULTS
# run LABEL CMD...: bench_run, plus CPU seconds and the 1-minute load average.
run() {
  local label=$1
  LOADS[$label]+="$(cut -d' ' -f1 /proc/loadavg) "
  bench_run "$@"
  CPU[$label]+="$(awk -F': ' '/User time/ {u=$2} /System time/ {s=$2} END {print u+s}' "$WORK/time.txt") "
  FAULTS[$label]+="$(awk -F': ' '/Minor/ {print $2}' "$WORK/time.txt") "
}
# table BASE BYTES: median/min/max wall, median CPU s, GB/s, ratio to BASE, RSS, load range.
table() {
  local base med label w
  base=$(echo "${WALLS[$1]}" | bench_median)
  echo "| run | median s | min s | max s | CPU s (median) | CPU s (all rounds) | minor faults (median) | GB/s out | vs cp | peak RSS MiB | load avg |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|"
  for label in "${LABELS[@]}"; do
    w=${WALLS[$label]}
    med=$(echo "$w" | bench_median)
    printf '| %s | %.2f | %.2f | %.2f | %.2f | %s | %.0f | %.2f | %.2fx | %.0f | %s-%s |\n' "$label" "$med" "$(echo "$w" | bench_min)" \
      "$(echo "$w" | bench_max)" "$(echo "${CPU[$label]}" | bench_median)" "${CPU[$label]% }" \
      "$(echo "${FAULTS[$label]}" | bench_median)" "$(echo "$2 / $med / 1000000000" | bc -l)" \
      "$(echo "$med / $base" | bc -l)" "$(echo "${RSS[$label]} / 1024" | bc -l)" \
      "$(echo "${LOADS[$label]}" | bench_min)" "$(echo "${LOADS[$label]}" | bench_max)"
  done
}
reset() { LABELS=(); WALLS=(); RSS=(); CPU=(); LOADS=(); FAULTS=(); }
echo "$(date -u +%F) $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), commit $(git rev-parse --short HEAD)"
for kind in ${KINDS:-fp8 mxfp4}; do
  reset
  bench_before
  "$WORK/ckpt" convert "$WORK/in/$kind" "$WORK/size.safetensors" --force --quiet
  size=$(stat -c %s "$WORK/size.safetensors")
  [[ ${CP_FROM_INPUT:-0} != 1 ]] || rm -f "$WORK/size.safetensors"
  cat "$WORK/in/$kind/model.safetensors" > /dev/null
  rm -f "$WORK/ref.safetensors"
  for round in $(seq "$ROUNDS"); do
    cpout "$kind"
    run "ckpt convert (dequantize to bf16)" "$WORK/ckpt" convert "$WORK/in/$kind" "$WORK/out.safetensors" --force --quiet
    if [[ -n ${BASE:-} ]]; then
      run "ckpt convert, before (BASE)" "$BASE" convert "$WORK/in/$kind" "$WORK/out.safetensors" --force --quiet
    fi
    if (( round <= TORCH )); then
      run "torch 2.6 CPU, upstream dequantization" "$WORK/torchpy" "$kind" "$WORK/in/$kind" "$WORK/ref.safetensors"
    fi
  done
  echo "### $kind: $(stat -c %s "$WORK/in/$kind/model.safetensors") bytes in, $size bytes out"
  table "cp of the output's size" "$size"
  if [[ -f $WORK/ref.safetensors ]]; then
    # The same bits as upstream's (NaN-free inputs): ckpt verify, bitwise.
    "$WORK/ckpt" convert "$WORK/in/$kind" "$WORK/out.safetensors" --force --quiet
    "$WORK/ckpt" verify "$WORK/out.safetensors" "$WORK/ref.safetensors" | tail -1
  fi
  rm -f "$WORK/size.safetensors" "$WORK/out.safetensors" "$WORK/ref.safetensors"
done
[[ $QGB != 0 ]] || exit 0
for scheme in fp8-block nvfp4; do
  reset
  bench_before
  "$WORK/ckpt" convert "$WORK/in/bf16" "$WORK/size.safetensors" --quantize "$scheme" --force --quiet
  size=$(stat -c %s "$WORK/size.safetensors")
  cat "$WORK/in/bf16/model.safetensors" > /dev/null
  for _ in $(seq "$ROUNDS"); do
    run "cp of the output's size" cp "$WORK/size.safetensors" "$WORK/cp.bin"
    run "ckpt convert --quantize $scheme" "$WORK/ckpt" convert "$WORK/in/bf16" "$WORK/out.safetensors" --quantize "$scheme" --force --quiet
    if [[ -n ${BASE:-} ]]; then
      run "ckpt convert --quantize $scheme, before (BASE)" "$BASE" convert "$WORK/in/bf16" "$WORK/out.safetensors" --quantize "$scheme" --force --quiet
    fi
  done
  echo "### quantize $scheme: $(stat -c %s "$WORK/in/bf16/model.safetensors") bytes of bf16 in, $size bytes out"
  table "cp of the output's size" "$size"
  rm -f "$WORK/size.safetensors" "$WORK/out.safetensors"
done
