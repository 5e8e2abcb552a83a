#!/usr/bin/env bash
# Measures `fscrypt-rs verify` throughput (MB/s of file data verified) on a
# scratch loop-device ext4 with a v2 AES-256-XTS/CTS directory holding one
# file of SIZE_MIB (default 256) random MiB: once warm (plaintext still in the
# page cache) and once cold (the kernel decrypts while verify reads), plus the
# kernel's own cold read time for comparison. Root only; cleans up on exit.
# Usage: scripts/verify-speed.sh [SIZE_MIB]   (BIN=path/to/fscrypt-rs to override)
set -euo pipefail
SIZE_MIB=${1:-256}
BIN=${BIN:-$(dirname "$0")/../target/release/fscrypt-rs}
[ -x "$BIN" ] || { echo "build first: cargo build --release -p fscrypt-cli (or set BIN)" >&2; exit 1; }
D=$(mktemp -d /tmp/fscrypt-rs-speed.XXXXXX)
truncate -s $((SIZE_MIB * 2 + 64))M "$D/img"
mkfs.ext4 -q -F -b 4096 -O encrypt,stable_inodes "$D/img"
LOOP=$(losetup -f --show "$D/img")
mkdir "$D/mnt"
mount "$LOOP" "$D/mnt"
cleanup() { umount "$D/mnt" 2>/dev/null || umount -l "$D/mnt"; losetup -d "$LOOP"; rm -rf "$D"; }
trap cleanup EXIT
head -c 64 /dev/urandom > "$D/key"
ID=$("$BIN" add-key "$D/mnt" --key-file "$D/key")
mkdir "$D/mnt/t"
"$BIN" set-policy "$ID" "$D/mnt/t" >/dev/null
dd if=/dev/urandom of="$D/mnt/t/big" bs=1M count="$SIZE_MIB" status=none
sync
echo "== warm (plaintext in the page cache)"
"$BIN" verify "$D/mnt/t" --key-file "$D/key" -q | head -1
echo 3 > /proc/sys/vm/drop_caches
echo "== cold (the kernel decrypts while verify reads)"
"$BIN" verify "$D/mnt/t" --key-file "$D/key" -q | head -1
echo 3 > /proc/sys/vm/drop_caches
echo "== the kernel alone: cold read of the file"
start=$(date +%s.%N); cat "$D/mnt/t/big" > /dev/null; end=$(date +%s.%N)
awk -v s="$start" -v e="$end" -v m="$SIZE_MIB" 'BEGIN { printf "%.1f MB/s\n", m * 1.048576 / (e - s) }'
