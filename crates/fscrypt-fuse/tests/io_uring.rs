//! FUSE over io_uring on a real mount (`src/ring/`): once the kernel offers
//! it, every request but FORGET comes through the ring and gets the same
//! answers as on `/dev/fuse`; `io_uring: false` keeps the mount on
//! `/dev/fuse`; the ring's threads end with the mount.
//!
//! Needs root, FUSE and a kernel with FUSE over io_uring (6.14+); each
//! test enables `/sys/module/fuse/parameters/enable_uring` for its
//! duration and puts back what it found. Without them the tests say so
//! and skip.

use std::fs;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::Path;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use fscrypt_fuse::{Op, StatsSnapshot};
use test_support::fuse::{Vault, mount_live};
use test_support::{TempDir, fuse_available, is_root};

const PARAM: &str = "/sys/module/fuse/parameters/enable_uring";

/// One test at a time: each flips the kernel's switch.
static SERIAL: Mutex<()> = Mutex::new(());

/// The kernel's switch on for as long as it lives, then as it was.
struct Enabled {
    was: String,
    _serial: MutexGuard<'static, ()>,
}

impl Drop for Enabled {
    fn drop(&mut self) {
        let _ = fs::write(PARAM, &self.was);
    }
}

fn enable(test: &str) -> Option<Enabled> {
    if !fuse_available(test) {
        return None;
    }
    if !is_root() {
        test_support::skip::skip(test, "not root: cannot enable FUSE over io_uring");
        return None;
    }
    let serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let Ok(was) = fs::read_to_string(PARAM) else {
        test_support::skip::skip(test, "this kernel has no FUSE over io_uring (Linux 6.14+)");
        return None;
    };
    fs::write(PARAM, "Y").expect("enabling FUSE over io_uring");
    Some(Enabled {
        was: was.trim().to_owned(),
        _serial: serial,
    })
}

fn stats(v: &Vault) -> StatsSnapshot {
    v.mount.as_ref().expect("mounted").stats()
}

