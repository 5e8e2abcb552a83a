//! Real-mount tests of the locked mount (issue 5 §5: no-key names, ENOKEY)
//! and of robustness against corrupt backing content (issue 5 §6).

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use fscrypt_fuse::layout::Format;
use test_support::bytes::XorShift;
use test_support::fuse::Vault;
use test_support::{is_mounted, need_fuse};

#[track_caller]
fn errno<T: std::fmt::Debug>(r: std::io::Result<T>) -> Option<i32> {
    r.unwrap_err().raw_os_error()
}

/// Backing entries of a backing directory that are user entries (no '.').
fn backing_entries(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| !p.file_name().unwrap().to_string_lossy().contains('.'))
        .collect();
    v.sort();
    v
}

#[test]
fn locked_mount_has_kernel_semantics() {
    need_fuse!();
    let mut v = Vault::new("locked");
    fs::write(v.p("file"), b"secret contents").unwrap();
    fs::create_dir(v.p("dir")).unwrap();
    fs::create_dir(v.p("empty")).unwrap();
    fs::write(v.p("dir/inner"), b"inner").unwrap();
    std::os::unix::fs::symlink("file", v.p("link")).unwrap();
    fs::write(v.p(&"n".repeat(200)), b"long name").unwrap();
    v.remount(false);

    let names: Vec<String> = fs::read_dir(v.mnt.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names.len(), 5);
    for n in &names {
        assert!(!["file", "dir", "empty", "link"].contains(&n.as_str()));
        assert!(
            fscrypt::nokey::NoKeyName::decode(n.as_bytes()).is_ok(),
            "not a no-key name: {n}"
        );
        // Lookup by the no-key name works; stat works.
        let m = fs::symlink_metadata(v.p(n)).unwrap();
        if m.is_file() {
            assert!(m.len() == 15 || m.len() == 9);
            // Contents need the key.
            assert_eq!(errno(File::open(v.p(n))), Some(libc::ENOKEY));
            assert_eq!(
                errno(OpenOptions::new().write(true).open(v.p(n))),
                Some(libc::ENOKEY)
            );
        }
        if m.file_type().is_symlink() {
            let t = fs::read_link(v.p(n)).unwrap();
            assert_eq!(
                m.len(),
                t.as_os_str().len() as u64,
                "symlink st_size = presented target length"
            );
            assert_ne!(t.to_str(), Some("file"));
        }
    }
    // Creating entries needs the key.
    assert_eq!(errno(File::create(v.p("new"))), Some(libc::ENOKEY));
    assert_eq!(errno(fs::create_dir(v.p("newdir"))), Some(libc::ENOKEY));
    assert_eq!(
        errno(std::os::unix::fs::symlink("x", v.p("newlink"))),
        Some(libc::ENOKEY)
    );
    // Renames need the key (spec §8.1, as the kernel).
    assert_eq!(
        errno(fs::rename(
            v.p(&names[0]),
            v.p("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")
        )),
        Some(libc::ENOKEY)
    );
    // Deletion works: the directory "dir" holds one entry, "empty" none.
    let mut dirs: Vec<&String> = names
        .iter()
        .filter(|n| fs::symlink_metadata(v.p(n)).unwrap().is_dir())
        .collect();
    dirs.sort_by_key(|n| fs::read_dir(v.p(n)).unwrap().count());
    let (empty, full) = (dirs[0].clone(), dirs[1].clone());
    let inner: Vec<String> = fs::read_dir(v.p(&full))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(inner.len(), 1);
    assert_eq!(errno(fs::remove_dir(v.p(&full))), Some(libc::ENOTEMPTY));
    fs::remove_file(v.p(&format!("{full}/{}", inner[0]))).unwrap();
    fs::remove_dir(v.p(&full)).unwrap();
    fs::remove_dir(v.p(&empty)).unwrap();
    for n in &names {
        if let Ok(m) = fs::symlink_metadata(v.p(n))
            && m.len() == 9
        {
            fs::remove_file(v.p(n)).unwrap(); // the long-named file
        }
    }
    // With the key again: what is left is intact.
    v.remount(true);
    let mut left: Vec<String> = fs::read_dir(v.mnt.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    left.sort();
    assert_eq!(left, ["file", "link"]);
    assert_eq!(fs::read(v.p("link")).unwrap(), b"secret contents");
    // No orphan side files of the deleted long name remain.
    let internal: Vec<_> = fs::read_dir(v.backing.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.contains('.'))
        .collect();
    assert_eq!(internal, ["fscrypt.dir"]);
}

#[test]
fn corrupt_backing_objects_give_eio_and_the_mount_stays_up() {
    need_fuse!();
    corrupt_objects(Format::V1);
    corrupt_objects(Format::V2);
    corrupt_objects(Format::V3);
}

fn corrupt_objects(format: Format) {
    let mut v = Vault::with_format("corrupt", test_support::fuse::policy(), format);
    for name in ["a-short-header", "b-bad-checksum", "c-bad-length", "d-good"] {
        fs::write(v.p(name), vec![b'x'; 5000]).unwrap();
    }
    fs::create_dir(v.p("e-dir")).unwrap();
    fs::write(v.p("e-dir/inner"), b"i").unwrap();
    std::os::unix::fs::symlink("target", v.p("f-link")).unwrap();
    // Map plaintext names to backing paths by inode number.
    let mut by_ino = std::collections::HashMap::new();
    for b in backing_entries(v.backing.path()) {
        by_ino.insert(fs::symlink_metadata(&b).unwrap().ino(), b);
    }
    let backing_of = |name: &str| by_ino[&fs::symlink_metadata(v.p(name)).unwrap().ino()].clone();
    let a = backing_of("a-short-header");
    let b = backing_of("b-bad-checksum");
    let c = backing_of("c-bad-length");
    let e = backing_of("e-dir");
    let f = backing_of("f-link");
    v.mount.take().unwrap().unmount().unwrap();

    OpenOptions::new()
        .write(true)
        .open(&a)
        .unwrap()
        .set_len(30)
        .unwrap();
    let mut bytes = fs::read(&b).unwrap();
    bytes[60] ^= 1;
    fs::write(&b, bytes).unwrap();
    match format {
        Format::V1 => OpenOptions::new()
            .append(true)
            .open(&c)
            .unwrap()
            .write_all(b"junk!")
            .unwrap(),
        // Format 2: any length of 4096 + m with m > DU encodes a size; one
        // with 0 < m < DU and m not a multiple of DU does not (format 3:
        // nor is it the length hint of any size).
        Format::V2 | Format::V3 => OpenOptions::new()
            .write(true)
            .open(&c)
            .unwrap()
            .set_len(4096 + 5)
            .unwrap(),
    }
    let meta = e.join("fscrypt.dir");
    let mut m = fs::read(&meta).unwrap();
    m[20] ^= 0xff;
    fs::write(&meta, m).unwrap();
    fs::remove_file(&f).unwrap();
    std::os::unix::fs::symlink("not base64!", &f).unwrap();
    // A foreign name and an undecryptable one.
    fs::write(v.backing.path().join("AAAA"), b"junk").unwrap();
    v.remount(true);

    for name in ["a-short-header", "b-bad-checksum", "c-bad-length"] {
        let r = fs::read(v.p(name));
        assert_eq!(r.unwrap_err().raw_os_error(), Some(libc::EIO), "{name}");
    }
    assert_eq!(
        errno(fs::read_dir(v.p("e-dir")).and_then(|d| d.collect::<Result<Vec<_>, _>>())),
        Some(libc::EIO)
    );
    assert_eq!(errno(fs::read_link(v.p("f-link"))), Some(libc::EIO));
    // The rest of the mount keeps working.
    assert_eq!(fs::read(v.p("d-good")).unwrap(), vec![b'x'; 5000]);
    let names: Vec<String> = fs::read_dir(v.mnt.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(names.contains(&"d-good".to_string()));
    assert!(!names.iter().any(|n| n == "AAAA"));
    fs::write(v.p("after"), b"still up").unwrap();
    assert_eq!(fs::read(v.p("after")).unwrap(), b"still up");
    // Damaged files can still be deleted.
    fs::remove_file(v.p("c-bad-length")).unwrap();
}

#[test]
fn corruption_is_logged_with_the_backing_path() {
    need_fuse!();
    // The mount runs in a thread of this process: its records land here.
    test_support::logs::capture(log::LevelFilter::Error);
    let mut v = Vault::new("corrupt-log");
    fs::write(v.p("victim"), b"data").unwrap();
    let b = backing_entries(v.backing.path());
    assert_eq!(b.len(), 1);
    v.mount.take().unwrap().unmount().unwrap();
    let mut bytes = fs::read(&b[0]).unwrap();
    bytes[0] = b'X';
    fs::write(&b[0], bytes).unwrap();
    v.remount(true);
    assert_eq!(
        fs::read(v.p("victim")).unwrap_err().raw_os_error(),
        Some(libc::EIO)
    );
    let logs = test_support::logs::captured();
    let want = b[0].display().to_string();
    assert!(
        logs.iter().any(|l| l.contains(&want)),
        "no log line names {want}: {logs:#?}"
    );
}

/// Deterministic pseudo-random bytes.
fn garbage(seed: &mut XorShift, n: usize) -> Vec<u8> {
    (0..n).map(|_| seed.next_u64() as u8).collect()
}

#[test]
fn garbage_in_the_backing_store_never_brings_the_mount_down() {
    need_fuse!();
    let mut v = Vault::new("garbage");
    fs::create_dir_all(v.p("a/b")).unwrap();
    for (i, name) in ["x", "a/y", "a/b/z", &"l".repeat(220)].iter().enumerate() {
        fs::write(v.p(name), vec![i as u8; 5000 + i * 3000]).unwrap();
    }
    std::os::unix::fs::symlink("x", v.p("a/s")).unwrap();
    v.mount.take().unwrap().unmount().unwrap();
    let mut seed = XorShift(0x9e37_79b9_7f4a_7c15);
    let all = test_support::tree::walk(v.backing.path());
    // The root's context must stay (without it the vault does not mount).
    let root_meta = v.backing.path().join("fscrypt.dir");
    for (k, p) in all.iter().enumerate() {
        let m = fs::symlink_metadata(p).unwrap();
        if m.file_type().is_symlink() {
            fs::remove_file(p).unwrap();
            let t: String = garbage(&mut seed, 200)
                .iter()
                .map(|b| (b'A' + b % 26) as char)
                .collect();
            std::os::unix::fs::symlink(t, p).unwrap();
        } else if m.is_file()
            && *p != root_meta
            && (p.file_name().unwrap() != "fscrypt.dir" || k % 3 == 0)
        {
            let len = (garbage(&mut seed, 1)[0] as usize) * 40;
            fs::write(p, garbage(&mut seed, len)).unwrap();
        }
    }
    // Foreign entries with names in our alphabet.
    fs::write(v.backing.path().join("QUFBQUFBQUFBQUFBQUFBQUFB"), b"?").unwrap();
    fs::create_dir(v.backing.path().join("QkJCQkJCQkJCQkJCQkJCQkJC")).unwrap();
    v.remount(true);
    // Touch everything; errors are fine, a dead mount is not.
    let seen = test_support::tree::walk(v.mnt.path());
    for p in &seen {
        let _ = fs::symlink_metadata(p);
        let _ = fs::read(p);
        let _ = fs::read_link(p);
        let _ = fs::read_dir(p).map(|d| d.count());
    }
    for name in ["x", "a", "a/y", "a/b", "a/b/z", "a/s"] {
        let _ = fs::read(v.p(name));
        let _ = fs::write(v.p(name), b"overwrite");
    }
    assert!(is_mounted(v.mnt.path()));
    fs::write(v.p("fresh"), b"alive").unwrap();
    assert_eq!(fs::read(v.p("fresh")).unwrap(), b"alive");
}

#[test]
fn units_past_the_size_after_a_crash_never_reappear() {
    need_fuse!();
    // Format 1 only: in format 2 the length is the size, nothing is stored
    // past it (a crash between data and length: crash_points.rs).
    let mut v = Vault::with_format("crash", test_support::fuse::policy(), Format::V1);
    fs::write(v.p("by-open"), vec![b'a'; 5000]).unwrap();
    fs::write(v.p("by-path"), vec![b'a'; 5000]).unwrap();
    let backing = backing_entries(v.backing.path());
    v.mount.take().unwrap().unmount().unwrap();
    // Simulate an extending write whose size update was lost: a stored unit
    // (any non-zero bytes) past the units that cover the recorded size.
    for b in &backing {
        let mut f = OpenOptions::new().append(true).open(b).unwrap();
        f.write_all(&[0x5a; 4096]).unwrap();
    }
    v.remount(true);
    // (Stat only for "by-path": any open repairs the file.)
    assert_eq!(fs::metadata(v.p("by-path")).unwrap().len(), 5000);
    assert_eq!(fs::read(v.p("by-open")).unwrap(), vec![b'a'; 5000]);
    // Grow through an open fd, and by path without any open fd.
    let f = OpenOptions::new().write(true).open(v.p("by-open")).unwrap();
    f.set_len(20_000).unwrap();
    drop(f);
    truncate_path(&v.p("by-path"), 20_000);
    let c2 = fs::read(v.p("by-path")).unwrap();
    let c1 = fs::read(v.p("by-open")).unwrap();
    for c in [c1, c2] {
        assert_eq!(c.len(), 20_000);
        assert!(c[..5000].iter().all(|&b| b == b'a'));
        assert!(
            c[5000..].iter().all(|&b| b == 0),
            "stale unit became visible"
        );
    }
}

/// truncate(2) on a path: the kernel sends SETATTR without opening the file.
#[allow(unsafe_code)]
fn truncate_path(p: &Path, len: i64) {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(p.as_os_str().as_bytes()).unwrap();
    // SAFETY: `c` is a valid NUL-terminated path that outlives the call.
    let r = unsafe { libc::truncate(c.as_ptr(), len) };
    assert_eq!(r, 0, "truncate({}) failed", p.display());
}
