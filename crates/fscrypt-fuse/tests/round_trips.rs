//! FUSE round trips per operation (issue 12 item 2), counted by the
//! daemon's own per-opcode counters ([`fscrypt_fuse::BackgroundMount::stats`]).
//!
//! Prints the requests per created file, per `stat` of a cold file, per
//! entry of an `ls -l` (readdir + lstat of every entry) and per entry of an
//! `rm -rf`; `bench/count-requests` runs it with the output shown. Asserts
//! what the adapter promises: `ls -l` needs no LOOKUP per entry
//! (readdirplus), and listing leaves no inode behind once the kernel
//! forgets.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use fscrypt_fuse::layout::Format;
use fscrypt_fuse::{Op, StatsSnapshot};
use test_support::fuse::Vault;
use test_support::fuse_available;

/// The tests of this file run one at a time: `live_inodes()` counts the
/// inodes of every mount in the process.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

fn stats(v: &Vault) -> StatsSnapshot {
    v.mount.as_ref().expect("mounted").stats()
}

fn per(what: &str, n: usize, d: &StatsSnapshot) {
    let mut line = format!(
        "{what:<28} {:>6.2} requests per file ({} for {n}):",
        d.total() as f64 / n as f64,
        d.total()
    );
    for &op in Op::ALL {
        let c = d.get(op);
        if c != 0 {
            line.push_str(&format!(" {} {:.2}", op.name(), c as f64 / n as f64));
        }
    }
    eprintln!("{line}");
}

fn populate(v: &Vault, n: usize) -> StatsSnapshot {
    fs::create_dir(v.p("d")).unwrap();
    let block = [7u8; 4096];
    let s0 = stats(v);
    for i in 0..n {
        let mut f = fs::File::create(v.p(&format!("d/file-{i}"))).unwrap();
        f.write_all(&block).unwrap();
    }
    stats(v).since(&s0)
}

/// A vault whose directory `d` holds `n` files of 4 KiB, remounted so that
/// the kernel knows none of them.
fn cold_populated(tag: &str, n: usize) -> Vault {
    let mut v = Vault::new(tag);
    populate(&v, n);
    v.remount(true);
    v
}

/// `ls -l`: list, then lstat every entry.
fn ls_l(v: &Vault) -> usize {
    let mut n = 0;
    for e in fs::read_dir(v.p("d")).unwrap() {
        let e = e.unwrap();
        let m = fs::symlink_metadata(e.path()).unwrap();
        assert!(m.len() >= 4096);
        n += 1;
    }
    n
}

#[test]
fn requests_per_operation() {
    if !fuse_available(module_path!()) {
        return;
    }
    let _g = serial();
    let n = 1000;
    let mut v = Vault::new("round-trips");
    let d = populate(&v, n);
    per("create+write 4096+close", n, &d);

    // Writes to an open file: does each ask for security.capability?
    let mut f = fs::OpenOptions::new()
        .append(true)
        .open(v.p("d/file-0"))
        .unwrap();
    let s0 = stats(&v);
    for _ in 0..100 {
        f.write_all(&[1u8; 4096]).unwrap();
    }
    per("write 4096 (open file)", 100, &stats(&v).since(&s0));
    drop(f);

    // stat of cold files: a fresh mount knows none of them.
    v.remount(true);
    let s0 = stats(&v);
    for i in 0..n {
        fs::symlink_metadata(v.p(&format!("d/file-{i}"))).unwrap();
    }
    per("stat (cold)", n, &stats(&v).since(&s0));

    v.remount(true);
    let s0 = stats(&v);
    assert_eq!(ls_l(&v), n);
    let ls = stats(&v).since(&s0);
    per("ls -l (cold)", n, &ls);

    // A missing name, asked for twice in a row: the second answer comes
    // from the kernel's negative entry (unless the TTL ran out between).
    let s0 = stats(&v);
    for _ in 0..2 {
        assert!(fs::symlink_metadata(v.p("d/missing")).is_err());
    }
    per("stat missing name x2", 1, &stats(&v).since(&s0));

    v.remount(true);
    let s0 = stats(&v);
    fs::remove_dir_all(v.p("d")).unwrap();
    per("rm -rf (cold)", n, &stats(&v).since(&s0));

    // readdirplus: the listing itself looks every entry up.
    assert!(
        ls.get(Op::Lookup) <= 2,
        "ls -l sent {} LOOKUPs for {n} entries (readdirplus should answer them)",
        ls.get(Op::Lookup)
    );
    assert!(ls.get(Op::Readdirplus) > 0, "no READDIRPLUS: {ls}");
}