/// Waits until requests come through the ring (every CPU's queue has
/// registered): LOOKUPs of fresh names until one arrives that way.
fn wait_for_ring(v: &Vault) {
    let deadline = Instant::now() + Duration::from_secs(10);
    for i in 0.. {
        let _ = fs::symlink_metadata(v.p(&format!("absent-{i}")));
        if stats(v).through_ring() > 0 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "no request came through io_uring in 10 s"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The names of this process's FUSE ring threads.
fn ring_threads() -> Vec<String> {
    let mut names = Vec::new();
    for t in fs::read_dir("/proc/self/task").unwrap().flatten() {
        if let Ok(comm) = fs::read_to_string(t.path().join("comm"))
            && comm.starts_with("fuse-ring-")
        {
            names.push(comm.trim().to_owned());
        }
    }
    names
}

/// Every kind of request the mount serves, with its results checked.
fn workload(root: &Path) {
    let p = |rel: &str| root.join(rel);
    fs::create_dir(p("d")).unwrap();
    // CREATE + WRITE, OPEN + READ, SETATTR (truncate, chmod, utimes), FSYNC.
    let data: Vec<u8> = (0..300_000u32).map(|i| (i % 253) as u8).collect();
    fs::write(p("d/f"), &data).unwrap();
    assert_eq!(fs::read(p("d/f")).unwrap(), data);
    let mut f = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(p("d/f"))
        .unwrap();
    f.seek(SeekFrom::Start(5000)).unwrap();
    f.write_all(b"middle").unwrap();
    f.sync_all().unwrap();
    f.set_len(10_000).unwrap();
    let mut back = Vec::new();
    f.seek(SeekFrom::Start(0)).unwrap();
    f.read_to_end(&mut back).unwrap();
    assert_eq!(back.len(), 10_000);
    assert_eq!(&back[5000..5006], b"middle");
    assert_eq!(&back[..5000], &data[..5000]);
    rustix::fs::fallocate(&f, rustix::fs::FallocateFlags::KEEP_SIZE, 0, 65_536).unwrap();
    drop(f);
    fs::set_permissions(p("d/f"), fs::Permissions::from_mode(0o600)).unwrap();
    let m = fs::metadata(p("d/f")).unwrap();
    assert_eq!((m.len(), m.mode() & 0o7777), (10_000, 0o600));
    rustix::fs::utimensat(
        rustix::fs::CWD,
        p("d/f"),
        &rustix::fs::Timestamps {
            last_access: rustix::fs::Timespec {
                tv_sec: 1_000_000,
                tv_nsec: 5,
            },
            last_modification: rustix::fs::Timespec {
                tv_sec: 2_000_000,
                tv_nsec: 7,
            },
        },
        rustix::fs::AtFlags::empty(),
    )
    .unwrap();
    let m = fs::metadata(p("d/f")).unwrap();
    assert_eq!((m.mtime(), m.mtime_nsec()), (2_000_000, 7));
    // SYMLINK + READLINK, LINK, MKNOD (fifo), RENAME, RENAME2 (noreplace).
    std::os::unix::fs::symlink("f", p("d/l")).unwrap();
    assert_eq!(fs::read_link(p("d/l")).unwrap(), Path::new("f"));
    assert_eq!(fs::read(p("d/l")).unwrap().len(), 10_000);
    fs::hard_link(p("d/f"), p("d/h")).unwrap();
    assert_eq!(fs::metadata(p("d/f")).unwrap().nlink(), 2);
    rustix::fs::mknodat(
        rustix::fs::CWD,
        p("d/fifo"),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
        0,
    )
    .unwrap();
    assert!(fs::metadata(p("d/fifo")).unwrap().file_type().is_fifo());
    fs::rename(p("d/h"), p("d/h2")).unwrap();
    let e = rustix::fs::renameat_with(
        rustix::fs::CWD,
        p("d/h2"),
        rustix::fs::CWD,
        p("d/f"),
        rustix::fs::RenameFlags::NOREPLACE,
    );
    assert_eq!(e, Err(rustix::io::Errno::EXIST));
    // xattrs: set, get, list, remove.
    rustix::fs::setxattr(p("d/f"), "user.k", b"v", rustix::fs::XattrFlags::CREATE).unwrap();
    let mut buf = [0u8; 64];
    let n = rustix::fs::getxattr(p("d/f"), "user.k", &mut buf).unwrap();
    assert_eq!(&buf[..n], b"v");
    let n = rustix::fs::listxattr(p("d/f"), &mut buf).unwrap();
    assert_eq!(&buf[..n], b"user.k\0");
    rustix::fs::removexattr(p("d/f"), "user.k").unwrap();
    // READDIRPLUS (and the listing's names), STATFS, FSYNCDIR.
    let mut names: Vec<String> = fs::read_dir(p("d"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["f", "fifo", "h2", "l"]);
    let st = rustix::fs::statvfs(root).unwrap();
    assert!(st.f_blocks > 0);
    fs::File::open(p("d")).unwrap().sync_all().unwrap();
    // Errors come back as errnos: ENOENT, ENOTEMPTY, EEXIST.
    assert_eq!(
        fs::metadata(p("d/none")).unwrap_err().kind(),
        std::io::ErrorKind::NotFound
    );
    assert!(fs::remove_dir(p("d")).is_err());
    assert!(fs::create_dir(p("d")).is_err());
    // UNLINK, RMDIR.
    for n in ["f", "fifo", "h2", "l"] {
        fs::remove_file(p(&format!("d/{n}"))).unwrap();
    }
    fs::remove_dir(p("d")).unwrap();
    assert!(
        fs::read_dir(root).unwrap().all(|e| !e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .starts_with('d'))
    );
}

#[test]
fn every_request_comes_through_the_ring_once_the_kernel_offers_it() {
    let Some(_on) = enable("every_request_comes_through_the_ring_once_the_kernel_offers_it") else {
        return;
    };
    let v = Vault::new("ring");
    wait_for_ring(&v);
    let cpus = fs::read_to_string("/sys/devices/system/cpu/possible").unwrap();
    eprintln!(
        "ring threads: {:?} (possible CPUs {})",
        ring_threads(),
        cpus.trim()
    );
    assert!(!ring_threads().is_empty());
    let s0 = stats(&v);
    workload(v.mnt.path());
    let d = stats(&v).since(&s0);
    eprintln!("requests: {d}");
    for op in [
        Op::Create,
        Op::Write,
        Op::Open,
        Op::Read,
        Op::Setattr,
        Op::Fsync,
        Op::Fallocate,
        Op::Symlink,
        Op::Readlink,
        Op::Link,
        Op::Mknod,
        Op::Rename,
        Op::Setxattr,
        Op::Getxattr,
        Op::Listxattr,
        Op::Removexattr,
        Op::Readdirplus,
        Op::Statfs,
        Op::Fsyncdir,
        Op::Mkdir,
        Op::Unlink,
        Op::Rmdir,
        Op::Release,
    ] {
        assert!(d.get(op) > 0, "{} was not sent: {d}", op.name());
    }
    // FORGET is the only request the kernel keeps on /dev/fuse.
    assert_eq!(d.through_ring(), d.total() - d.get(Op::Forget), "{d}");
}

#[test]
fn without_io_uring_the_mount_stays_on_dev_fuse() {
    let Some(_on) = enable("without_io_uring_the_mount_stays_on_dev_fuse") else {
        return;
    };
    let backing = TempDir::new("ring-off-backing");
    let mnt = TempDir::new("ring-off-mnt");
    let policy = test_support::fuse::policy();
    fscrypt_fuse::create_root(backing.path(), &policy).unwrap();
    let mut config = test_support::fuse::mount_config(backing.path(), policy, true);
    config.io_uring = false;
    let m = mount_live(config, mnt.path());
    workload(mnt.path());
    let s = m.stats();
    assert!(s.get(Op::Create) > 0);
    assert_eq!(s.through_ring(), 0, "{s}");
    assert!(ring_threads().is_empty());
    m.unmount().unwrap();
}

#[test]
fn ring_threads_end_with_the_mount_and_a_remount_gets_a_new_ring() {
    let Some(_on) = enable("ring_threads_end_with_the_mount_and_a_remount_gets_a_new_ring") else {
        return;
    };
    let mut v = Vault::new("ring-remount");
    wait_for_ring(&v);
    fs::write(v.p("kept"), b"across mounts").unwrap();
    v.remount(true);
    wait_for_ring(&v);
    assert_eq!(fs::read(v.p("kept")).unwrap(), b"across mounts");
    assert!(stats(&v).through_ring() > 0);
    v.mount.take().unwrap().unmount().unwrap();
    assert_eq!(
        ring_threads(),
        Vec::<String>::new(),
        "threads outlived the mount"
    );
}
