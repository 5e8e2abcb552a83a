//! Processes seen from the tests: finding a daemon by its command line,
//! its uid, waiting for a condition, and a guard that kills a child.

use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

/// The pid of a process whose argv holds every one of `args` (each as a
/// whole argument), if there is one.
pub fn pid_with_args(args: &[&[u8]]) -> Option<u32> {
    for e in std::fs::read_dir("/proc").ok()?.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmd) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let argv: Vec<&[u8]> = cmd.split(|&b| b == 0).collect();
        if args.iter().all(|a| argv.contains(a)) {
            return Some(pid);
        }
    }
    None
}

/// The pid of the `fscrypt-rs mount --foreground` daemon serving `mnt`.
pub fn mount_daemon(mnt: &Path) -> Option<u32> {
    pid_with_args(&[b"--foreground", mnt.as_os_str().as_encoded_bytes()])
}

/// The effective uid of process `pid` (from `/proc/<pid>/status`).
pub fn uid_of(pid: u32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let uid = status.lines().find(|l| l.starts_with("Uid:"))?;
    uid.split_whitespace().nth(2)?.parse().ok()
}

/// Waits for `cond`, polling every 20 ms.
///
/// # Panics
/// If `cond` is still false after `timeout` (the message names `what`).
pub fn wait_for(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < timeout, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A child process, killed and reaped on drop.
#[derive(Debug)]
pub struct ChildGuard(pub Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
