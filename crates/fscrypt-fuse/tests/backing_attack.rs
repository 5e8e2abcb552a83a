//! The backing directory is untrusted input (issue 9 §2): whoever can write
//! it must not make the daemon (root) act on anything outside the vault.
//!
//! - A racing thread keeps swapping a backing entry for a symlink to a canary
//!   file outside the vault while the mount does chmod, chown, truncate,
//!   setxattr, utimens and open+write on it: the canary never changes and the
//!   daemon stays up (5 s, 30 s with FSCRYPT_RS_LONG_TESTS=1).
//! - A backing directory replaced by a symlink to an outside directory, and
//!   an outside directory bind-mounted over a backing directory: never
//!   entered (nothing read, created or deleted there).
//! - A foreign file (another user's, same filesystem) hard-linked into the
//!   backing store under a vault file's name: chmod, chown, utimes,
//!   truncate, setxattr, removexattr and open for writing through the mount
//!   are refused and the file is unchanged (issue 20 item 7), also after it
//!   was renamed behind the mount and looked up under both names; a vault
//!   file of another owner hard-linked through the mount stays changeable.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use test_support::fuse::Vault;
use test_support::tree::only_user_entry;
use test_support::{BindGuard, TempDir, need_fuse};

/// Everything observable about a file that the attack could change.
#[derive(Debug, PartialEq, Eq)]
struct Snapshot {
    mode: u32,
    uid: u32,
    gid: u32,
    len: u64,
    mtime: (i64, i64),
    content: Vec<u8>,
    xattrs: Vec<u8>,
}

fn snapshot(p: &Path) -> Snapshot {
    let m = fs::symlink_metadata(p).unwrap();
    let mut x = vec![0u8; 4096];
    let n = rustix::fs::listxattr(p, &mut x).unwrap_or(0);
    x.truncate(n);
    Snapshot {
        mode: m.mode(),
        uid: m.uid(),
        gid: m.gid(),
        len: m.len(),
        mtime: (m.mtime(), m.mtime_nsec()),
        content: fs::read(p).unwrap(),
        xattrs: x,
    }
}

/// Snapshot of every file below `dir` (names, and for files their state).
fn tree(dir: &Path) -> Vec<(PathBuf, Snapshot)> {
    let mut all = test_support::tree::walk(dir);
    all.sort();
    all.into_iter()
        .filter(|p| p.is_file())
        .map(|p| {
            let s = snapshot(&p);
            (p, s)
        })
        .collect()
}

