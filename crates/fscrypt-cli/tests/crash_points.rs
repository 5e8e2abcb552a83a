//! Crash safety of `fscrypt-rs mount` at exact steps, with the real binary
//! as the daemon (`fscrypt-rs mount --foreground` in a child process): the
//! daemon is killed at exact steps of create, mknod, mkdir, symlink,
//! long-name side files, unlink, rmdir and rename (the test-only
//! `FSCRYPT_RS_CRASH_AT` hook of the `crash-points` feature); after a
//! remount the entry is absent or complete, nothing is unreadable, no
//! internal name shows, and the backing store holds no leftovers.
//!
//! Random-moment kills are in `crash_harness.rs`; the shared vault and
//! checks in `crash_common/mod.rs`.
//!
//! Needs root and /dev/fuse (skips loudly without). Mounts are always undone.

mod crash_common;

use std::path::Path;
use std::time::{Duration, Instant};

use crash_common::*;
use test_support::skip::can_mount;

fn long_name(tag: &str) -> String {
    format!("{tag}-{}", "L".repeat(200))
}

fn mkfifo(p: &Path) -> std::io::Result<()> {
    rustix::fs::mknodat(
        rustix::fs::CWD,
        p,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o640),
        0,
    )
    .map_err(std::io::Error::from)
}

/// One crash point: `setup` runs with the point armed (must not reach it),
/// `trigger` must reach it (the daemon dies); `name` is then absent or
/// complete. Returns whether `name` exists after the remount.
fn crash_at(
    v: &mut Vault,
    point: &str,
    setup: &dyn Fn(&Vault),
    trigger: &dyn Fn(&Vault),
    name: &str,
) -> bool {
    v.mount(Some(point));
    setup(v);
    trigger(v);
    assert!(
        v.died_within(Duration::from_secs(20)),
        "crash point {point} was not reached"
    );
    v.mount(None);
    let tree = check_all(v, point);
    let exists = std::fs::symlink_metadata(v.p(name)).is_ok();
    if exists {
        // Complete: usable, removable, and the name can be made again.
        match tree.get(name) {
            Some(Found::Dir) => {
                std::fs::write(v.p(&format!("{name}/inner")), b"in").unwrap();
                std::fs::remove_file(v.p(&format!("{name}/inner"))).unwrap();
                std::fs::remove_dir(v.p(name)).unwrap();
            }
            Some(_) => std::fs::remove_file(v.p(name)).unwrap(),
            None => panic!("{point}: {name} exists but was not listed"),
        }
    }
    std::fs::write(v.p(name), b"again").unwrap();
    assert_eq!(std::fs::read(v.p(name)).unwrap(), b"again");
    std::fs::remove_file(v.p(name)).unwrap();
    v.unmount();
    exists
}

