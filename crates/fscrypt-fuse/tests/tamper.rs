//! Issue 22: the tamper tests of the authenticated vault (format 3,
//! `docs/design/vault-format-3.md`). Each attack is made on the BACKING
//! directory the way an attacker would: the vault is unmounted, its backing
//! files are changed with `std::fs`, and it is mounted again. Then:
//!
//! - format 3: reading the attacked file through the mount fails with EIO,
//!   and exactly one log line names its backing object and inode, without
//!   any plaintext (name or contents); the other files still read and the
//!   mount stays up;
//! - format 2 (the same attack): the old, undetected behaviour (garbage or
//!   another file's bytes, a silently shorter or longer file), which is what
//!   format 3 fixes.
//!
//! Attacks: a flipped byte in a data unit (first unit, a unit of the second
//! tag group, the last partial unit); two units of a file swapped; a unit
//! copied from another file at the same index; the backing file truncated
//! and extended; backing objects swapped, moved into another directory
//! under a file's name, copied under another name; a file put back to an
//! earlier version of itself (rollback), with `fsck --accept-rollback` and
//! a machine that never saw the newer version (the known limit). Renames
//! and hard links made through the mount keep files readable.

use std::fs;
use std::io::ErrorKind;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use fscrypt_fuse::layout::{Format, HEADER_SIZE};
use fscrypt_fuse::vault::fsck;
use fscrypt_fuse::vault::integrity::generations::GenerationStore;
use fscrypt_fuse::vault::integrity::units;
use test_support::TempDir;
use test_support::fuse::{Vault, master, policy};
use test_support::fuse_available;
use test_support::tree::user_entries;

/// The data unit size of the default policy.
const DU: u64 = 4096;

/// A marker in every file's plaintext and name: must never reach the logs.
const SECRET: &str = "SeCrEtPlAiNtExT";

/// `n` bytes of plaintext for file `tag`: the marker and a counter, so that
/// every unit of every file differs.
fn plain(tag: &str, n: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(n + 64);
    let mut i = 0u64;
    while out.len() < n {
        out.extend_from_slice(format!("{SECRET}-{tag}-{i:08}\n").as_bytes());
        i += 1;
    }
    out.truncate(n);
    out
}

/// Writes `data` to `rel` through the mount; returns the backing object
/// that appeared for it (in backing directory `bdir`).
fn put(v: &Vault, bdir: &Path, rel: &str, data: &[u8]) -> PathBuf {
    let before = user_entries(bdir);
    fs::write(v.p(rel), data).unwrap();
    let new: Vec<PathBuf> = user_entries(bdir)
        .into_iter()
        .filter(|p| !before.contains(p))
        .collect();
    assert_eq!(new.len(), 1, "{rel}: one new backing entry: {new:?}");
    new[0].clone()
}

/// Unmounts the vault (the attacker works on the backing dir offline).
fn down(v: &mut Vault) {
    if let Some(m) = v.mount.take() {
        m.unmount().expect("unmount");
    }
}

/// Backing offset of data unit `i` in `format`.
fn unit_at(format: Format, i: u64) -> u64 {
    match format {
        Format::V3 => units::unit_offset(i, DU).unwrap(),
        _ => HEADER_SIZE + i * DU,
    }
}

fn read_unit(path: &Path, format: Format, i: u64) -> Vec<u8> {
    let b = fs::read(path).unwrap();
    let o = unit_at(format, i) as usize;
    b[o..o + DU as usize].to_vec()
}

fn write_at(path: &Path, off: u64, bytes: &[u8]) {
    use std::os::unix::fs::FileExt;
    let f = fs::OpenOptions::new().write(true).open(path).unwrap();
    f.write_all_at(bytes, off).unwrap();
}

fn flip(path: &Path, off: u64) {
    let mut b = fs::read(path).unwrap();
    b[off as usize] ^= 0x40;
    fs::write(path, b).unwrap();
}

/// The captured log lines mentioning `backing`.
fn lines_naming(backing: &Path) -> Vec<String> {
    let shown = backing.display().to_string();
    test_support::logs::captured()
        .into_iter()
        .filter(|l| l.contains(&shown))
        .collect()
}