#[test]
fn swapped_entry_never_reaches_outside_file() {
    need_fuse!();
    let v = Vault::new("attack-swap");
    let outside = TempDir::new("attack-canary");
    let canary = outside.path().join("canary");
    fs::write(&canary, b"CANARY: never to be touched by the daemon\n").unwrap();
    fs::set_permissions(&canary, fs::Permissions::from_mode(0o600)).unwrap();
    let before = snapshot(&canary);

    let f = v.p("f");
    fs::write(&f, b"vault data").unwrap();
    let entry = only_user_entry(v.backing.path());
    let hold = v.backing.path().join("attack.hold");
    let link = v.backing.path().join("attack.link");
    std::os::unix::fs::symlink(&canary, &link).unwrap();

    let stop = AtomicBool::new(false);
    let changed = AtomicBool::new(false);
    let ops = AtomicU64::new(0);
    let swaps = AtomicU64::new(0);
    let end = Instant::now() + test_support::env::duration(5, 30);
    std::thread::scope(|s| {
        // The attacker: entry -> hold, symlink -> entry, ..., and back.
        s.spawn(|| {
            let mut i = 0u32;
            while !stop.load(Ordering::Relaxed) {
                let _ = fs::rename(&entry, &hold);
                let _ = fs::rename(&link, &entry);
                swaps.fetch_add(1, Ordering::Relaxed);
                std::thread::sleep(Duration::from_micros(50 + (i % 7) as u64 * 100));
                let _ = fs::rename(&entry, &link);
                let _ = fs::rename(&hold, &entry);
                std::thread::sleep(Duration::from_micros(50 + (i % 5) as u64 * 100));
                i = i.wrapping_add(1);
            }
        });
        // The mount user: every attribute and content change, in a loop.
        for t in 0..2u32 {
            let f = &f;
            let (stop, ops) = (&stop, &ops);
            s.spawn(move || {
                let mut i = t;
                while !stop.load(Ordering::Relaxed) {
                    let mode = if i % 2 == 0 { 0o644 } else { 0o4755 };
                    let _ = fs::set_permissions(f, fs::Permissions::from_mode(mode));
                    let _ = std::os::unix::fs::chown(f, Some(1234 + i % 2), Some(4321));
                    let _ = std::os::unix::fs::chown(f, Some(0), Some(0));
                    if let Ok(h) = fs::OpenOptions::new().write(true).open(f) {
                        let _ = h.set_len(3 + (i % 100) as u64);
                        use std::io::Write;
                        let _ = (&h).write_all(b"written through the mount");
                    }
                    // truncate(2) by path: the kernel sends SETATTR(size) as well.
                    let _ = std::process::Command::new("truncate")
                        .args(["-s", &(i % 50).to_string()])
                        .arg(f)
                        .stderr(std::process::Stdio::null())
                        .status();
                    let _ = rustix::fs::setxattr(
                        f,
                        "user.attack",
                        b"value",
                        rustix::fs::XattrFlags::empty(),
                    );
                    let _ = rustix::fs::removexattr(f, "user.attack");
                    let _ = fs::File::options()
                        .write(true)
                        .open(f)
                        .and_then(|h| h.set_modified(SystemTime::UNIX_EPOCH));
                    let _ = rustix::fs::utimensat(
                        rustix::fs::CWD,
                        f,
                        &rustix::fs::Timestamps {
                            last_access: rustix::fs::Timespec {
                                tv_sec: 1000,
                                tv_nsec: 0,
                            },
                            last_modification: rustix::fs::Timespec {
                                tv_sec: 2000,
                                tv_nsec: 0,
                            },
                        },
                        rustix::fs::AtFlags::empty(),
                    );
                    let _ = fs::read(f);
                    ops.fetch_add(1, Ordering::Relaxed);
                    i = i.wrapping_add(2);
                }
            });
        }
        // The checker.
        while Instant::now() < end {
            if snapshot(&canary) != before {
                changed.store(true, Ordering::Relaxed);
                break;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        stop.store(true, Ordering::Relaxed);
    });
    let after = snapshot(&canary);
    eprintln!(
        "{} mount op rounds, {} swaps",
        ops.load(Ordering::Relaxed),
        swaps.load(Ordering::Relaxed)
    );
    assert!(
        !changed.load(Ordering::Relaxed) && after == before,
        "the outside canary changed: before {before:?}, after {after:?}"
    );
    // The daemon is still up and serves the vault.
    let _ = fs::rename(&hold, &entry);
    fs::write(v.p("still-up"), b"alive").unwrap();
    assert_eq!(fs::read(v.p("still-up")).unwrap(), b"alive");
}

#[test]
fn directory_replaced_by_symlink_is_never_entered() {
    need_fuse!();
    let mut v = Vault::new("attack-dirlink");
    fs::create_dir(v.p("d")).unwrap();
    fs::write(v.p("d/x"), b"inside").unwrap();
    let bdir = only_user_entry(v.backing.path());
    // The outside directory: a copy of the backing directory, so that a
    // daemon following the link would find a perfectly readable vault dir.
    let outside = TempDir::new("attack-outside");
    let out = outside.path().join("copy");
    fs::create_dir(&out).unwrap();
    for e in fs::read_dir(&bdir).unwrap() {
        let e = e.unwrap();
        fs::copy(e.path(), out.join(e.file_name())).unwrap();
    }
    let before = tree(outside.path());
    v.remount(true);
    fs::rename(&bdir, v.backing.path().join("attack.moved")).unwrap();
    std::os::unix::fs::symlink(&out, &bdir).unwrap();
    let _ = fs::read_dir(v.p("d")).map(|r| r.count());
    let _ = fs::read(v.p("d/x"));
    let _ = fs::write(v.p("d/new"), b"must not land outside");
    let _ = fs::create_dir(v.p("d/newdir"));
    let _ = fs::set_permissions(v.p("d/x"), fs::Permissions::from_mode(0o777));
    let _ = fs::remove_file(v.p("d/x"));
    let _ = fs::remove_dir(v.p("d"));
    assert_eq!(
        tree(outside.path()),
        before,
        "the outside directory changed"
    );
    assert!(
        fs::symlink_metadata(&bdir)
            .unwrap()
            .file_type()
            .is_symlink(),
        "the planted symlink is still there (it was not followed and removed)"
    );
    assert!(
        fs::read(v.p("d/x")).is_err(),
        "read through a planted symlink"
    );
}

#[test]
fn bind_mount_in_backing_store_is_never_entered() {
    need_fuse!();
    let mut v = Vault::new("attack-bind");
    fs::create_dir(v.p("b")).unwrap();
    let bdir = only_user_entry(v.backing.path());
    // The outside directory holds a copy of the backing directory's
    // metadata, so a daemon entering it would accept it as a vault dir.
    let outside = TempDir::new("attack-bindsrc");
    for e in fs::read_dir(&bdir).unwrap() {
        let e = e.unwrap();
        fs::copy(e.path(), outside.path().join(e.file_name())).unwrap();
    }
    let before = tree(outside.path());
    v.remount(true);
    rustix::mount::mount_bind(outside.path(), &bdir).expect("bind mount");
    let _guard = BindGuard(bdir.clone());
    let _ = fs::read_dir(v.p("b")).map(|r| r.count());
    let _ = fs::write(v.p("b/new"), b"must not land outside");
    let _ = fs::create_dir(v.p("b/newdir"));
    let _ = fs::remove_dir(v.p("b"));
    assert_eq!(
        tree(outside.path()),
        before,
        "the bind-mounted outside directory changed"
    );
}

/// Every metadata change and a write through the mount at `f`; returns
/// which of them succeeded.
fn try_every_change(f: &Path) -> Vec<&'static str> {
    let mut ok = Vec::new();
    if fs::set_permissions(f, fs::Permissions::from_mode(0o4777)).is_ok() {
        ok.push("chmod");
    }
    let ts = rustix::fs::Timestamps {
        last_access: rustix::fs::Timespec {
            tv_sec: 1,
            tv_nsec: 0,
        },
        last_modification: rustix::fs::Timespec {
            tv_sec: 1,
            tv_nsec: 0,
        },
    };
    if rustix::fs::utimensat(rustix::fs::CWD, f, &ts, rustix::fs::AtFlags::empty()).is_ok() {
        ok.push("utimens");
    }
    if rustix::fs::setxattr(f, "user.attack", b"v", rustix::fs::XattrFlags::empty()).is_ok() {
        ok.push("setxattr");
    }
    if rustix::fs::removexattr(f, "user.keep").is_ok() {
        ok.push("removexattr");
    }
    // truncate(2) by path: SETATTR(size) without an open file.
    if std::process::Command::new("truncate")
        .args(["-s", "0"])
        .arg(f)
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
    {
        ok.push("truncate");
    }
    if fs::OpenOptions::new().write(true).open(f).is_ok() {
        ok.push("open for writing");
    }
    // Last: a chown to root would make the object the vault owner's.
    if std::os::unix::fs::chown(f, Some(0), Some(0)).is_ok() {
        ok.push("chown");
    }
    ok
}

#[test]
fn foreign_hard_link_is_never_changed() {
    need_fuse!();
    let mut v = Vault::new("attack-hardlink");
    fs::write(v.p("f"), b"vault data").unwrap();
    let entry = only_user_entry(v.backing.path());
    // Another user's file on the backing filesystem (temporary directories
    // of one test run share it).
    let outside = TempDir::new("attack-foreign");
    let foreign = outside.path().join("foreign");
    fs::write(&foreign, b"another user's file, not the vault's\n").unwrap();
    fs::set_permissions(&foreign, fs::Permissions::from_mode(0o640)).unwrap();
    rustix::fs::setxattr(&foreign, "user.keep", b"k", rustix::fs::XattrFlags::empty()).unwrap();
    std::os::unix::fs::chown(&foreign, Some(4242), Some(4242)).unwrap();
    assert_eq!(
        fs::metadata(&foreign).unwrap().dev(),
        fs::metadata(v.backing.path()).unwrap().dev(),
        "the test needs the backing store and the foreign file on one filesystem"
    );
    let before = snapshot(&foreign);
    v.remount(true);
    fs::remove_file(&entry).unwrap();
    fs::hard_link(&foreign, &entry).unwrap();

    let done = try_every_change(&v.p("f"));
    assert_eq!(
        done,
        Vec::<&str>::new(),
        "changes applied to a foreign file"
    );
    assert_eq!(snapshot(&foreign), before, "the foreign file changed");
    // Still listed and statable (only changes are refused).
    let m = fs::metadata(v.p("f")).unwrap();
    assert_eq!(m.uid(), 4242);
    fs::write(v.p("still-up"), b"alive").unwrap();
    assert_eq!(fs::read(v.p("still-up")).unwrap(), b"alive");
}

/// The foreign link renamed in the backing store between two lookups: the
/// vault has then seen two names of the object, but only one of them still
/// names it, so the foreign file's second link stays unexplained.
#[test]
fn foreign_hard_link_renamed_behind_the_mount_is_never_changed() {
    need_fuse!();
    let mut v = Vault::new("attack-hardlink-rename");
    fs::write(v.p("f"), b"vault data").unwrap();
    let entry_f = only_user_entry(v.backing.path());
    fs::write(v.p("g"), b"other vault data").unwrap();
    fs::remove_file(&entry_f).unwrap();
    let entry_g = only_user_entry(v.backing.path());
    let outside = TempDir::new("attack-foreign-rename");
    let foreign = outside.path().join("foreign");
    fs::write(&foreign, b"another user's file, not the vault's\n").unwrap();
    fs::set_permissions(&foreign, fs::Permissions::from_mode(0o640)).unwrap();
    rustix::fs::setxattr(&foreign, "user.keep", b"k", rustix::fs::XattrFlags::empty()).unwrap();
    std::os::unix::fs::chown(&foreign, Some(4242), Some(4242)).unwrap();
    assert_eq!(
        fs::metadata(&foreign).unwrap().dev(),
        fs::metadata(v.backing.path()).unwrap().dev(),
        "the test needs the backing store and the foreign file on one filesystem"
    );
    let before = snapshot(&foreign);
    v.remount(true);
    fs::remove_file(&entry_g).unwrap();
    fs::hard_link(&foreign, &entry_f).unwrap();
    // Lookup through the mount records the name of `f`; refused here already.
    assert_eq!(fs::metadata(v.p("f")).unwrap().nlink(), 2);
    assert!(fs::set_permissions(v.p("f"), fs::Permissions::from_mode(0o600)).is_err());
    // Renamed behind the mount to `g`'s name; a lookup records that name too.
    fs::rename(&entry_f, &entry_g).unwrap();
    assert_eq!(fs::metadata(v.p("g")).unwrap().uid(), 4242);

    let done = try_every_change(&v.p("g"));
    assert_eq!(
        done,
        Vec::<&str>::new(),
        "changes applied to a foreign file"
    );
    assert_eq!(snapshot(&foreign), before, "the foreign file changed");
}

#[test]
fn hard_link_made_through_the_mount_stays_changeable() {
    need_fuse!();
    let mut v = Vault::new("attack-ownlink");
    fs::write(v.p("f"), b"vault data").unwrap();
    rustix::fs::setxattr(v.p("f"), "user.keep", b"k", rustix::fs::XattrFlags::empty()).unwrap();
    // A vault file of another user (chown'ed through the mount, as root may),
    // hard-linked through the mount: both links are the vault's.
    std::os::unix::fs::chown(v.p("f"), Some(4242), Some(4242)).unwrap();
    fs::hard_link(v.p("f"), v.p("g")).unwrap();
    v.remount(true);
    // Both links looked up (as `ls` would), then every change works.
    assert_eq!(fs::metadata(v.p("g")).unwrap().nlink(), 2);
    assert_eq!(fs::metadata(v.p("f")).unwrap().uid(), 4242);
    let done = try_every_change(&v.p("f"));
    assert_eq!(
        done,
        [
            "chmod",
            "utimens",
            "setxattr",
            "removexattr",
            "truncate",
            "open for writing",
            "chown"
        ]
    );
    assert_eq!(fs::read(v.p("g")).unwrap(), b"");
}
