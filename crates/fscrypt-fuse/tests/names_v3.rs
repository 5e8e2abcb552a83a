//! Format 3 tagged names and symlink targets (`docs/vault-format.md`
//! §4b.6 and §4b.7), driven through `EncryptedFs` without FUSE:
//! names of every length round-trip (inline and long), and each kind of
//! tampering with the backing store that format 2 shows as garbage is
//! hidden (names) or EIO (symlink targets) in format 3, and reported by
//! fsck with the key.

use std::ffi::OsStr;
use std::fs;
use std::path::{Path, PathBuf};

use fscrypt_fuse::layout::{self, EntryName, Format};
use fscrypt_fuse::vault::fsck;
use fscrypt_fuse::{Caller, EncryptedFs, InodeNo, ROOT};
use test_support::TempDir;
use test_support::fuse::{master, open_fs, policy};

const ME: Caller = Caller { uid: 0, gid: 0 };
const MARKER: &str = ".sync-conflict-20261205-101010-ABCDEFG";

fn vault(tag: &str, format: Format) -> (TempDir, EncryptedFs) {
    let dir = TempDir::new(tag);
    fscrypt_fuse::create_root_with(dir.path(), &policy(), format).unwrap();
    let fs = open_fs(&dir, true);
    assert_eq!(fs.format(), format);
    (dir, fs)
}

fn names(fs: &EncryptedFs, dir: InodeNo) -> Vec<String> {
    let fh = fs.opendir(dir).unwrap();
    let mut out = Vec::new();
    fs.readdir(fh, 0, |_, _, _, name| {
        out.push(name.to_string_lossy().into_owned());
        false
    })
    .unwrap();
    fs.releasedir(fh).unwrap();
    out.retain(|n| n != "." && n != "..");
    out.sort();
    out
}

fn touch(fs: &EncryptedFs, dir: InodeNo, name: &str) {
    let (_, fh) = fs
        .create(dir, OsStr::new(name), 0o600, libc::O_WRONLY, ME)
        .unwrap();
    fs.write(fh, 0, name.as_bytes()).unwrap();
    fs.release(fh).unwrap();
}

fn ino(fs: &EncryptedFs, dir: InodeNo, name: &str) -> InodeNo {
    InodeNo(fs.lookup(dir, OsStr::new(name)).unwrap().ino.0)
}

/// The entries of a backing directory that are not internal (names,
/// long names, conflict copies, foreign names), sorted.
fn backing_entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| layout::classify(n.as_bytes()) != EntryName::Internal)
        .collect();
    v.sort();
    v
}

/// `name` with its `i`-th character replaced by another base64url one.
fn flip_char(name: &str, i: usize) -> String {
    let mut b = name.as_bytes().to_vec();
    b[i] = if b[i] == b'A' { b'B' } else { b'A' };
    String::from_utf8(b).unwrap()
}

fn fsck_with_key(dir: &Path) -> fsck::Report {
    let m = master();
    fsck::check(
        dir,
        &policy(),
        &fsck::Options {
            master: Some(&m),
            ..fsck::Options::default()
        },
    )
    .unwrap()
}

/// The fsck kinds about names and symlink targets.
const NAME_KINDS: &[fsck::Kind] = &[
    fsck::Kind::BadName,
    fsck::Kind::BadNameLength,
    fsck::Kind::UndecryptableName,
    fsck::Kind::NonCanonicalName,
    fsck::Kind::BadNameTag,
    fsck::Kind::LongNameWithoutSideFile,
    fsck::Kind::BadSideFile,
    fsck::Kind::OrphanSideFile,
    fsck::Kind::BadSymlink,
    fsck::Kind::UndecryptableSymlink,
    fsck::Kind::BadSymlinkTag,
    fsck::Kind::BadStoreObject,
    fsck::Kind::UnreferencedStoreObject,
];

fn problems(r: &fsck::Report, kind: fsck::Kind) -> Vec<&fsck::Problem> {
    r.problems.iter().filter(|p| p.kind == kind).collect()
}

