#!/usr/bin/env bash
# Benchmark `ckpt merge` of a rank-16 LoRA adapter into a bf16 base against `cp` of the
# base (and `ckpt convert` of it, the output path the merge writes through) and a PEFT-style
# merge in torch on the CPU (bench/merge_ref.py: the whole base in
# memory, as merge_and_unload), interleaved rounds, median/min/max wall time and peak RSS.
#
#   bench/merge.sh [PARENT_DIR] [SIZE_GB] [ROUNDS]     (defaults /tmp 1 3)
#
# Needs the torch 2.x chroot (scripts/torch2-chroot.sh) for the generator and the reference;
# PARENT_DIR must be under /tmp for it. Environment: GEN_DIR=DIR reuses a base and adapter
# made before by `merge_ref.py gen DIR GB` (not removed); TORCH=0 leaves the torch reference
# out (it holds the whole base in memory: ~2.2 GiB RSS at 1 GB); CKPT_BEFORE=BINARY also
# times another ckpt build (e.g. the branch point's) in the same rounds. Besides the table: median
# CPU seconds (user+sys) and minor page faults per command, and `uptime` after each round.
set -euo pipefail
PARENT=${1:-/tmp}
SIZE_GB=${2:-1}
ROUNDS=${3:-3}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/bench/lib.sh"
WORK=$(mktemp -d "$PARENT/ckpt-merge-bench.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
cp "$ROOT/bench/merge_ref.py" "$WORK/"
GEN=${GEN_DIR:-$WORK}
[ -n "${GEN_DIR:-}" ] || (cd "$WORK" && "$ROOT/scripts/torch2-python" merge_ref.py gen "$WORK" "$SIZE_GB")
(cd "$ROOT" && go build -o "$WORK/ckpt" ./cmd/ckpt)
BYTES=$(stat -c %s "$GEN/model.safetensors")
declare -A FAULTS
bench_before() { rm -f "$WORK"/out*; sync; cat "$GEN/model.safetensors" "$GEN/lora/adapter_model.safetensors" > /dev/null; }
run() { # label, command...: bench_run, keeping the minor page faults
  bench_run "$@"
  FAULTS[$1]+="$(awk -F': ' '/Minor \(reclaiming a frame\) page faults/ {print $2}' "$WORK/time.txt") "
}
for _ in $(seq "$ROUNDS"); do
  run "cp base" cp "$GEN/model.safetensors" "$WORK/out.cp"
  run "ckpt convert (no merge)" "$WORK/ckpt" convert "$GEN/model.safetensors" "$WORK/out.safetensors"
  run "ckpt merge" "$WORK/ckpt" merge "$GEN/model.safetensors" "$GEN/lora" "$WORK/out.safetensors"
  if [ -n "${CKPT_BEFORE:-}" ]; then
    run "ckpt merge, before" "$CKPT_BEFORE" merge "$GEN/model.safetensors" "$GEN/lora" "$WORK/out.safetensors"
  fi
  if [ "${TORCH:-1}" != 0 ]; then
    run "PEFT-style merge, torch CPU" sh -c "cd '$WORK' && '$ROOT/scripts/torch2-python' merge_ref.py merge '$GEN' '$WORK/out.ref.safetensors'"
  fi
  echo "round done: $(uptime)"
done
echo "base: $BYTES bytes, rank-16 adapter on every projection; $(nproc) CPUs; $(date -u +%F)"
echo "| command | median s | min s | max s | GB/s | vs cp | peak RSS MiB |"
echo "|---|---|---|---|---|---|---|"
bench_table "cp base" "$BYTES"
echo
echo "| command | CPU s (user+sys) per run | minor faults per run |"
echo "|---|---|---|"
for label in "${LABELS[@]}"; do
  echo "| $label | ${CPUS[$label]} | ${FAULTS[$label]} |"
done