/// A mount without `allow_other` (the default of `fscrypt-rs mount`) has no
/// `default_permissions`: the kernel does not fetch a directory's
/// attributes again after each change in it for its next permission
/// check, so neither a create nor an unlink costs a GETATTR (the old code:
/// one per file, 200 for each loop here).
#[test]
fn an_owner_only_mount_does_not_fetch_the_directory_after_each_change() {
    if !fuse_available(module_path!()) {
        return;
    }
    let _g = serial();
    let n = 200;
    let mut v = Vault::new("owner-only");
    v.owner_only = true;
    v.remount(true);
    let created = populate(&v, n);
    per("create (owner only)", n, &created);
    let s0 = stats(&v);
    for i in 0..n {
        fs::remove_file(v.p(&format!("d/file-{i}"))).unwrap();
    }
    let removed = stats(&v).since(&s0);
    per("unlink (owner only)", n, &removed);
    for d in [&created, &removed] {
        assert!(d.get(Op::Getattr) <= 2, "{d}");
    }
    assert_eq!(removed.get(Op::Unlink), n as u64, "{removed}");
    // access(2) now reaches the daemon (ACCESS), answered by the backing
    // object (root here: granted).
    fs::write(v.p("a"), b"x").unwrap();
    let s0 = stats(&v);
    rustix::fs::access(v.p("a"), rustix::fs::Access::WRITE_OK).unwrap();
    rustix::fs::access(v.p("d"), rustix::fs::Access::EXEC_OK).unwrap();
    let asked = stats(&v).since(&s0);
    assert_eq!(asked.get(Op::Access), 2, "{asked}");
}

/// A file created write-only and written (what `tar x`, `cp` and the seed's
/// create loop do) costs no GETXATTR `security.capability`: write-only
/// handles use the kernel's direct-write path, which does not ask for it
/// (fuse.rs `open_flags`). The old code sent one per created file, before
/// its first write. Reopening an existing file write-only does not ask
/// either.
#[test]
fn write_only_files_cost_no_capability_round_trip() {
    if !fuse_available(module_path!()) {
        return;
    }
    let _g = serial();
    let n = 200;
    let v = Vault::new("direct-writes");
    fs::create_dir(v.p("d")).unwrap();
    let s0 = stats(&v);
    for i in 0..n {
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(v.p(&format!("d/f{i}")))
            .unwrap();
        f.write_all(&[i as u8; 4096]).unwrap();
    }
    let created = stats(&v).since(&s0);
    per("create write-only + write", n, &created);
    let s0 = stats(&v);
    for i in 0..n {
        let mut f = fs::OpenOptions::new()
            .append(true)
            .open(v.p(&format!("d/f{i}")))
            .unwrap();
        f.write_all(b"tail").unwrap();
    }
    let appended = stats(&v).since(&s0);
    per("open write-only + append", n, &appended);
    for d in [&created, &appended] {
        assert_eq!(d.get(Op::Getxattr), 0, "{d}");
        assert_eq!(d.get(Op::Write), n as u64, "one WRITE per write(2): {d}");
    }
    // Five requests per created file, one of them (RELEASE) asynchronous:
    // GETATTR of the directory (default_permissions after the previous
    // create changed it), LOOKUP, CREATE, WRITE, RELEASE; format 3 adds the
    // FLUSH of close(2), which ends the file's write session (the other
    // formats answer the first FLUSH with ENOSYS and get no more).
    let per_file = if Format::LATEST == Format::V3 { 6 } else { 5 };
    assert!(
        created.total() <= per_file * n as u64 + 10,
        "{} requests for {n} created files: {created}",
        created.total()
    );
    for i in 0..n {
        let mut want = vec![i as u8; 4096];
        want.extend_from_slice(b"tail");
        assert_eq!(fs::read(v.p(&format!("d/f{i}"))).unwrap(), want);
    }
}

