# Shared by the benchmark scripts (sourced, not run): interleaved timing of whole
# processes under /usr/bin/time -v, medians, and the generated torch.save input.
#
#   bench_run LABEL CMD...   times CMD once; rounds accumulate per LABEL, in first-seen order
#                            (LABELS). Before each run it calls bench_before if the script
#                            defines it (e.g. to remove outputs and sync).
#   bench_median             reads wall times (space or newline separated) and prints the median
#   bench_min / bench_max    the same for min and max
#   bench_table BASE_LABEL BYTES   one markdown row per label: median/min/max s, GB/s of the
#                            median over BYTES, ratio to BASE_LABEL's median, peak RSS MiB
#   bench_gen_pt PY OUT GB   a torch.save state dict of float32 tensors of 256 MiB, >= GB GB
#   bench_gen_st PY OUT MB   a safetensors file of MB MiB of float32 [4096, 4096] tensors
#                            w.0000, w.0001, ... (random normal, numpy)
#   bench_minio_start PY DIR   starts MinIO (CKPT_MINIO, minio on PATH, ~/go/bin/minio) on a free
#                            loopback port with data in DIR, random keys, and the AWS_* and rclone
#                            ("bench:") environment for it; sets MPID; returns once it is ready
#   bench_build_ggufref PY DIR   compiles bench/ggufref against ggml's C (ollama v0.17.4's
#                            vendored copy, from the Go module cache) into DIR/ggufref
# bench_run also keeps each run's user+sys CPU seconds (CPUS, per label).
# Needs $WORK (a scratch directory) set before use.

LABELS=()
declare -A WALLS RSS CPUS

bench_run() { # label, command...
  local label=$1; shift
  if declare -F bench_before > /dev/null; then bench_before; fi
  /usr/bin/time -v -o "$WORK/time.txt" "$@" > /dev/null
  local wall rss
  wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$WORK/time.txt" |
    awk -F: '{ if (NF == 3) print $1*3600 + $2*60 + $3; else print $1*60 + $2 }')
  rss=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$WORK/time.txt")
  CPUS[$label]+="$(awk -F': ' '/(User|System) time \(seconds\)/ {s += $2} END {print s}' "$WORK/time.txt") "
  [[ -v "WALLS[$label]" ]] || LABELS+=("$label")
  WALLS[$label]+="$wall "
  if (( ${RSS[$label]:-0} < rss )); then RSS[$label]=$rss; fi
}

bench_median() { tr ' ' '\n' | grep . | sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
bench_min() { tr ' ' '\n' | grep . | sort -g | head -1; }
bench_max() { tr ' ' '\n' | grep . | sort -g | tail -1; }

bench_table() { # base label, bytes
  local base med w
  base=$(echo "${WALLS[$1]}" | bench_median)
  for label in "${LABELS[@]}"; do
    w=${WALLS[$label]}
    med=$(echo "$w" | bench_median)
    printf '| %s | %.2f | %.2f | %.2f | %.2f | %.2fx | %.0f |\n' "$label" "$med" "$(echo "$w" | bench_min)" "$(echo "$w" | bench_max)" \
      "$(echo "$2 / $med / 1000000000" | bc -l)" "$(echo "$med / $base" | bc -l)" "$(echo "${RSS[$label]} / 1024" | bc -l)"
  done
}

bench_gen_pt() { # python, out, GB
  "$1" - "$2" "$3" <<'PYEOF'
import sys, torch
path, gb = sys.argv[1], float(sys.argv[2])
per = 256 << 20                      # bytes per tensor
n = int(gb * 1e9 / per) + 1          # at least GB decimal gigabytes
g = torch.Generator().manual_seed(0)
sd = {f"layers.{i}.weight": torch.randn(per // 4, generator=g) for i in range(n)}
torch.save(sd, path)
PYEOF
}

bench_gen_st() { # python, out, MB
  "$1" - "$2" "$3" <<'PYEOF'
import json, struct, sys
import numpy as np
path, mb = sys.argv[1], int(sys.argv[2])
n = max(1, mb // 64)                     # [4096, 4096] float32 = 64 MiB each
rng = np.random.default_rng(0)
hdr, off = {}, 0
for i in range(n):
    hdr["w.%04d" % i] = {"dtype": "F32", "shape": [4096, 4096], "data_offsets": [off, off + (64 << 20)]}
    off += 64 << 20
h = json.dumps(hdr).encode()
h += b" " * (-len(h) % 8)
with open(path, "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h)
    for i in range(n):
        f.write(rng.standard_normal(4096 * 4096, dtype=np.float32).tobytes())
PYEOF
}

bench_build_ggufref() { # python, dir
  local ggml
  ggml=$(cd "$2" && go mod download -json github.com/ollama/ollama@v0.17.4 |
    "$1" -c 'import json, sys; print(json.load(sys.stdin)["Dir"])')/ml/backend/ggml/ggml
  ${CC:-gcc} -O3 -DNDEBUG -std=gnu11 -Wno-unused-function -I "$ggml/src" -I "$ggml/include" -I "$ggml/src/ggml-cpu" \
    -o "$2/ggufref" "$ROOT/bench/ggufref/ggufref.c" "$ggml/src/ggml-quants.c" -lm
}

bench_minio_start() { # python, data dir
  local minio port cport
  minio=${CKPT_MINIO:-$(command -v minio || echo "$HOME/go/bin/minio")}
  port=$("$1" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  cport=$("$1" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  export AWS_ACCESS_KEY_ID=bench$RANDOM$RANDOM AWS_SECRET_ACCESS_KEY=secret$RANDOM$RANDOM$RANDOM
  export AWS_ENDPOINT_URL=http://127.0.0.1:$port AWS_REGION=us-east-1 AWS_EC2_METADATA_DISABLED=true
  export RCLONE_CONFIG_BENCH_TYPE=s3 RCLONE_CONFIG_BENCH_PROVIDER=Minio RCLONE_CONFIG_BENCH_ENDPOINT=$AWS_ENDPOINT_URL \
    RCLONE_CONFIG_BENCH_ACCESS_KEY_ID=$AWS_ACCESS_KEY_ID RCLONE_CONFIG_BENCH_SECRET_ACCESS_KEY=$AWS_SECRET_ACCESS_KEY \
    RCLONE_CONFIG_BENCH_REGION=us-east-1
  unset AWS_CA_BUNDLE   # plain http; a CA bundle only breaks rclone's transport
  MINIO_ROOT_USER=$AWS_ACCESS_KEY_ID MINIO_ROOT_PASSWORD=$AWS_SECRET_ACCESS_KEY MINIO_BROWSER=off \
    "$minio" server --quiet --address "127.0.0.1:$port" --console-address "127.0.0.1:$cport" "$2" >"$2.log" 2>&1 &
  MPID=$!
  for _ in $(seq 300); do curl -sf "$AWS_ENDPOINT_URL/minio/health/ready" >/dev/null && break; sleep 0.1; done
}
