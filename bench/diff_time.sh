# Sourced by bench/diff.sh and bench/diff_fp8.sh (not run).
#   t FILES CMD...   runs CMD under GNU time and prints one line: wall and CPU
#                    seconds (user+sys), max RSS, minor faults. With COLD set,
#                    FILES (a space-separated list) are first dropped from the
#                    page cache (POSIX_FADV_DONTNEED, those files only).
t() {
  local files=$1; shift
  if [ -n "${COLD:-}" ]; then
    # shellcheck disable=SC2086
    /usr/bin/python3 -c 'import os, sys
for p in sys.argv[1:]:
    fd = os.open(p, os.O_RDONLY); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED); os.close(fd)' $files
  fi
  /usr/bin/time -f "%e s wall, %U+%S s CPU, %M KiB max RSS, %R minflt" "$@" 2>&1 >/dev/null | tail -1
}
