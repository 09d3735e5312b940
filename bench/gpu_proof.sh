#!/usr/bin/env bash
# The hardware proof of issue 9 (part 2), on a machine with an NVIDIA GPU, its
# driver, and python3 with torch 2.x and safetensors, but no Go. Beforehand, on a
# machine with Go:
#
#   make gpu-bundle        # bin/gpu-bundle: ckpt and the -tags gpu test binaries
#
# then, from the repository root on the GPU machine (bin/gpu-bundle carried along):
#
#   bench/gpu_proof.sh proof   # ~3 min: nvidia-smi, ckpt devices, the gpu test binaries
#                              # twice, TestGPUCorruption 20 times, ckpt load --map-location
#                              # cuda:0 of every fixture checked against the cpu load
#   bench/gpu_proof.sh bench   # ~6 min for 8.5 GB: generate the checkpoints, load them on
#                              # cuda:0 (checked), and the benchmark, cold and warm cache
#   bench/gpu_proof.sh all     # both (may not fit one 10-minute device command)
#
# Raw outputs go to $OUT (default /tmp/gpu-proof), at most 6 files: env.txt, tests.txt,
# fixtures.txt (proof); bench.log, bench.jsonl, bench.md (bench). Commit them under
# docs/gpu/ with the date, and the table of bench.md in docs/benchmarks.md.
#
# Settings: GB (checkpoint size, default 8.5), RUNS (warm runs per method, default 3; the
# cold run is one), WORK (where the checkpoints go, default /tmp/ckpt-gpu-proof; needs
# ~2.3x GB of disk), BUNDLE (default bin/gpu-bundle), PY (default python3), ROUNDS (rounds of
# the gpu test binaries, default 2), CMD_RUN (a -test.run pattern for cmd_ckpt.test, default all;
# its tests need no GPU apart from the load and devices ones, so one short device lease may
# name only those), BASE (a baseline ckpt binary: its load rows run beside this bundle's in the
# same run), QUICK=1 (only dd, the ckpt rows and safetensors' load_file: for an A/B in a short lease).
#
# Cold cache is `sync; echo 3 >/proc/sys/vm/drop_caches` (root), else (or with
# NO_DROP_CACHES=1, on a shared machine) posix_fadvise DONTNEED on the file. The GPU's
# settings are never touched.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PHASE=${1:-all}
OUT=${OUT:-/tmp/gpu-proof}
GB=${GB:-8.5}
RUNS=${RUNS:-3}
WORK=${WORK:-/tmp/ckpt-gpu-proof}
BUNDLE=$(cd "${BUNDLE:-bin/gpu-bundle}" 2>/dev/null && pwd) || { echo "no bundle: run make gpu-bundle and carry bin/gpu-bundle" >&2; exit 1; }
PY=${PY:-python3}
CKPT=$BUNDLE/ckpt
HELP=$ROOT/bench/gpu_proof.py
mkdir -p "$OUT" "$WORK"

say() { printf '\n=== %s\n' "$*"; }
# run CMD...: print the command, run it, print its exit status.
run() { printf '$ %s\n' "$*"; "$@"; printf '[exit %d]\n' "$?"; }