#[test]
fn names_of_every_length_round_trip_with_tags() {
    let (dir, fs) = vault("v3-names", Format::V3);
    let short = "a";
    let medium = "m".repeat(100);
    let long = "z".repeat(255);
    for n in [short, &medium, &long] {
        touch(&fs, ROOT, n);
    }
    let d = InodeNo(fs.mkdir(ROOT, OsStr::new("d"), 0o755, ME).unwrap().ino.0);
    fs.symlink(ROOT, OsStr::new("s"), b"a", ME).unwrap();
    let mut want = vec![
        short.to_string(),
        medium.clone(),
        long.clone(),
        "d".into(),
        "s".into(),
    ];
    want.sort();
    assert_eq!(names(&fs, ROOT), want);

    // The bytes: inline names decode to ciphertext ‖ 16-byte tag (PAD_32:
    // 32 or 128 bytes of ciphertext); the 255-byte name is long, its side
    // file holds 255 + 16 bytes.
    let mut longs = 0;
    for e in backing_entries(dir.path()) {
        match layout::classify(e.as_bytes()) {
            EntryName::Short(stored) => {
                assert!([48, 144].contains(&stored.len()), "{e}: {}", stored.len());
            }
            EntryName::Long => {
                longs += 1;
                let side = fs::read(dir.path().join(format!("{e}.name"))).unwrap();
                assert_eq!(side.len(), 271);
            }
            k => panic!("{e}: {k:?}"),
        }
    }
    assert_eq!(longs, 1);

    // Lookup, rename (inline ↔ long, across directories), unlink.
    for n in &want {
        fs.lookup(ROOT, OsStr::new(n)).unwrap();
    }
    let b200 = "b".repeat(200);
    fs.rename(ROOT, OsStr::new(short), ROOT, OsStr::new(&b200), 0)
        .unwrap();
    fs.rename(ROOT, OsStr::new(&long), ROOT, OsStr::new("c"), 0)
        .unwrap();
    fs.rename(ROOT, OsStr::new(&medium), d, OsStr::new("m2"), 0)
        .unwrap();
    assert_eq!(names(&fs, d), vec!["m2".to_string()]);
    let mut want = vec![b200.clone(), "c".into(), "d".into(), "s".into()];
    want.sort();
    assert_eq!(names(&fs, ROOT), want);
    assert_eq!(fs.readlink(ino(&fs, ROOT, "s")).unwrap(), b"a".to_vec());
    // The long name's side file moved with it: only the new one is left.
    let sides: Vec<_> = fs::read_dir(dir.path())
        .unwrap()
        .filter(|e| {
            let n = e.as_ref().unwrap().file_name();
            n.to_string_lossy().ends_with(".name")
        })
        .collect();
    assert_eq!(sides.len(), 1);
    fs.unlink(d, OsStr::new("m2")).unwrap();
    fs.unlink(ROOT, OsStr::new(&b200)).unwrap();
    assert!(names(&fs, d).is_empty());
    drop(fs);

    // A second mount sees the same; fsck finds nothing wrong with names
    // or symlinks (contents are checked elsewhere).
    let fs = open_fs(&dir, true);
    assert_eq!(names(&fs, ROOT), vec!["c", "d", "s"]);
    drop(fs);
    let r = fsck_with_key(dir.path());
    let bad: Vec<_> = r
        .problems
        .iter()
        .filter(|p| NAME_KINDS.contains(&p.kind))
        .collect();
    assert!(bad.is_empty(), "{bad:?}");

    // Locked: no-key names (tags unchecked, they need the key), lookups by
    // those names scan the directory, unlink works.
    touch(&open_fs(&dir, true), ROOT, &long);
    let fs = open_fs(&dir, false);
    let listed = names(&fs, ROOT);
    assert_eq!(listed.len(), 4);
    for n in &listed {
        assert!(!["c", "d", "s"].contains(&n.as_str()));
        fs.lookup(ROOT, OsStr::new(n)).unwrap();
    }
    for n in &listed {
        let a = fs.lookup(ROOT, OsStr::new(n)).unwrap();
        if a.kind == fuser::FileType::RegularFile {
            fs.unlink(ROOT, OsStr::new(n)).unwrap();
        }
    }
    assert_eq!(names(&fs, ROOT).len(), 2);
    assert_eq!(
        fs.lookup(
            ROOT,
            OsStr::new("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")
        )
        .unwrap_err()
        .errno(),
        libc::ENOENT
    );
}

/// The name whose backing name is changed: 32 bytes, so that its
/// ciphertext has no NUL padding, and any decryption of a changed one
/// without NUL or `/` is a name format 2 lists.
const TARGET: &str = "tttttttttttttttttttttttttttttttt";

