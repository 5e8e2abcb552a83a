//! FUSE over io_uring (Linux 6.14 and later): the kernel hands each request
//! to a serving thread of the CPU its caller runs on, through an io_uring
//! command the thread left waiting on `/dev/fuse`, and takes the reply
//! with the same command that fetches the next request
//! (`Documentation/filesystems/fuse/fuse-io-uring.rst`).
//!
//! Why: on `/dev/fuse` every request wakes whichever serving thread slept
//! longest and every reply wakes the caller, each on whatever CPU the
//! scheduler picks; on a VM a wake-up across CPUs costs 20-35 us
//! (`bench/wake_latency.c`), several times the work of most requests. With
//! one queue per CPU and its thread pinned there, the request's wake-up
//! stays on the caller's CPU (bench/RESULTS.md has the figures).
//!
//! When: the kernel offers FUSE_OVER_IO_URING at INIT only once root
//! enabled it (`/sys/module/fuse/parameters/enable_uring`, off by
//! default); the mount takes it unless told not to
//! ([`crate::MountConfig::io_uring`]). Until every CPU's queue has its
//! entries registered, and for FORGET and INTERRUPT always, requests keep
//! coming on `/dev/fuse` to fuser's threads. Both paths answer through the
//! same [`Ops`].
//!
//! Threads: one per possible CPU (the kernel keeps a queue per possible
//! CPU and uses the ring only once all have entries), pinned to it, each
//! with its own io_uring (128-byte SQEs, one submitter) and [`DEPTH`]
//! entries: a 288-byte header (`fuse_uring_req_header`) and a payload buffer of [`MAX_REQUEST`]
//! (plus [`READ_SLACK`]) bytes each.
//! A thread serves its entries one after the other and stops when the
//! kernel ends the connection (unmount: every command completes with
//! ENOTCONN or ENODEV). While it replies, a thread is `SCHED_IDLE` (root
//! only), so that the woken caller stays on its CPU (`Policy`). Without
//! `allow_other` it refuses other users' requests as fuser does
//! (`wire::serve`).
//!
//! What it costs: sequential reads. A CPU's read-ahead READs are decrypted
//! one after the other by that CPU's thread, where two `/dev/fuse` threads
//! decrypt two at once (bench/RESULTS.md: 1,321 against 1,600 MB/s).

#![allow(unsafe_code)]

mod abi;
mod wire;

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use io_uring::{IoUring, cqueue, opcode, squeue, types};

use crate::backend::Backend;
use crate::ops::{MAX_REQUEST, Ops};
use wire::Header;
use zerocopy::IntoBytes;

/// Entries per queue: one being served while the kernel fills the other.
const DEPTH: usize = 2;

/// Bytes of an entry's payload buffer beyond the largest request
/// ([`MAX_REQUEST`]): a READ decrypts whole data units into the buffer in
/// place, up to two units (of at most 64 KiB) more than it returns.
pub(super) const READ_SLACK: usize = 2 * 65536;

/// `FUSE_IO_URING_CMD_REGISTER`: register an entry's buffers and wait for
/// a request.
const CMD_REGISTER: u32 = 1;
/// `FUSE_IO_URING_CMD_COMMIT_AND_FETCH`: send the reply in the entry and
/// wait for the next request.
const CMD_COMMIT_AND_FETCH: u32 = 2;

/// How long a registration refused with EAGAIN (INIT not yet complete) is
/// retried before the thread gives up (the mount then stays on
/// `/dev/fuse`).
const REGISTER_PATIENCE: Duration = Duration::from_secs(10);

/// How many times a thread registers an entry again after its command
/// failed unexpectedly (neither the connection's end nor INIT's delay),
/// before it lets the entry go. A queue without entries would leave every
/// request of its CPU waiting.
const RETRIES: u32 = 16;

/// How long [`Ring::join`] waits for the threads after an unmount.
const JOIN_PATIENCE: Duration = Duration::from_secs(5);

