#!/usr/bin/env python3
"""scaling: fscrypt-rs's parallel scaling and daemon memory (issue 12, items
3 and 4), on the same setup as compare-fs (a loop ext4 image in tmpfs).

  1. create: 1 process making N files in one directory, then 4 processes
     making N files each in 4 directories at once (bench/create_files.c):
     aggregate files/s and the 4-vs-1 ratio
  2. read: 1 reader of a M MiB file, then 4 readers of 4 such files at once
     (page cache dropped first): aggregate MB/s and the 4-vs-1 ratio
  3. memory: the daemon's VmRSS/VmHWM after mounting; after creating F files
     (one directory) and after `rm -rf` of them (the kernel still caching
     them); then again with `echo 2 > drop_caches` (the kernel forgets the
     inodes) between the creating and the removing

Each of 1 and 2 is repeated --reps times; medians and min..max are printed.
The machine may be shared: quote medians. Everything is undone on exit.

Usage: python3 bench/scaling.py [--bin target/release/fscrypt-rs]
       [--reps 5] [--n 2500] [--mib 128] [--files 100000] [--skip-par]
       [--skip-mem]
"""

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare_fs as cf  # noqa: E402

MiB = cf.MiB


def mem_kib(pid):
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM", "Threads"):
                out[k] = int(v.split()[0])
    return out


def forget_all(pid, settle=1.0):
    """drop_caches=2 until the daemon's RSS stops moving (forgets are async)."""
    last = None
    for _ in range(20):
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("2\n")
        time.sleep(settle)
        now = mem_kib(pid)["VmRSS"]
        if last is not None and abs(now - last) < 256:
            return now
        last = now
    return last


