#!/usr/bin/env python3
"""compare-fs: the same workloads on plain ext4, kernel fscrypt, fscrypt-rs
(FUSE), gocryptfs and securefs, all on one loop ext4 image in tmpfs.

Workloads (issue 6, part 2), each repeated --reps times (median, min..max),
page cache dropped before every read measurement:
  1. create N files of 4096 bytes (open O_CREAT, write, close), N = 2000 and
     10,000: files/s
  2. 1 GiB sequential write ending in fsync, then sequential read: MB/s
  3. random 4 KiB reads over a 256 MiB file for 20 s (fio, psync): IOPS
  4. `ls -l` of the 10,000-file directory: seconds
  5. extract a ~100 MB tar of small files (from /usr/include, /usr/share),
     `du -s`, `rm -rf`: seconds
  6. the seed's own benchmark, bench/create_files.c (compiled here): N times
     open(O_CREAT), write 4096 bytes, close, N = 2000 and 10,000: files/s
  7. parallelism: 4 processes creating files in 4 directories at once, and 4
     readers of 4 different files (cold) at once: aggregate files/s and MB/s,
     beside the same work by 1 process
  8. the FUSE daemon's memory after the workloads: VmRSS and peak VmHWM (MiB)
  9. the FUSE daemon's memory after creating N more files (empty, 10 per
     cent per directory, N = 100,000; quick 10,000) with the page cache
     dropped, and after removing them again (rm -rf, caches dropped): VmRSS
 10. reading the whole tree of workload 5 back (cold, `tar c | cat`): seconds
 11. real work (issue 27): `git clone` of a local repository of 3,000 files
     of workload 5's tree, `git status` in the clone (cold), and `make -j2`
     of a generated C project (60 files of 20 functions, one program):
     seconds
Reverse views (issue 24: fscrypt-rs-reverse, gocryptfs-reverse): the tree of
workload 5 extracted as plaintext on the image, an encrypted read-only view
of it mounted (`mount --reverse`, `gocryptfs -reverse`), then per rep:
 R1. `rsync -a` of the view into an empty backup directory (cold), a second
     `rsync -a` with nothing changed, and one after one plaintext file grew
     by a byte: seconds, and rsync's own count of files and bytes sent
 R2. reading the whole view (cold, `tar c | cat`): seconds, beside
     workload 10 on the forward mount (issue 24's >= 0.8x gate)
CPU: user+sys seconds of the workload (this process and its children), plus
the FUSE daemon (/proc/<pid>/stat), plus kernel threads (kworkers doing
kernel fscrypt's and the loop device's work).

Everything created (mounts, daemons, loop device, tmpfs, keys) is undone on
exit, error, SIGINT, SIGTERM or SIGHUP.
"""

import argparse
import csv
import json
import os
import random
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

MiB = 1024 * 1024
CLK_TCK = os.sysconf("SC_CLK_TCK")
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def log(msg):
    print(f"compare-fs: {msg}", file=sys.stderr, flush=True)


def run(cmd, check=True, capture=False, stdin=None, timeout=None, env=None):
    """Runs a command (list); returns CompletedProcess."""
    return subprocess.run(
        cmd,
        check=check,
        stdout=subprocess.PIPE if capture else subprocess.DEVNULL,
        stderr=subprocess.PIPE if capture else None,
        stdin=stdin if stdin is not None else subprocess.DEVNULL,
        timeout=timeout,
        text=True,
        env=env,
    )


class Interrupted(Exception):
    pass


def on_signal(signum, _frame):
    raise Interrupted(f"signal {signum}")


# ---------------------------------------------------------------- cleanup
class Cleanup:
    """A stack of undo actions, run in reverse order exactly once."""

    def __init__(self):
        self.stack = []

    def push(self, what, fn):
        self.stack.append((what, fn))

    def pop_run(self, what):
        for i in range(len(self.stack) - 1, -1, -1):
            if self.stack[i][0] == what:
                _, fn = self.stack.pop(i)
                self._do(what, fn)
                return

    def _do(self, what, fn):
        try:
            fn()
        except Exception as e:  # keep undoing the rest
            log(f"cleanup of {what} failed: {e}")

    def run_all(self):
        while self.stack:
            what, fn = self.stack.pop()
            self._do(what, fn)


def is_mounted(path):
    path = os.path.realpath(path)
    with open("/proc/self/mountinfo") as f:
        for line in f:
            if line.split()[4] == path:
                return True
    return False


def unmount(path, fuse=False):
    if not is_mounted(path):
        return
    if fuse and shutil.which("fusermount3"):
        if run(["fusermount3", "-u", path], check=False).returncode == 0:
            return
    if run(["umount", path], check=False).returncode != 0:
        run(["umount", "-l", path], check=False)


def stop_daemon(proc, mnt):
    unmount(mnt, fuse=True)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# ---------------------------------------------------------------- CPU