/// Format 3's verdict on an attacked file: EIO on read, exactly one
/// "corrupt backing object" line naming `backing` and an inode (the inode
/// `rel` has in the mount when it can still be stat'ed), containing
/// `reason`; no plaintext in any log line.
fn assert_detected(v: &Vault, rel: &str, backing: &Path, reason: &str) {
    let err = fs::read(v.p(rel)).expect_err("format 3 must refuse the attacked file");
    assert_eq!(err.raw_os_error(), Some(libc::EIO), "{rel}: {err}");
    let lines = lines_naming(backing);
    assert_eq!(lines.len(), 1, "{rel}: one log line: {lines:?}");
    let l = &lines[0];
    assert!(l.contains("corrupt backing object"), "{l}");
    assert!(l.contains(reason), "{l} lacks {reason:?}");
    match fs::metadata(v.p(rel)) {
        Ok(m) => assert!(l.contains(&format!("(inode {})", m.ino())), "{l}"),
        Err(_) => assert!(l.contains("(inode "), "{l}"),
    }
    for l in test_support::logs::captured() {
        assert!(!l.contains(SECRET), "plaintext in the logs: {l}");
    }
}

/// The other files still read as written, and the mount is still up.
fn bystanders_fine(v: &Vault, files: &[(&str, &[u8])]) {
    for (rel, data) in files {
        assert_eq!(&fs::read(v.p(rel)).unwrap()[..], *data, "{rel}");
    }
    fs::read_dir(v.mnt.path()).unwrap().for_each(drop);
    fs::write(v.p("after-attack"), b"still writable").unwrap();
    assert_eq!(fs::read(v.p("after-attack")).unwrap(), b"still writable");
}

fn start(tag: &str, format: Format) -> Option<Vault> {
    if !fuse_available(tag) {
        return None;
    }
    test_support::logs::capture(log::LevelFilter::Error);
    Some(Vault::with_format(tag, policy(), format))
}

/// Runs attack `attack` (on the unmounted backing dir; gets the backing
/// object of `victim` and of `other`) on a vault of `format` holding
/// `victim` (of `n` bytes) and `other` (of `n` bytes, same directory), and
/// a bystander in a subdirectory. Format 3: detected with `reason`;
/// format 2: the read succeeds with wrong bytes.
fn run(
    tag: &str,
    format: Format,
    n: usize,
    reason: &str,
    old: fn(&[u8], &[u8]),
    attack: impl Fn(&Path, &Path),
) {
    let Some(mut v) = start(&format!("{tag}-{format:?}"), format) else {
        return;
    };
    let root = v.backing.path().to_path_buf();
    let victim_plain = plain("victim", n);
    let other_plain = plain("other", n);
    let by_plain = plain("bystander", 9000);
    let victim = put(&v, &root, &format!("victim-{SECRET}"), &victim_plain);
    let other = put(&v, &root, "other", &other_plain);
    fs::create_dir(v.p("sub")).unwrap();
    put(
        &v,
        &user_entries(&root)
            .into_iter()
            .find(|p| p.is_dir())
            .unwrap(),
        "sub/by",
        &by_plain,
    );
    down(&mut v);
    let other_before = fs::read(&other).unwrap();
    attack(&victim, &other);
    // `other` is a bystander unless the attack changed it too.
    let other_kept = fs::read(&other).unwrap() == other_before;
    v.remount(true);
    let rel = format!("victim-{SECRET}");
    match format {
        Format::V3 => {
            assert_detected(&v, &rel, &victim, reason);
            let mut fine: Vec<(&str, &[u8])> = vec![("sub/by", &by_plain)];
            if other_kept {
                fine.push(("other", &other_plain));
            }
            bystanders_fine(&v, &fine);
        }
        _ => {
            let got = fs::read(v.p(&rel)).expect("format 2 does not notice");
            old(&got, &victim_plain);
        }
    }
}

/// [`run`] on format 3 and format 2; format 2 reads wrong bytes.
fn both(tag: &str, n: usize, reason: &str, attack: impl Fn(Format, &Path, &Path)) {
    both_old(tag, n, reason, differs, attack);
}

/// [`run`] on format 3 and format 2, where `old(got, plaintext)` asserts
/// what format 2 read.
fn both_old(
    tag: &str,
    n: usize,
    reason: &str,
    old: fn(&[u8], &[u8]),
    attack: impl Fn(Format, &Path, &Path),
) {
    for format in [Format::V3, Format::V2] {
        run(tag, format, n, reason, old, |a, b| attack(format, a, b));
    }
}

/// Format 2's old behaviour: wrong bytes, silently.
fn differs(got: &[u8], want: &[u8]) {
    assert!(got != want, "format 2 reads the attacked bytes");
}

/// Format 2's old behaviour: a silently shorter file (a prefix of it).
fn shorter(got: &[u8], want: &[u8]) {
    assert!(got.len() < want.len(), "{} !< {}", got.len(), want.len());
    assert!(want.starts_with(got));
}

/// Format 2's old behaviour: silently new bytes after the contents.
fn longer(got: &[u8], want: &[u8]) {
    assert!(got.len() > want.len(), "{} !> {}", got.len(), want.len());
    assert!(got.starts_with(want));
}

