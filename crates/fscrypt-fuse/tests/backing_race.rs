//! A backing object is the one the kernel looked up (issue 9 §3): readers
//! racing an atomic save (write a temporary file, rename it over `F`) must
//! only ever see whole versions, never another file's bytes decrypted with
//! the wrong key or size. Variants: rename over directories, RENAME_EXCHANGE
//! of two files, unlink + recreate under one name.
//!
//! Every version is its 8-byte version number repeated `len_of(v)` times, so
//! a read is either exactly one version or garbage. 5 s per variant by
//! default, 60 s with FSCRYPT_RS_LONG_TESTS=1.

use std::fs;
use std::io::ErrorKind;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use test_support::fuse::Vault;
use test_support::need_fuse;

/// Number of 8-byte words of version `v` (sizes differ per version and
/// cross data-unit boundaries).
fn len_of(v: u64) -> usize {
    1 + (v.wrapping_mul(7919) % 3000) as usize
}

fn version(v: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(len_of(v) * 8);
    for _ in 0..len_of(v) {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out
}

/// Whether `b` is exactly one written version.
fn whole(b: &[u8]) -> bool {
    if b.is_empty() || !b.len().is_multiple_of(8) {
        return false;
    }
    let v = u64::from_le_bytes(b[..8].try_into().unwrap());
    b.len() == len_of(v) * 8 && b.chunks_exact(8).all(|c| c == v.to_le_bytes())
}

#[derive(Default)]
struct Counts {
    ok: AtomicU64,
    garbage: AtomicU64,
    empty: AtomicU64,
    enoent: AtomicU64,
    estale: AtomicU64,
    other: AtomicU64,
}

impl Counts {
    fn read(&self, r: std::io::Result<Vec<u8>>) {
        match r {
            Ok(b) if b.is_empty() => self.empty.fetch_add(1, Ordering::Relaxed),
            Ok(b) if whole(&b) => self.ok.fetch_add(1, Ordering::Relaxed),
            Ok(_) => self.garbage.fetch_add(1, Ordering::Relaxed),
            Err(e) => self.error(&e),
        };
    }
    fn error(&self, e: &std::io::Error) -> u64 {
        if e.kind() == ErrorKind::NotFound {
            self.enoent.fetch_add(1, Ordering::Relaxed)
        } else if e.raw_os_error() == Some(libc::ESTALE) {
            self.estale.fetch_add(1, Ordering::Relaxed)
        } else {
            eprintln!("read error: {e}");
            self.other.fetch_add(1, Ordering::Relaxed)
        }
    }
    fn report(&self, what: &str) -> [u64; 6] {
        let c = [
            self.ok.load(Ordering::Relaxed),
            self.garbage.load(Ordering::Relaxed),
            self.empty.load(Ordering::Relaxed),
            self.enoent.load(Ordering::Relaxed),
            self.estale.load(Ordering::Relaxed),
            self.other.load(Ordering::Relaxed),
        ];
        eprintln!(
            "{what}: ok {} garbage {} empty {} ENOENT {} ESTALE {} other errors {}",
            c[0], c[1], c[2], c[3], c[4], c[5]
        );
        c
    }
}

/// Runs `writer` in one thread and `reader` in three until the time is up.
fn race(writer: impl Fn(u64) + Sync, reader: impl Fn(&Counts) + Sync) -> Counts {
    let counts = Counts::default();
    let stop = AtomicBool::new(false);
    let end = Instant::now() + test_support::env::duration(5, 60);
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut v = 10;
            while Instant::now() < end {
                writer(v);
                v += 1;
            }
            stop.store(true, Ordering::Relaxed);
        });
        for _ in 0..3 {
            s.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    reader(&counts);
                }
            });
        }
    });
    counts
}

fn save(dir: &Path, name: &str, v: u64) {
    let tmp = dir.join(format!("{name}.tmp"));
    fs::write(&tmp, version(v)).unwrap();
    fs::rename(&tmp, dir.join(name)).unwrap();
}

