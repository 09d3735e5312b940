#!/bin/sh
# Builds (once) and mounts a Debian trixie chroot with torch 2.x, numpy,
# torchvision and safetensors (Debian packages; no PyPI), for scripts/torch2-python: the
# interop tests then check ckpt against torch 2.x and the safetensors
# library too (Debian bookworm, the CI machine's own system, has torch 1.13
# and no safetensors). Needs root, network access to deb.debian.org, and
# debootstrap (installed when missing). Re-running only re-mounts.
#
#   scripts/torch2-chroot.sh [ROOT]             (default /var/tmp/ckpt-trixie)
#   scripts/torch2-chroot.sh --unmount [ROOT]   undo the mounts (CI does, when the stage ends)
#
# Mounts /proc, /sys, /dev, /tmp (and $TMPDIR) and this repository at the
# same paths inside, so tests' files and working directories are visible.
set -eu
unmount=
if [ "${1:-}" = "--unmount" ]; then
	unmount=1
	shift
fi
root=${1:-${CKPT_TRIXIE:-/var/tmp/ckpt-trixie}}
repo=$(cd "$(dirname "$0")/.." && pwd)

# mounts_under prints the mount points inside $root, deepest first.
mounts_under() {
	awk -v r="$root" 'index($2, r "/") == 1 {print $2}' /proc/mounts | sort -r
}
if [ -n "$unmount" ]; then
	for m in $(mounts_under); do
		# A busy mount (a process still running inside) is detached lazily.
		umount "$m" 2>/dev/null || umount -l "$m"
	done
	if [ -n "$(mounts_under)" ]; then
		echo "torch2-chroot: still mounted under $root:" >&2
		mounts_under >&2
		exit 1
	fi
	echo "torch2-chroot: nothing mounted under $root any more"
	exit 0
fi
if ! chroot "$root" /usr/bin/python3 -c 'import torch, numpy, safetensors' >/dev/null 2>&1; then
	if ! command -v debootstrap >/dev/null; then
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
	fi
	echo "building a Debian trixie chroot with torch 2.x in $root (debootstrap, a few minutes)"
	# A broken earlier chroot may still have /tmp and the repository
	# bind-mounted inside: unmount everything first, and never remove
	# while anything is mounted there.
	for m in $(mounts_under); do
		umount "$m"
	done
	if awk -v r="$root" 'index($2, r "/") == 1 {found = 1} END {exit !found}' /proc/mounts; then
		echo "$root still has mounts inside; not removing it" >&2
		exit 1
	fi
	rm -rf "$root"
	debootstrap --variant=minbase --include=python3-torch,python3-numpy,python3-safetensors,python3-torchvision \
		trixie "$root" http://deb.debian.org/debian >"$root.log" 2>&1 || {
		tail -20 "$root.log"
		exit 1
	}
fi
bind() { # host path, bound at the same path inside
	[ -d "$1" ] || return 0
	mkdir -p "$root$1"
	mountpoint -q "$root$1" || mount --bind "$1" "$root$1"
}
mkdir -p "$root/proc" "$root/sys"
mountpoint -q "$root/proc" || mount -t proc proc "$root/proc"
mountpoint -q "$root/sys" || mount -t sysfs sysfs "$root/sys"
bind /dev
bind /tmp
[ -z "${TMPDIR:-}" ] || bind "$TMPDIR"
# The repository, unless it is already visible through /tmp or $TMPDIR (a
# bind on a directory under them would make that directory unremovable).
[ -e "$root$repo/scripts/torch2-chroot.sh" ] || bind "$repo"
chroot "$root" /usr/bin/python3 -c 'import torch, numpy, safetensors; print("torch", torch.__version__, "numpy", numpy.__version__, "safetensors", safetensors.__version__)' 2>/dev/null