def summary(xs):
    return f"median {statistics.median(xs):8.1f}  ({min(xs):.1f}..{max(xs):.1f})"


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", help="fscrypt-rs binary (default: cargo build --release)")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--n", type=int, default=2500, help="files per creating process")
    ap.add_argument("--mib", type=int, default=128, help="MiB per file read")
    ap.add_argument("--files", type=int, default=100_000, help="files of the memory run")
    ap.add_argument("--skip-par", action="store_true")
    ap.add_argument("--skip-mem", action="store_true")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("scaling: must run as root (loop devices, mounts, drop_caches)")
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, cf.on_signal)
    bin_ = os.path.abspath(args.bin or cf.build_binary())
    cleanup = cf.Cleanup()
    try:
        base = tempfile.mkdtemp(prefix="scaling.")
        cleanup.push("workdir", lambda: os.rmdir(base))
        work = os.path.join(base, "tmpfs")
        os.mkdir(work)
        cleanup.push("workdir/tmpfs", lambda: os.rmdir(work))
        img_gib = 3
        cf.run(["mount", "-t", "tmpfs", "-o", f"size={img_gib * 1024 + 256}m,mode=0700",
                "tmpfs", work])
        cleanup.push("tmpfs", lambda: cf.unmount(work))
        seed = cf.build_seed(work)
        img = os.path.join(work, "ext4.img")
        with open(img, "wb") as f:
            f.truncate(img_gib * 1024 * MiB)
        cf.run(["mkfs.ext4", "-q", "-F", "-b", "4096", "-N", "400000",
                "-E", "lazy_itable_init=0,lazy_journal_init=0", img])
        loop = cf.run(["losetup", "--find", "--show", img], capture=True).stdout.strip()
        cleanup.push("loop", lambda: cf.run(["losetup", "-d", loop], check=False))
        ext = os.path.join(work, "ext4")
        os.mkdir(ext)
        cf.run(["mount", loop, ext])
        cleanup.push("ext4 mount", lambda: cf.unmount(ext))
        cipher, mnt = os.path.join(ext, "cipher"), os.path.join(work, "mnt")
        os.mkdir(cipher)
        os.mkdir(mnt)
        keyf = os.path.join(work, "key")
        cf.run([bin_, "init", cipher, "--new-key-file", keyf], capture=True)
        logf = open(os.path.join(work, "daemon.log"), "w")
        cleanup.push("daemon log", logf.close)
        proc = subprocess.Popen([bin_, "mount", cipher, mnt, "--key-file", keyf,
                                 "--foreground"], stdin=subprocess.DEVNULL,
                                stdout=logf, stderr=subprocess.STDOUT)
        cleanup.push("daemon", lambda: cf.stop_daemon(proc, mnt))
        deadline = time.monotonic() + 60
        while not cf.is_mounted(mnt):
            if proc.poll() is not None or time.monotonic() > deadline:
                sys.exit("scaling: the daemon did not mount")
            time.sleep(0.1)
        m0 = mem_kib(proc.pid)
        print(f"daemon pid {proc.pid}: {m0['Threads']} threads, "
              f"/dev/fuse fds: {count_fuse_fds(proc.pid)}")

        if not args.skip_par:
            c1, c4, r1, r4 = [], [], [], []
            for r in range(args.reps):
                dirs = [os.path.join(mnt, f"par-{r}-{i}") for i in range(5)]
                for d in dirs:
                    os.mkdir(d)
                os.sync()
                c1.append(cf.parallel_create(seed, dirs[:1], args.n))
                os.sync()
                c4.append(cf.parallel_create(seed, dirs[1:], args.n))
                for d in dirs:
                    cf.rm_tree(d)
                os.sync()
                print(f"create rep {r + 1}: 1p {c1[-1]:.0f}/s, 4p {c4[-1]:.0f}/s, "
                      f"ratio {c4[-1] / c1[-1]:.2f}", flush=True)
            files = [os.path.join(mnt, f"read-{i}.bin") for i in range(4)]
            for f in files:
                cf.write_seq(f, args.mib * MiB)
            for r in range(args.reps):
                cf.drop_caches()
                r1.append(cf.parallel_read(files[:1]))
                cf.drop_caches()
                r4.append(cf.parallel_read(files))
                print(f"read rep {r + 1}: 1p {r1[-1]:.0f} MB/s, 4p {r4[-1]:.0f} MB/s, "
                      f"ratio {r4[-1] / r1[-1]:.2f}", flush=True)
            for f in files:
                os.unlink(f)
            os.sync()
            ratios_c = [b / a for a, b in zip(c1, c4)]
            ratios_r = [b / a for a, b in zip(r1, r4)]
            print(f"create files/s  1 process : {summary(c1)}")
            print(f"create files/s  4 processes: {summary(c4)}")
            print(f"create 4-vs-1 ratio        : {summary(ratios_c)}")
            print(f"read MB/s       1 reader   : {summary(r1)}")
            print(f"read MB/s       4 readers  : {summary(r4)}")
            print(f"read 4-vs-1 ratio          : {summary(ratios_r)}")

        if not args.skip_mem:
            before = forget_all(proc.pid)
            print(f"memory: RSS {before} KiB before (after drop_caches)")
            # A: create, then rm -rf while the kernel still caches them all.
            d = os.path.join(mnt, "many-a")
            os.mkdir(d)
            t0 = time.monotonic()
            cf.run([seed, d, str(args.files)], capture=True)
            m = mem_kib(proc.pid)
            print(f"memory: after creating {args.files} files ({time.monotonic() - t0:.0f} s): "
                  f"RSS {m['VmRSS']} KiB, HWM {m['VmHWM']} KiB")
            t0 = time.monotonic()
            cf.rm_tree(d)
            time.sleep(2)
            m = mem_kib(proc.pid)
            print(f"memory: after rm -rf of them ({time.monotonic() - t0:.0f} s): "
                  f"RSS {m['VmRSS']} KiB, HWM {m['VmHWM']} KiB")
            print(f"memory: after that + drop_caches: RSS {forget_all(proc.pid)} KiB")
            # B: create, let the kernel forget them, then rm -rf.
            d = os.path.join(mnt, "many-b")
            os.mkdir(d)
            cf.run([seed, d, str(args.files)], capture=True)
            m = mem_kib(proc.pid)
            print(f"memory: after creating {args.files} files again: RSS {m['VmRSS']} KiB")
            print(f"memory: after drop_caches (forgets): RSS {forget_all(proc.pid)} KiB")
            cf.rm_tree(d)
            time.sleep(2)
            m = mem_kib(proc.pid)
            print(f"memory: after rm -rf of them: RSS {m['VmRSS']} KiB, HWM {m['VmHWM']} KiB")
            print(f"memory: after that + drop_caches: RSS {forget_all(proc.pid)} KiB")
    finally:
        cleanup.run_all()


def count_fuse_fds(pid):
    n = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") == "/dev/fuse":
                n += 1
        except OSError:
            pass
    return n


if __name__ == "__main__":
    main()