#[test]
fn atomic_save_never_reads_garbage() {
    need_fuse!();
    let v = Vault::new("race-save");
    let root = v.mnt.path().to_path_buf();
    save(&root, "F", 1);
    let f = v.p("F");
    let c = race(|n| save(&root, "F", n), |c| c.read(fs::read(&f)));
    let [ok, garbage, empty, enoent, estale, other] = c.report("atomic save");
    assert!(ok > 0, "no read succeeded");
    assert_eq!(garbage, 0, "reads returned bytes never written as a whole");
    assert_eq!(
        empty, 0,
        "reads of an always-complete file returned nothing"
    );
    // F always exists: the kernel retries an open that gets ESTALE once with
    // a fresh lookup, so neither error is expected.
    assert_eq!(enoent + estale + other, 0, "reads failed");
}

#[test]
fn exchange_of_two_files_never_reads_garbage() {
    need_fuse!();
    let v = Vault::new("race-xchg");
    fs::write(v.p("A"), version(1)).unwrap();
    fs::write(v.p("B"), version(2)).unwrap();
    let (a, b) = (v.p("A"), v.p("B"));
    let c = race(
        |_| {
            rustix::fs::renameat_with(
                rustix::fs::CWD,
                &a,
                rustix::fs::CWD,
                &b,
                rustix::fs::RenameFlags::EXCHANGE,
            )
            .unwrap();
        },
        |c| {
            c.read(fs::read(&a));
            c.read(fs::read(&b));
        },
    );
    let [ok, garbage, empty, enoent, estale, other] = c.report("exchange");
    assert!(ok > 0);
    assert_eq!(garbage, 0, "reads returned bytes never written as a whole");
    assert_eq!(empty, 0);
    assert_eq!(enoent + estale + other, 0, "reads failed");
}

#[test]
fn unlink_and_recreate_never_reads_garbage() {
    need_fuse!();
    let v = Vault::new("race-recreate");
    fs::write(v.p("F"), version(1)).unwrap();
    let f = v.p("F");
    let c = race(
        |n| {
            let _ = fs::remove_file(&f);
            fs::write(&f, version(n)).unwrap();
        },
        |c| c.read(fs::read(&f)),
    );
    let [ok, garbage, _empty, _enoent, _estale, other] = c.report("unlink+recreate");
    assert!(ok > 0);
    // Empty reads (between create and write) and ENOENT/ESTALE (between
    // unlink and create) are what a local filesystem gives too.
    assert_eq!(garbage, 0, "reads returned bytes never written as a whole");
    assert_eq!(other, 0, "reads failed");
}

#[test]
fn rename_over_directories_never_reads_garbage() {
    need_fuse!();
    let v = Vault::new("race-dirs");
    let root = v.mnt.path().to_path_buf();
    fs::create_dir(v.p("D")).unwrap();
    fs::write(v.p("D/data"), version(1)).unwrap();
    let d = v.p("D");
    let c = race(
        |n| {
            // Build the new directory, swap it in, remove the old one.
            let new = root.join("D.new");
            fs::create_dir(&new).unwrap();
            fs::write(new.join("data"), version(n)).unwrap();
            rustix::fs::renameat_with(
                rustix::fs::CWD,
                &new,
                rustix::fs::CWD,
                &d,
                rustix::fs::RenameFlags::EXCHANGE,
            )
            .unwrap();
            fs::remove_file(new.join("data")).unwrap();
            fs::remove_dir(&new).unwrap();
        },
        |c| {
            match fs::read_dir(&d) {
                Ok(rd) => {
                    let names: Result<Vec<_>, _> = rd.map(|e| e.map(|e| e.file_name())).collect();
                    match names {
                        Ok(n) if n == ["data"] => {}
                        // The old directory, emptied after the swap.
                        Ok(n) if n.is_empty() => {}
                        Ok(n) => {
                            eprintln!("unexpected listing {n:?}");
                            c.garbage.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(e) => {
                            c.error(&e);
                        }
                    }
                }
                Err(e) => {
                    c.error(&e);
                }
            }
            match fs::read(d.join("data")) {
                // The old directory, emptied after the swap: not an error.
                Err(e) if e.kind() == ErrorKind::NotFound => {}
                r => c.read(r),
            }
        },
    );
    let [ok, garbage, empty, _enoent, _estale, other] = c.report("rename over directories");
    assert!(ok > 0);
    assert_eq!(garbage, 0, "reads returned bytes never written as a whole");
    assert_eq!(empty, 0);
    assert_eq!(other, 0, "reads failed");
}