def stat_ticks(pid):
    """utime+stime (+ reaped children) of a process, in clock ticks."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            rest = f.read().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return 0
    return sum(int(x) for x in rest[11:15])


def kthread_ticks():
    """CPU ticks of each kernel thread (children of kthreadd, pid 2), by pid.

    Kernel workers come and go; a delta is taken per pid (see CpuMeter), so
    a worker exiting mid-interval loses only its own share instead of
    making the sum go down."""
    total = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                rest = f.read().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue
        if rest[1] == "2" or name == "2":
            total[name] = int(rest[11]) + int(rest[12])
    return total


class CpuMeter:
    def __init__(self, daemon_pids):
        self.daemon_pids = daemon_pids

    def snap(self):
        s = resource.getrusage(resource.RUSAGE_SELF)
        c = resource.getrusage(resource.RUSAGE_CHILDREN)
        work = s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime
        daemon = sum(stat_ticks(p) for p in self.daemon_pids()) / CLK_TCK
        return (work, daemon, kthread_ticks())

    @staticmethod
    def delta(a, b):
        kthr = sum(max(0, t - a[2].get(pid, 0)) for pid, t in b[2].items()) / CLK_TCK
        return {
            "workload": b[0] - a[0],
            "daemon": max(0.0, b[1] - a[1]),
            "kthreads": kthr,
            "total": (b[0] - a[0]) + max(0.0, b[1] - a[1]) + kthr,
        }


# How much memory drop_caches() touches after dropping (MiB); set in main()
# from the largest cold read.
WARM_MIB = 0


def drop_caches():
    """Empties the page cache, then touches WARM_MIB of memory and frees it.

    The touch takes a guest artefact out of every cold measurement: with
    free page reporting (`page_reporting.page_reporting_order` on this VM's
    kernel command line), memory that stays free for a while is handed
    back to the host, and the first use of it again costs a host page fault
    per page. A cold read needs fresh page cache for its data (FUSE: twice,
    the file's pages and the backing file's), so without the touch it paid
    for whatever the workload before it left unused: a 1 GiB read right
    after a 1 GiB write through FUSE ran at 850-900 MB/s when the write
    went around the page cache (direct I/O) and at 1,400 when it had just
    filled it, and at 1,400-1,500 for both after the touch (bench/RESULTS.md,
    2026-12-03). Every filesystem gets the same touch.
    """
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")
    if WARM_MIB:
        buf = bytearray(WARM_MIB * MiB)
        buf[:: 4096] = b"x" * (len(buf) // 4096)
        del buf


# ---------------------------------------------------------------- filesystems
class Fs:
    """One filesystem under test. setup() returns the directory to work in."""

    key = ""
    label = ""
    fuse = False

    def __init__(self, ctx):
        self.ctx = ctx
        self.proc = None
        self.skip_reason = None

    def daemon_pids(self):
        return [self.proc.pid] if self.proc and self.proc.poll() is None else []

    def setup(self):
        raise NotImplementedError

    def describe(self):
        return self.label

    def start_daemon(self, cmd, mnt, timeout=90, env=None):
        logf = open(os.path.join(self.ctx.work, f"{self.key}-daemon.log"), "w")
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT,
            env=None if env is None else {**os.environ, **env},
        )
        self.ctx.cleanup.push(f"daemon {self.key}", lambda: stop_daemon(self.proc, mnt))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if is_mounted(mnt):
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        logf.flush()
        with open(logf.name) as f:
            tail = f.read()[-800:]
        raise RuntimeError(f"{cmd[0]} did not mount {mnt}: {tail.strip()}")


class PlainExt4(Fs):
    key, label = "ext4", "ext4"

    def setup(self):
        d = os.path.join(self.ctx.img_mnt, "plain")
        os.makedirs(d)
        return d


class KernelFscrypt(Fs):
    key, label = "kernel", "kernel fscrypt"

    def setup(self):
        bin_ = self.ctx.bin
        for verb in ("add-key", "set-policy"):
            if not bin_ or run([bin_, verb, "--help"], check=False).returncode != 0:
                self.skip_reason = (
                    f"`fscrypt-rs {verb}` is not available in {bin_} "
                    "(kernel key/policy commands not on main yet)"
                )
                return None
        keyf = os.path.join(self.ctx.work, "kernel.key")
        with open(keyf, "wb") as f:
            f.write(os.urandom(64))
        os.chmod(keyf, 0o600)
        out = run(
            [bin_, "add-key", self.ctx.img_mnt, "--key-file", keyf, "--json"],
            capture=True,
        ).stdout
        ident = None
        try:
            j = json.loads(out)
            ident = j.get("identifier") or j.get("key_identifier") or j.get("id")
        except ValueError:
            pass
        if not ident:
            ident = out.strip().split()[-1]
        d = os.path.join(self.ctx.img_mnt, "kernel")
        os.makedirs(d)
        run(
            [bin_, "set-policy", ident, d, "--contents", "AES-256-XTS",
             "--filenames", "AES-256-CTS"],
            capture=True,
        )
        self.detail = f"v2 AES-256-XTS/AES-256-CTS, key {ident}"
        # The key goes away with the unmount of the image (per-sb keyring);
        # remove it explicitly first when the command exists.
        self.ctx.cleanup.push(
            "kernel key",
            lambda: run([bin_, "remove-key", ident, self.ctx.img_mnt], check=False),
        )
        return d

    def describe(self):
        return f"{self.label} ({getattr(self, 'detail', '')})"


URING_PARAM = "/sys/module/fuse/parameters/enable_uring"


class FscryptRs(Fs):
    """fscrypt-rs on /dev/fuse, as every FUSE peer here (`-o noio_uring`:
    even where root enabled FUSE over io_uring)."""

    key, label, fuse = "fscrypt-rs", "fscrypt-rs (data format 3, authenticated)", True
    options = ["-o", "noio_uring"]
    init_args = []

    def setup(self):
        bin_ = self.ctx.bin
        for verb in ("init", "mount"):
            if not bin_ or run([bin_, verb, "--help"], check=False).returncode != 0:
                self.skip_reason = (
                    f"`fscrypt-rs {verb}` is not available in {bin_} (FUSE mount not on main yet)"
                )
                return None
        cipher = os.path.join(self.ctx.img_mnt, f"{self.key}.cipher")
        mnt = os.path.join(self.ctx.work, f"mnt-{self.key}")
        os.makedirs(cipher)
        os.makedirs(mnt)
        keyf = os.path.join(self.ctx.work, f"{self.key}.key")
        run([bin_, "init", cipher, "--new-key-file", keyf] + self.init_args, capture=True)
        # Format 3's generation store goes with the run (never /var/lib).
        state = os.path.join(self.ctx.work, f"{self.key}.state")
        self.start_daemon(
            [bin_, "mount", cipher, mnt, "--key-file", keyf, "--foreground"] + self.options,
            mnt, env={"FSCRYPT_RS_STATE_DIR": state},
        )
        return mnt


class FscryptRsNoIntegrity(FscryptRs):
    """fscrypt-rs on a vault made with `init --no-integrity` (data format 2:
    encrypted, not authenticated), on /dev/fuse: what authentication costs
    is the ratio of the two fscrypt-rs columns (rs/rs-v2)."""

    key, label = "fscrypt-rs-v2", "fscrypt-rs --no-integrity (data format 2)"
    init_args = ["--no-integrity"]


class FscryptRsUring(FscryptRs):
    """fscrypt-rs served through FUSE over io_uring (Linux 6.14+): root
    enables the kernel's switch for this filesystem's turn and puts it back
    after. None of the peers can use it (go-fuse and the libfuse securefs
    links have no io_uring transport), so it is its own column."""

    key, label = "fscrypt-rs-uring", "fscrypt-rs (FUSE over io_uring)"
    options = []

    def setup(self):
        try:
            with open(URING_PARAM) as f:
                was = f.read().strip()
        except OSError:
            self.skip_reason = f"this kernel has no FUSE over io_uring ({URING_PARAM})"
            return None
        with open(URING_PARAM, "w") as f:
            f.write("Y")

        def restore():
            with open(URING_PARAM, "w") as f:
                f.write(was)

        self.ctx.cleanup.push("enable_uring", restore)
        return super().setup()


class Gocryptfs(Fs):
    key, label, fuse = "gocryptfs", "gocryptfs", True

    def setup(self):
        cipher = os.path.join(self.ctx.img_mnt, "gocryptfs.cipher")
        mnt = os.path.join(self.ctx.work, "mnt-gocryptfs")
        os.makedirs(cipher)
        os.makedirs(mnt)
        pw = os.path.join(self.ctx.work, "gocryptfs.pass")
        with open(pw, "w") as f:
            f.write("compare-fs benchmark password\n")
        os.chmod(pw, 0o600)
        run(["gocryptfs", "-init", "-q", "-passfile", pw, cipher], capture=True)
        self.start_daemon(
            ["gocryptfs", "-fg", "-q", "-nosyslog", "-passfile", pw, cipher, mnt], mnt
        )
        return mnt


class Securefs(Fs):
    key, label, fuse = "securefs", "securefs", True

    def setup(self):
        data = os.path.join(self.ctx.img_mnt, "securefs.data")
        mnt = os.path.join(self.ctx.work, "mnt-securefs")
        os.makedirs(data)
        os.makedirs(mnt)
        keyf = os.path.join(self.ctx.work, "securefs.key")
        with open(keyf, "wb") as f:
            f.write(os.urandom(32))
        os.chmod(keyf, 0o600)
        run(["securefs", "create", "--keyfile", keyf, data], capture=True)
        self.start_daemon(["securefs", "mount", "--keyfile", keyf, data, mnt], mnt)
        return mnt


class ReverseView(Fs):
    """A read-only encrypted view of a plaintext tree (for backups). setup()
    extracts workload 5's tree as plaintext on the image and mounts the view
    of it; run_reverse_workloads() measures rsync of the view."""

    fuse, reverse = True, True

    def setup(self):
        self.plain = os.path.join(self.ctx.img_mnt, f"{self.key}.plain")
        os.makedirs(self.plain)
        run(["tar", "-xf", self.ctx.tar_path, "-C", self.plain])
        mnt = os.path.join(self.ctx.work, f"mnt-{self.key}")
        os.makedirs(mnt)
        return self.mount_view(mnt)


class FscryptRsReverse(ReverseView):
    key, label = "fscrypt-rs-reverse", "fscrypt-rs mount --reverse"

    def mount_view(self, mnt):
        bin_ = self.ctx.bin
        help_ = run([bin_, "init", "--help"], check=False, capture=True).stdout
        if "--reverse" not in help_:
            self.skip_reason = f"`fscrypt-rs init --reverse` is not available in {bin_}"
            return None
        keyf = os.path.join(self.ctx.work, f"{self.key}.key")
        run([bin_, "init", "--reverse", self.plain, "--new-key-file", keyf], capture=True)
        self.start_daemon(
            [bin_, "mount", "--reverse", self.plain, mnt, "--key-file", keyf,
             "--foreground", "-o", "noio_uring"],
            mnt, env={"FSCRYPT_RS_STATE_DIR": os.path.join(self.ctx.work, f"{self.key}.state")},
        )
        return mnt


class GocryptfsReverse(ReverseView):
    key, label = "gocryptfs-reverse", "gocryptfs -reverse"

    def mount_view(self, mnt):
        pw = os.path.join(self.ctx.work, f"{self.key}.pass")
        with open(pw, "w") as f:
            f.write("compare-fs benchmark password\n")
        os.chmod(pw, 0o600)
        run(["gocryptfs", "-init", "-reverse", "-q", "-passfile", pw, self.plain], capture=True)
        self.start_daemon(
            ["gocryptfs", "-reverse", "-fg", "-q", "-nosyslog", "-passfile", pw,
             self.plain, mnt], mnt
        )
        return mnt


FS_CLASSES = [PlainExt4, KernelFscrypt, FscryptRs, FscryptRsNoIntegrity, FscryptRsUring,
              Gocryptfs, Securefs, FscryptRsReverse, GocryptfsReverse]


# ---------------------------------------------------------------- workloads
def create_files(d, n):
    buf = os.urandom(4096)
    flags = os.O_CREAT | os.O_WRONLY | os.O_EXCL
    t0 = time.perf_counter()
    for i in range(n):
        fd = os.open(os.path.join(d, f"file-{i:06d}.dat"), flags, 0o644)
        os.write(fd, buf)
        os.close(fd)
    return time.perf_counter() - t0


def write_seq(path, size):
    chunk = os.urandom(MiB)
    t0 = time.perf_counter()
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
    try:
        left = size
        while left > 0:
            left -= os.write(fd, chunk[: min(MiB, left)])
        os.fsync(fd)
    finally:
        os.close(fd)
    return time.perf_counter() - t0


def read_seq(path):
    t0 = time.perf_counter()
    fd = os.open(path, os.O_RDONLY)
    total = 0
    try:
        while True:
            b = os.read(fd, MiB)
            if not b:
                break
            total += len(b)
    finally:
        os.close(fd)
    return time.perf_counter() - t0, total


def rand_read_iops(path, size, seconds, fio):
    if fio:
        out = run(
            [fio, "--name=randread", f"--filename={path}", "--rw=randread", "--bs=4k",
             f"--size={size}", f"--runtime={seconds}", "--time_based", "--ioengine=psync",
             "--invalidate=1", "--numjobs=1", "--output-format=json"],
            capture=True,
        ).stdout
        j = json.loads(out[out.index("{"):])
        return j["jobs"][0]["read"]["iops"]
    # Fallback without fio: pread at random 4 KiB-aligned offsets.
    fd = os.open(path, os.O_RDONLY)
    blocks = size // 4096
    rnd = random.Random(1)
    n = 0
    t0 = time.perf_counter()
    end = t0 + seconds
    try:
        while True:
            for _ in range(256):
                os.pread(fd, 4096, rnd.randrange(blocks) * 4096)
            n += 256
            if time.perf_counter() >= end:
                break
    finally:
        os.close(fd)
    return n / (time.perf_counter() - t0)


def build_seed(work):
    """Compiles bench/create_files.c (the seed's create loop) into work/."""
    out = os.path.join(work, "create_files")
    run(["cc", "-O2", "-o", out, os.path.join(REPO, "bench", "create_files.c")])
    return out


def seed_create(seed_bin, d, n):
    """Seconds the seed program takes for n files in d."""
    return float(run([seed_bin, d, str(n)], capture=True).stdout.strip())


def parallel_create(seed_bin, dirs, n):
    """Aggregate files/s of len(dirs) seed programs at once, n files each."""
    t0 = time.perf_counter()
    procs = [subprocess.Popen([seed_bin, d, str(n)], stdout=subprocess.DEVNULL) for d in dirs]
    codes = [pr.wait() for pr in procs]
    secs = time.perf_counter() - t0
    if any(codes):
        raise RuntimeError(f"parallel create failed: exit codes {codes}")
    return len(dirs) * n / secs


def parallel_read(paths):
    """Aggregate MB/s of one reader process per path, all at once (cold)."""
    t0 = time.perf_counter()
    procs = [subprocess.Popen(["dd", f"if={p}", "of=/dev/null", "bs=1M", "status=none"])
             for p in paths]
    codes = [pr.wait() for pr in procs]
    secs = time.perf_counter() - t0
    if any(codes):
        raise RuntimeError(f"parallel read failed: exit codes {codes}")
    return sum(os.path.getsize(p) for p in paths) / secs / 1e6


def daemon_memory_mib(pids):
    """(VmRSS, VmHWM) in MiB summed over the daemon pids, or None."""
    rss = hwm = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        rss += int(line.split()[1])
                    elif line.startswith("VmHWM:"):
                        hwm += int(line.split()[1])
        except OSError:
            return None
    return (rss / 1024, hwm / 1024) if pids else None


def timed_cmd(cmd):
    t0 = time.perf_counter()
    run(cmd)
    return time.perf_counter() - t0


def rm_tree(path):
    if os.path.lexists(path):
        run(["rm", "-rf", path])


def read_tree(path):
    """Seconds to read every file under path (`tar c` into a pipe: tar
    skips reading when its output is /dev/null)."""
    return timed_cmd(["sh", "-c", 'tar -cf - -C "$1" . | cat > /dev/null', "sh", path])


def rsync_stats(src, dst):
    """(seconds, files sent, MB sent) of `rsync -a src/ dst/`, from rsync's
    --stats (regular files transferred, total transferred file size)."""
    t0 = time.perf_counter()
    out = run(["rsync", "-a", "--stats", src + "/", dst + "/"], capture=True).stdout
    secs = time.perf_counter() - t0
    stats = {}
    for line in out.splitlines():
        k, _, v = line.partition(":")
        stats[k.strip()] = v.strip().split(" ")[0].replace(",", "")
    files = int(stats["Number of regular files transferred"])
    size = int(stats["Total transferred file size"])
    return secs, files, size / 1e6


# metric key -> (label, unit, higher is better)
def metric_defs(p):
    n1, n2 = p["create_n"]
    return [
        (f"create_{n1}", f"create {n1} x 4 KiB files", "files/s", True),
        (f"create_{n2}", f"create {n2} x 4 KiB files", "files/s", True),
        ("seq_write", f"seq write {p['seq_mib']} MiB + fsync", "MB/s", True),
        ("seq_read", f"seq read {p['seq_mib']} MiB (cold)", "MB/s", True),
        ("rand_read", f"rand 4K read, {p['rand_mib']} MiB file, {p['rand_s']} s", "IOPS", True),
        ("ls_l", f"ls -l of {n2} files (cold)", "s", False),
        ("tar_x", f"tar x {p['tar_mb']:.0f} MB ({p['tar_files']} files)", "s", False),
        ("du_s", "du -s of the tree (cold)", "s", False),
        ("rm_rf", "rm -rf of the tree", "s", False),
        (f"seed_create_{n1}", f"seed create_files.c, {n1} files", "files/s", True),
        (f"seed_create_{n2}", f"seed create_files.c, {n2} files", "files/s", True),
        ("create_1p", f"create {p['par_n']} files, 1 process", "files/s", True),
        ("create_4p", f"create 4 x {p['par_n']} files, 4 processes", "files/s", True),
        ("read_1p", f"read 1 x {p['par_mib']} MiB, 1 process (cold)", "MB/s", True),
        ("read_4p", f"read 4 x {p['par_mib']} MiB, 4 processes (cold)", "MB/s", True),
        ("daemon_rss", "FUSE daemon RSS after the workloads", "MiB", False),
        ("daemon_hwm", "FUSE daemon peak RSS (VmHWM)", "MiB", False),
        ("rss_created", f"FUSE daemon RSS, {p['churn_n']} files created", "MiB", False),
        ("rss_removed", f"FUSE daemon RSS, {p['churn_n']} files removed", "MiB", False),
        ("tree_read", f"read the {p['tar_mb']:.0f} MB tree (cold)", "s", False),
        ("git_clone", f"git clone, {p['git_files']} files", "s", False),
        ("git_status", "git status of the clone (cold)", "s", False),
        ("make_c", f"make -j2, C project of {CPROJ_FILES} files", "s", False),
        ("rsync_1", "reverse: rsync -a view, first (cold)", "s", False),
        ("rsync_1_files", "reverse: files sent, first rsync", "files", False),
        ("rsync_1_mb", "reverse: MB sent, first rsync", "MB", False),
        ("rsync_2", "reverse: rsync again, no change", "s", False),
        ("rsync_2_files", "reverse: files sent, no change", "files", False),
        ("rsync_2_mb", "reverse: MB sent, no change", "MB", False),
        ("rsync_3", "reverse: rsync after 1 file changed", "s", False),
        ("rsync_3_files", "reverse: files sent, 1 file changed", "files", False),
        ("rsync_3_mb", "reverse: MB sent, 1 file changed", "MB", False),
    ]


def run_workloads(fs, d, p, reps, meter, results, progress):
    """Runs every workload on directory d; appends samples to results."""

    def record(metric, value, cpu):
        results.setdefault(metric, {"values": [], "cpu": []})
        results[metric]["values"].append(value)
        results[metric]["cpu"].append(cpu)

    n1, n2 = p["create_n"]
    keep_dir = None
    # 1. create N files
    for n in (n1, n2):
        for r in range(reps):
            progress(f"create {n} files, rep {r + 1}/{reps}")
            sub = os.path.join(d, f"create-{n}-{r}")
            os.mkdir(sub)
            a = meter.snap()
            secs = create_files(sub, n)
            record(f"create_{n}", n / secs, CpuMeter.delta(a, meter.snap()))
            os.sync()
            if n == n2 and keep_dir is None:
                keep_dir = sub
            else:
                rm_tree(sub)
    # 4. ls -l of the n2-file directory (kept from workload 1)
    for r in range(reps):
        progress(f"ls -l {n2}, rep {r + 1}/{reps}")
        drop_caches()
        a = meter.snap()
        secs = timed_cmd(["ls", "-l", keep_dir])
        record("ls_l", secs, CpuMeter.delta(a, meter.snap()))
    rm_tree(keep_dir)
    os.sync()
    # 2. sequential write + read
    seq = os.path.join(d, "seq.bin")
    size = p["seq_mib"] * MiB
    for r in range(reps):
        progress(f"seq write {p['seq_mib']} MiB, rep {r + 1}/{reps}")
        rm_tree(seq)
        os.sync()
        p["trim"]()
        a = meter.snap()
        secs = write_seq(seq, size)
        record("seq_write", size / secs / 1e6, CpuMeter.delta(a, meter.snap()))
        progress(f"seq read {p['seq_mib']} MiB, rep {r + 1}/{reps}")
        drop_caches()
        a = meter.snap()
        secs, total = read_seq(seq)
        if total != size:
            raise RuntimeError(f"{fs.label}: read {total} bytes of {size}")
        record("seq_read", size / secs / 1e6, CpuMeter.delta(a, meter.snap()))
    rm_tree(seq)
    os.sync()
    p["trim"]()
    # 3. random 4 KiB reads
    rnd = os.path.join(d, "rand.bin")
    rsize = p["rand_mib"] * MiB
    write_seq(rnd, rsize)
    for r in range(reps):
        progress(f"random reads {p['rand_s']} s, rep {r + 1}/{reps}")
        drop_caches()
        a = meter.snap()
        iops = rand_read_iops(rnd, rsize, p["rand_s"], p["fio"])
        record("rand_read", iops, CpuMeter.delta(a, meter.snap()))
    rm_tree(rnd)
    os.sync()
    p["trim"]()
    # 5. tar x, du -s, rm -rf
    for r in range(reps):
        progress(f"tar x / du -s / rm -rf, rep {r + 1}/{reps}")
        dst = os.path.join(d, f"tree-{r}")
        os.mkdir(dst)
        drop_caches()
        a = meter.snap()
        secs = timed_cmd(["tar", "-xf", p["tar_path"], "-C", dst])
        record("tar_x", secs, CpuMeter.delta(a, meter.snap()))
        drop_caches()
        a = meter.snap()
        secs = timed_cmd(["du", "-s", dst])
        record("du_s", secs, CpuMeter.delta(a, meter.snap()))
        drop_caches()
        a = meter.snap()
        secs = read_tree(dst)
        record("tree_read", secs, CpuMeter.delta(a, meter.snap()))
        drop_caches()
        a = meter.snap()
        secs = timed_cmd(["rm", "-rf", dst])
        record("rm_rf", secs, CpuMeter.delta(a, meter.snap()))
        os.sync()
        p["trim"]()
    # 11. real work: git clone, git status, make
    for r in range(reps):
        progress(f"git clone / git status / make, rep {r + 1}/{reps}")
        clone = os.path.join(d, f"clone-{r}")
        drop_caches()
        a = meter.snap()
        secs = timed_cmd(["git", "clone", "-q", "--no-hardlinks", p["git_repo"], clone])
        record("git_clone", secs, CpuMeter.delta(a, meter.snap()))
        drop_caches()
        a = meter.snap()
        secs = timed_cmd(["git", "-C", clone, "status", "--porcelain"])
        record("git_status", secs, CpuMeter.delta(a, meter.snap()))
        rm_tree(clone)
        proj = os.path.join(d, f"cproj-{r}")
        shutil.copytree(p["cproj"], proj)
        os.sync()
        drop_caches()
        a = meter.snap()
        secs = timed_cmd(["make", "-s", "-j2", "-C", proj])
        record("make_c", secs, CpuMeter.delta(a, meter.snap()))
        rm_tree(proj)
        os.sync()
        p["trim"]()
    # 6. the seed's create loop (C)
    for n in (n1, n2):
        for r in range(reps):
            progress(f"seed create {n} files, rep {r + 1}/{reps}")
            sub = os.path.join(d, f"seed-{n}-{r}")
            os.mkdir(sub)
            a = meter.snap()
            secs = seed_create(p["seed_bin"], sub, n)
            record(f"seed_create_{n}", n / secs, CpuMeter.delta(a, meter.snap()))
            os.sync()
            rm_tree(sub)
            os.sync()
    # 7. parallelism: 1 vs 4 creating processes, 1 vs 4 readers
    pn, pmib = p["par_n"], p["par_mib"]
    for r in range(reps):
        progress(f"create 1 x / 4 x {pn} files, rep {r + 1}/{reps}")
        dirs = [os.path.join(d, f"par-{r}-{i}") for i in range(5)]
        for x in dirs:
            os.mkdir(x)
        a = meter.snap()
        rate = parallel_create(p["seed_bin"], dirs[:1], pn)
        record("create_1p", rate, CpuMeter.delta(a, meter.snap()))
        a = meter.snap()
        rate = parallel_create(p["seed_bin"], dirs[1:], pn)
        record("create_4p", rate, CpuMeter.delta(a, meter.snap()))
        for x in dirs:
            rm_tree(x)
        os.sync()
    files = [os.path.join(d, f"par-read-{i}.bin") for i in range(4)]
    for f in files:
        write_seq(f, pmib * MiB)
    for r in range(reps):
        progress(f"read 1 x / 4 x {pmib} MiB, rep {r + 1}/{reps}")
        drop_caches()
        a = meter.snap()
        rate = parallel_read(files[:1])
        record("read_1p", rate, CpuMeter.delta(a, meter.snap()))
        drop_caches()
        a = meter.snap()
        rate = parallel_read(files)
        record("read_4p", rate, CpuMeter.delta(a, meter.snap()))
    for f in files:
        rm_tree(f)
    os.sync()
    p["trim"]()
    # 8. the daemon's memory after all of the above
    mem = daemon_memory_mib(fs.daemon_pids())
    if fs.fuse and mem:
        zero = {"workload": 0.0, "daemon": 0.0, "kthreads": 0.0, "total": 0.0}
        record("daemon_rss", mem[0], zero)
        record("daemon_hwm", mem[1], zero)
    # 9. the daemon's memory across creating and removing many files
    if fs.fuse and mem:
        churn = os.path.join(d, "churn")
        os.mkdir(churn)
        cn = p["churn_n"]
        progress(f"create {cn} files for the memory figures")
        for i in range(10):
            sub = os.path.join(churn, str(i))
            os.mkdir(sub)
            for j in range(cn // 10):
                os.close(os.open(os.path.join(sub, str(j)), os.O_CREAT | os.O_WRONLY, 0o644))
        os.sync()
        drop_caches()
        time.sleep(1)
        rss = daemon_memory_mib(fs.daemon_pids())
        if rss:
            record("rss_created", rss[0], zero)
        progress(f"remove {cn} files for the memory figures")
        rm_tree(churn)
        os.sync()
        drop_caches()
        time.sleep(1)
        rss = daemon_memory_mib(fs.daemon_pids())
        if rss:
            record("rss_removed", rss[0], zero)
        p["trim"]()


def run_reverse_workloads(fs, view, p, reps, meter, results, progress):
    """Workloads R1 and R2 (module doc) on a reverse view of fs.plain."""

    def record(metric, value, cpu):
        results.setdefault(metric, {"values": [], "cpu": []})
        results[metric]["values"].append(value)
        results[metric]["cpu"].append(cpu)

    zero = {"workload": 0.0, "daemon": 0.0, "kthreads": 0.0, "total": 0.0}
    # One plaintext file to change: the largest, so that its view shows it.
    victim = max((os.path.join(dp, f) for dp, _, fs_ in os.walk(fs.plain) for f in fs_
                  if not f.startswith(".") and os.path.isfile(os.path.join(dp, f))),
                 key=os.path.getsize)
    for r in range(reps):
        backup = os.path.join(fs.ctx.img_mnt, f"{fs.key}.backup")
        os.mkdir(backup)
        for n in (1, 2, 3):
            progress(f"rsync {n}/3, rep {r + 1}/{reps}")
            if n == 3:
                with open(victim, "ab") as f:
                    f.write(b"x")
            drop_caches()
            a = meter.snap()
            secs, files, mb = rsync_stats(view, backup)
            record(f"rsync_{n}", secs, CpuMeter.delta(a, meter.snap()))
            record(f"rsync_{n}_files", files, zero)
            record(f"rsync_{n}_mb", mb, zero)
        rm_tree(backup)
        os.sync()
        progress(f"read the view, rep {r + 1}/{reps}")
        drop_caches()
        a = meter.snap()
        secs = read_tree(view)
        record("tree_read", secs, CpuMeter.delta(a, meter.snap()))


# ---------------------------------------------------------------- setup
def ensure_packages(fio_wanted):
    need = []
    for cmd, pkg in [
        ("gocryptfs", "gocryptfs"),
        ("securefs", "securefs"),
        ("fusermount3", "fuse3"),
        ("mkfs.ext4", "e2fsprogs"),
        ("losetup", "mount"),
        ("tar", "tar"),
        ("cc", "gcc"),
        ("git", "git"),
        ("make", "make"),
        ("rsync", "rsync"),
    ]:
        if not shutil.which(cmd):
            need.append(pkg)
    if fio_wanted and not shutil.which("fio"):
        need.append("fio")
    if need:
        log(f"installing Debian packages: {' '.join(need)}")
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        run(["apt-get", "update", "-qq"], env=env)
        run(["apt-get", "install", "-y", "-qq", *need], env=env)


def build_binary():
    log("building fscrypt-rs (release)")
    run(["cargo", "build", "--release", "-q", "-p", "fscrypt-cli"], stdin=None)
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(REPO, "target"))
    return os.path.join(target, "release", "fscrypt-rs")


CPROJ_FILES = 60
CPROJ_FUNCS = 20


def build_git_repo(work, tar, n):
    """A bare git repository of the first n files of the tar (one commit),
    for workload 11's clone. Returns (path, files)."""
    src = os.path.join(work, "gitsrc")
    os.mkdir(src)
    names = run(["tar", "-tf", tar], capture=True).stdout.split("\n")
    names = [x for x in names if x and not x.endswith("/")][:n]
    lst = os.path.join(work, "git.list")
    with open(lst, "w") as f:
        f.write("\n".join(names) + "\n")
    run(["tar", "-xf", tar, "-C", src, "-T", lst])
    env = dict(os.environ, GIT_AUTHOR_NAME="bench", GIT_AUTHOR_EMAIL="bench@localhost",
               GIT_COMMITTER_NAME="bench", GIT_COMMITTER_EMAIL="bench@localhost")
    run(["git", "-C", src, "init", "-q"], env=env)
    run(["git", "-C", src, "add", "-A"], env=env)
    run(["git", "-C", src, "commit", "-q", "-m", "tree"], env=env)
    bare = os.path.join(work, "repo.git")
    run(["git", "clone", "-q", "--bare", src, bare], env=env)
    shutil.rmtree(src)
    return bare, len(names)


def build_c_project(work):
    """A generated C project for workload 11's build: CPROJ_FILES sources
    of CPROJ_FUNCS small functions each and a main, one Makefile."""
    proj = os.path.join(work, "cproj")
    os.mkdir(proj)
    for i in range(CPROJ_FILES):
        with open(os.path.join(proj, f"m{i}.c"), "w") as f:
            f.write("#include <stdint.h>\n#include <string.h>\n")
            for j in range(CPROJ_FUNCS):
                f.write(f"uint64_t f{i}_{j}(const uint8_t *p, size_t n) {{\n"
                        f"  uint64_t h = {i * CPROJ_FUNCS + j}u;\n"
                        f"  for (size_t k = 0; k < n; k++) h = (h ^ p[k]) * 1099511628211u;\n"
                        f"  return h + memchr(p, {j}, n) != 0;\n}}\n")
            f.write(f"uint64_t m{i}(const uint8_t *p, size_t n) {{ return "
                    + " + ".join(f"f{i}_{j}(p, n)" for j in range(CPROJ_FUNCS)) + "; }\n")
    with open(os.path.join(proj, "main.c"), "w") as f:
        f.write("#include <stdint.h>\n#include <stddef.h>\n#include <stdio.h>\n")
        f.write("".join(f"uint64_t m{i}(const uint8_t *, size_t);\n" for i in range(CPROJ_FILES)))
        f.write("int main(void) { const uint8_t b[4] = {1, 2, 3, 4}; uint64_t h = 0;\n")
        f.write("".join(f"  h += m{i}(b, 4);\n" for i in range(CPROJ_FILES)))
        f.write('  printf("%llu\\n", (unsigned long long)h); return 0; }\n')
    objs = " ".join(f"m{i}.o" for i in range(CPROJ_FILES))
    with open(os.path.join(proj, "Makefile"), "w") as f:
        f.write(f"prog: main.o {objs}\n\t$(CC) -o $@ $^\n%.o: %.c\n\t$(CC) -O2 -c -o $@ $<\n")
    return proj


def build_tar(work, target_bytes):
    """A tar of small files (<= 64 KiB) from /usr/include, then /usr/share."""
    files, total = [], 0
    for root in ("/usr/include", "/usr/share"):
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames.sort()
            for fn in sorted(filenames):
                path = os.path.join(dirpath, fn)
                try:
                    st = os.lstat(path)
                except OSError:
                    continue
                if not os.path.isfile(path) or os.path.islink(path):
                    continue
                if st.st_size > 64 * 1024 or not os.access(path, os.R_OK):
                    continue
                files.append(path)
                total += st.st_size
                if total >= target_bytes:
                    break
            if total >= target_bytes:
                break
        if total >= target_bytes:
            break
    lst = os.path.join(work, "tar.list")
    with open(lst, "w") as f:
        f.write("\n".join(files) + "\n")
    tar = os.path.join(work, "tree.tar")
    run(["tar", "-cf", tar, "-P", "-T", lst], check=False)
    # -P keeps absolute names; strip them on extraction with a transform.
    tar2 = os.path.join(work, "tree-rel.tar")
    run(["tar", "-cf", tar2, "--transform=s,^/,,", "-P", "-T", lst])
    os.unlink(tar)
    return tar2, len(files), total


# ---------------------------------------------------------------- report
def fmt(v, unit):
    if v is None:
        return "-"
    if unit == "s":
        return f"{v:.3f}"
    if unit == "files":
        return f"{v:,.0f}"
    if v >= 1000:
        return f"{v:,.0f}"
    return f"{v:.1f}"


def summarize(samples):
    vals = samples["values"]
    return {
        "median": statistics.median(vals),
        "min": min(vals),
        "max": max(vals),
        "runs": vals,
        "cpu_total_median": statistics.median(c["total"] for c in samples["cpu"]),
        "cpu": samples["cpu"],
    }


def ratio(ours, theirs, higher):
    if ours is None or theirs is None or ours == 0 or theirs == 0:
        return None
    return ours / theirs if higher else theirs / ours


def render(report):
    defs = report["metrics"]
    fss = [f for f in report["filesystems"] if not f.get("skipped")]
    names = [f["key"] for f in fss]
    pairs = [("fscrypt-rs", "fscrypt-rs-v2"),
             ("fscrypt-rs", "gocryptfs"), ("fscrypt-rs", "securefs"),
             ("fscrypt-rs-uring", "gocryptfs"), ("fscrypt-rs-uring", "securefs"),
             ("fscrypt-rs-uring", "kernel"),
             ("fscrypt-rs-reverse", "gocryptfs-reverse"), ("fscrypt-rs-reverse", "fscrypt-rs")]
    pairs = [(a, b) for a, b in pairs if a in names and b in names]
    short = {"fscrypt-rs": "rs", "fscrypt-rs-uring": "rs-uring", "fscrypt-rs-v2": "rs-v2",
             "fscrypt-rs-reverse": "rs-rev", "gocryptfs-reverse": "gocryptfs-rev"}
    head = ["workload", "unit"] + names + [f"{short[a]}/{short.get(b, b)}" for a, b in pairs]
    rows = []
    for key, label, unit, higher in defs:
        row = [label, unit]
        med = {}
        for f in fss:
            s = f["results"].get(key)
            med[f["key"]] = s["median"] if s else None
            cell = fmt(med[f["key"]], unit)
            if s and len(s["runs"]) > 1:
                cell += f" ({fmt(s['min'], unit)}..{fmt(s['max'], unit)})"
            row.append(cell)
        for ours, other in pairs:
            r = ratio(med.get(ours), med.get(other), higher)
            row.append("-" if r is None else f"{r:.2f}x")
        rows.append(row)
    cpu_row = ["CPU user+sys, whole run", "s"]
    for f in fss:
        cpu_row.append(f"{f['cpu_total']:.1f}")
    cpu_row += ["-"] * len(pairs)
    rows.append(cpu_row)
    widths = [max(len(str(r[i])) for r in [head] + rows) for i in range(len(head))]
    lines = [" | ".join(str(c).ljust(w) for c, w in zip(head, widths))]
    lines.append("-|-".join("-" * w for w in widths))
    for r in rows:
        lines.append(" | ".join(str(c).ljust(w) for c, w in zip(r, widths)))
    lines.append(
        "ratios: >1 means fscrypt-rs is better (faster, more files/s); rs = on /dev/fuse, "
        "rs-uring = through FUSE over io_uring, both authenticated (data format 3); "
        "rs/rs-v2 = what authentication costs (format 3 against --no-integrity); "
        "rs-rev = the reverse view (its 'read the tree' against the forward mount's: "
        "rs-rev/rs); "
        "median of reps, (min..max) when reps > 1."
    )
    cpu_lines = ["", "CPU seconds (median per rep: workload + FUSE daemon + kernel threads):"]
    chead = ["workload"] + names
    crow = []
    for key, label, unit, higher in defs:
        r = [label]
        for f in fss:
            s = f["results"].get(key)
            if s:
                c = [x for x in s["cpu"]]
                med = lambda k: statistics.median(x[k] for x in c)
                r.append(f"{med('total'):.2f} ({med('workload'):.2f}+{med('daemon'):.2f}+{med('kthreads'):.2f})")
            else:
                r.append("-")
        crow.append(r)
    cw = [max(len(str(r[i])) for r in [chead] + crow) for i in range(len(chead))]
    cpu_lines.append(" | ".join(str(c).ljust(w) for c, w in zip(chead, cw)))
    cpu_lines.append("-|-".join("-" * w for w in cw))
    for r in crow:
        cpu_lines.append(" | ".join(str(c).ljust(w) for c, w in zip(r, cw)))
    skipped = [f for f in report["filesystems"] if f.get("skipped")]
    tail = [""]
    for f in fss:
        if f.get("merged_from"):
            tail.append(f"{f['key']}: measured in an earlier run ({f['merged_from']}, "
                        f"started {f.get('started')})")
    for f in skipped:
        tail.append(f"SKIPPED {f['key']}: {f['skipped']}")
    return "\n".join(lines + cpu_lines + tail)


def write_outputs(report, out_dir):
    os.makedirs(out_dir, exist_ok=True)
    stamp = report["started"].replace(":", "").replace("-", "")
    base = os.path.join(out_dir, f"compare-fs-{stamp}")
    with open(base + ".json", "w") as f:
        json.dump(report, f, indent=2)
    with open(base + ".csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["filesystem", "metric", "unit", "median", "min", "max", "runs",
                    "cpu_total_median_s"])
        for fs in report["filesystems"]:
            if fs.get("skipped"):
                w.writerow([fs["key"], "skipped", "", "", "", "", fs["skipped"], ""])
                continue
            for key, label, unit, _ in report["metrics"]:
                s = fs["results"].get(key)
                if s:
                    w.writerow([fs["key"], key, unit, f"{s['median']:.6g}", f"{s['min']:.6g}",
                                f"{s['max']:.6g}", ";".join(f"{v:.6g}" for v in s["runs"]),
                                f"{s['cpu_total_median']:.3f}"])
    table = render(report)
    with open(base + ".txt", "w") as f:
        f.write(table + "\n")
    return base, table