// 1. One byte flipped in a data unit.

#[test]
fn flipped_byte_in_the_first_unit() {
    both(
        "flip-first",
        3 * DU as usize + 100,
        "data unit 0 fails its tag",
        |f, a, _| flip(a, unit_at(f, 0) + 17),
    );
}

#[test]
fn flipped_byte_in_a_unit_of_the_second_group() {
    let n = 130 * DU as usize + 5;
    both(
        "flip-group2",
        n,
        "data unit 129 fails its tag",
        |f, a, _| flip(a, unit_at(f, 129) + 4000),
    );
}

#[test]
fn flipped_byte_in_the_last_partial_unit() {
    let n = 2 * DU as usize + 300;
    both("flip-last", n, "data unit 2 fails its tag", |f, a, _| {
        flip(a, unit_at(f, 2) + 5)
    });
}

// 2. Two units of one file swapped.

#[test]
fn two_units_swapped() {
    both("swap-units", 4 * DU as usize, "fails its tag", |f, a, _| {
        let u1 = read_unit(a, f, 1);
        let u2 = read_unit(a, f, 2);
        write_at(a, unit_at(f, 1), &u2);
        write_at(a, unit_at(f, 2), &u1);
    });
}

// 3. A unit copied from another file at the same index.

#[test]
fn unit_copied_from_another_file() {
    both(
        "copy-unit",
        3 * DU as usize,
        "data unit 1 fails its tag",
        |f, a, b| write_at(a, unit_at(f, 1), &read_unit(b, f, 1)),
    );
}

// 4. Truncated and extended: the authenticated length wins.

fn set_len(p: &Path, len: u64) {
    fs::OpenOptions::new()
        .write(true)
        .open(p)
        .unwrap()
        .set_len(len)
        .unwrap();
}

fn len(p: &Path) -> u64 {
    fs::metadata(p).unwrap().len()
}

#[test]
fn truncated_by_one_unit() {
    both_old(
        "trunc-unit",
        3 * DU as usize + 10,
        "does not match the authenticated size",
        shorter,
        |_, a, _| set_len(a, len(a) - DU),
    );
}

#[test]
fn truncated_to_the_header() {
    both_old(
        "trunc-header",
        3 * DU as usize + 10,
        "does not match the authenticated size",
        shorter,
        |_, a, _| set_len(a, HEADER_SIZE),
    );
}

#[test]
fn extended_by_a_unit_of_zeros() {
    both_old(
        "ext-zeros",
        3 * DU as usize + 10,
        "does not match the authenticated size",
        longer,
        |_, a, _| set_len(a, len(a) + DU),
    );
}

#[test]
fn extended_by_garbage() {
    both_old(
        "ext-garbage",
        3 * DU as usize + 10,
        "does not match the authenticated size",
        longer,
        |_, a, _| {
            let l = len(a);
            let junk: Vec<u8> = (0..DU + 123).map(|i| (i * 37 + 11) as u8).collect();
            write_at(a, l, &junk);
        },
    );
}

// 5. Backing objects swapped, moved, copied.

#[test]
fn backing_objects_of_two_files_swapped() {
    both("swap-files", 2 * DU as usize, "not bound", |_, a, b| {
        let tmp = a.with_extension("tmp");
        fs::rename(a, &tmp).unwrap();
        fs::rename(b, a).unwrap();
        fs::rename(&tmp, b).unwrap();
    });
}

/// A file of another directory moved over `victim` (under its name).
#[test]
fn backing_object_moved_from_another_directory() {
    for format in [Format::V3, Format::V2] {
        let Some(mut v) = start(&format!("move-dir-{format:?}"), format) else {
            return;
        };
        let root = v.backing.path().to_path_buf();
        let victim_plain = plain("victim", 5000);
        let victim = put(&v, &root, "victim", &victim_plain);
        fs::create_dir(v.p("d")).unwrap();
        let bd = user_entries(&root)
            .into_iter()
            .find(|p| p.is_dir())
            .unwrap();
        let other_plain = plain("other", 6000);
        let other = put(&v, &bd, "d/other", &other_plain);
        down(&mut v);
        fs::rename(&other, &victim).unwrap();
        v.remount(true);
        match format {
            Format::V3 => {
                assert_detected(&v, "victim", &victim, "not bound");
                bystanders_fine(&v, &[]);
            }
            _ => {
                assert_eq!(fs::read(v.p("victim")).unwrap(), other_plain);
            }
        }
    }
}

