//! `-o idle=DURATION` (gocryptfs `-idle`): a mount that served no FUSE
//! request for that long, with no file or directory open, unmounts itself
//! the way `fscrypt-rs unmount` would ([`super::unmount`]'s umount(2) or
//! `fusermount3 -u`); the daemon then ends as after any unmount. A busy
//! refusal (a working directory in the mount, say) starts a new idle
//! period.
//!
//! Activity is read from the mount's request counters ([`RequestStats`]):
//! the watcher compares their sum at each tick, so serving a request costs
//! nothing more than the counting it already did.

use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use super::MountPoint;
use super::unmount::{Refusal, try_unmount};
use crate::stats::RequestStats;

/// How often the watcher looks at the counters for an idle time of
/// `idle`: a tenth of it, between 100 ms and 1 s (a mount unmounts at most
/// that much later than its idle time).
fn tick(idle: Duration) -> Duration {
    (idle / 10).clamp(Duration::from_millis(100), Duration::from_secs(1))
}

/// When a mount has been idle long enough: fed the request total and the
/// open handles at each tick.
#[derive(Debug)]
struct Quiet {
    idle: Duration,
    last_total: u64,
    since: Instant,
}

impl Quiet {
    fn new(idle: Duration, total: u64, now: Instant) -> Quiet {
        Quiet {
            idle,
            last_total: total,
            since: now,
        }
    }

    /// Whether the mount is due to unmount at `now`, having served `total`
    /// requests so far with `open` handles open. A new request or an open
    /// handle starts the idle period again.
    fn due(&mut self, total: u64, open: u64, now: Instant) -> bool {
        if total != self.last_total || open != 0 {
            self.last_total = total;
            self.since = now;
            return false;
        }
        now.duration_since(self.since) >= self.idle
    }

    /// Starts a new idle period at `now` (after a refused unmount).
    fn rearm(&mut self, now: Instant) {
        self.since = now;
    }
}

/// Watches the mount at `mp` until it unmounted it for being idle for
/// `idle`, or until `stop` is closed (the session ended otherwise).
pub(super) fn watch(stats: Arc<RequestStats>, idle: Duration, mp: MountPoint, stop: Receiver<()>) {
    let tick = tick(idle);
    let mut quiet = Quiet::new(idle, stats.total(), Instant::now());
    loop {
        match stop.recv_timeout(tick) {
            Err(RecvTimeoutError::Timeout) => {}
            _ => return,
        }
        if !quiet.due(stats.total(), stats.open_handles(), Instant::now()) {
            continue;
        }
        let target = mp.current_path().unwrap_or_else(|| mp.path().to_path_buf());
        match try_unmount(&target) {
            Ok(()) => {
                log::info!(
                    "fscrypt-fuse: idle for {} s: unmounted {}",
                    idle.as_secs(),
                    target.display()
                );
                return;
            }
            Err(Refusal::Busy) => log::info!(
                "fscrypt-fuse: idle for {} s but {} is busy: waiting for another idle period",
                idle.as_secs(),
                target.display()
            ),
            Err(Refusal::Other(e)) => log::warn!(
                "fscrypt-fuse: idle for {} s but not unmounted: {e}; trying again after \
                 another idle period",
                idle.as_secs()
            ),
        }
        quiet.rearm(Instant::now());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn due_after_the_idle_time_without_requests_or_open_handles() {
        let idle = Duration::from_secs(2);
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        let mut q = Quiet::new(idle, 10, t0);
        assert!(!q.due(10, 0, at(1_999)));
        assert!(q.due(10, 0, at(2_000)));
        // A request starts the period again.
        assert!(!q.due(11, 0, at(2_100)));
        assert!(!q.due(11, 0, at(4_000)));
        assert!(q.due(11, 0, at(4_100)));
        // An open handle keeps it from ever running out.
        assert!(!q.due(11, 1, at(10_000)));
        assert!(!q.due(11, 1, at(60_000)));
        assert!(!q.due(11, 0, at(61_000)));
        assert!(q.due(11, 0, at(62_000)));
        // A refused unmount re-arms.
        q.rearm(at(62_000));
        assert!(!q.due(11, 0, at(63_000)));
        assert!(q.due(11, 0, at(64_000)));
    }

    #[test]
    fn ticks_are_a_tenth_of_the_idle_time_within_bounds() {
        assert_eq!(tick(Duration::from_secs(2)), Duration::from_millis(200));
        assert_eq!(tick(Duration::from_millis(500)), Duration::from_millis(100));
        assert_eq!(tick(Duration::from_secs(3600)), Duration::from_secs(1));
    }
}
