#!/usr/bin/env bash
# `fscrypt-rs encrypt DIR --convert` against `cp -a` of the same tree on the
# same (loop ext4, -O encrypt) filesystem: into a plain directory and into an
# encrypted (unlocked) one, each followed by `sync`, page cache dropped
# before each run. Root only. Usage: bench/convert-vs-cp.sh [BIN] [TREE_MIB]
set -euo pipefail
BIN=${1:-target/release/fscrypt-rs}
MIB=${2:-1024}
BIN=$(realpath "$BIN")
W=$(mktemp -d /tmp/convert-bench.XXXXXX)
cleanup() { umount "$W/mnt" 2>/dev/null || true; [ -n "${LOOP:-}" ] && losetup -d "$LOOP"; rm -rf "$W"; }
trap cleanup EXIT
truncate -s $((MIB * 4 + 512))M "$W/img"
mkfs.ext4 -q -b 4096 -O encrypt,stable_inodes "$W/img"
LOOP=$(losetup -f --show "$W/img")
mkdir "$W/mnt" && mount "$LOOP" "$W/mnt"
export FSCRYPT_CONF="$W/fscrypt.conf" FSCRYPT_ROOT_MNT="$W/mnt"
"$BIN" setup --time 0.001 >/dev/null
head -c 32 /dev/urandom > "$W/key"; chmod 600 "$W/key"
# The tree: half in 64 MiB files, a quarter in 128 KiB files, a quarter in
# 2-22 KiB files; a few dirs, symlinks and hard links.
python3 - "$W/mnt/tree" "$MIB" <<'PY'
import os, sys, random
root, mib = sys.argv[1], int(sys.argv[2]); random.seed(1)
os.makedirs(root)
blob = os.urandom(1 << 20)
def write(p, n):
    with open(p, "wb") as f:
        while n > 0:
            k = min(n, len(blob)); f.write(blob[:k]); n -= k
for i in range(max(1, mib // 2 // 64)):
    write(f"{root}/big{i}", 64 << 20)
os.makedirs(f"{root}/mid")
for i in range(mib // 4 * 8):
    write(f"{root}/mid/m{i}", 128 << 10)
left, i = (mib // 4) << 20, 0
while left > 0:
    d = f"{root}/small/d{i % 100}"; os.makedirs(d, exist_ok=True)
    n = random.randint(2 << 10, 22 << 10); write(f"{d}/s{i}", n); left -= n; i += 1
    if i % 50 == 0: os.symlink(f"s{i-1}", f"{d}/l{i}")
    if i % 70 == 0: os.link(f"{d}/s{i-1}", f"{d}/h{i}")
PY
cp -a "$W/mnt/tree" "$W/mnt/tree2"
sync
du -sh --apparent-size "$W/mnt/tree"; find "$W/mnt/tree" | wc -l
drop() { sync; echo 3 > /proc/sys/vm/drop_caches; }
t() { local s e; s=$(date +%s.%N); "$@"; sync; e=$(date +%s.%N); echo "$e - $s" | bc; }
drop; T1=$(t cp -a "$W/mnt/tree" "$W/mnt/plain")
mkdir "$W/mnt/enc"
"$BIN" encrypt "$W/mnt/enc" --source raw_key --name b1 --key "$W/key" -q
drop; T2=$(t cp -a "$W/mnt/tree/." "$W/mnt/enc/")
rm -rf "$W/mnt/plain" "$W/mnt/enc"/*   # room for the conversion's copy
drop; T3=$(t "$BIN" encrypt "$W/mnt/tree2" --convert --source raw_key --name b2 --key "$W/key" -q)
"$BIN" status "$W/mnt/tree2" | head -3
echo "cp -a (plain dir) + sync:      $T1 s"
echo "cp -a (encrypted dir) + sync:  $T2 s"
echo "encrypt --convert:             $T3 s"
echo "convert / cp -a into encrypted: $(echo "scale=2; $T2 / $T3" | bc) of its speed"
echo "convert / cp -a plain:          $(echo "scale=2; $T1 / $T3" | bc) of its speed"
