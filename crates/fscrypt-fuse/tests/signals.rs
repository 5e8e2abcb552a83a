//! SIGTERM and SIGINT unmount a `mount()` cleanly (issue 5 §6). The test
//! re-runs its own binary as the mounting child process.

use std::process::Command;
use std::time::{Duration, Instant};

use test_support::fuse::{mount_config, mount_live, policy};
use test_support::mount::wait_mounted;
use test_support::{TempDir, fuse_available, is_mounted};

const CHILD_ENV: &str = "FSCRYPT_FUSE_TEST_CHILD_MOUNT";

fn child_mount(spec: &str) -> ! {
    let (backing, mnt) = spec.split_once('\n').expect("child spec");
    let mut cfg = mount_config(std::path::Path::new(backing), policy(), true);
    cfg.fs_name = "fscrypt-signal-test".into();
    let r = fscrypt_fuse::mount(cfg, std::path::Path::new(mnt));
    std::process::exit(if r.is_ok() { 0 } else { 3 });
}

fn run(sig: rustix::process::Signal, test_name: &str) {
    if let Ok(spec) = std::env::var(CHILD_ENV) {
        child_mount(&spec);
    }
    if !fuse_available(test_name) {
        return;
    }
    let backing = TempDir::new("sig-backing");
    let mnt = TempDir::new("sig-mnt");
    fscrypt_fuse::create_root(backing.path(), &policy()).unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([test_name, "--exact", "--nocapture", "--test-threads=1"])
        .env(
            CHILD_ENV,
            format!("{}\n{}", backing.path().display(), mnt.path().display()),
        )
        .spawn()
        .unwrap();
    assert!(
        wait_mounted(mnt.path(), Duration::from_secs(20)),
        "child did not mount"
    );
    std::fs::write(mnt.path().join("file"), b"persisted").unwrap();
    let pid = rustix::process::Pid::from_child(&child);
    rustix::process::kill_process(pid, sig).unwrap();
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if t0.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            let _ = fscrypt_fuse::unmount(mnt.path());
            panic!("child did not exit after {sig:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "child exit: {status}");
    assert!(!is_mounted(mnt.path()), "still mounted after {sig:?}");
    // The data is in the backing store: mount again and read it.
    let m = mount_live(mount_config(backing.path(), policy(), true), mnt.path());
    assert_eq!(
        std::fs::read(mnt.path().join("file")).unwrap(),
        b"persisted"
    );
    m.unmount().unwrap();
}

#[test]
fn sigterm_unmounts_cleanly() {
    run(rustix::process::Signal::TERM, "sigterm_unmounts_cleanly");
}

#[test]
fn sigint_unmounts_cleanly() {
    run(rustix::process::Signal::INT, "sigint_unmounts_cleanly");
}