#[test]
fn crash_points() {
    if !can_mount("crash_points") {
        return;
    }
    let start = Instant::now();
    let mut v = Vault::new("points");
    let none = |_: &Vault| {};
    let long = long_name("file");
    let ldir = long_name("dir");
    let lsym = long_name("sym");
    let long_target = "t".repeat(4000);
    type Step = Box<dyn Fn(&Vault)>;
    let cases: Vec<(&str, Step, Step, String)> = vec![
        (
            "create:after-open",
            Box::new(none),
            Box::new(|v: &Vault| {
                let _ = std::fs::write(v.p("f1"), b"x");
            }),
            "f1".into(),
        ),
        (
            "create:after-header",
            Box::new(none),
            Box::new(|v: &Vault| {
                let _ = std::fs::write(v.p("f2"), b"x");
            }),
            "f2".into(),
        ),
        (
            "create:before-link",
            Box::new(none),
            Box::new(|v: &Vault| {
                let _ = std::fs::write(v.p("f3"), b"x");
            }),
            "f3".into(),
        ),
        (
            "create:after-link",
            Box::new(none),
            Box::new(|v: &Vault| {
                let _ = std::fs::write(v.p("f4"), b"x");
            }),
            "f4".into(),
        ),
        (
            "create:after-open",
            Box::new(none),
            Box::new({
                let l = long.clone();
                move |v: &Vault| {
                    let _ = std::fs::write(v.p(&l), b"x");
                }
            }),
            long.clone(),
        ),
        (
            "name:after-side-tmp",
            Box::new(none),
            Box::new({
                let l = long.clone();
                move |v: &Vault| {
                    let _ = std::fs::write(v.p(&l), b"x");
                }
            }),
            long.clone(),
        ),
        (
            "name:after-side",
            Box::new(none),
            Box::new({
                let l = long.clone();
                move |v: &Vault| {
                    let _ = std::fs::write(v.p(&l), b"x");
                }
            }),
            long.clone(),
        ),
        (
            "mknod:after-node",
            Box::new(none),
            Box::new(|v: &Vault| {
                let _ = mkfifo(&v.p("fifo1"));
            }),
            "fifo1".into(),
        ),
        (
            "mknod:before-rename",
            Box::new(none),
            Box::new(|v: &Vault| {
                let _ = mkfifo(&v.p("fifo2"));
            }),
            "fifo2".into(),
        ),
        (
            "mkdir:after-tmpdir",
            Box::new(none),
            Box::new(|v: &Vault| {
                let _ = std::fs::create_dir(v.p("d1"));
            }),
            "d1".into(),
        ),
        (
            "mkdir:after-meta",
            Box::new(none),
            Box::new(|v: &Vault| {
                let _ = std::fs::create_dir(v.p("d2"));
            }),
            "d2".into(),
        ),
        (
            "mkdir:before-rename",
            Box::new(none),
            Box::new({
                let l = ldir.clone();
                move |v: &Vault| {
                    let _ = std::fs::create_dir(v.p(&l));
                }
            }),
            ldir.clone(),
        ),
        (
            "symlink:after-store-write",
            Box::new(none),
            Box::new({
                let t = long_target.clone();
                move |v: &Vault| {
                    let _ = std::os::unix::fs::symlink(&t, v.p("s1"));
                }
            }),
            "s1".into(),
        ),
        (
            "symlink:after-store",
            Box::new(none),
            Box::new({
                let t = long_target.clone();
                move |v: &Vault| {
                    let _ = std::os::unix::fs::symlink(&t, v.p("s2"));
                }
            }),
            "s2".into(),
        ),
        (
            "unlink:after-unlink",
            Box::new({
                let l = long.clone();
                move |v: &Vault| std::fs::write(v.p(&l), b"data").unwrap()
            }),
            Box::new({
                let l = long.clone();
                move |v: &Vault| {
                    let _ = std::fs::remove_file(v.p(&l));
                }
            }),
            long.clone(),
        ),
        (
            "unlink:before-unstore",
            Box::new({
                let (l, t) = (lsym.clone(), long_target.clone());
                move |v: &Vault| std::os::unix::fs::symlink(&t, v.p(&l)).unwrap()
            }),
            Box::new({
                let l = lsym.clone();
                move |v: &Vault| {
                    let _ = std::fs::remove_file(v.p(&l));
                }
            }),
            lsym.clone(),
        ),
        (
            "rmdir:after-clear",
            Box::new(|v: &Vault| std::fs::create_dir(v.p("r1")).unwrap()),
            Box::new(|v: &Vault| {
                let _ = std::fs::remove_dir(v.p("r1"));
            }),
            "r1".into(),
        ),
        (
            "rmdir:after-rmdir",
            Box::new({
                let l = ldir.clone();
                move |v: &Vault| std::fs::create_dir(v.p(&l)).unwrap()
            }),
            Box::new({
                let l = ldir.clone();
                move |v: &Vault| {
                    let _ = std::fs::remove_dir(v.p(&l));
                }
            }),
            ldir.clone(),
        ),
        (
            "rename:after-clear",
            Box::new(|v: &Vault| {
                std::fs::create_dir(v.p("ra")).unwrap();
                std::fs::write(v.p("ra/keep"), b"kept").unwrap();
                std::fs::create_dir(v.p("rb")).unwrap();
            }),
            Box::new(|v: &Vault| {
                let _ = std::fs::rename(v.p("ra"), v.p("rb"));
            }),
            "rb".into(),
        ),
        (
            "rename:after-rename",
            Box::new({
                let (l, t) = (lsym.clone(), long_target.clone());
                move |v: &Vault| {
                    std::os::unix::fs::symlink(&t, v.p(&l)).unwrap();
                    std::fs::write(v.p("src"), b"src").unwrap();
                }
            }),
            Box::new({
                let l = lsym.clone();
                move |v: &Vault| {
                    let _ = std::fs::rename(v.p("src"), v.p(&l));
                }
            }),
            lsym.clone(),
        ),
    ];
    let n = cases.len();
    for (point, setup, trigger, name) in cases {
        crash_at(&mut v, point, &*setup, &*trigger, &name);
        // Leave the tree as it was for the next case (ra/rb, src).
        v.mount(None);
        for extra in ["ra", "rb"] {
            let _ = std::fs::remove_file(v.p(&format!("{extra}/keep")));
            let _ = std::fs::remove_dir(v.p(extra));
        }
        let _ = std::fs::remove_file(v.p("src"));
        check_all(&v, point);
        v.unmount();
    }
    eprintln!(
        "crash_points: {n} crash points, all left an absent or complete entry ({:.1} s)",
        start.elapsed().as_secs_f64()
    );
}