/// A backing object copied under another file's name in the same
/// directory: the copy is EIO (the original still reads).
#[test]
fn backing_object_copied_under_another_name() {
    for format in [Format::V3, Format::V2] {
        let Some(mut v) = start(&format!("copy-name-{format:?}"), format) else {
            return;
        };
        let root = v.backing.path().to_path_buf();
        let a_plain = plain("a", 5000);
        let a = put(&v, &root, "a", &a_plain);
        let b = put(&v, &root, "b", &plain("b", 7000));
        down(&mut v);
        fs::copy(&a, &b).unwrap();
        v.remount(true);
        match format {
            Format::V3 => {
                assert_detected(&v, "b", &b, "not bound");
                bystanders_fine(&v, &[("a", &a_plain)]);
            }
            _ => assert_eq!(fs::read(v.p("b")).unwrap(), a_plain),
        }
    }
}

// 6. Rollback.

#[test]
fn rollback_is_detected_then_accepted() {
    for format in [Format::V3, Format::V2] {
        let Some(mut v) = start(&format!("rollback-{format:?}"), format) else {
            return;
        };
        let root = v.backing.path().to_path_buf();
        let old = plain("old", 5000);
        let new = plain("new", 6000);
        let f = put(&v, &root, "f", &old);
        down(&mut v);
        let saved = TempDir::new("rollback-saved");
        let copy = saved.path().join("f");
        fs::copy(&f, &copy).unwrap();
        v.remount(true);
        fs::write(v.p("f"), &new).unwrap();
        assert_eq!(fs::read(v.p("f")).unwrap(), new);
        down(&mut v);
        fs::copy(&copy, &f).unwrap();
        v.remount(true);
        if format != Format::V3 {
            assert_eq!(fs::read(v.p("f")).unwrap(), old, "format 2: silent");
            continue;
        }
        assert_detected(&v, "f", &f, "rolled back");
        bystanders_fine(&v, &[]);

        // The owner accepts the restore (fsck --accept-rollback, with no
        // mount serving the vault): the old contents read again.
        down(&mut v);
        let dir = v.state.path().join("vault");
        let store = GenerationStore::open(&dir).unwrap();
        let m = master();
        let got = fsck::accept_rollback(&root, &policy(), Some(&m), "/f", &store, &dir).unwrap();
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0].0, "/f");
        drop(store);
        v.remount(true);
        assert_eq!(fs::read(v.p("f")).unwrap(), old);
    }
}

/// The known limit: a machine that never saw the newer version (a fresh
/// state directory) cannot tell a rollback from the file as it is.
#[test]
fn rollback_is_not_seen_by_a_machine_that_never_saw_the_newer_version() {
    let Some(mut v) = start("rollback-fresh", Format::V3) else {
        return;
    };
    let root = v.backing.path().to_path_buf();
    let old = plain("old", 5000);
    let f = put(&v, &root, "f", &old);
    down(&mut v);
    let saved = TempDir::new("rollback-fresh-saved");
    fs::copy(&f, saved.path().join("f")).unwrap();
    v.remount(true);
    fs::write(v.p("f"), plain("new", 6000)).unwrap();
    down(&mut v);
    fs::copy(saved.path().join("f"), &f).unwrap();
    v.state = TempDir::new("rollback-fresh-state2");
    v.remount(true);
    assert_eq!(fs::read(v.p("f")).unwrap(), old);
    assert!(lines_naming(&f).is_empty());
}

#[test]
fn rename_and_hard_link_through_the_mount_keep_files_readable() {
    let Some(mut v) = start("rename-link", Format::V3) else {
        return;
    };
    let a = plain("a", 9000);
    let b = plain("b", 3000);
    fs::write(v.p("a"), &a).unwrap();
    fs::create_dir(v.p("d")).unwrap();
    fs::rename(v.p("a"), v.p("d/a2")).unwrap();
    fs::write(v.p("b"), &b).unwrap();
    fs::hard_link(v.p("b"), v.p("d/b2")).unwrap();
    fs::remove_file(v.p("b")).unwrap();
    assert_eq!(fs::read(v.p("d/a2")).unwrap(), a);
    assert_eq!(fs::read(v.p("d/b2")).unwrap(), b);
    v.remount(true);
    assert_eq!(fs::read(v.p("d/a2")).unwrap(), a);
    assert_eq!(fs::read(v.p("d/b2")).unwrap(), b);
    assert_eq!(
        fs::metadata(v.p("b")).unwrap_err().kind(),
        ErrorKind::NotFound
    );
    let root = v.backing.path().to_path_buf();
    let sub = user_entries(&root)
        .into_iter()
        .find(|p| p.is_dir())
        .unwrap();
    for e in user_entries(&sub) {
        assert!(lines_naming(&e).is_empty(), "{:?}", lines_naming(&e));
    }
}