/// Flips, one at a time, characters of the backing name of [`TARGET`] in
/// the root (all but the last, which would make the encoding
/// non-canonical) and returns, per flip, the names listed besides "other".
fn flipped_listings(format: Format) -> (Vec<Vec<String>>, TempDir) {
    let (dir, fs) = vault(&format!("flip-{format}"), format);
    touch(&fs, ROOT, "other");
    let other_b = backing_entries(dir.path()).remove(0);
    touch(&fs, ROOT, TARGET);
    drop(fs);
    let target_b = backing_entries(dir.path())
        .into_iter()
        .find(|n| *n != other_b)
        .unwrap();
    let mut out = Vec::new();
    for i in 0..target_b.len() - 1 {
        let flipped = flip_char(&target_b, i);
        let from = dir.path().join(&target_b);
        let to = dir.path().join(&flipped);
        fs::rename(&from, &to).unwrap();
        let fs = open_fs(&dir, true);
        let mut listed = names(&fs, ROOT);
        assert!(listed.contains(&"other".to_string()), "{listed:?}");
        listed.retain(|n| n != "other");
        assert!(!listed.contains(&TARGET.to_string()));
        // A lookup of the original name finds nothing.
        assert_eq!(
            fs.lookup(ROOT, OsStr::new(TARGET)).unwrap_err().errno(),
            libc::ENOENT
        );
        drop(fs);
        out.push(listed);
        fs::rename(&to, &from).unwrap();
    }
    (out, dir)
}

#[test]
fn a_changed_backing_name_is_hidden_in_v3_and_garbage_in_v2() {
    test_support::logs::capture(log::LevelFilter::Error);
    let (v3, dir) = flipped_listings(Format::V3);
    assert!(v3.iter().all(|l| l.is_empty()), "{v3:?}");
    assert!(v3.len() >= 40);
    // Each hidden name was logged by its backing path.
    let logs = test_support::logs::captured();
    let root = dir.path().display().to_string();
    assert!(
        logs.iter()
            .any(|l| l.contains(&root) && l.contains("name tag does not verify")),
        "{logs:?}"
    );
    // fsck with the key names it by backing path, without a plaintext path.
    let fs = open_fs(&dir, true);
    fs.unlink(ROOT, OsStr::new("other")).unwrap();
    drop(fs);
    let target = backing_entries(dir.path()).remove(0);
    let flipped = flip_char(&target, 3);
    fs::rename(dir.path().join(&target), dir.path().join(&flipped)).unwrap();
    let r = fsck_with_key(dir.path());
    let p = problems(&r, fsck::Kind::BadNameTag);
    assert_eq!(p.len(), 1, "{:?}", r.problems);
    assert_eq!(p[0].backing, flipped);
    assert_eq!(p[0].path, None);
    assert!(r.remaining() >= 1);

    // Format 2: the same flips list decrypted garbage (each unless the
    // garbage holds a NUL or `/`: about 1 in 4).
    let (v2, _dir) = flipped_listings(Format::V2);
    assert!(
        v2.iter().filter(|l| l.len() == 1).count() > v2.len() / 4,
        "{v2:?}"
    );
}

#[test]
fn conflict_copies_are_checked_on_the_name_without_the_marker() {
    let (dir, fs) = vault("v3-conflict", Format::V3);
    touch(&fs, ROOT, "x");
    touch(&fs, ROOT, &"y".repeat(200));
    for b in backing_entries(dir.path()) {
        let copy = String::from_utf8(fscrypt_fuse::vault::conflict::insert(
            b.as_bytes(),
            MARKER.as_bytes(),
        ))
        .unwrap();
        fs::copy(dir.path().join(&b), dir.path().join(copy)).unwrap();
    }
    let fs = open_fs(&dir, true);
    let shown: Vec<String> = names(&fs, ROOT);
    assert_eq!(shown.len(), 4, "{shown:?}");
    let copy_x = String::from_utf8(fscrypt_fuse::vault::conflict::insert(
        b"x",
        MARKER.as_bytes(),
    ))
    .unwrap();
    assert!(shown.contains(&copy_x));
    fs.lookup(ROOT, OsStr::new(&copy_x)).unwrap();
    // A copy of a changed name is hidden like the name.
    let short = backing_entries(dir.path())
        .into_iter()
        .find(|n| !n.starts_with("fscrypt") && !n.contains("sync-conflict"))
        .unwrap();
    let bad = String::from_utf8(fscrypt_fuse::vault::conflict::insert(
        flip_char(&short, 2).as_bytes(),
        MARKER.as_bytes(),
    ))
    .unwrap();
    fs::copy(dir.path().join(&short), dir.path().join(&bad)).unwrap();
    drop(fs);
    let fs = open_fs(&dir, true);
    assert_eq!(names(&fs, ROOT), shown);
}

