#!/usr/bin/env bash
# Benchmark ckpt's GGUF (de)quantization against a C loop over ggml's own
# reference routines on the same data, file I/O included on both sides.
#
#   bench/gguf.sh [PARENT_DIR] [SIZE_MB] [ROUNDS]
#
# Generates (in a fresh temporary directory under PARENT_DIR, deleted at the
# end) IN.safetensors: SIZE_MB (default 4096) of float32 weights, random
# normal, as [4096, 4096] tensors named w.0000, w.0001, ... Then, with
# ckpt convert, q8_0.gguf and q4_k.gguf from it, and runs ROUNDS rounds
# (default 3), interleaved, of:
#   (a) GGUF -> safetensors (dequantize to float32), Q8_0 and Q4_K:
#         bench/ggufref deq TYPE  (dequantize_row_q8_0 / dequantize_row_q4_K)
#         ckpt convert TYPE.gguf OUT.safetensors
#   (b) safetensors -> Q8_0 GGUF:
#         bench/ggufref q q8_0     (quantize_row_q8_0_ref)
#         ckpt convert IN.safetensors OUT.gguf --gguf-type q8_0
# bench/ggufref (bench/ggufref/ggufref.c) is compiled -O3 here with
# ggml-quants.c of github.com/ollama/ollama@v0.17.4's vendored ggml from
# the Go module cache (as internal/ggmlref does for the tests); it reads
# and writes the raw data sections in 1M-element chunks on one thread and
# fsyncs its output, as ckpt does. After the rounds the data each side
# wrote is compared byte for byte (cmp). Prints one markdown table per
# group: median/min/max wall seconds, GB/s of float32 data (SIZE_MB) over
# the median, ratio to the C loop's median, peak RSS (/usr/bin/time -v).
set -euo pipefail
PARENT=${1:-/tmp}
SIZE_MB=${2:-4096}
ROUNDS=${3:-3}
PY=${PYTHON:-/usr/bin/python3}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/bench/lib.sh"
mkdir -p "$PARENT"
WORK=$(mktemp -d "$PARENT/ckpt-bench-gguf.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

go build -o "$WORK/ckpt" "$ROOT/cmd/ckpt"
bench_build_ggufref "$PY" "$WORK"
bench_gen_st "$PY" "$WORK/in.safetensors" "$SIZE_MB"
IN=$WORK/in.safetensors
F32_BYTES=$(( $(stat -c %s "$IN") - 8 - $(od -An -tu8 -N8 "$IN" | tr -d ' ') ))
st_off() { echo $(( 8 + $(od -An -tu8 -N8 "$1" | tr -d ' ') )); }
gguf_off() { "$WORK/ckpt" inspect --json "$1" | "$PY" -c 'import json, sys; print(json.load(sys.stdin)["gguf"]["data_offset"])'; }
for t in q8_0 q4_k; do
  "$WORK/ckpt" convert "$IN" "$WORK/$t.gguf" --gguf-type "$t" --gguf-meta general.architecture=llama > /dev/null
done
cat "$IN" "$WORK"/*.gguf > /dev/null   # warm the page cache for every command alike

bench_before() { rm -f "$WORK"/out.*; sync; }
reset() { LABELS=(); unset WALLS RSS CPUS; declare -gA WALLS RSS CPUS; }
header() {
  echo
  echo "$1 ($(( F32_BYTES / 1000000 )) MB of float32; rounds: $ROUNDS)"
  echo
  echo '| command | median s | min s | max s | GB/s (float32) | ratio | peak RSS MiB |'
  echo '|---|---|---|---|---|---|---|'
}

for t in q8_0 q4_k; do
  reset
  off=$(gguf_off "$WORK/$t.gguf")
  for r in $(seq "$ROUNDS"); do
    bench_run "C: ggml dequantize_row_$t loop" "$WORK/ggufref" deq "$t" "$WORK/$t.gguf" "$off" "$WORK/out.f32"
    # --sync: the C loop fsyncs what it writes, so ckpt's output is on the disk too.
    bench_run "ckpt convert $t.gguf out.safetensors" "$WORK/ckpt" convert --sync "$WORK/$t.gguf" "$WORK/out.safetensors"
  done
  header "(a) GGUF $t -> float32 safetensors"
  bench_table "C: ggml dequantize_row_$t loop" "$F32_BYTES"
  "$WORK/ggufref" deq "$t" "$WORK/$t.gguf" "$off" "$WORK/out.f32"
  if cmp -s -i "$(st_off "$WORK/out.safetensors")":0 "$WORK/out.safetensors" "$WORK/out.f32"; then
    echo; echo "data: identical bytes (ckpt's safetensors data section == the C loop's output)"
  else
    echo; echo "data: DIFFERENT"; exit 1
  fi
done

reset
off=$(st_off "$IN")
for r in $(seq "$ROUNDS"); do
  bench_run "C: ggml quantize_row_q8_0_ref loop" "$WORK/ggufref" q q8_0 "$IN" "$off" "$WORK/out.q8"
  bench_run "ckpt convert in.safetensors out.gguf --gguf-type q8_0" "$WORK/ckpt" convert --sync "$IN" "$WORK/out.gguf" --gguf-type q8_0 --gguf-meta general.architecture=llama
done
header "(b) float32 safetensors -> GGUF q8_0"
bench_table "C: ggml quantize_row_q8_0_ref loop" "$F32_BYTES"
"$WORK/ggufref" q q8_0 "$IN" "$off" "$WORK/out.q8"
if cmp -s -i "$(gguf_off "$WORK/out.gguf")":0 "$WORK/out.gguf" "$WORK/out.q8"; then
  echo; echo "data: identical bytes (ckpt's GGUF data section == the C loop's output)"
else
  echo; echo "data: DIFFERENT"; exit 1
fi
