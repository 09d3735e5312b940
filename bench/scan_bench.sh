#!/usr/bin/env bash
# Benchmark `ckpt scan` against a blocklist pickle scanner in Python on the same files.
#
#   bench/scan_bench.sh [PARENT_DIR] [SIZE_GB] [ROUNDS]
#
# No blocklist scanner is packaged by Debian (bookworm or trixie: `apt-cache search picklescan`
# finds nothing) and PyPI is not reachable here, so the peer is bench/scan_ref.py: a
# stdlib-only scanner built the way picklescan works (zipfile + pickletools.genops over every
# .pkl record or the bare pickle stream, GLOBAL/INST names and STACK_GLOBAL resolved from the
# two preceding string opcodes, matched against a module blocklist).
# Files: a torch.save zip checkpoint of SIZE_GB (default 10) decimal GB generated in a fresh
# temporary directory under PARENT_DIR (deleted at the end; tensors are torch.empty, whose
# untouched pages cost no memory), the same as a legacy (magic-number) file, and the
# testdata/fixtures tree (about 60 small files). Each command runs ROUNDS times (default 5),
# interleaved, warm page cache; the table shows the median wall time of the whole process
# (date +%s%N around /usr/bin/time) and the peak RSS (/usr/bin/time %M) of that run.
set -euo pipefail
PARENT=${1:-/tmp}
SIZE_GB=${2:-10}
ROUNDS=${3:-5}
PY=${PYTHON:-/usr/bin/python3}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$PARENT"
WORK=$(mktemp -d "$PARENT/ckpt-bench-scan.XXXXXX")   # only this is deleted at the end
trap 'rm -rf "$WORK"' EXIT

go build -o "$WORK/ckpt" "$ROOT/cmd/ckpt"
"$PY" - "$WORK" "$SIZE_GB" <<'PYEOF'
import sys, torch
work, gb = sys.argv[1], float(sys.argv[2])
per = 256 << 20
n = int(gb * 1e9 / per) + 1
sd = {f"layers.{i}.weight": torch.empty(per // 4) for i in range(n)}
torch.save(sd, f"{work}/big.pt")
torch.save(sd, f"{work}/big_legacy.pt", _use_new_zipfile_serialization=False)
PYEOF

# The published blocklist bypasses and hidden globals of pickle/audit_test.go, one bare
# pickle file each: how many does each scanner flag?
mkdir -p "$WORK/bypasses"
"$PY" - "$WORK/bypasses" <<'PYEOF'
import sys
d = sys.argv[1]
P = {
 "collect_env_run": b"\x80\x02ctorch.utils.collect_env\nrun\nX\x04\x00\x00\x00trueq\x00\x85R.",
 "spawnv_passfds": b"\x80\x02cmultiprocessing.util\nspawnv_passfds\nX\x04\x00\x00\x00true]\x86R.",
 "runpy_run_code": b"\x80\x02crunpy\n_run_code\nX\x04\x00\x00\x00pass}\x86R.",
 "pip_main": b"\x80\x02cpip\nmain\n]X\x07\x00\x00\x00install\x85R.",
 "getattr_chain": b"c__builtin__\ngetattr\n(c__builtin__\n__import__\n(S'os'\ntRS'system'\ntR(S'true'\ntR.",
 "memo_stack_global": b"\x80\x04\x8c\x02os\x94\x8c\x06system\x94\x8c\x04true\x94h\x00h\x01\x93h\x02\x85R.",
 "computed_stack_global": b"\x80\x04c__builtin__\nstr\n\x8c\x02os\x85R\x8c\x06system\x93\x8c\x04true\x85R.",
 "inst_p0": b"(S'true'\nios\nsystem\n.",
 "nested_reduce": b"c__builtin__\neval\n(c__builtin__\nstr\n(S'1+1'\ntRtR.",
 "torch_load": b"\x80\x02ctorch\nload\nX\x05\x00\x00\x00x.pth\x85R.",
 "numpy_runstring": b"\x80\x02cnumpy.testing._private.utils\nrunstring\nX\x04\x00\x00\x00pass}\x86R.",
 "functools_partial": b"\x80\x02cfunctools\npartial\ncposix\nsystem\n\x85R.",
 "inductor_compile": b"\x80\x02ctorch._inductor.codecache\ncompile_file\n)R.",
}
for k, v in P.items():
    open(f"{d}/{k}.pkl", "wb").write(v)
PYEOF
NBYP=$(ls "$WORK/bypasses" | wc -l)
CKPT_FLAG=0; REF_FLAG=0
for f in "$WORK"/bypasses/*.pkl; do
  if "$WORK/ckpt" scan "$f" >/dev/null 2>&1; then :; else CKPT_FLAG=$((CKPT_FLAG+1)); fi
  if "$PY" "$ROOT/bench/scan_ref.py" "$f" >/dev/null 2>&1; then :; else REF_FLAG=$((REF_FLAG+1)); fi
done

run() { # label cmd... -> appends "label wall_ms rss_kib" to $WORK/times
  local label=$1; shift
  local t0 t1
  t0=$(date +%s%N)
  /usr/bin/time -f "%M" -o "$WORK/t" "$@" >/dev/null 2>&1 || true
  t1=$(date +%s%N)
  echo "$label $(( (t1 - t0) / 1000 )) $(tail -1 "$WORK/t")" >> "$WORK/times"   # time prepends "Command exited ..." on exit != 0
}
for r in $(seq "$ROUNDS"); do
  for f in big.pt big_legacy.pt fixtures; do
    p="$WORK/$f"; [ "$f" = fixtures ] && p="$ROOT/testdata/fixtures"
    run "ckpt:$f" "$WORK/ckpt" scan --json "$p"
    run "ref:$f" "$PY" "$ROOT/bench/scan_ref.py" "$p"
  done
done
echo "Machine: $(uname -m), $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB RAM, $(uname -r); $(date -u +%F); median of $ROUNDS runs"
echo "big.pt: $(stat -c %s "$WORK/big.pt") bytes; big_legacy.pt: $(stat -c %s "$WORK/big_legacy.pt") bytes"
echo
echo "| files | ckpt scan --json (process) | ckpt peak RSS | Python blocklist scan, scan_ref.py (process) | its peak RSS | ref / ckpt |"
echo "|---|---|---|---|---|---|"
for f in big.pt big_legacy.pt fixtures; do
  c=$(awk -v k="ckpt:$f" '$1==k{print $2, $3}' "$WORK/times" | sort -n | awk '{a[NR]=$0} END{print a[int((NR+1)/2)]}')
  p=$(awk -v k="ref:$f" '$1==k{print $2, $3}' "$WORK/times" | sort -n | awk '{a[NR]=$0} END{print a[int((NR+1)/2)]}')
  set -- $c $p
  echo "| $f | $(awk -v u="$1" 'BEGIN{printf "%.1f", u/1000}') ms | $(( $2 / 1024 )) MiB | $(awk -v u="$3" 'BEGIN{printf "%.1f", u/1000}') ms | $(( $4 / 1024 )) MiB | $(awk -v a="$3" -v b="$1" 'BEGIN{printf "%.1fx", (b>0)?a/b:0}') |"
done
echo
echo "Bypass pickles flagged (exit != 0: unsafe or unknown for ckpt, a blocklist hit for the reference): ckpt $CKPT_FLAG of $NBYP, reference $REF_FLAG of $NBYP"
