#!/usr/bin/env bash
# Benchmark `ckpt merge` of a rank-16 LoRA adapter into a bf16 base against `cp` of the
# base and a PEFT-style merge in torch on the CPU (bench/merge_ref.py: the whole base in
# memory, as merge_and_unload), interleaved rounds, median/min/max wall time and peak RSS.
#
#   bench/merge.sh [PARENT_DIR] [SIZE_GB] [ROUNDS]     (defaults /tmp 1 3)
#
# Needs the torch 2.x chroot (scripts/torch2-chroot.sh) for the generator and the reference;
# PARENT_DIR must be under /tmp for it.
set -euo pipefail
PARENT=${1:-/tmp}
SIZE_GB=${2:-1}
ROUNDS=${3:-3}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/bench/lib.sh"
WORK=$(mktemp -d "$PARENT/ckpt-merge-bench.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
cp "$ROOT/bench/merge_ref.py" "$WORK/"
(cd "$WORK" && "$ROOT/scripts/torch2-python" merge_ref.py gen "$WORK" "$SIZE_GB")
(cd "$ROOT" && go build -o "$WORK/ckpt" ./cmd/ckpt)
BYTES=$(stat -c %s "$WORK/model.safetensors")
bench_before() { rm -f "$WORK"/out*; sync; cat "$WORK/model.safetensors" "$WORK/lora/adapter_model.safetensors" > /dev/null; }
for _ in $(seq "$ROUNDS"); do
  bench_run "cp base" cp "$WORK/model.safetensors" "$WORK/out.cp"
  bench_run "ckpt merge" "$WORK/ckpt" merge "$WORK/model.safetensors" "$WORK/lora" "$WORK/out.safetensors"
  bench_run "PEFT-style merge, torch CPU" sh -c "cd '$WORK' && '$ROOT/scripts/torch2-python' merge_ref.py merge '$WORK' '$WORK/out.ref.safetensors'"
done
echo "base: $BYTES bytes, rank-16 adapter on every projection; $(nproc) CPUs; $(date -u +%F)"
echo "| command | median s | min s | max s | GB/s | vs cp | peak RSS MiB |"
echo "|---|---|---|---|---|---|---|"
bench_table "cp base" "$BYTES"
