#!/usr/bin/env bash
# Local convert with the in-kernel copy (issue 35) against the build
# before it and cp, in guard.sh's three regimes, with minor page faults.
#
#   bench/local_copy.sh OLD_CKPT NEW_CKPT PT SAFETENSORS [ROUNDS] [REGIMES]
#
# OLD_CKPT, NEW_CKPT: two ckpt binaries (before and after); PT: a
# torch.save file, SAFETENSORS: a float32 safetensors file (the --dtype
# bf16 input). REGIMES (default "warm idle cold") as in guard.sh: warm =
# outputs removed and the input read once; idle = also sync and 2 s idle
# first; cold = sync and caches dropped (root), ckpt --sync against
# cp && sync. Each round runs every command once, the order rotated from
# round to round. One line per run: regime, work, command, wall s, user+sys
# CPU-s, minor faults, the MB dirty or under write-back in the whole
# system once the command returned (/proc/meminfo Dirty + Writeback: what
# it left to the kernel's write-back), and the command's context switches
# (voluntary + involuntary: its wake-ups); then medians. Outputs go beside the inputs' copies
# in a temporary directory under $TMPDIR (default /var/tmp), removed at
# the end.
set -euo pipefail
OLD=$1 NEW=$2 PT=$3 ST=$4 ROUNDS=${5:-3} REGIMES=${6:-warm idle cold}
OUT=$(mktemp -d "${TMPDIR:-/var/tmp}/ckpt-localcopy.XXXXXX")
trap 'rm -rf "$OUT" "$OUT".*' EXIT
fresh() { rm -rf "$OUT"/*; }
prep() { # regime, input
  fresh
  case $1 in
  warm) cat "$2" >/dev/null ;;
  idle) sync; sleep 2; cat "$2" >/dev/null ;;
  cold) sync; echo 3 >/proc/sys/vm/drop_caches ;;
  esac
}
run() { # regime work label cmd...
  local regime=$1 work=$2 label=$3; shift 3
  /usr/bin/time -f '%e %U %S %R %w %c' -o "$OUT.time" "$@" >/dev/null 2>"$OUT.err" || { cat "$OUT.err" >&2; exit 1; }
  local d; d=$(awk '/^(Dirty|Writeback):/ {s += $2} END {printf "%d", s / 1024}' /proc/meminfo)
  read -r w u s f vcs ics <"$OUT.time"
  printf '%s\t%s\t%s\t%s\t%.2f\t%s\t%s\t%s\n' "$regime" "$work" "$label" "$w" "$(echo "$u + $s" | bc -l)" "$f" "$d" "$((vcs + ics))" | tee -a "$OUT.runs"
}
cpsync() { cp "$1" "$2" && sync "$2"; }
export -f cpsync
echo "# $(date -u '+%F %T') UTC, load $(cut -d' ' -f1-3 /proc/loadavg)"
printf 'regime\twork\tcommand\twall_s\tcpu_s\tminflt\tdirty_wb_mb\tcsw\n'
for ((r = 0; r < ROUNDS; r++)); do
  for regime in $REGIMES; do
    sync=() cp=(cp)
    if [ "$regime" = cold ]; then sync=(--sync) cp=(bash -c 'cpsync "$@"' _); fi
    for work in pth shards bf16; do
      case $work in
      pth) in=$PT args=("$OUT/o.safetensors") ;;
      shards) in=$PT args=(--max-shard-size 256MB "$OUT/shards/") ;;
      bf16) in=$ST args=(--dtype bf16 "$OUT/o.safetensors") ;;
      esac
      cmds=(old new cp)
      for ((k = 0; k < 3; k++)); do
        c=${cmds[$(((k + r) % 3))]}
        prep "$regime" "$in"
        case $c in
        old) run "$regime" "$work" old "$OLD" convert "${sync[@]}" "$in" "${args[@]}" ;;
        new) run "$regime" "$work" new "$NEW" convert "${sync[@]}" "$in" "${args[@]}" ;;
        cp) run "$regime" "$work" cp "${cp[@]}" "$in" "$OUT/copy" ;;
        esac
      done
    done
  done
done
echo "# end $(date -u '+%F %T') UTC, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# medians: regime work command wall_s cpu_s minflt (wall ratio to cp) csw"
sort -k1,1 -k2,2 -k3,3 "$OUT.runs" | awk -F'\t' '
  function med(s,  a, n, i, j, t) { n = split(s, a, " ")
    for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j - 1] + 0 > a[j] + 0; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
  { k = $1 "\t" $2 "\t" $3; W[k] = W[k] " " $4; C[k] = C[k] " " $5; F[k] = F[k] " " $6; S[k] = S[k] " " $8; keys[k] = 1 }
  END { for (k in keys) { split(k, p, "\t"); cpk = p[1] "\t" p[2] "\tcp"
        printf "%s\t%.2f\t%.2f\t%d\t%.2fx\t%d\n", k, med(W[k]), med(C[k]), med(F[k]), med(W[k]) / med(W[cpk]), med(S[k]) } }' | sort
