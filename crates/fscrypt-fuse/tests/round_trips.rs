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
use std::time::{Duration, Instant};

use fscrypt_fuse::{Op, StatsSnapshot};
use test_support::fuse::Vault;
use test_support::fuse_available;

fn stats(v: &Vault) -> StatsSnapshot {
    v.mount.as_ref().expect("mounted").stats()
}

fn per(what: &str, n: usize, d: &StatsSnapshot) {
    let mut line = format!(
        "{what:<28} {:>6.2} requests per file:",
        d.total() as f64 / n as f64
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

/// `ls -l`: list, then lstat every entry.
fn ls_l(v: &Vault) -> usize {
    let mut n = 0;
    for e in fs::read_dir(v.p("d")).unwrap() {
        let e = e.unwrap();
        let m = fs::symlink_metadata(e.path()).unwrap();
        assert_eq!(m.len(), 4096);
        n += 1;
    }
    n
}

#[test]
fn requests_per_operation() {
    if !fuse_available(module_path!()) {
        return;
    }
    let n = 1000;
    let mut v = Vault::new("round-trips");
    let d = populate(&v, n);
    per("create+write 4096+close", n, &d);

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

/// Entries returned by readdirplus are kernel lookups: once the kernel
/// forgets them (drop_caches), the inode table is back to its baseline.
/// "." and ".." are no lookups (counting them would leak the directory).
#[test]
fn readdirplus_lookups_are_forgotten() {
    if !fuse_available(module_path!()) {
        return;
    }
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