def merge_previous(report, paths):
    """Adds filesystems from earlier runs' JSON that this run did not
    measure (or skipped), in the canonical order, marking their origin."""
    if not paths:
        return
    have = {f["key"]: f for f in report["filesystems"] if not f.get("skipped")}
    same = ("create_n", "seq_mib", "rand_mib", "rand_s", "tar_files")
    for path in paths:
        with open(path) as f:
            prev = json.load(f)
        pp, cp = prev.get("params") or {}, report["params"] or {}
        # JSON turns tuples into lists: compare in JSON form.
        diff = [k for k in same if json.loads(json.dumps(cp.get(k))) != pp.get(k)]
        if diff or prev.get("reps") != report["reps"]:
            sys.exit(f"compare-fs: {path} used other sizes/reps ({', '.join(diff) or 'reps'}); "
                     "cannot merge")
        for fs in prev["filesystems"]:
            if fs.get("skipped") or fs["key"] in have:
                continue
            fs = dict(fs, merged_from=os.path.basename(path), started=prev.get("started"))
            have[fs["key"]] = fs
    order = [c.key for c in FS_CLASSES]
    skipped = [f for f in report["filesystems"] if f.get("skipped") and f["key"] not in have]
    report["filesystems"] = sorted(have.values(), key=lambda f: order.index(f["key"])) + skipped
    report["merged"] = [os.path.basename(p) for p in paths]


