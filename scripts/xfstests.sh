#!/usr/bin/env bash
# Runs xfstests (fstests) against two fscrypt-rs vaults mounted through
# FUSE (FSTYP=fuse, FUSE_SUBTYP=.fscrypt-rs), as README's POSIX section
# describes; the results of the last full run are in scripts/xfstests.expected.
#
# usage: scripts/xfstests.sh [--xfstests DIR] [--bin PATH] [--keep] [--options OPTS]
#                            [--size GIB] [CHECK ARGS...]
#
#   --xfstests DIR  an xfstests checkout you built (`make` in it; its README
#                   lists the packages). Default: $XFSTESTS_DIR.
#   --bin PATH      the fscrypt-rs binary (default: built here with
#                   `cargo build --release -p fscrypt-cli`).
#   --keep          keep the temporary vaults and results directory.
#   --options OPTS  more mount options for both vaults, e.g. noio_uring
#                   (mount(8) passes its helper only options that are not
#                   the kernel's defaults: dev and suid never reach it).
#   --size GIB      size of the ext4 file system each vault is on (default
#                   10): sparse images in /var/tmp, loop-mounted, one per
#                   vault as xfstests' TEST and SCRATCH devices are, so the
#                   ENOSPC tests (generic/103 fills SCRATCH) fill those and
#                   not the disk /var/tmp is on.
#   CHECK ARGS      passed to xfstests' ./check (default: -g generic/quick),
#                   e.g. `generic/003 generic/213` or `-g generic/auto`.
#
# Needs root (xfstests does), /dev/fuse, and installs the mount(8) helper
# /sbin/mount.fuse.fscrypt-rs (a short script running the binary as
# mount.fscrypt-rs on this run's vaults) for the run, removing it
# afterwards; while one exists (another run, or one killed before its
# clean-up) the run is refused and it is left alone. Tests
# that need the users fsgqa, fsgqa2 and 123456-fsgqa are "not run" unless
# those users exist (xfstests' README: useradd -m fsgqa, ...).
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
xfstests=${XFSTESTS_DIR:-}
bin=""
keep=0
extra=""
size_gib=10
while [ $# -gt 0 ]; do
    case $1 in
    --xfstests) xfstests=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    --options) extra=,$2; shift 2 ;;
    --size) size_gib=$2; shift 2 ;;
    -h|--help) sed -n '2,29p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) break ;;
    esac
