//! Request statistics of a mount: one counter per FUSE opcode served.
//!
//! Counting costs one relaxed atomic increment per request (no lock, no
//! allocation). The counts hold no names or inode numbers, so they may be
//! logged: the daemon prints them at unmount (info level), and
//! [`crate::BackgroundMount::stats`] hands them to tests and embedders.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

macro_rules! ops {
    ($($(#[$m:meta])* $v:ident => $s:literal,)*) => {
        /// A FUSE request kind (opcode), as counted by [`RequestStats`].
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[allow(missing_docs)]
        pub enum Op { $($(#[$m])* $v,)* }

        impl Op {
            /// Every opcode, in counter order.
            pub const ALL: &'static [Op] = &[$(Op::$v,)*];

            /// The opcode's name as in the FUSE protocol (upper case).
            pub fn name(self) -> &'static str {
                match self { $(Op::$v => $s,)* }
            }
        }
    };
}

ops! {
    Init => "INIT",
    Destroy => "DESTROY",
    Lookup => "LOOKUP",
    /// FORGET, and each inode of a BATCH_FORGET (fuser's default
    /// `batch_forget` forwards them one by one; its type is not public).
    Forget => "FORGET",
    Getattr => "GETATTR",
    Setattr => "SETATTR",
    Readlink => "READLINK",
    Mknod => "MKNOD",
    Mkdir => "MKDIR",
    Unlink => "UNLINK",
    Rmdir => "RMDIR",
    Symlink => "SYMLINK",
    Rename => "RENAME",
    Link => "LINK",
    Open => "OPEN",
    Read => "READ",
    Write => "WRITE",
    Flush => "FLUSH",
    Release => "RELEASE",
    Fsync => "FSYNC",
    Opendir => "OPENDIR",
    Readdir => "READDIR",
    Readdirplus => "READDIRPLUS",
    Releasedir => "RELEASEDIR",
    Fsyncdir => "FSYNCDIR",
    Statfs => "STATFS",
    Setxattr => "SETXATTR",
    Getxattr => "GETXATTR",
    Listxattr => "LISTXATTR",
    Removexattr => "REMOVEXATTR",
    Access => "ACCESS",
    Create => "CREATE",
    Fallocate => "FALLOCATE",
}

const N: usize = Op::ALL.len();

/// Per-opcode request counters of one mount.
pub struct RequestStats {
    counts: [AtomicU64; N],
    /// Requests counted above that came through FUSE over io_uring
    /// (`crate::ring`); the rest came on `/dev/fuse`.
    ring: AtomicU64,
    /// File and directory handles open now: OPEN, CREATE and OPENDIR that
    /// succeeded, less RELEASE and RELEASEDIR (`-o idle` waits for none).
    open: AtomicU64,
}

impl Default for RequestStats {
    fn default() -> Self {
        RequestStats {
            counts: std::array::from_fn(|_| AtomicU64::new(0)),
            ring: AtomicU64::new(0),
            open: AtomicU64::new(0),
        }
    }
}

impl RequestStats {
    /// Fresh counters, all zero.
    pub fn new() -> RequestStats {
        RequestStats::default()
    }

    /// Counts one request of kind `op`.
    #[inline]
    pub fn count(&self, op: Op) {
        self.counts[op as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// Counts one request that came through FUSE over io_uring (besides
    /// its opcode's counter).
    #[inline]
    pub fn count_ring(&self) {
        self.ring.fetch_add(1, Ordering::Relaxed);
    }

    /// Requests of kind `op` so far.
    pub fn get(&self, op: Op) -> u64 {
        self.counts[op as usize].load(Ordering::Relaxed)
    }

    /// Requests of every kind so far (one relaxed load per opcode).
    pub fn total(&self) -> u64 {
        self.counts.iter().map(|c| c.load(Ordering::Relaxed)).sum()
    }

    /// Counts one file or directory handle handed to the kernel (a
    /// successful OPEN, CREATE or OPENDIR).
    #[inline]
    pub fn handle_opened(&self) {
        self.open.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts one handle the kernel gave back (RELEASE, RELEASEDIR); never
    /// below zero.
    #[inline]
    pub fn handle_released(&self) {
        let _ = self
            .open
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
    }

    /// File and directory handles the kernel holds open now.
    pub fn open_handles(&self) -> u64 {
        self.open.load(Ordering::Relaxed)
    }

    /// A copy of every counter (for differences: `after - before`).
    pub fn snapshot(&self) -> StatsSnapshot {
        StatsSnapshot {
            counts: std::array::from_fn(|i| self.counts[i].load(Ordering::Relaxed)),
            ring: self.ring.load(Ordering::Relaxed),
        }
    }
}

impl fmt::Debug for RequestStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.snapshot(), f)
    }
}

/// The counters at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatsSnapshot {
    counts: [u64; N],
    ring: u64,
}

impl StatsSnapshot {
    /// Requests of kind `op`.
    pub fn get(&self, op: Op) -> u64 {
        self.counts[op as usize]
    }

    /// All requests.
    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Of [`StatsSnapshot::total`], the requests that came through FUSE
    /// over io_uring.
    pub fn through_ring(&self) -> u64 {
        self.ring
    }

    /// The requests between `earlier` and this snapshot.
    pub fn since(&self, earlier: &StatsSnapshot) -> StatsSnapshot {
        StatsSnapshot {
            counts: std::array::from_fn(|i| self.counts[i].saturating_sub(earlier.counts[i])),
            ring: self.ring.saturating_sub(earlier.ring),
        }
    }
}

impl fmt::Display for StatsSnapshot {
    /// `LOOKUP 3, GETATTR 1` (nonzero counters only; `none` if all zero),
    /// then ` (4 through io_uring)` if any came that way.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for &op in Op::ALL {
            let n = self.get(op);
            if n != 0 {
                if !first {
                    f.write_str(", ")?;
                }
                write!(f, "{} {n}", op.name())?;
                first = false;
            }
        }
        if first {
            f.write_str("none")?;
        }
        if self.ring != 0 {
            write!(f, " ({} through io_uring)", self.ring)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_per_opcode_and_differences() {
        let s = RequestStats::new();
        assert_eq!(s.snapshot().to_string(), "none");
        s.count(Op::Lookup);
        let a = s.snapshot();
        s.count(Op::Lookup);
        s.count(Op::Getattr);
        s.count(Op::Fallocate);
        let b = s.snapshot();
        assert_eq!(s.get(Op::Lookup), 2);
        assert_eq!(b.get(Op::Getattr), 1);
        assert_eq!(b.total(), 4);
        let d = b.since(&a);
        assert_eq!(d.to_string(), "LOOKUP 1, GETATTR 1, FALLOCATE 1");
        assert_eq!(d.total(), 3);
        assert_eq!(d.through_ring(), 0);
        s.count_ring();
        let c = s.snapshot().since(&b);
        assert_eq!(c.through_ring(), 1);
        assert_eq!(c.to_string(), "none (1 through io_uring)");
        // Every opcode has its own counter and name.
        let names: std::collections::HashSet<_> = Op::ALL.iter().map(|o| o.name()).collect();
        assert_eq!(names.len(), Op::ALL.len());
        for (i, &op) in Op::ALL.iter().enumerate() {
            assert_eq!(op as usize, i);
        }
    }

    #[test]
    fn counting_is_concurrent() {
        let s = std::sync::Arc::new(RequestStats::new());
        let t: Vec<_> = (0..4)
            .map(|_| {
                let s = s.clone();
                std::thread::spawn(move || {
                    for _ in 0..10_000 {
                        s.count(Op::Write);
                    }
                })
            })
            .collect();
        for t in t {
            t.join().unwrap();
        }
        assert_eq!(s.get(Op::Write), 40_000);
        assert_eq!(s.total(), 40_000);
    }

    #[test]
    fn open_handles_count_opens_less_releases() {
        let s = RequestStats::new();
        assert_eq!(s.open_handles(), 0);
        s.handle_opened();
        s.handle_opened();
        s.handle_released();
        assert_eq!(s.open_handles(), 1);
        s.handle_released();
        s.handle_released();
        assert_eq!(s.open_handles(), 0, "never below zero");
    }
}