proof() {
  {
    say "date, bundle, machine"
    date -u +%Y-%m-%dT%H:%M:%SZ
    cat "$BUNDLE/COMMIT"
    uname -a
    run nvidia-smi
    run nvidia-smi --query-gpu=name,uuid,driver_version,pcie.link.gen.current,pcie.link.width.current,pcie.link.gen.max,memory.total,memory.used,compute_mode,mig.mode.current --format=csv
    run cat /proc/driver/nvidia/version
    run "$PY" -c 'import torch, safetensors; print("torch", torch.__version__, "cuda", torch.version.cuda, "safetensors", safetensors.__version__)'
    say "ckpt devices"
    run "$CKPT" devices
    run "$CKPT" devices --json
    run env CUDA_VISIBLE_DEVICES= "$CKPT" devices --json
    run env CUDA_VISIBLE_DEVICES=0 CUDA_DEVICE_ORDER=PCI_BUS_ID "$CKPT" devices
  } >"$OUT/env.txt" 2>&1

  {
    for ((round = 1; round <= ${ROUNDS:-2}; round++)); do
      for t in devicecopy cmd_ckpt kernels; do
        dir=${t//_//}
        pat=.
        [ "$t" = cmd_ckpt ] && pat=${CMD_RUN:-.}
        say "round $round: go test -tags gpu ./$dir -run '$pat' (fake-driver tests too)"
        (cd "$ROOT/$dir" && run timeout 300 "$BUNDLE/$t.test" -test.v -test.count=1 -test.run "$pat")
      done
    done
    say "TestGPUCorruption, 20 times"
    (cd "$ROOT/devicecopy" && run timeout 300 "$BUNDLE/devicecopy.test" -test.run '^TestGPUCorruption$' -test.count=20 -test.v)
  } >"$OUT/tests.txt" 2>&1

  {
    say "ckpt load --map-location cuda:0 of every fixture, checked against --map-location cpu"
    for e in "$ROOT"/testdata/fixtures/*.expected.json; do
      f=${e%.expected.json}
      name=$(basename "$f")
      "$CKPT" load "$f" --map-location cpu --json >"$WORK/fx-cpu.json" 2>"$WORK/fx-cpu.err"
      c=$?
      "$CKPT" load "$f" --map-location cuda:0 --json >"$WORK/fx-cuda.json" 2>"$WORK/fx-cuda.err"
      g=$?
      "$CKPT" load "$f" --map-location cuda:0 --no-verify --json >/dev/null 2>"$WORK/fx-nv.err"
      n=$?
      if [ $c -ne 0 ] || [ $g -ne 0 ]; then
        [ $c -eq $g ] && v=SAME || v=FAIL
        echo "$name: $v: exit $c on cpu, $g on cuda:0, $n with --no-verify: $(head -c 300 "$WORK/fx-cuda.err")"
      else
        "$PY" "$HELP" fixture "$name" "$WORK/fx-cpu.json" "$WORK/fx-cuda.json"
        [ $n -eq 0 ] || echo "$name: FAIL: --no-verify exit $n: $(head -c 300 "$WORK/fx-nv.err")"
      fi
    done
    say "the stored cuda:0/cuda:1 tags as saved (cuda:1 missing on one GPU: a pre-flight refusal is right)"
    run "$CKPT" load "$ROOT/testdata/fixtures/cuda_tagged.pt"
  } >"$OUT/fixtures.txt" 2>&1
  grep -c ': PASS' "$OUT/fixtures.txt" | sed 's/^/fixtures passing: /'
  grep -E ': FAIL' "$OUT/fixtures.txt" || echo "no fixture failed"
  grep -E '^(--- FAIL|FAIL|ok|PASS)' "$OUT/tests.txt" | sort | uniq -c
}

drop() { # drop the page cache (of the file, at least)
  sync
  if [ -n "${NO_DROP_CACHES:-}" ] || ! { echo 3 >/proc/sys/vm/drop_caches; } 2>/dev/null; then
    "$PY" -c 'import os,sys
fd = os.open(sys.argv[1], os.O_RDONLY); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED); os.close(fd)' "$1"
  fi
}
warmup() { cat "$1" >/dev/null; }
now() { date +%s.%N; }

# measure METHOD FILE CACHE CMD...: one run; appends a JSON line to bench.jsonl runs.
# The command prints JSON (ckpt --json or gpu_proof.py peer) or nothing (a plain read).
measure() {
  local method=$1 file=$2 cache=$3; shift 3
  if [ "$cache" = cold ]; then drop "$file"; else warmup "$file"; fi
  local t0 t1 rc
  t0=$(now)
  "$@" >"$WORK/run.json" 2>>"$OUT/bench.log"
  rc=$?
  t1=$(now)
  "$PY" - "$method" "$file" "$cache" "$t0" "$t1" "$rc" "$WORK/run.json" >>"$WORK/runs.jsonl" <<'EOF'
import json, sys
method, file, cache, t0, t1, rc, path = sys.argv[1:]
wall = float(t1) - float(t0)
r = {"method": method, "file": file, "cache": cache, "rc": int(rc), "wall": wall, "seconds": wall}
try:
    j = json.load(open(path))
except Exception:
    j = None
if j and "uploaded" in j:  # ckpt load --json
    u = j["uploaded"] or {}
    r.update(bytes=u.get("bytes"), seconds=(u.get("upload_seconds") or 0) + (u.get("verify_seconds") or 0),
             upload_seconds=u.get("upload_seconds"), verify_seconds=u.get("verify_seconds"),
             read_seconds=u.get("read_seconds"), verified=u.get("verified"))
elif j:  # gpu_proof.py peer
    r.update(bytes=j["bytes_on_gpu"], seconds=j["seconds"], seconds_with_cuda_init=j["seconds_with_cuda_init"])
print(json.dumps(r))
EOF
  tail -1 "$WORK/runs.jsonl" >>"$OUT/bench.log"
}

# row METHOD FILE CMD...: one cold run and RUNS warm runs.
row() {
  local method=$1 file=$2; shift 2
  echo "--- $method $file: $*" >>"$OUT/bench.log"
  measure "$method" "$file" cold "$@"
  for ((i = 0; i < RUNS; i++)); do measure "$method" "$file" warm "$@"; done
}

bench() {
  : >"$OUT/bench.log"
  : >"$WORK/runs.jsonl"
  {
    say "date, bundle, GPU"
    date -u +%Y-%m-%dT%H:%M:%SZ
    cat "$BUNDLE/COMMIT"
    nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.current,pcie.link.width.current --format=csv
    nproc
    free -g
    say "generate (GB=$GB)"
    run "$PY" "$HELP" gen "$WORK" "$GB"
    ls -l "$WORK"
    run "$PY" "$HELP" check-be "$WORK"
    say "ckpt load of the generated files on cuda:0"
    for f in model.pt model.safetensors be.pt be_le.pt; do
      "$CKPT" load "$WORK/$f" --map-location cuda:0 --json >"$WORK/$f.load.json"
      echo "ckpt load $f --map-location cuda:0: exit $?"
      "$PY" -c 'import json,sys; j=json.load(open(sys.argv[1])); u=j["uploaded"]; print(sys.argv[1], "tensors", u["tensors"], "bytes", u["bytes"], "verified", u["verified"], "mismatches", len(u["mismatches"]), "upload GB/s", round(u["upload_gb_per_s"], 2), "verify s", round(u["verify_seconds"], 3))' "$WORK/$f.load.json"
    done
    "$PY" -c 'import json,sys
a = json.load(open(sys.argv[1]))["uploaded"]["storages"]; b = json.load(open(sys.argv[2]))["uploaded"]["storages"]
same = [x["upload_digest"] for x in a] == [x["upload_digest"] for x in b] and all(x["swapped"] for x in a if x["nbytes"])
print("big-endian upload holds the little-endian bytes:", "PASS" if same else "FAIL")' "$WORK/be.pt.load.json" "$WORK/be_le.pt.load.json"
    run "$CKPT" load "$WORK/model.pt" --map-location cuda:0
    say "pinned cuMemcpyHtoDAsync through ckpt's binding (BenchmarkGPUPinnedHtoD)"
    (cd "$ROOT/devicecopy" && run "$BUNDLE/devicecopy.test" -test.run '^$' -test.bench GPUPinnedHtoD -test.benchtime 40x -test.count 3)
  } >>"$OUT/bench.log" 2>&1

  local PT=$WORK/model.pt ST=$WORK/model.safetensors
  row "plain read (dd bs=16M)" "$PT" dd if="$PT" of=/dev/null bs=16M status=none
  row "ckpt load (verify)" "$PT" "$CKPT" load "$PT" --map-location cuda:0 --json
  [ -z "${QUICK:-}" ] && row "ckpt load --no-verify" "$PT" "$CKPT" load "$PT" --map-location cuda:0 --no-verify --json
  row "ckpt load safetensors (verify)" "$ST" "$CKPT" load "$ST" --map-location cuda:0 --json
  if [ -n "${BASE:-}" ]; then
    row "ckpt load (verify), baseline" "$PT" "$BASE" load "$PT" --map-location cuda:0 --json
    row "ckpt load safetensors (verify), baseline" "$ST" "$BASE" load "$ST" --map-location cuda:0 --json
  fi
  if [ -n "${QUICK:-}" ]; then
    row "safetensors load_file(device='cuda:0')" "$ST" "$PY" "$HELP" peer safetensors "$ST"
  else
  row "torch.load(map_location='cuda:0')" "$PT" "$PY" "$HELP" peer torch_load "$PT"
  row "torch.load(mmap=True).to('cuda:0')" "$PT" "$PY" "$HELP" peer torch_mmap_to "$PT"
  row "safetensors load_file(device='cuda:0')" "$ST" "$PY" "$HELP" peer safetensors "$ST"
  row "pinned H2D copy (torch, physical limit)" "$PT" "$PY" "$HELP" peer pinned_copy "$PT"
  fi

  # Median per method and cache, as bench.jsonl; GB/s over the file's storage bytes.
  "$PY" - "$WORK/runs.jsonl" >"$OUT/bench.jsonl" <<'EOF'
import json, os, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
groups = {}
for r in rows:
    groups.setdefault((r["method"], r["file"], r["cache"]), []).append(r)
ref = {}
for r in rows:
    if r.get("bytes") and r["method"].startswith("ckpt"):
        ref[r["file"]] = r["bytes"]
for (m, f, c), rs in groups.items():
    ok = [r for r in rs if r["rc"] == 0]
    if not ok:
        print(json.dumps({"method": m, "file": f, "cache": c, "runs": 0, "seconds": 0, "gb_per_s": 0, "failed": len(rs)}))
        continue
    s = statistics.median(r["seconds"] for r in ok)
    n = ref.get(f) or ok[0].get("bytes") or 0
    if m.startswith("plain"):
        n = os.path.getsize(f)
    if m.startswith("pinned"):
        n = ok[0].get("bytes") or n
    out = {"method": m, "file": f, "cache": c, "runs": len(ok), "seconds": s, "bytes": n, "gb_per_s": n / s / 1e9 if s else 0,
           "wall": statistics.median(r["wall"] for r in ok), "failed": len(rs) - len(ok)}
    for k in ("upload_seconds", "verify_seconds", "read_seconds", "seconds_with_cuda_init"):
        if ok[0].get(k) is not None:
            out[k] = statistics.median(r[k] for r in ok)
    print(json.dumps(out))
EOF
  {
    echo "GPU load benchmark, $(date -u +%Y-%m-%d), $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader), bundle $(head -1 "$BUNDLE/COMMIT")"
    echo "seconds: ckpt = upload + verify from its --json (context creation included); python peers = the load call after CUDA init; plain read = wall; median of $RUNS warm runs, 1 cold run"
    echo
    "$PY" "$HELP" table "$OUT/bench.jsonl"
  } >"$OUT/bench.md"
  cat "$OUT/bench.md"
}

case $PHASE in
proof) proof ;;
bench) bench ;;
all) proof; bench ;;
*) echo "usage: bench/gpu_proof.sh proof|bench|all" >&2; exit 2 ;;
esac