/// The long-name entry of a backing directory and its side file.
fn long_entry(dir: &Path) -> (PathBuf, PathBuf) {
    let e = backing_entries(dir)
        .into_iter()
        .find(|n| n.starts_with(layout::LONG_PREFIX))
        .unwrap();
    (dir.join(&e), dir.join(format!("{e}.name")))
}

#[test]
fn a_changed_side_file_is_hidden_and_eio_in_v3() {
    let long = "q".repeat(240);
    for format in [Format::V3, Format::V2] {
        let (dir, fs) = vault(&format!("side-{format}"), format);
        touch(&fs, ROOT, &long);
        touch(&fs, ROOT, "other");
        drop(fs);
        let (entry, side) = long_entry(dir.path());
        let good = fs::read(&side).unwrap();

        // One byte of the side file changed.
        let mut bad = good.clone();
        bad[10] ^= 1;
        fs::write(&side, &bad).unwrap();
        let fs = open_fs(&dir, true);
        assert_eq!(names(&fs, ROOT), vec!["other".to_string()]);
        match format {
            // The side file is checked on lookup too.
            Format::V3 => assert_eq!(
                fs.lookup(ROOT, OsStr::new(&long)).unwrap_err().errno(),
                libc::EIO
            ),
            // Format 2 never reads it on lookup.
            _ => {
                fs.lookup(ROOT, OsStr::new(&long)).unwrap();
            }
        }
        drop(fs);

        // A consistent forgery: the changed ciphertext under the name its
        // hash gives (what anyone can compute without the key).
        let ct_len = match format {
            Format::V3 => good.len() - 16,
            _ => good.len(),
        };
        let forged_name = layout::BackingName::from_ciphertext(&bad[..ct_len]).name;
        let forged = dir.path().join(&forged_name);
        fs::rename(&entry, &forged).unwrap();
        fs::remove_file(&side).unwrap();
        fs::write(dir.path().join(format!("{forged_name}.name")), &bad).unwrap();
        let fs = open_fs(&dir, true);
        let listed = names(&fs, ROOT);
        match format {
            Format::V3 => assert_eq!(listed, vec!["other".to_string()]),
            // Garbage (or, rarely, nothing when the decryption is no name).
            _ => assert!(listed.len() <= 2 && !listed.contains(&long)),
        }
        drop(fs);
        if format == Format::V3 {
            let r = fsck_with_key(dir.path());
            let p = problems(&r, fsck::Kind::BadNameTag);
            assert_eq!(p.len(), 1, "{:?}", r.problems);
            assert_eq!(p[0].backing, format!("{forged_name}.name"));
        }
    }
}

#[test]
fn an_entry_moved_to_another_directory_is_hidden_in_v3() {
    let mut shown = Vec::new();
    for format in [Format::V3, Format::V2] {
        let (dir, fs) = vault(&format!("move-{format}"), format);
        let d1 = InodeNo(fs.mkdir(ROOT, OsStr::new("d1"), 0o755, ME).unwrap().ino.0);
        let d2 = InodeNo(fs.mkdir(ROOT, OsStr::new("d2"), 0o755, ME).unwrap().ino.0);
        assert_ne!(d1, d2);
        // 32-byte names: no NUL padding, so format 2 lists most of
        // their decryptions under another key; differing in their first
        // block, so the decryptions are independent (CBC-CTS).
        let names_in: Vec<String> = (0..12)
            .map(|i| format!("{i:02}{}", "b".repeat(30)))
            .collect();
        for n in &names_in {
            touch(&fs, d1, n);
        }
        touch(&fs, d1, &"w".repeat(230));
        touch(&fs, d2, "stays");
        drop(fs);
        // Tell the two backing directories apart: d1 has 13 entries.
        let dirs = backing_entries(dir.path());
        let (p0, p1) = (dir.path().join(&dirs[0]), dir.path().join(&dirs[1]));
        let (b1, b2) = if backing_entries(&p0).len() == 13 {
            (p0, p1)
        } else {
            (p1, p0)
        };
        for e in fs::read_dir(&b1).unwrap() {
            let n = e.unwrap().file_name();
            if n != "fscrypt.dir" {
                fs::rename(b1.join(&n), b2.join(&n)).unwrap();
            }
        }
        let fs = open_fs(&dir, true);
        let listed = names(&fs, ino(&fs, ROOT, "d2"));
        assert!(listed.contains(&"stays".to_string()));
        assert!(!names_in.iter().any(|n| listed.contains(n)));
        assert!(names(&fs, ino(&fs, ROOT, "d1")).is_empty());
        shown.push(listed.len() - 1);
        drop(fs);
        if format == Format::V3 {
            let r = fsck_with_key(dir.path());
            assert_eq!(
                problems(&r, fsck::Kind::BadNameTag).len(),
                13,
                "{:?}",
                r.problems
            );
            assert!(
                r.problems
                    .iter()
                    .filter(|p| p.kind == fsck::Kind::BadNameTag)
                    .all(|p| p.path.is_none())
            );
        }
    }
    // Format 3 hides all 13; format 2 lists garbage names for most.
    assert_eq!(shown[0], 0);
    assert!(shown[1] >= 3, "{shown:?}");
}

