#!/usr/bin/env bash
# Benchmark `ckpt convert` against `cp` on a generated checkpoint of at least 4 GB.
#
#   bench/convert.sh [PARENT_DIR] [SIZE_GB] [ROUNDS]
#
# Generates WORKDIR/big.pt (in a fresh temporary directory under PARENT_DIR) with
# /usr/bin/python3 torch (float32 tensors of 256 MiB each), then runs ROUNDS rounds
# (default 5) of these commands, interleaved so that every command sees the same
# machine, with the input in the page cache and no dirty pages left by the previous one:
#   cp IN OUT                      the issue's floor: read once, write once (no fsync)
#   cp IN OUT && sync OUT          the same made durable, as ckpt convert's output is
#   ckpt convert IN OUT.safetensors
#   ckpt convert --map-location cpu IN OUT.pt          (zip -> zip)
#   ckpt convert --dtype bf16 IN OUT.safetensors        (for information: a cast)
#   the reference converter (the steps of Hugging Face's convert.py: torch.load with
#   weights_only, .contiguous(), safetensors.torch.save_file with {"format": "pt"}, then
#   load_file again to check every tensor) when REF_PYTHON (default: scripts/torch2-python
#   if its chroot is mounted) imports torch and safetensors
# and prints a markdown table of the median, min and max wall time, the median's GB/s and
# ratio to cp's median, and the peak RSS (/usr/bin/time -v). The disk of a shared VM varies
# 2-3x from run to run; medians over interleaved rounds are what to compare.
# cp uses copy_file_range (no user-space copy); ckpt convert reads every byte into user
# space (it hashes them), writes with O_DIRECT and fsyncs before its atomic rename.
set -euo pipefail
PARENT=${1:-/tmp}
SIZE_GB=${2:-4}
ROUNDS=${3:-5}
PY=${PYTHON:-/usr/bin/python3}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/bench/lib.sh"
mkdir -p "$PARENT"
WORK=$(mktemp -d "$PARENT/ckpt-bench-convert.XXXXXX")   # only this is deleted at the end
trap 'rm -rf "$WORK"' EXIT

go build -o "$WORK/ckpt" "$ROOT/cmd/ckpt"
bench_gen_pt "$PY" "$WORK/big.pt" "$SIZE_GB"

IN="$WORK/big.pt"
SIZE=$(stat -c %s "$IN")

REF_PYTHON=${REF_PYTHON:-$ROOT/scripts/torch2-python}
if "$REF_PYTHON" -c 'import torch, safetensors' >/dev/null 2>&1; then
  cat > "$WORK/ref_convert.py" <<'PYEOF'
import sys, torch
from safetensors.torch import save_file, load_file
src, dst = sys.argv[1], sys.argv[2]
loaded = torch.load(src, map_location="cpu", weights_only=True)
loaded = {k: v.contiguous() for k, v in loaded.items()}
save_file(loaded, dst, metadata={"format": "pt"})
reloaded = load_file(dst)
for k in loaded:
    if not torch.equal(loaded[k], reloaded[k]):
        raise SystemExit(f"{k} differs")
PYEOF
  REF_VERSION=$("$REF_PYTHON" -c 'import torch, safetensors; print(f"torch {torch.__version__}, safetensors {safetensors.__version__}")' 2>/dev/null)
else
  REF_PYTHON=
  echo "no reference converter: REF_PYTHON=$ROOT/scripts/torch2-python does not import torch and safetensors (run scripts/torch2-chroot.sh)" >&2
fi
cat "$IN" > /dev/null   # warm the page cache for every command alike

bench_before() {
  rm -f "$WORK"/out.*
  sync  # start each command with no dirty pages left by the previous one
}

for ((r = 1; r <= ROUNDS; r++)); do
  bench_run "cp IN OUT" cp "$IN" "$WORK/out.copy"
  bench_run "cp IN OUT && sync OUT" sh -c "cp '$IN' '$WORK/out.copy' && sync '$WORK/out.copy'"
  # --sync: the outputs are on the disk at exit, as after `cp && sync`.
  bench_run "ckpt convert IN OUT.safetensors" "$WORK/ckpt" convert --sync "$IN" "$WORK/out.safetensors"
  bench_run "ckpt convert --map-location cpu IN OUT.pt" "$WORK/ckpt" convert --sync --map-location cpu "$IN" "$WORK/out.pt"
  bench_run "ckpt convert --dtype bf16 IN OUT.safetensors" "$WORK/ckpt" convert --sync --dtype bf16 "$IN" "$WORK/out.safetensors"
  if [[ -n $REF_PYTHON ]]; then
    bench_run "reference: torch.load + save_file + check" "$REF_PYTHON" "$WORK/ref_convert.py" "$IN" "$WORK/out.safetensors"
  fi
done

[[ -z $REF_PYTHON ]] || echo "reference converter: $REF_VERSION"
echo "input: $SIZE bytes ($(echo "$SIZE / 1000000000" | bc -l | cut -c1-5) GB), $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB RAM, $(df -h "$WORK" | awk 'NR==2 {print $1}'), $ROUNDS rounds, $(date -u +%Y-%m-%d)"
echo
echo "| command | median s | min s | max s | GB/s (median) | median / cp's | peak RSS MiB |"
echo "|---|---|---|---|---|---|---|"
bench_table "cp IN OUT" "$SIZE"
