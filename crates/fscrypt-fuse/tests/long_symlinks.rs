//! Symlink targets up to PATH_MAX − 1 (4095 bytes) through a real mount:
//! targets up to 3028 bytes (format 2; 3012 in format 3, whose inline
//! target also carries a 16-byte tag) stay inline in the backing symlink,
//! longer ones go to the symlink store (`fscrypt.symlinks/`,
//! `docs/vault-format.md` §6); 4096 bytes give ENAMETOOLONG.

use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use fscrypt_fuse::layout::{Format, SYMLINK_MAX_BLOB};
use fscrypt_fuse::vault::integrity::symlinks::SYMLINK_MAX_BLOB_V3;
use test_support::fuse::Vault;
use test_support::fuse_available;

fn target(len: usize) -> Vec<u8> {
    (0..len).map(|i| b"abcdefgh/xyz"[i % 12]).collect()
}

fn store_objects(backing: &Path) -> usize {
    fs::read_dir(backing.join("fscrypt.symlinks"))
        .map(|rd| rd.count())
        .unwrap_or(0)
}

/// The backing symlink behind mount path `p` (found by inode number).
fn backing_target(v: &Vault, p: &Path) -> Vec<u8> {
    let ino = fs::symlink_metadata(p).unwrap().ino();
    for e in fs::read_dir(v.backing.path()).unwrap() {
        let e = e.unwrap();
        if e.metadata().unwrap().ino() == ino {
            return fs::read_link(e.path())
                .unwrap()
                .into_os_string()
                .into_encoded_bytes();
        }
    }
    panic!("no backing entry for {}", p.display());
}

#[test]
fn symlink_targets_up_to_4095_bytes_round_trip() {
    if !fuse_available(module_path!()) {
        return;
    }
    let mut v = Vault::new("longsym");
    // Largest inline ciphertext: the blob less its 2-byte length and NUL.
    let max_inline = match Format::LATEST {
        Format::V3 => SYMLINK_MAX_BLOB_V3,
        _ => SYMLINK_MAX_BLOB,
    } - 3;
    let lens = [
        1usize,
        max_inline - 20,
        max_inline,
        max_inline + 1,
        4094,
        4095,
    ];
    for &n in &lens {
        std::os::unix::fs::symlink(OsStr::from_bytes(&target(n)), v.p(&format!("s{n}")))
            .unwrap_or_else(|e| panic!("symlink of {n} bytes: {e}"));
        let inline = !backing_target(&v, &v.p(&format!("s{n}"))).starts_with(b"fscrypt.");
        assert_eq!(inline, n <= max_inline, "{n} bytes: inline iff it fits");
    }
    assert_eq!(store_objects(v.backing.path()), 3);
    let err =
        std::os::unix::fs::symlink(OsStr::from_bytes(&target(4096)), v.p("s4096")).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::ENAMETOOLONG));
    let check = |v: &Vault| {
        for &n in &lens {
            let p = v.p(&format!("s{n}"));
            let t = fs::read_link(&p).unwrap();
            assert_eq!(t.as_os_str().as_bytes(), &target(n)[..], "{n} bytes");
            assert_eq!(fs::symlink_metadata(&p).unwrap().len(), n as u64);
        }
    };
    check(&v);
    v.remount(true);
    check(&v);

    // Locked: the no-key form of a stored target, as of an inline one.
    v.remount(false);
    for e in fs::read_dir(v.mnt.path()).unwrap() {
        let t = fs::read_link(e.unwrap().path()).unwrap();
        assert!(!t.as_os_str().is_empty());
    }
    v.remount(true);

    // Hard link, rename over, unlink: the store object goes with the last link.
    fs::hard_link(v.p("s4095"), v.p("h4095")).unwrap();
    fs::remove_file(v.p("s4095")).unwrap();
    assert_eq!(store_objects(v.backing.path()), 3);
    assert_eq!(
        fs::read_link(v.p("h4095")).unwrap().as_os_str().as_bytes(),
        &target(4095)[..]
    );
    fs::write(v.p("plain"), b"x").unwrap();
    fs::rename(v.p("plain"), v.p("h4095")).unwrap();
    assert_eq!(store_objects(v.backing.path()), 2);
    fs::remove_file(v.p(&format!("s{}", max_inline + 1))).unwrap();
    fs::remove_file(v.p("s4094")).unwrap();
    assert_eq!(store_objects(v.backing.path()), 0);
    fs::create_dir(v.p("d")).unwrap();
    std::os::unix::fs::symlink(OsStr::from_bytes(&target(4000)), v.p("d/s")).unwrap();
    fs::rename(v.p("d/s"), v.p("moved")).unwrap();
    v.remount(true);
    assert_eq!(
        fs::read_link(v.p("moved")).unwrap().as_os_str().as_bytes(),
        &target(4000)[..]
    );
}