/// Replaces the backing symlink `link` by one to `target`.
fn relink(link: &Path, target: &str) {
    fs::remove_file(link).unwrap();
    std::os::unix::fs::symlink(target, link).unwrap();
}

#[test]
fn a_changed_symlink_target_is_eio_in_v3_and_garbage_in_v2() {
    test_support::logs::capture(log::LevelFilter::Error);
    let target = "some/where/over/the/rainbow/".repeat(3);
    let mut garbage = Vec::new();
    for format in [Format::V3, Format::V2] {
        let (dir, fs) = vault(&format!("symlink-{format}"), format);
        fs.symlink(ROOT, OsStr::new("s"), target.as_bytes(), ME)
            .unwrap();
        drop(fs);
        let link = dir.path().join(&backing_entries(dir.path())[0]);
        let good = fs::read_link(&link)
            .unwrap()
            .into_os_string()
            .into_string()
            .unwrap();
        let mut got = Vec::new();
        // Characters inside the encrypted target (past the 40-byte context
        // and 2-byte length), never the last.
        for i in (60..good.len() - 30).step_by(7) {
            relink(&link, &flip_char(&good, i));
            let fs = open_fs(&dir, true);
            let r = fs.readlink(ino(&fs, ROOT, "s"));
            got.push(r.map_err(|e| e.errno()));
            relink(&link, &good);
        }
        if format == Format::V3 {
            assert!(got.iter().all(|r| *r == Err(libc::EIO)), "{got:?}");
            let logs = test_support::logs::captured();
            assert!(
                logs.iter().any(|l| l.contains("symlink target tag")),
                "{logs:?}"
            );
            relink(&link, &flip_char(&good, 70));
            let r = fsck_with_key(dir.path());
            let p = problems(&r, fsck::Kind::BadSymlinkTag);
            assert_eq!(p.len(), 1, "{:?}", r.problems);
            assert_eq!(p[0].backing, backing_entries(dir.path())[0]);
        }
        garbage.push(
            got.iter()
                .filter(|r| matches!(r, Ok(t) if *t != target.as_bytes()))
                .count(),
        );
        assert!(
            !got.iter()
                .any(|r| matches!(r, Ok(t) if *t == target.as_bytes()))
        );
    }
    assert_eq!(garbage[0], 0);
    assert!(garbage[1] > 0, "{garbage:?}");
}