fn bytes(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31) ^ seed | 1)
        .collect()
}

/// Format 2 (`docs/vault-format.md` §4a, `init --no-integrity`): a size
/// change is one `ftruncate`. Killed between an extending write's data
/// units and its `ftruncate`, the file has the new data rounded up to whole
/// data units with zeros (never garbage); killed after a truncate down's
/// `ftruncate`, before the stale trailer and tail are zeroed, the size is the
/// new one and growing the file again shows zeros only.
#[test]
fn crash_points_of_format_2_size_changes() {
    if !can_mount("crash_points_of_format_2_size_changes") {
        return;
    }
    use std::os::unix::fs::FileExt;
    let mut v = Vault::with_init("points-v2", &["--no-integrity"]);
    let old = bytes(1, 100);
    let new = bytes(2, 5000);
    let big = bytes(3, 3 * 4096 + 100);
    v.mount(None);
    std::fs::write(v.p("w"), &old).unwrap();
    std::fs::write(v.p("t"), &big).unwrap();
    v.unmount();

    // Extending write of 5000 bytes at 8192 (units 2 and 3) into a 100-byte
    // file; the kill comes after the data units of the first WRITE request
    // (the kernel may split the write), before the length.
    v.mount(Some("write:after-data"));
    {
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(v.p("w"))
            .unwrap();
        let _ = f.write_all_at(&new, 8192);
    }
    assert!(
        v.died_within(Duration::from_secs(20)),
        "write:after-data was not reached"
    );
    v.mount(None);
    check_all(&v, "write:after-data");
    let got = std::fs::read(v.p("w")).unwrap();
    assert!(
        got.len() > 8192 && got.len().is_multiple_of(4096),
        "the written data rounded up to whole units, not {}",
        got.len()
    );
    assert_eq!(&got[..100], &old[..]);
    assert!(got[100..8192].iter().all(|&b| b == 0));
    // Then a prefix of the new data (every byte of it is non-zero), then the
    // zero padding of its last unit: never garbage.
    let tail = &got[8192..];
    let w = tail.iter().position(|&b| b == 0).unwrap_or(tail.len());
    assert!(w > 0 && w <= new.len());
    assert_eq!(&tail[..w], &new[..w]);
    assert!(tail[w..].iter().all(|&b| b == 0), "zeros, not garbage");
    v.unmount();

    // Truncate down: 12388 -> 5000 bytes; the kill comes right after the
    // one ftruncate (the stale trailer and unit tail are not zeroed yet).
    v.mount(Some("truncate:after-length"));
    {
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(v.p("t"))
            .unwrap();
        let _ = f.set_len(5000);
    }
    assert!(
        v.died_within(Duration::from_secs(20)),
        "truncate:after-length was not reached"
    );
    v.mount(None);
    check_all(&v, "truncate:after-length");
    let got = std::fs::read(v.p("t")).unwrap();
    assert_eq!(got, &big[..5000]);
    // Growing again (by truncate and by a write past the trailer's unit)
    // shows zeros where the old bytes were.
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(v.p("t"))
        .unwrap();
    f.set_len(3 * 4096 + 100).unwrap();
    drop(f);
    let got = std::fs::read(v.p("t")).unwrap();
    assert_eq!(&got[..5000], &big[..5000]);
    assert!(
        got[5000..].iter().all(|&b| b == 0),
        "stale bytes reappeared"
    );
    v.unmount();
}

