#!/bin/sh
# Measures `fscrypt-rs fsck` on a vault of N files (default 100,000) in
# 100 directories, without and with the key (issue 11, "Speed"). As root,
# with /dev/fuse; builds nothing: run `cargo build --release -p fscrypt-cli`
# first. Usage: scripts/fsck-speed.sh [N] [WORKDIR]
set -eu
N=${1:-100000}
WORK=${2:-$(mktemp -d /tmp/fsck-speed.XXXXXX)}
BIN=${FSCRYPT_RS:-$(dirname "$0")/../target/release/fscrypt-rs}
PER=$((N / 100))
mkdir -p "$WORK/cipher" "$WORK/plain"
echo "fsck-speed: vault in $WORK/cipher, $N files ($PER per directory)"
"$BIN" init "$WORK/cipher" --new-key-file "$WORK/key" >/dev/null
"$BIN" mount "$WORK/cipher" "$WORK/plain" --key-file "$WORK/key"
trap '"$BIN" unmount "$WORK/plain" 2>/dev/null || true' EXIT
start=$(date +%s)
d=0
while [ $d -lt 100 ]; do
    mkdir "$WORK/plain/dir-$d"
    (
        cd "$WORK/plain/dir-$d"
        i=0
        while [ $i -lt $PER ]; do
            echo "file $i of directory $d" > "file-number-$i.txt"
            i=$((i + 1))
        done
    )
    d=$((d + 1))
done
echo "fsck-speed: populated in $(( $(date +%s) - start )) s"
"$BIN" unmount "$WORK/plain"
trap - EXIT
sync
echo "fsck-speed: without the key:"
/usr/bin/time -f "%e s elapsed, %M KiB max RSS" "$BIN" fsck "$WORK/cipher" --no-key
echo "fsck-speed: with the key:"
/usr/bin/time -f "%e s elapsed, %M KiB max RSS" "$BIN" fsck "$WORK/cipher" --key-file "$WORK/key"
echo "fsck-speed: remove $WORK when done"