/// FUSE over io_uring for one mount: whether it may be used, and its
/// threads once started.
#[derive(Debug)]
pub(crate) struct Ring {
    /// Whether the mount may use the ring.
    wanted: bool,
    /// Without `allow_other`: the only user whose requests are served
    /// ([`wire::serve`]).
    owner_only: Option<u32>,
    /// A duplicate of the mount's `/dev/fuse` descriptor, given before
    /// INIT ([`Ring::attach`]).
    dev: Mutex<Option<Arc<OwnedFd>>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl Ring {
    /// The ring of a mount; `wanted` false: it never starts. `owner_only`:
    /// the mount is not `allow_other`, and this is the mounting user.
    pub(crate) fn new(wanted: bool, owner_only: Option<u32>) -> Arc<Ring> {
        Arc::new(Ring {
            wanted,
            owner_only,
            dev: Mutex::new(None),
            threads: Mutex::new(Vec::new()),
        })
    }

    /// Keeps a duplicate of the mount's `/dev/fuse` descriptor for the
    /// ring's commands and the mount's notifications ([`Ring::device`];
    /// before the session answers INIT). Without it (the dup failed: one
    /// debug line) neither is used.
    pub(crate) fn attach(&self, dev: &OwnedFd) {
        match dev.try_clone() {
            Ok(fd) => *lock(&self.dev) = Some(Arc::new(fd)),
            Err(e) => log::debug!("fscrypt-fuse: duplicating /dev/fuse: {e}"),
        }
    }

    /// The mount's `/dev/fuse` descriptor kept by [`Ring::attach`], for
    /// notifications (`prune.rs`), whether or not the ring serves.
    pub(crate) fn device(&self) -> Option<Arc<OwnedFd>> {
        lock(&self.dev).clone()
    }

    /// Whether INIT should ask for FUSE_OVER_IO_URING.
    pub(crate) fn wanted(&self) -> bool {
        self.wanted && lock(&self.dev).is_some()
    }

    /// Starts one serving thread per possible CPU (at INIT: the threads
    /// register as soon as the kernel has INIT's reply).
    pub(crate) fn start<B: Backend>(&self, ops: Arc<Ops<B>>) {
        let Some(dev) = self.device() else {
            return;
        };
        let queues = possible_cpus();
        log::info!("fscrypt-fuse: serving through FUSE over io_uring ({queues} queues)");
        let mut threads = lock(&self.threads);
        for qid in 0..queues {
            let (dev, ops, owner_only) = (dev.clone(), ops.clone(), self.owner_only);
            let spawned = std::thread::Builder::new()
                .name(format!("fuse-ring-{qid}"))
                .spawn(move || {
                    if let Err(e) = serve_queue(qid, &dev, &ops, owner_only) {
                        log::warn!("fscrypt-fuse: io_uring queue {qid} stopped: {e}");
                    }
                });
            match spawned {
                Ok(t) => threads.push(t),
                Err(e) => log::warn!("fscrypt-fuse: io_uring queue {qid} not started: {e}"),
            }
        }
    }

    /// Waits (at most [`JOIN_PATIENCE`]) for the threads to end after the
    /// mount is gone; a thread still running then is left detached (one
    /// warning).
    pub(crate) fn join(&self) {
        let threads = std::mem::take(&mut *lock(&self.threads));
        let deadline = Instant::now() + JOIN_PATIENCE;
        for t in threads {
            while !t.is_finished() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
            if t.is_finished() {
                let _ = t.join();
            } else {
                log::warn!("fscrypt-fuse: an io_uring serving thread outlived its mount");
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The kernel's number of queues, `num_possible_cpus()`: the highest CPU
/// number in `/sys/devices/system/cpu/possible` ("0-3", "0,2-5") plus one.
fn possible_cpus() -> usize {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/possible").unwrap_or_default();
    parse_cpu_list_max(&text).map_or_else(
        || std::thread::available_parallelism().map_or(1, usize::from),
        |max| max + 1,
    )
}

/// The highest CPU number of a kernel CPU list ("0-3,8"), if any.
fn parse_cpu_list_max(text: &str) -> Option<usize> {
    text.trim()
        .split(',')
        .filter_map(|part| part.rsplit('-').next()?.trim().parse::<usize>().ok())
        .max()
}

/// One ring entry's buffers. The kernel keeps their addresses from
/// REGISTER on and writes requests into them; they live as long as a
/// command of theirs may be in flight.
struct Entry {
    header: Box<Header>,
    payload: Vec<u8>,
    /// `iovec[2]` for REGISTER: header, payload.
    iov: Box<[libc::iovec; 2]>,
    /// The command last submitted (resubmitted as is after EAGAIN).
    last: u32,
}

impl Entry {
    fn new() -> Entry {
        let mut header = Header::boxed();
        let mut payload = vec![0u8; MAX_REQUEST as usize + READ_SLACK];
        let header_bytes = header.as_mut_bytes();
        let iov = Box::new([
            libc::iovec {
                iov_base: header_bytes.as_mut_ptr().cast(),
                iov_len: header_bytes.len(),
            },
            libc::iovec {
                iov_base: payload.as_mut_ptr().cast(),
                iov_len: payload.len(),
            },
        ]);
        Entry {
            header,
            payload,
            iov,
            last: CMD_REGISTER,
        }
    }
}

/// Queues `cmd` for entry `idx` of queue `qid` (submitted with the next
/// wait: a reply and the wait for the next request are one system call).
fn submit(
    ring: &mut IoUring<squeue::Entry128, cqueue::Entry>,
    dev: &OwnedFd,
    e: &mut Entry,
    idx: usize,
    qid: usize,
    cmd: u32,
) -> io::Result<()> {
    let req = abi::fuse_uring_cmd_req {
        commit_id: e.header.commit_id(),
        qid: qid as u16,
        ..Default::default()
    };
    let mut area = [0u8; 80];
    area[..size_of::<abi::fuse_uring_cmd_req>()].copy_from_slice(req.as_bytes());
    let mut op = opcode::UringCmd80::new(types::Fd(dev.as_raw_fd()), cmd).cmd(area);
    if cmd == CMD_REGISTER {
        op = op.addr(Some(e.iov.as_ptr() as u64));
    }
    let mut sqe = op.build().user_data(idx as u64);
    if cmd == CMD_REGISTER {
        // REGISTER wants `sqe->len` = 2 (the iovecs), which io-uring's
        // UringCmd80 does not set: `len` is the u32 at byte 24 of
        // `struct io_uring_sqe`.
        const _: () = assert!(std::mem::size_of::<squeue::Entry128>() == 128);
        // SAFETY: Entry128 is `#[repr(C)]` over the kernel's 128-byte SQE
        // (asserted above); every bit pattern is a valid SQE, and only
        // the `len` field changes.
        let mut bytes: [u8; 128] = unsafe { std::mem::transmute(sqe) };
        bytes[24..28].copy_from_slice(&2u32.to_ne_bytes());
        // SAFETY: as above.
        sqe = unsafe { std::mem::transmute::<[u8; 128], squeue::Entry128>(bytes) };
    }
    e.last = cmd;
    // SAFETY: the SQE points at `e.iov` (REGISTER) and through it at
    // `e.header` and `e.payload`, heap buffers that stay where they are
    // and alive while any command of the entry may be in flight: the
    // entries are dropped only once every command has completed, and
    // leaked otherwise (`serve_queue`).
    unsafe {
        ring.submission()
            .push(&sqe)
            .map_err(|_| io::Error::other("io_uring submission queue full"))?;
    }
    Ok(())
}

/// Serves queue `qid` until the kernel ends the connection.
fn serve_queue<B: Backend>(
    qid: usize,
    dev: &OwnedFd,
    ops: &Ops<B>,
    owner_only: Option<u32>,
) -> io::Result<()> {
    let mut set = rustix::thread::CpuSet::new();
    set.set(qid);
    if let Err(e) = rustix::thread::sched_setaffinity(None, &set) {
        // Not fatal: served from another CPU, only slower.
        log::debug!("fscrypt-fuse: io_uring queue {qid} not pinned: {e}");
    }
    let mut ring: IoUring<squeue::Entry128, cqueue::Entry> = IoUring::builder()
        .setup_single_issuer()
        .setup_coop_taskrun()
        .build((2 * DEPTH) as u32)?;
    let mut entries: Vec<Entry> = (0..DEPTH).map(|_| Entry::new()).collect();
    let mut policy = Policy::new();
    let mut in_flight = 0;
    let r = (|| {
        for (idx, e) in entries.iter_mut().enumerate() {
            submit(&mut ring, dev, e, idx, qid, CMD_REGISTER)?;
            in_flight += 1;
        }
        let started = Instant::now();
        let mut retries = 0;
        let mut done = [(0u64, 0i32); DEPTH];
        while in_flight > 0 {
            match ring.submit_and_wait(1) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                r => r?,
            };
            policy.at_work();
            let mut n = 0;
            for c in ring.completion() {
                if n < DEPTH {
                    done[n] = (c.user_data(), c.result());
                    n += 1;
                }
            }
            for &(idx, res) in &done[..n] {
                let Some(e) = entries.get_mut(idx as usize) else {
                    continue;
                };
                match -res {
                    0 => {
                        wire::serve(ops, &mut e.header, &mut e.payload, owner_only);
                        policy.before_reply();
                        submit(&mut ring, dev, e, idx as usize, qid, CMD_COMMIT_AND_FETCH)?;
                    }
                    // Before INIT's reply reached the kernel, or interrupted:
                    // the same command again.
                    libc::EAGAIN | libc::EINTR if started.elapsed() < REGISTER_PATIENCE => {
                        std::thread::sleep(Duration::from_millis(1));
                        let cmd = e.last;
                        submit(&mut ring, dev, e, idx as usize, qid, cmd)?;
                    }
                    // The connection ended (unmount, abort).
                    libc::ENOTCONN | libc::ENODEV | libc::ECONNABORTED => in_flight -= 1,
                    errno => {
                        log::warn!(
                            "fscrypt-fuse: io_uring queue {qid}: command {} failed: errno {errno}",
                            e.last
                        );
                        if retries < RETRIES && e.last == CMD_COMMIT_AND_FETCH {
                            retries += 1;
                            submit(&mut ring, dev, e, idx as usize, qid, CMD_REGISTER)?;
                        } else {
                            in_flight -= 1;
                        }
                    }
                }
            }
        }
        Ok(())
    })();
    if in_flight > 0 {
        // A command may still point at the buffers: never free them.
        std::mem::forget(entries);
        std::mem::forget(ring);
    }
    r
}

/// The scheduling policy of a serving thread around its replies.
///
/// The reply wakes the caller (`fuse_request_end`: a plain `wake_up`).
/// The scheduler puts a woken task on an idle CPU when its own is busy,
/// and the caller's CPU is busy: this thread runs there, about to sleep
/// until the next request. So every reply moved the caller to the other
/// CPU, whose queue and thread it then used, and the next reply moved it
/// back: a wake-up of a halted CPU per request (20-35 us on a VM). A CPU
/// that runs only `SCHED_IDLE` tasks counts as idle for that choice
/// (`sched_idle_cpu`), so the thread is `SCHED_IDLE` while it replies and
/// the caller stays where it was, preempting it (on the test VM, random
/// 4 KiB reads 27,000-30,000 -> 86,000-88,000 IOPS; with both CPUs busy
/// with other work, 52,000 either way). The thread is back to
/// `SCHED_OTHER` as soon as it has work (`at_work`), so requests are never
/// served at idle priority.
///
/// Only with CAP_SYS_NICE (root): without it a thread may drop to
/// `SCHED_IDLE` but not come back (RLIMIT_NICE), so an unprivileged
/// daemon keeps `SCHED_OTHER` throughout.
struct Policy {
    /// Whether the thread may switch (root), and whether it is idle now.
    enabled: bool,
    idle: bool,
}

impl Policy {
    fn new() -> Policy {
        Policy {
            enabled: rustix::process::geteuid().is_root(),
            idle: false,
        }
    }

    fn before_reply(&mut self) {
        if self.enabled && !self.idle {
            self.idle = set_policy(libc::SCHED_IDLE);
        }
    }

    fn at_work(&mut self) {
        if self.idle {
            if set_policy(libc::SCHED_OTHER) {
                self.idle = false;
            } else {
                // Never serve at idle priority: no more switching.
                log::warn!("fscrypt-fuse: io_uring serving thread stuck at SCHED_IDLE");
                self.enabled = false;
            }
        }
    }
}

/// Sets the calling thread's scheduling policy (priority 0); whether it
/// was set.
fn set_policy(policy: i32) -> bool {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: sched_setscheduler reads `param`, a valid sched_param that
    // lives across the call; pid 0 is the calling thread.
    unsafe { libc::sched_setscheduler(0, policy, &param) == 0 }
}

#[cfg(test)]
mod tests {
    use super::{Policy, parse_cpu_list_max};

    fn current_policy() -> i32 {
        // SAFETY: no arguments but the calling thread's pid 0.
        unsafe { libc::sched_getscheduler(0) }
    }

    #[test]
    fn replies_at_idle_priority_and_serves_at_normal_priority() {
        // In a thread of its own: the policy is per thread.
        std::thread::spawn(|| {
            let mut p = Policy::new();
            p.before_reply();
            let expect = if p.enabled {
                libc::SCHED_IDLE
            } else {
                eprintln!("not root: the policy never changes");
                libc::SCHED_OTHER
            };
            assert_eq!(current_policy(), expect);
            p.at_work();
            assert_eq!(current_policy(), libc::SCHED_OTHER);
            p.at_work();
            assert_eq!(current_policy(), libc::SCHED_OTHER);
            p.before_reply();
            p.before_reply();
            assert_eq!(current_policy(), expect);
            p.at_work();
            assert_eq!(current_policy(), libc::SCHED_OTHER);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list_max("0-1\n"), Some(1));
        assert_eq!(parse_cpu_list_max("0"), Some(0));
        assert_eq!(parse_cpu_list_max("0,2-5,8"), Some(8));
        assert_eq!(parse_cpu_list_max(""), None);
    }
}