/// A cold sequential read reaches the daemon in READs of 1 MiB: the mount's
/// read-ahead is raised from the 128 KiB every FUSE mount starts with (the
/// old code: 64 READs of 128 KiB for 8 MiB). The mount is made as root
/// here; without root the default stays.
#[test]
fn sequential_reads_come_in_mebibytes() {
    if !fuse_available(module_path!()) {
        return;
    }
    let _g = serial();
    let mut v = Vault::new("read-ahead");
    let data: Vec<u8> = (0..8u32 << 20).map(|i| (i % 251) as u8).collect();
    fs::write(v.p("big"), &data).unwrap();
    v.remount(true);
    let s0 = stats(&v);
    assert_eq!(fs::read(v.p("big")).unwrap(), data);
    let d = stats(&v).since(&s0);
    per("read 8 MiB (cold)", 8, &d);
    assert!(
        d.get(Op::Read) <= 12,
        "{} READs for 8 MiB: {d}",
        d.get(Op::Read)
    );
}

/// A walk that reads a whole directory before it stats the entries (`du`,
/// `rm -rf`, `find -ls` through fts) gets every entry's attributes from
/// the listing: readdirplus for every batch, not only the first (with
/// READDIRPLUS_AUTO, which the old code asked for, every batch after the
/// first was a plain READDIR and each entry of it cost a LOOKUP: 799 of
/// 1000 here).
#[test]
fn a_walk_that_lists_first_needs_no_lookups() {
    if !fuse_available(module_path!()) {
        return;
    }
    let _g = serial();
    let n = 1000;
    let v = cold_populated("list-first", n);
    let s0 = stats(&v);
    let names: Vec<_> = fs::read_dir(v.p("d"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(names.len(), n);
    for p in &names {
        assert_eq!(fs::symlink_metadata(p).unwrap().len(), 4096);
    }
    let d = stats(&v).since(&s0);
    per("list, then lstat each", n, &d);
    assert!(
        d.get(Op::Lookup) <= 2,
        "{} LOOKUPs for {n} entries listed first: {d}",
        d.get(Op::Lookup)
    );
    assert_eq!(d.get(Op::Readdir), 0, "plain READDIRs: {d}");
}

/// Entries returned by readdirplus are kernel lookups: once the kernel
/// forgets them (drop_caches), the inode table is back to its baseline.
/// "." and ".." are no lookups (counting them would leak the directory).
#[test]
fn readdirplus_lookups_are_forgotten() {
    if !fuse_available(module_path!()) {
        return;
    }
    let _g = serial();
    let n = 300;
    let mut v = Vault::new("rdplus-forget");
    populate(&v, n);
    fs::create_dir(v.p("d/sub")).unwrap();
    v.remount(true);
    let base = fscrypt_fuse::live_inodes();
    // Twice: the second listing refreshes the cached dentries (nlookup +1
    // each again on both sides).
    for _ in 0..2 {
        let names: Vec<_> = fs::read_dir(v.p("d"))
            .unwrap()
            .map(|e| e.unwrap())
            .collect();
        assert_eq!(names.len(), n + 1);
        let _ = fs::read_dir(v.p("d/sub")).unwrap().count();
    }
    assert!(
        fscrypt_fuse::live_inodes() > base + n / 2,
        "the listing should have looked the entries up"
    );
    if fs::write("/proc/sys/vm/drop_caches", b"3").is_err() {
        eprintln!("SKIPPED drop_caches part: cannot write /proc/sys/vm/drop_caches");
        return;
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let now = fscrypt_fuse::live_inodes();
        if now <= base {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "inode table did not return to its baseline after drop_caches: {now} > {base}"
        );
        let _ = fs::write("/proc/sys/vm/drop_caches", b"3");
        std::thread::sleep(Duration::from_millis(100));
    }
    // And everything still works after the forgets.
    assert_eq!(fs::read(v.p("d/file-7")).unwrap().len(), 4096);
    assert_eq!(fs::read_dir(v.p("d")).unwrap().count(), n + 1);
}

/// The kernel caches names and attributes for the TTL; every change made
/// through the mount must show at once, also for what the kernel does not
/// change itself (the other name of a hard link, a rename over a cached
/// name, a directory's nlink and mtime, attributes that came from a
/// readdirplus listing, a name cached as absent).
#[test]
fn cached_attributes_follow_our_own_changes() {
    if !fuse_available(module_path!()) {
        return;
    }
    let _g = serial();
    let v = Vault::new("ttl-coherence");
    let p = |s: &str| v.p(s);
    let meta = |s: &str| fs::symlink_metadata(p(s)).unwrap();
    fs::create_dir(p("d")).unwrap();
    fs::write(p("d/a"), b"1234").unwrap();
    let d0 = meta("d");
    // Prime the caches: the listing (readdirplus) and stats.
    assert_eq!(fs::read_dir(p("d")).unwrap().count(), 1);
    assert_eq!(meta("d/a").nlink(), 1);

    // Hard link: both names see nlink 2, then 1 after unlinking one.
    fs::hard_link(p("d/a"), p("d/b")).unwrap();
    assert_eq!(meta("d/a").nlink(), 2);
    assert_eq!(meta("d/b").nlink(), 2);
    assert_eq!(meta("d/a").ino(), meta("d/b").ino());
    fs::remove_file(p("d/b")).unwrap();
    assert_eq!(meta("d/a").nlink(), 1);
    assert!(fs::symlink_metadata(p("d/b")).is_err());

    // Write and truncate: size (no writeback cache: the kernel knows it).
    fs::OpenOptions::new()
        .append(true)
        .open(p("d/a"))
        .unwrap()
        .write_all(b"56")
        .unwrap();
    assert_eq!(meta("d/a").len(), 6);
    fs::OpenOptions::new()
        .write(true)
        .open(p("d/a"))
        .unwrap()
        .set_len(2)
        .unwrap();
    assert_eq!(meta("d/a").len(), 2);
    assert_eq!(fs::read(p("d/a")).unwrap(), b"12");

    // chmod: mode and ctime.
    let c0 = meta("d/a").ctime_nsec() + meta("d/a").ctime() * 1_000_000_000;
    std::thread::sleep(Duration::from_millis(20));
    fs::set_permissions(p("d/a"), fs::Permissions::from_mode(0o640)).unwrap();
    let m = meta("d/a");
    assert_eq!(m.mode() & 0o7777, 0o640);
    assert!(
        m.ctime_nsec() + m.ctime() * 1_000_000_000 > c0,
        "ctime after chmod"
    );

    // Rename over a cached name: the name shows the moved file.
    fs::write(p("d/c"), b"cccccc").unwrap();
    let c_ino = meta("d/c").ino();
    assert_eq!(meta("d/a").len(), 2);
    fs::rename(p("d/c"), p("d/a")).unwrap();
    assert_eq!(meta("d/a").ino(), c_ino);
    assert_eq!(meta("d/a").len(), 6);
    assert!(fs::symlink_metadata(p("d/c")).is_err());

    // The directory's nlink and mtime after mkdir/rmdir/create/unlink in it.
    let n0 = meta("d").nlink();
    fs::create_dir(p("d/sub")).unwrap();
    assert_eq!(meta("d").nlink(), n0 + 1);
    fs::remove_dir(p("d/sub")).unwrap();
    assert_eq!(meta("d").nlink(), n0);
    let m1 = meta("d").modified().unwrap();
    assert!(m1 >= d0.modified().unwrap());
    std::thread::sleep(Duration::from_millis(20));
    fs::write(p("d/e"), b"").unwrap();
    let m2 = meta("d").modified().unwrap();
    assert!(m2 > m1, "directory mtime after create");
    std::thread::sleep(Duration::from_millis(20));
    fs::remove_file(p("d/e")).unwrap();
    assert!(
        meta("d").modified().unwrap() > m2,
        "directory mtime after unlink"
    );

    // A name cached as absent (negative entry) appears once created, for
    // every way of making a name.
    for (i, make) in ["file", "dir", "symlink", "link", "rename"]
        .iter()
        .enumerate()
    {
        let name = format!("d/n{i}");
        assert!(fs::symlink_metadata(p(&name)).is_err());
        assert!(fs::symlink_metadata(p(&name)).is_err());
        match *make {
            "file" => fs::write(p(&name), b"x").unwrap(),
            "dir" => fs::create_dir(p(&name)).unwrap(),
            "symlink" => std::os::unix::fs::symlink("t", p(&name)).unwrap(),
            "link" => fs::hard_link(p("d/a"), p(&name)).unwrap(),
            _ => {
                fs::write(p("d/tmp"), b"x").unwrap();
                fs::rename(p("d/tmp"), p(&name)).unwrap()
            }
        }
        assert!(
            fs::symlink_metadata(p(&name)).is_ok(),
            "{make}: name stays absent"
        );
    }

    // Attributes from a fresh listing are current too.
    assert!(fs::read_dir(p("d")).unwrap().count() > 0);
    fs::OpenOptions::new()
        .append(true)
        .open(p("d/a"))
        .unwrap()
        .write_all(b"7")
        .unwrap();
    assert_eq!(meta("d/a").len(), 7);
}

/// The kernel asks for `security.capability` before the first write to
/// each file; it is answered without backing I/O: not even the inode is
/// looked up (an unknown inode gives EOPNOTSUPP, not ENOENT).
#[test]
fn security_capability_costs_no_backing_io() {
    let backing = test_support::TempDir::new("cap-backing");
    let policy = test_support::fuse::policy();
    fscrypt_fuse::create_root(backing.path(), &policy).unwrap();
    let fs = test_support::fuse::open_fs(backing.path(), true);
    let r = fs.getxattr(
        fscrypt_fuse::InodeNo(0xdead_beef),
        std::ffi::OsStr::new("security.capability"),
        0,
    );
    assert_eq!(r.unwrap_err().errno(), libc::EOPNOTSUPP);
}

/// GNU `ls -l` asks every entry for `security.selinux` and
/// `system.posix_acl_access` (two GETXATTR round trips per entry when they
/// are answered ENODATA); answered EOPNOTSUPP, it stops asking for the
/// rest of the mount after the first entry.
#[test]
fn gnu_ls_l_asks_for_xattrs_once_per_mount() {
    if !fuse_available(module_path!()) {
        return;
    }
    let _g = serial();
    let n = 200;
    let v = cold_populated("ls-xattrs", n);
    let s0 = stats(&v);
    let out = std::process::Command::new("ls")
        .arg("-l")
        .arg(v.p("d"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), n + 1);
    let d = stats(&v).since(&s0);
    per("GNU ls -l (cold)", n, &d);
    assert!(
        d.get(Op::Getxattr) <= 4,
        "ls -l sent {} GETXATTRs for {n} entries",
        d.get(Op::Getxattr)
    );
}

/// Undoes a bind mount (lazily, so that a failing test never leaves one).
struct BindGuard(std::path::PathBuf);

impl Drop for BindGuard {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

/// An entry readdirplus cannot look up (here a mount point in the backing
/// directory) is still listed, as readdir lists it; only its own lookup
/// fails. An entry listed with node id 0 would vanish: glibc's readdir
/// skips d_ino 0.
#[test]
fn entries_that_fail_their_lookup_are_still_listed() {
    if !fuse_available(module_path!()) {
        return;
    }
    let _g = serial();
    let mut v = Vault::new("rdplus-fail");
    fs::create_dir(v.p("m")).unwrap();
    fs::write(v.p("ok"), b"x").unwrap();
    let ino = fs::symlink_metadata(v.p("m")).unwrap().ino();
    let backing_m = fs::read_dir(v.backing.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| fs::symlink_metadata(p).unwrap().ino() == ino)
        .expect("backing of m");
    let other = test_support::TempDir::new("rdplus-fail-other");
    let st = std::process::Command::new("mount")
        .arg("--bind")
        .arg(other.path())
        .arg(&backing_m)
        .status()
        .unwrap();
    if !st.success() {
        eprintln!("SKIPPED {}: mount --bind failed", module_path!());
        return;
    }
    let _bind = BindGuard(backing_m.clone());
    v.remount(true);
    let base = fscrypt_fuse::live_inodes();
    let mut names: Vec<String> = fs::read_dir(v.mnt.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["m", "ok"]);
    assert_eq!(
        fs::symlink_metadata(v.p("m")).unwrap_err().raw_os_error(),
        Some(libc::EXDEV)
    );
    assert_eq!(fs::read(v.p("ok")).unwrap(), b"x");
    // "ok" is the one inode the listing added.
    assert_eq!(fscrypt_fuse::live_inodes(), base + 1);
}