/// Format 3 (`docs/vault-format.md` §4b, the vault `init` makes): the
/// record is the commit point of a size change. Killed between an
/// extending write's data units and its record, the file keeps its old
/// size; the crash recovery pass at the next mount cuts off the units
/// written past it, so that `stat` of the closed file agrees with a read
/// (the old code: the length still hinted the new size, "read length !=
/// st_size"), and growing the file later shows zeros, never the cut
/// units. Killed after a truncate down's record, the size is the new one.
/// Killed with a file open after an fsync'd append, the append is there.
#[test]
fn crash_points_of_format_3_size_changes() {
    if !can_mount("crash_points_of_format_3_size_changes") {
        return;
    }
    use std::os::unix::fs::FileExt;
    let mut v = Vault::new("points-v3");
    let old = bytes(1, 100);
    let new = bytes(2, 5000);
    let big = bytes(3, 3 * 4096 + 100);
    v.mount(None);
    std::fs::write(v.p("w"), &old).unwrap();
    std::fs::write(v.p("t"), &big).unwrap();
    v.unmount();

    v.mount(Some("write:after-data"));
    {
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(v.p("w"))
            .unwrap();
        let _ = f.write_all_at(&new, 8192);
    }
    assert!(
        v.died_within(Duration::from_secs(20)),
        "write:after-data was not reached"
    );
    v.mount(None);
    check_all(&v, "write:after-data");
    assert_eq!(std::fs::metadata(v.p("w")).unwrap().len(), 100);
    assert_eq!(std::fs::read(v.p("w")).unwrap(), old);
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(v.p("w"))
        .unwrap();
    f.set_len(8192 + 5000).unwrap();
    drop(f);
    let got = std::fs::read(v.p("w")).unwrap();
    assert_eq!(&got[..100], &old[..]);
    assert!(got[100..].iter().all(|&b| b == 0), "cut units came back");
    v.unmount();

    v.mount(Some("truncate:after-length"));
    {
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(v.p("t"))
            .unwrap();
        let _ = f.set_len(5000);
    }
    assert!(
        v.died_within(Duration::from_secs(20)),
        "truncate:after-length was not reached"
    );
    v.mount(None);
    check_all(&v, "truncate:after-length");
    assert_eq!(std::fs::read(v.p("t")).unwrap(), &big[..5000]);
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(v.p("t"))
        .unwrap();
    f.set_len(3 * 4096 + 100).unwrap();
    drop(f);
    let got = std::fs::read(v.p("t")).unwrap();
    assert_eq!(&got[..5000], &big[..5000]);
    assert!(
        got[5000..].iter().all(|&b| b == 0),
        "stale bytes reappeared"
    );
    v.unmount();

    // A write session grows the size in memory; `fsync` stores it: killed
    // with the file still open after an fsync'd append, the append reads
    // back (and a later, unsynced one may be lost, never garbage).
    v.mount(None);
    std::fs::write(v.p("s"), &old).unwrap();
    let synced = bytes(4, 6000);
    let f = std::fs::OpenOptions::new()
        .append(true)
        .open(v.p("s"))
        .unwrap();
    std::io::Write::write_all(&mut &f, &synced).unwrap();
    f.sync_all().unwrap();
    std::io::Write::write_all(&mut &f, &bytes(5, 3000)).unwrap();
    v.kill();
    drop(f);
    v.mount(None);
    check_all(&v, "kill after fsync");
    let got = std::fs::read(v.p("s")).unwrap();
    assert!(
        got.len() >= 6100,
        "fsync'd append lost: {} bytes",
        got.len()
    );
    assert!(
        got[..100] == old[..] && got[100..6100] == synced[..],
        "fsync'd append changed"
    );
    v.unmount();
}
