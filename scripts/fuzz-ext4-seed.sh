#!/bin/sh
# Make the seed image of the `ext4_image` fuzz target: a 64 KiB ext4 (1 KiB
# blocks, no journal) whose encrypted directory the kernel fills, written
# to fuzz/seeds/ext4_image/kernel-64k.img. Needs root, loop devices and a
# built fscrypt-rs (FSCRYPT_RS, default target/debug/fscrypt-rs).
# The key is the one the fuzz target uses: bytes i*29+3 for i in 0..64.
set -eu
cd "$(dirname "$0")/.."
BIN=${FSCRYPT_RS:-target/debug/fscrypt-rs}
OUT=fuzz/seeds/ext4_image
mkdir -p "$OUT"
T=$(mktemp -d)
trap 'umount "$T/mnt" 2>/dev/null || true; rm -rf "$T"' EXIT
python3 -c 'import sys; sys.stdout.buffer.write(bytes((i*29+3)&255 for i in range(64)))' > "$T/key"
truncate -s 64K "$T/img"
mkfs.ext4 -q -F -b 1024 -O encrypt,^has_journal,^resize_inode -N 32 -m 0 "$T/img"
mkdir "$T/mnt"
mount -o loop "$T/img" "$T/mnt"
ID=$("$BIN" add-key "$T/mnt" --key-file "$T/key")
mkdir "$T/mnt/enc" "$T/mnt/plain"
"$BIN" set-policy "$ID" "$T/mnt/enc" --padding 16
echo hello > "$T/mnt/enc/a"
head -c 3000 /dev/zero | tr '\0' x > "$T/mnt/enc/three-blocks"
mkdir "$T/mnt/enc/dir"
echo deep > "$T/mnt/enc/dir/a-much-longer-file-name-than-sixteen"
ln -s a "$T/mnt/enc/fast-link"
ln -s "$(head -c 200 /dev/zero | tr '\0' l)" "$T/mnt/enc/slow-link"
ln "$T/mnt/enc/a" "$T/mnt/enc/hard"
echo plain > "$T/mnt/plain/p"
"$BIN" remove-key "$T/mnt" "$ID" >/dev/null 2>&1 || true
umount "$T/mnt"
cp "$T/img" "$OUT/kernel-64k.img"
echo "wrote $OUT/kernel-64k.img"
