#!/usr/bin/env bash
# ckpt diff of a bf16 safetensors file against its block-FP8 quantization
# (ckpt convert --quantize fp8-block, dequantized on the fly by diff),
# against `cat A B > /dev/null` in the same run, interleaved rounds, warm page
# cache; wall and CPU seconds (user+sys), max RSS and minor page faults (GNU
# time), the load average after each round. CKPT_BASE=/path/to/ckpt adds that
# build's diff to each round; COLD=1 drops the two files from the page cache
# (POSIX_FADV_DONTNEED, these files only) before every command.
#   bench/diff_fp8.sh BF16.safetensors [DIR] [ROUNDS]
# (a bf16 base: e.g. DIR/model.safetensors of `bench/merge_ref.py gen DIR 1`;
# its weights must end in .weight to be quantized).
set -euo pipefail
cd "$(dirname "$0")/.."
src=$1
dir=${2:-/var/tmp/ckpt-bench-diff-fp8}
rounds=${3:-3}
mkdir -p "$dir"
go build -o "$dir/ckpt" ./cmd/ckpt
if [ ! -f "$dir/fp8/model.safetensors" ]; then
  "$dir/ckpt" convert "$src" "$dir/fp8/" --quantize fp8-block --force > /dev/null
fi
a=$src b=$dir/fp8
cat "$a" "$b/model.safetensors" > /dev/null # warm
. bench/diff_time.sh
pair="$a $b/model.safetensors"
ls -l "$a" "$b/model.safetensors" | awk '{print $5, $9}'
for _ in $(seq "$rounds"); do
  echo "cat A B:           $(t "$pair" sh -c "cat '$a' '$b/model.safetensors' > /dev/null")"
  echo "ckpt diff bf16 fp8: $(t "$pair" "$dir/ckpt" diff "$a" "$b")"
  if [ -n "${CKPT_BASE:-}" ]; then echo "base diff bf16 fp8: $(t "$pair" "$CKPT_BASE" diff "$a" "$b")"; fi
  uptime
done