done
[ $# -gt 0 ] || set -- -g generic/quick

fail() { echo "xfstests.sh: $*" >&2; exit 2; }
[ "$(id -u)" -eq 0 ] || fail "xfstests needs root: run this as root"
[ -n "$xfstests" ] || fail "give the xfstests checkout with --xfstests DIR or XFSTESTS_DIR (build it with make first)"
[ -x "$xfstests/check" ] && [ -x "$xfstests/ltp/fsx" ] \
    || fail "$xfstests is not a built xfstests checkout (run make in it)"
[ -c /dev/fuse ] || fail "/dev/fuse is missing (modprobe fuse)"
[[ $size_gib =~ ^[1-9][0-9]*$ ]] || fail "--size takes a whole number of GiB"
command -v mkfs.ext4 >/dev/null || fail "mkfs.ext4 is missing (apt-get install e2fsprogs)"

if [ -z "$bin" ]; then
    (cd "$here" && cargo build --release -p fscrypt-cli) || fail "cargo build failed"
    bin=$here/target/release/fscrypt-rs
fi
bin=$(realpath "$bin")
[ -x "$bin" ] || fail "$bin is not executable"

helper=/sbin/mount.fuse.fscrypt-rs
marker="# written by fscrypt-rs scripts/xfstests.sh"
if [ -e "$helper" ]; then
    if grep -qF "$marker" "$helper"; then
        fail "$helper is in use by another run of this script (or one that was killed: then remove it)"
    fi
    fail "$helper exists and was not written by this script: remove it or run xfstests by hand"
fi

# The work directory (keys, results, the images) on a disk, not tmpfs;
# each vault on an ext4 of its own.
work=$(mktemp -d /var/tmp/fscrypt-rs-xfstests.XXXXXX)
chmod 0700 "$work"
cleanup() {
    for m in "$work/test.mnt" "$work/scratch.mnt" "$work/test.fs" "$work/scratch.fs"; do
        if mountpoint -q "$m"; then umount "$m" || umount -l "$m" || true; fi
    done
    if grep -qF "$marker" "$helper" 2>/dev/null; then rm -f "$helper"; fi
    if [ "$keep" -eq 0 ]; then rm -rf "$work"; else echo "kept $work"; fi
}
trap cleanup EXIT

for v in test scratch; do
    truncate -s "${size_gib}G" "$work/$v.img"
    mkfs.ext4 -q -F "$work/$v.img"
    mkdir "$work/$v.fs" "$work/$v.mnt"
    # mount(8) sets up the loop device and frees it again at umount.
    mount -o loop "$work/$v.img" "$work/$v.fs" || fail "cannot loop-mount $work/$v.img"
    mkdir "$work/$v.fs/vault"
    # Each vault has its own key file (and master key).
    "$bin" init --new-key-file "$work/$v.key" --no-recovery-key "$work/$v.fs/vault" >/dev/null
done

# xfstests compares df's file system type with FSTYP ("fuse"); a vault's
# mount reports its subtype ("fuse.fscrypt-rs"). A df first on PATH, for
# this run only, shows that type as "fuse"; nothing else changes.
mkdir -p "$work/bin"
{
    echo '#!/bin/bash'
    echo 'set -o pipefail'
    printf '%q "$@" | sed -E '\''s/^(\\S+\\s+)fuse\\.fscrypt-rs(\\s)/\\1fuse\\2/'\''\n' "$(type -P df)"
} >"$work/bin/df"
chmod 0755 "$work/bin/df"
export PATH=$work/bin:$PATH

umask 022
# xfstests unmounts by source (`umount $SCRATCH_DEV`), which umount(8)
# takes for a mount point when it is a directory; so TEST_DEV and
# SCRATCH_DEV are names (as in xfstests' README.fuse) that the helper maps
# to the vaults, giving the name as fsname= so the mount's source is it.
tag=fscrypt-rs-xfstests-$$
{
    echo '#!/bin/bash'
    echo "$marker"
    echo 'args=("$@")'
    printf 'case ${args[0]} in\n'
    printf '%q) args[0]=%q ;;\n' "$tag-test" "$work/test.fs/vault" "$tag-scratch" "$work/scratch.fs/vault"
    printf '*) echo "mount.fuse.fscrypt-rs: only for the xfstests run (sources %s-test, %s-scratch)" >\x262; exit 32 ;;\n' "$tag" "$tag"
    printf 'esac\n'
    printf 'exec -a mount.fscrypt-rs %q "${args[@]}" -o "fsname=$1"\n' "$bin"
} >"$helper"
chmod 0755 "$helper"

# xfstests reads local.config from its directory, or the file HOST_OPTIONS names.
cat >"$work/local.config" <<EOF
export FSTYP=fuse
export FUSE_SUBTYP=.fscrypt-rs
export TEST_DEV=$tag-test
export TEST_DIR=$work/test.mnt
export SCRATCH_DEV=$tag-scratch
export SCRATCH_MNT=$work/scratch.mnt
export TEST_FS_MOUNT_OPTS="-o keyfile=$work/test.key,allow_other$extra"
export MOUNT_OPTIONS="-o keyfile=$work/scratch.key,allow_other$extra"
export RESULT_BASE=$work/results
EOF

echo "xfstests.sh: binary $bin, vaults under $work, ./check $*"
status=0
(cd "$xfstests" && HOST_OPTIONS=$work/local.config ./check "$@") || status=$?
if [ -f "$work/results/check.log" ]; then
    tail -n 5 "$work/results/check.log"
fi
if [ -d "$work/results" ] && [ "$keep" -eq 0 ]; then
    out=$here/target/xfstests-results
    rm -rf "$out"
    cp -r "$work/results" "$out"
    echo "xfstests.sh: results copied to $out"
fi
exit "$status"
