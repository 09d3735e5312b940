#!/usr/bin/env bash
# ckpt diff of two ~SIZE_MB checkpoints (a torch .pt and the safetensors
# file ckpt convert makes of it with every other tensor perturbed by torch),
# against `cat A B > /dev/null` in the same run, interleaved rounds, warm page
# cache; wall and CPU seconds (user+sys), max RSS and minor page faults (GNU
# time), the load average after each round. CKPT_BASE=/path/to/ckpt adds that
# build's diff to each round (a before/after comparison in one run); COLD=1
# drops the two files from the page cache (POSIX_FADV_DONTNEED, these files
# only) before every command.
# Usage: bench/diff.sh [SIZE_MB] [DIR] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
size=${1:-1024}
dir=${2:-/var/tmp/ckpt-bench-diff}
rounds=${3:-3}
mkdir -p "$dir"
go build -o "$dir/ckpt" ./cmd/ckpt
if [ ! -f "$dir/a.pt" ] || [ "$(cat "$dir/size" 2>/dev/null)" != "$size" ]; then
  /usr/bin/python3 - "$dir" "$size" <<'PY'
import sys, torch
d, mb = sys.argv[1], int(sys.argv[2])
torch.manual_seed(0)
n = mb * (1 << 20) // 4 // 32  # 32 float32 tensors
a = {f"model.layers.{i}.w": torch.randn(n // 4096, 4096) for i in range(32)}
torch.save(a, f"{d}/a.pt")
b = {k: (v + 1e-3 * torch.randn_like(v) if i % 2 else v) for i, (k, v) in enumerate(a.items())}
torch.save(b, f"{d}/b.pt")
PY
  "$dir/ckpt" convert "$dir/b.pt" "$dir/b.safetensors" --force >/dev/null
  echo "$size" > "$dir/size"
fi
a=$dir/a.pt b=$dir/b.safetensors
cat "$a" "$b" > /dev/null # warm
. bench/diff_time.sh
pair="$a $b"
ls -l "$a" "$b" | awk '{print $5, $9}'
for _ in $(seq "$rounds"); do
  echo "cat A B:   $(t "$pair" sh -c "cat '$a' '$b' > /dev/null")"
  echo "ckpt diff: $(t "$pair" "$dir/ckpt" diff "$a" "$b")"
  if [ -n "${CKPT_BASE:-}" ]; then echo "base diff: $(t "$pair" "$CKPT_BASE" diff "$a" "$b")"; fi
  uptime
done