# ---------------------------------------------------------------- main
def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true",
                    help="small sizes, 1 repetition: a fast end-to-end check")
    ap.add_argument("--reps", type=int, help="repetitions per workload (default 3; quick 1)")
    ap.add_argument("--out", default=os.path.join(os.getcwd(), "compare-fs-results"),
                    help="directory for the .txt/.csv/.json results")
    ap.add_argument("--only", help="comma-separated subset: ext4,kernel,fscrypt-rs,fscrypt-rs-v2,"
                    "fscrypt-rs-uring,gocryptfs,securefs,fscrypt-rs-reverse,gocryptfs-reverse")
    ap.add_argument("--bin", help="fscrypt-rs binary (default: cargo build --release)")
    ap.add_argument("--no-fio", action="store_true", help="use the built-in random-read loop")
    ap.add_argument("--image-gib", type=float, help="size of the ext4 image (default 3, quick 1)")
    ap.add_argument("--merge", action="append", default=[], metavar="JSON",
                    help="take filesystems not measured in this run from an earlier run's "
                         ".json (same sizes required), to complete one table")
    args = ap.parse_args()

    if os.geteuid() != 0:
        sys.exit("compare-fs: must run as root (loop devices, mounts, drop_caches)")
    quick = args.quick
    reps = args.reps or (1 if quick else 3)
    p = {
        "create_n": (200, 1000) if quick else (2000, 10000),
        "seq_mib": 64 if quick else 1024,
        "rand_mib": 32 if quick else 256,
        "rand_s": 3 if quick else 20,
        "tar_target": (10 if quick else 100) * 1000 * 1000,
        "par_n": 500 if quick else 2500,
        "par_mib": 16 if quick else 128,
        "churn_n": 10000 if quick else 100000,
    }
    img_gib = args.image_gib or (1 if quick else 3)
    only = set(args.only.split(",")) if args.only else None
    # Page cache for the largest cold read, twice (a FUSE file's pages and
    # its backing file's): see drop_caches().
    global WARM_MIB
    WARM_MIB = 2 * p["seq_mib"]

    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, on_signal)

    ensure_packages(not args.no_fio)
    p["fio"] = None if args.no_fio else shutil.which("fio")
    bin_ = args.bin or build_binary()
    if not os.access(bin_, os.X_OK):
        sys.exit(f"compare-fs: {bin_} is not an executable")
    bin_ = os.path.abspath(bin_)

    cleanup = Cleanup()

    class Ctx:
        pass

    ctx = Ctx()
    ctx.cleanup = cleanup
    ctx.bin = bin_
    report = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "quick": quick,
        "reps": reps,
        "params": None,
        "machine": {
            "kernel": os.uname().release,
            "cpus": os.cpu_count(),
            "note": "shared machine: other jobs may run concurrently; numbers are noisy",
        },
        "filesystems": [],
    }
    try:
        base = tempfile.mkdtemp(prefix="compare-fs.")
        cleanup.push("workdir", lambda: shutil.rmtree(base, ignore_errors=True))
        ctx.work = os.path.join(base, "tmpfs")
        os.mkdir(ctx.work)
        tmpfs_size = int(img_gib * 1024 + 512)
        run(["mount", "-t", "tmpfs", "-o", f"size={tmpfs_size}m,mode=0700", "tmpfs", ctx.work])
        cleanup.push("tmpfs", lambda: unmount(ctx.work))
        p["seed_bin"] = build_seed(ctx.work)
        log("building the tar of small files")
        tar, nfiles, tbytes = build_tar(ctx.work, p["tar_target"])
        p["tar_path"], p["tar_files"], p["tar_mb"] = tar, nfiles, tbytes / 1e6
        ctx.tar_path = tar
        log("building the git repository and the C project")
        p["git_repo"], p["git_files"] = build_git_repo(ctx.work, tar, 3000)
        p["cproj"] = build_c_project(ctx.work)
        report["params"] = {k: v for k, v in p.items()
                            if k not in ("tar_path", "trim", "seed_bin", "git_repo", "cproj")}
        img = os.path.join(ctx.work, "ext4.img")
        with open(img, "wb") as f:
            f.truncate(int(img_gib * 1024 * MiB))
        run(["mkfs.ext4", "-q", "-F", "-O", "encrypt", "-b", "4096",
             "-E", "lazy_itable_init=0,lazy_journal_init=0", img])
        loop = run(["losetup", "--find", "--show", img], capture=True).stdout.strip()
        cleanup.push("loop", lambda: run(["losetup", "-d", loop], check=False))
        ctx.img_mnt = os.path.join(ctx.work, "ext4")
        os.mkdir(ctx.img_mnt)
        # No online discard (it made rm -rf measure discard); freed blocks
        # are returned to tmpfs by an untimed fstrim between workloads.
        run(["mount", loop, ctx.img_mnt])
        p["trim"] = lambda: run(["fstrim", ctx.img_mnt], check=False)
        cleanup.push("ext4 mount", lambda: unmount(ctx.img_mnt))
        report["machine"]["storage"] = f"ext4 on {loop} backed by tmpfs ({img_gib} GiB image)"
        log(f"ext4 image on {loop}, mounted at {ctx.img_mnt}")

        defs = metric_defs(p)
        report["metrics"] = defs
        for cls in FS_CLASSES:
            fs = cls(ctx)
            if only and fs.key not in only:
                continue
            entry = {"key": fs.key, "label": fs.label}
            report["filesystems"].append(entry)
            t_fs = time.monotonic()
            try:
                d = fs.setup()
            except (subprocess.CalledProcessError, RuntimeError, OSError) as e:
                err = getattr(e, "stderr", None)
                fs.skip_reason = f"setup failed: {e}" + (f": {err.strip()}" if err else "")
                d = None
            if d is None:
                entry["skipped"] = fs.skip_reason
                log(f"SKIP {fs.key}: {fs.skip_reason}")
                cleanup.pop_run(f"daemon {fs.key}")
                cleanup.pop_run("enable_uring")
                continue
            entry["label"] = fs.describe()
            meter = CpuMeter(fs.daemon_pids)
            results = {}

            def progress(msg, key=fs.key):
                log(f"[{key}] {msg}")

            a = meter.snap()
            try:
                if getattr(fs, "reverse", False):
                    run_reverse_workloads(fs, d, p, reps, meter, results, progress)
                else:
                    run_workloads(fs, d, p, reps, meter, results, progress)
            except (subprocess.CalledProcessError, RuntimeError, OSError) as e:
                entry["error"] = str(e)
                log(f"ERROR {fs.key}: {e}")
            entry["cpu_total"] = CpuMeter.delta(a, meter.snap())["total"]
            entry["wall_s"] = time.monotonic() - t_fs
            entry["results"] = {k: summarize(v) for k, v in results.items()}
            if entry.get("error") and not results:
                entry["skipped"] = f"workloads failed: {entry['error']}"
            # Tear this filesystem down and free the image before the next.
            if fs.fuse:
                cleanup.pop_run(f"daemon {fs.key}")
            for name in os.listdir(ctx.img_mnt):
                if name != "lost+found":
                    rm_tree(os.path.join(ctx.img_mnt, name))
            os.sync()
            cleanup.pop_run("kernel key")
            cleanup.pop_run("enable_uring")
            run(["fstrim", ctx.img_mnt], check=False)
        merge_previous(report, args.merge)
        out_base, table = write_outputs(report, args.out)
        print(table)
        print(f"\nresults: {out_base}.txt, {out_base}.csv, {out_base}.json")
        print("note: " + report["machine"]["note"])
    except Interrupted as e:
        log(f"interrupted ({e}); cleaning up")
        cleanup.run_all()
        sys.exit(130)
    finally:
        cleanup.run_all()


if __name__ == "__main__":
    main()
