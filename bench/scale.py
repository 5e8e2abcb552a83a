#!/usr/bin/env python3
"""scale: many files in one vault against gocryptfs (issue 27 item 5).

For each count N (--counts, default 10000,100000), on a fresh filesystem of
each kind (fscrypt-rs on /dev/fuse, data format 3, and gocryptfs), on an
ext4 image in a tmpfs as bench/compare-fs sets it up (or, with --disk DIR,
a sparse image file in DIR, for counts that do not fit in memory):

  create tree   N files of 4 KiB (bench/create_files.c) in N/1000
                directories of 1000, one directory after another
  create flat   min(N, 100000) files of 4 KiB in one directory
  ls -l flat    cold (caches dropped): `ls -l` of the big directory
  find          cold: `find` over the tree
  rm -rf        the tree and the big directory
  RSS           the daemon's VmHWM (peak) over the run and VmRSS after
                `rm -rf` with the kernel's caches dropped

Times are wall seconds of one run (the counts make repetitions long);
files/s for the creates. The machine may be shared: run it alone. Root.

Usage: python3 bench/scale.py [--bin target/release/fscrypt-rs]
       [--counts 10000,100000] [--only fscrypt-rs,gocryptfs] [--disk /var/tmp]
"""

import argparse
import os
import signal
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare_fs as cf  # noqa: E402

KINDS = {"fscrypt-rs": cf.FscryptRs, "gocryptfs": cf.Gocryptfs}
PER_DIR = 1000
FLAT_MAX = 100_000


def timed(cmd):
    t0 = time.perf_counter()
    cf.run(cmd, capture=True)
    return time.perf_counter() - t0


def mem(pids):
    m = cf.daemon_memory_mib(pids)
    return m if m else (float("nan"), float("nan"))


def one(kind, n, ctx, seed):
    """The figures of filesystem `kind` with `n` files."""
    fs = KINDS[kind](ctx)
    mnt = fs.setup()
    if mnt is None:
        return {"skip": fs.skip_reason}
    r = {}
    tree = os.path.join(mnt, "tree")
    os.mkdir(tree)
    dirs = max(1, n // PER_DIR)
    secs = 0.0
    for i in range(dirs):
        d = os.path.join(tree, f"d{i:04d}")
        os.mkdir(d)
        secs += cf.seed_create(seed, d, min(PER_DIR, n - i * PER_DIR))
    r["create tree (files/s)"] = n / secs
    flat = os.path.join(mnt, "flat")
    os.mkdir(flat)
    nflat = min(n, FLAT_MAX)
    r["create flat (files/s)"] = nflat / cf.seed_create(seed, flat, nflat)
    cf.drop_caches()
    r["ls -l flat, cold (s)"] = timed(["sh", "-c", f"ls -l {flat} > /dev/null"])
    cf.drop_caches()
    r["find tree, cold (s)"] = timed(["sh", "-c", f"find {tree} > /dev/null"])
    r["rm -rf all (s)"] = timed(["rm", "-rf", tree, flat])
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("2\n")
    time.sleep(2)
    rss, hwm = mem(fs.daemon_pids())
    r["daemon RSS peak (MiB)"] = hwm
    r["daemon RSS after (MiB)"] = rss
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", help="fscrypt-rs binary (default: cargo build --release)")
    ap.add_argument("--counts", default="10000,100000")
    ap.add_argument("--only", default="fscrypt-rs,gocryptfs")
    ap.add_argument("--disk", help="put the ext4 image in this directory (sparse) instead of "
                    "a tmpfs: for counts whose backing bytes exceed memory (1,000,000 files "
                    "are about 18 GB in data format 3)")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("scale: must run as root (loop devices, mounts, drop_caches)")
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, cf.on_signal)
    counts = [int(c) for c in args.counts.split(",")]
    kinds = args.only.split(",")
    bin_ = os.path.abspath(args.bin or cf.build_binary())
    results = {}
    for n in counts:
        # Backing bytes per 4 KiB file: about 16 KiB for format 3, 8 for
        # gocryptfs; twice the largest N (tree + flat), plus room.
        gib = max(2, (2 * n * 20 * 1024) // (1 << 30) + 1)
        for kind in kinds:
            cleanup = cf.Cleanup()

            class Ctx:
                pass

            ctx = Ctx()
            ctx.cleanup = cleanup
            ctx.bin = bin_
            try:
                base = tempfile.mkdtemp(prefix="scale.")
                cleanup.push("workdir", lambda b=base: os.rmdir(b))
                ctx.work = os.path.join(base, "tmpfs")
                os.mkdir(ctx.work)
                cleanup.push("workdir/tmpfs", lambda w=ctx.work: os.rmdir(w))
                tmpfs_mib = 512 if args.disk else gib * 1024 + 256
                cf.run(["mount", "-t", "tmpfs", "-o", f"size={tmpfs_mib}m,mode=0700",
                        "tmpfs", ctx.work])
                cleanup.push("tmpfs", lambda w=ctx.work: cf.unmount(w))
                seed = cf.build_seed(ctx.work)
                img_dir = tempfile.mkdtemp(prefix="scale-img.", dir=args.disk) if args.disk else ctx.work
                img = os.path.join(img_dir, "ext4.img")
                if args.disk:
                    cleanup.push("image dir", lambda d=img_dir: (os.unlink(os.path.join(d, "ext4.img")), os.rmdir(d)))
                with open(img, "wb") as f:
                    f.truncate(gib << 30)
                cf.run(["mkfs.ext4", "-q", "-F", "-b", "4096", "-N", str(4 * n + 100_000),
                        "-E", "lazy_itable_init=0,lazy_journal_init=0", img])
                loop = cf.run(["losetup", "--find", "--show", img], capture=True).stdout.strip()
                cleanup.push("loop", lambda lo=loop: cf.run(["losetup", "-d", lo], check=False))
                ctx.img_mnt = os.path.join(ctx.work, "ext4")
                os.mkdir(ctx.img_mnt)
                cf.run(["mount", loop, ctx.img_mnt])
                cleanup.push("ext4 mount", lambda m=ctx.img_mnt: cf.unmount(m))
                cf.log(f"scale: {kind}, {n} files")
                results[(kind, n)] = one(kind, n, ctx, seed)
            finally:
                cleanup.run_all()
    metrics = [m for r in results.values() if "skip" not in r for m in r][: 7]
    cols = [(k, n) for n in counts for k in kinds]
    print(f"{'':26s}" + "".join(f"{k[:10] + ' ' + str(n):>20s}" for k, n in cols))
    for m in metrics:
        row = "".join(f"{results[c].get(m, float('nan')):20.2f}" for c in cols)
        print(f"{m:26s}{row}")
    for c, r in results.items():
        if "skip" in r:
            print(f"{c}: skipped: {r['skip']}")


if __name__ == "__main__":
    sys.exit(main())
