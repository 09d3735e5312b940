#!/usr/bin/env bash
# Dequantization speed (issue 32, item 7): a block-FP8 shard and a gpt-oss
# MXFP4 expert shard to BF16 safetensors with `ckpt convert`, against torch
# 2.6 on the CPU doing the upstream dequantization (bench/quant_deq.py:
# DeepSeek's weight_dequant, transformers' convert_moe_packed_tensors) and
# against `cp` of a file of the output's size. Page cache warm, interleaved
# rounds; wall seconds and peak RSS from /usr/bin/time -v.
#
#   bench/quant_deq.sh [GB] [ROUNDS]     (GB: size of the FP8 shard, default 1)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
GB=${1:-1}
ROUNDS=${2:-3}
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
bench_before() { rm -f "$WORK"/out.safetensors "$WORK"/ref.safetensors "$WORK"/cp.bin; sync; }
for kind in fp8 mxfp4; do
  LABELS=(); WALLS=(); RSS=()
  bench_before
  "$WORK/ckpt" convert "$WORK/in/$kind" "$WORK/size.safetensors" --force --quiet
  size=$(stat -c %s "$WORK/size.safetensors")
  cat "$WORK/in/$kind/model.safetensors" > /dev/null
  for _ in $(seq "$ROUNDS"); do
    bench_run "cp of the output's size" cp "$WORK/size.safetensors" "$WORK/cp.bin"
    bench_run "ckpt convert (dequantize to bf16)" "$WORK/ckpt" convert "$WORK/in/$kind" "$WORK/out.safetensors" --force --quiet
    bench_run "torch 2.6 CPU, upstream dequantization" "$WORK/torchpy" "$kind" "$WORK/in/$kind" "$WORK/ref.safetensors"
  done
  echo "### $kind: $(stat -c %s "$WORK/in/$kind/model.safetensors") bytes in, $size bytes out"
  echo "| run | median s | min s | max s | GB/s out | vs cp | peak RSS MiB |"
  echo "|---|---|---|---|---|---|---|"
  bench_table "cp of the output's size" "$size"
  # The same bits as upstream's (NaN-free inputs): ckpt verify, bitwise.
  "$WORK/ckpt" convert "$WORK/in/$kind" "$WORK/out.safetensors" --force --quiet
  torchpy "$kind" "$WORK/in/$kind" "$WORK/ref.safetensors"
  "$WORK/ckpt" verify "$WORK/out.safetensors" "$WORK/ref.safetensors" | tail -1
  rm -f "$WORK/size.safetensors" "$WORK/out.safetensors" "$WORK/ref.safetensors"
done