#[test]
fn a_changed_stored_symlink_target_is_eio_in_v3() {
    let target = "x/".repeat(1800);
    let mut v2_garbage = 0;
    for format in [Format::V3, Format::V2] {
        let (dir, fs) = vault(&format!("stored-{format}"), format);
        fs.symlink(ROOT, OsStr::new("s"), target.as_bytes(), ME)
            .unwrap();
        assert_eq!(fs.readlink(ino(&fs, ROOT, "s")).unwrap(), target.as_bytes());
        drop(fs);
        let store = dir.path().join(layout::SYMLINK_STORE_DIR);
        let obj = fs::read_dir(&store)
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        let good = fs::read(&obj).unwrap();
        // Bytes of the encrypted target (past the header, context and
        // length), one at a time.
        for at in [100usize, 700, 1500, 2500, 3500] {
            let mut bad = good.clone();
            bad[12 + 40 + at] ^= 0x20;
            if format == Format::V2 {
                // The SHA-256 checksum of format 2 is recomputed by anyone.
                let (ctx, mut blob) = layout::decode_store_object(&good).unwrap();
                blob[at] ^= 0x20;
                bad = layout::encode_store_object(&ctx, &blob);
            }
            fs::write(&obj, &bad).unwrap();
            let fs = open_fs(&dir, true);
            let r = fs.readlink(ino(&fs, ROOT, "s"));
            match format {
                Format::V3 => assert_eq!(r.unwrap_err().errno(), libc::EIO),
                // Garbage, unless the garbage holds a NUL.
                _ => match r {
                    Ok(t) => {
                        assert_ne!(t, target.as_bytes());
                        v2_garbage += 1;
                    }
                    Err(e) => assert_eq!(e.errno(), libc::EIO),
                },
            }
            drop(fs);
            if format == Format::V3 {
                let r = fsck_with_key(dir.path());
                let p = problems(&r, fsck::Kind::BadSymlinkTag);
                assert_eq!(p.len(), 1, "{:?}", r.problems);
                assert!(p[0].backing.starts_with(layout::SYMLINK_STORE_DIR));
            }
        }
    }
    assert!(v2_garbage > 0);
}

/// The backing entry (in the backing root) behind mount path `p`.
fn backing_of(v: &test_support::fuse::Vault, p: &Path) -> PathBuf {
    use std::os::unix::fs::MetadataExt;
    let ino = fs::symlink_metadata(p).unwrap().ino();
    fs::read_dir(v.backing.path())
        .unwrap()
        .map(|e| e.unwrap())
        .find(|e| e.metadata().unwrap().ino() == ino)
        .unwrap()
        .path()
}

#[test]
fn through_a_mount() {
    if !test_support::fuse_available(module_path!()) {
        return;
    }
    let mut v = test_support::fuse::Vault::with_format("v3-mount", policy(), Format::V3);
    let medium = "m".repeat(100);
    let long = "z".repeat(255);
    for n in ["a", medium.as_str(), long.as_str()] {
        fs::write(v.p(n), n).unwrap();
    }
    // Inline symlink targets hold 16 bytes less than in format 2 (3028).
    let t = |n: usize| "abcdefgh/xyz".repeat(400)[..n].to_string();
    for n in [3012, 3013] {
        std::os::unix::fs::symlink(t(n), v.p(&format!("s{n}"))).unwrap();
        let backing = fs::read_link(backing_of(&v, &v.p(&format!("s{n}")))).unwrap();
        let inline = !backing.to_string_lossy().starts_with("fscrypt.");
        assert_eq!(inline, n == 3012, "{n}");
        assert_eq!(
            fs::read_link(v.p(&format!("s{n}"))).unwrap().to_str(),
            Some(t(n).as_str())
        );
    }
    let listed = |v: &test_support::fuse::Vault| {
        let mut l: Vec<String> = fs::read_dir(v.mnt.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        l.sort();
        l
    };
    let mut all = vec![
        "a".to_string(),
        medium.clone(),
        long.clone(),
        "s3012".into(),
        "s3013".into(),
    ];
    all.sort();
    assert_eq!(listed(&v), all);

    // Tamper with the backing name of "a" and the inline target of s3012.
    let a = backing_of(&v, &v.p("a"));
    let name = a.file_name().unwrap().to_str().unwrap().to_string();
    let link = backing_of(&v, &v.p("s3012"));
    let good = fs::read_link(&link)
        .unwrap()
        .into_os_string()
        .into_string()
        .unwrap();
    v.mount.take().unwrap().unmount().unwrap();
    fs::rename(&a, v.backing.path().join(flip_char(&name, 5))).unwrap();
    relink(&link, &flip_char(&good, 2000));
    v.remount(true);
    all.retain(|n| n != "a");
    assert_eq!(listed(&v), all);
    assert_eq!(
        fs::metadata(v.p("a")).unwrap_err().raw_os_error(),
        Some(libc::ENOENT)
    );
    assert_eq!(
        fs::read_link(v.p("s3012")).unwrap_err().raw_os_error(),
        Some(libc::EIO)
    );
    assert_eq!(fs::read(v.p(&long)).unwrap(), long.as_bytes());
}
