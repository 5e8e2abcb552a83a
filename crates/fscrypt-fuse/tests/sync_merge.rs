//! Vaults in synced folders (issue 23 §1, §2), through real mounts:
//!
//! - the same directory made on two replicas while apart gets the same
//!   `fscrypt.dir`, so whichever copy a sync tool keeps, every name of both
//!   sides decrypts after the merge (gocryptfs #151, Cryptomator #865);
//! - conflict copies made by sync tools (Syncthing, Nextcloud, Dropbox) are
//!   listed as the plaintext name with the tool's marker, and can be read,
//!   renamed and removed; conflict copies of internal files are never
//!   listed; `fsck` lists the copies and stays clean.

use std::collections::BTreeSet;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use fscrypt_vault::fsck;
use test_support::TempDir;
use test_support::fuse::{Vault, master, mount_config, mount_live, policy};
use test_support::need_fuse;

const SYNCTHING: &str = ".sync-conflict-20261205-101010-ABCDEFG";
const NEXTCLOUD: &str = " (conflicted copy 2026-12-05 101010)";
const DROPBOX: &str = " (Alice's conflicted copy 2026-12-05)";

/// `cp -a SRC/. DST/` (with `-n`: keep what DST has, as a sync tool that
/// keeps one side's copy of a file both sides made).
fn copy_tree(src: &Path, dst: &Path, no_clobber: bool) {
    let mut c = Command::new("cp");
    c.arg("-a");
    if no_clobber {
        c.arg("-n");
    }
    let st = c
        .arg(format!("{}/.", src.display()))
        .arg(dst)
        .status()
        .unwrap();
    assert!(st.success(), "cp -a failed");
}

/// Runs `f` with `backing` mounted (with the key) on a fresh mount point.
fn with_mount<T>(backing: &Path, f: impl FnOnce(&Path) -> T) -> T {
    let mnt = TempDir::new("sync-mnt");
    let m = mount_live(mount_config(backing, policy(), true), mnt.path());
    let r = f(mnt.path());
    m.unmount().expect("unmount");
    r
}

fn names(dir: &Path) -> BTreeSet<String> {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect()
}

/// The backing entry of the plaintext path `p` (same inode number).
fn backing_of(backing: &Path, p: &Path) -> PathBuf {
    let ino = fs::symlink_metadata(p).unwrap().ino();
    test_support::tree::walk(backing)
        .into_iter()
        .find(|b| fs::symlink_metadata(b).unwrap().ino() == ino)
        .unwrap_or_else(|| panic!("no backing entry for {}", p.display()))
}

/// `fsck` with the key: no problem, and the conflict copies it lists.
fn fsck_clean(backing: &Path) -> Vec<String> {
    let key = master();
    let r = fsck::check(
        backing,
        &policy(),
        &fsck::Options {
            master: Some(&key),
            repair: false,
            check_clean_marker: true,
        },
    )
    .unwrap();
    assert!(r.problems.is_empty(), "fsck: {:?}", r.problems);
    r.conflicts
        .iter()
        .map(|c| {
            c.path
                .clone()
                .unwrap_or_else(|| format!("backing:{}", c.backing))
        })
        .collect()
}

#[test]
fn same_directory_made_on_two_replicas_merges() {
    need_fuse!();
    let mut v = Vault::new("sync-origin");
    fs::write(v.p("shared"), b"before the split").unwrap();
    v.mount.take().unwrap().unmount().unwrap();
    let a = TempDir::new("sync-replica-a");
    let b = TempDir::new("sync-replica-b");
    copy_tree(v.backing.path(), a.path(), false);
    copy_tree(v.backing.path(), b.path(), false);
    // While apart, both make x/ and x/sub/ and put their own files there.
    for (replica, side) in [(&a, "a"), (&b, "b")] {
        with_mount(replica.path(), |m| {
            fs::create_dir_all(m.join("x/sub")).unwrap();
            fs::write(m.join(format!("x/from-{side}")), side.repeat(5000)).unwrap();
            fs::write(m.join(format!("x/sub/deep-{side}")), side).unwrap();
        });
    }
    let meta = |r: &Path, rel: &str| {
        let x = with_mount(r, |m| backing_of(r, &m.join(rel)));
        fs::read(x.join("fscrypt.dir")).unwrap()
    };
    assert_eq!(
        meta(a.path(), "x"),
        meta(b.path(), "x"),
        "the same directory made on two replicas has different contexts"
    );
    // Merge both ways: whichever side's fscrypt.dir the tool keeps.
    for (first, second) in [(&a, &b), (&b, &a)] {
        let merged = TempDir::new("sync-merged");
        copy_tree(first.path(), merged.path(), false);
        copy_tree(second.path(), merged.path(), true);
        with_mount(merged.path(), |m| {
            assert_eq!(
                names(&m.join("x")),
                ["from-a", "from-b", "sub"].map(String::from).into(),
                "names of one side are lost after the merge"
            );
            assert_eq!(fs::read(m.join("x/from-a")).unwrap(), b"a".repeat(5000));
            assert_eq!(fs::read(m.join("x/from-b")).unwrap(), b"b".repeat(5000));
            assert_eq!(fs::read(m.join("x/sub/deep-a")).unwrap(), b"a");
            assert_eq!(fs::read(m.join("x/sub/deep-b")).unwrap(), b"b");
            assert_eq!(fs::read(m.join("shared")).unwrap(), b"before the split");
        });
        assert!(fsck_clean(merged.path()).is_empty());
    }
}

#[test]
fn a_directory_made_again_under_its_name_gets_the_same_context() {
    need_fuse!();
    let v = Vault::new("sync-again");
    fs::create_dir(v.p("d")).unwrap();
    let first = fs::read(backing_of(v.backing.path(), &v.p("d")).join("fscrypt.dir")).unwrap();
    fs::remove_dir(v.p("d")).unwrap();
    fs::create_dir(v.p("d")).unwrap();
    fs::create_dir(v.p("other")).unwrap();
    let again = fs::read(backing_of(v.backing.path(), &v.p("d")).join("fscrypt.dir")).unwrap();
    let other = fs::read(backing_of(v.backing.path(), &v.p("other")).join("fscrypt.dir")).unwrap();
    assert_eq!(first, again);
    assert_ne!(first, other, "two names must give two contexts");
}

/// A conflict copy shares its original's nonce. Kept under a name of its
/// own ("keep both"), each then changes apart from the other: in format 3
/// neither may read as rolled back because the other was written (the old
/// code remembered one generation per nonce: after the copy was written,
/// the original read as EIO). Renamed over its original, the copy is the
/// newest version there, also after a remount.
#[test]
fn a_kept_conflict_copy_and_its_original_change_apart() {
    need_fuse!();
    let mut v = Vault::new("sync-keep-both");
    fs::write(v.p("notes"), b"base").unwrap();
    let b = backing_of(v.backing.path(), &v.p("notes"));
    v.mount.take().unwrap().unmount().unwrap();
    let marked = fscrypt_vault::conflict::insert(
        b.file_name().unwrap().as_encoded_bytes(),
        SYNCTHING.as_bytes(),
    );
    let copy = b.with_file_name(String::from_utf8(marked).unwrap());
    fs::copy(&b, &copy).unwrap();
    fs::copy(
        &b,
        copy.with_file_name(format!(
            "{}{NEXTCLOUD}",
            b.file_name().unwrap().to_str().unwrap()
        )),
    )
    .unwrap();
    v.remount(true);
    fs::write(v.p("notes"), b"mine 1").unwrap();
    fs::rename(v.p(&format!("notes{SYNCTHING}")), v.p("theirs")).unwrap();
    for i in 0..3 {
        fs::write(v.p("theirs"), format!("theirs {i}")).unwrap();
        fs::write(v.p("notes"), format!("mine {i}")).unwrap();
    }
    let check = |v: &Vault| {
        assert_eq!(fs::read(v.p("notes")).unwrap(), b"mine 2");
        assert_eq!(fs::read(v.p("theirs")).unwrap(), b"theirs 2");
    };
    check(&v);
    v.remount(true);
    check(&v);
    // The other copy (still at generation 1) replaces the original.
    fs::rename(v.p(&format!("notes{NEXTCLOUD}")), v.p("notes")).unwrap();
    assert_eq!(fs::read(v.p("notes")).unwrap(), b"base");
    v.remount(true);
    assert_eq!(fs::read(v.p("notes")).unwrap(), b"base");
    assert_eq!(fs::read(v.p("theirs")).unwrap(), b"theirs 2");
}

#[test]
fn conflict_copies_are_listed_decrypted_and_usable() {
    need_fuse!();
    let mut v = Vault::new("sync-conflicts");
    let long = format!("{}.txt", "l".repeat(200));
    fs::write(v.p("report.txt"), b"theirs").unwrap();
    fs::write(v.p(&long), b"long theirs").unwrap();
    fs::write(v.p("plain"), b"plain theirs").unwrap();
    let report = backing_of(v.backing.path(), &v.p("report.txt"));
    let long_b = backing_of(v.backing.path(), &v.p(&long));
    let plain_b = backing_of(v.backing.path(), &v.p("plain"));
    v.mount.take().unwrap().unmount().unwrap();
    // What the sync tools leave: the other side's version under the marked
    // name (before the extension of the backing name, which for an inline
    // name is its end and for a long name before `.<hash>`).
    let mark = |b: &Path, m: &str| {
        let name = b.file_name().unwrap().as_encoded_bytes();
        let marked = fscrypt_vault::conflict::insert(name, m.as_bytes());
        let to = b.with_file_name(String::from_utf8(marked).unwrap());
        fs::copy(b, &to).unwrap();
        to
    };
    for m in [SYNCTHING, NEXTCLOUD, DROPBOX] {
        mark(&report, m);
    }
    mark(&long_b, SYNCTHING);
    mark(&plain_b, NEXTCLOUD);
    // A sync tool's copy of internal files is never listed.
    mark(&v.backing.path().join("fscrypt.dir"), SYNCTHING);
    v.remount(true);
    fs::write(v.p("report.txt"), b"mine").unwrap();
    let long_copy = format!("{}{SYNCTHING}.txt", "l".repeat(200));
    let expected: BTreeSet<String> = [
        "report.txt".to_owned(),
        format!("report{SYNCTHING}.txt"),
        format!("report{NEXTCLOUD}.txt"),
        format!("report{DROPBOX}.txt"),
        long.clone(),
        long_copy.clone(),
        "plain".to_owned(),
        format!("plain{NEXTCLOUD}"),
    ]
    .into();
    assert_eq!(names(v.mnt.path()), expected);
    // Without the key: the no-key names, each copy's with its marker, and
    // each one found again by its listed name. The long name's copy is not
    // listed: a long no-key name has 252 characters, no room for a marker.
    v.remount(false);
    let locked = names(v.mnt.path());
    assert_eq!(locked.len(), expected.len() - 1, "{locked:?}");
    for (m, copies) in [(SYNCTHING, 1), (NEXTCLOUD, 2), (DROPBOX, 1)] {
        let n = locked.iter().filter(|n| n.ends_with(m)).count();
        assert_eq!(n, copies, "{m}: {locked:?}");
    }
    for n in &locked {
        fs::symlink_metadata(v.p(n)).unwrap_or_else(|e| panic!("{n}: {e}"));
    }
    v.remount(true);
    assert_eq!(fs::read(v.p("report.txt")).unwrap(), b"mine");
    for m in [SYNCTHING, NEXTCLOUD, DROPBOX] {
        assert_eq!(fs::read(v.p(&format!("report{m}.txt"))).unwrap(), b"theirs");
    }
    assert_eq!(fs::read(v.p(&long_copy)).unwrap(), b"long theirs");
    assert_eq!(
        fs::read(v.p(&format!("plain{NEXTCLOUD}"))).unwrap(),
        b"plain theirs"
    );
    v.mount.take().unwrap().unmount().unwrap();
    let mut listed = fsck_clean(v.backing.path());
    listed.sort();
    let mut want = vec![
        format!("/plain{NEXTCLOUD}"),
        format!("/report{DROPBOX}.txt"),
        format!("/report{NEXTCLOUD}.txt"),
        format!("/report{SYNCTHING}.txt"),
        format!("/{long_copy}"),
        format!("backing:fscrypt{SYNCTHING}.dir"),
    ];
    want.sort();
    assert_eq!(listed, want, "fsck lists the conflict copies");
    v.remount(true);
    // Resolving the conflicts through the mount: rename one copy over
    // the original, remove the others; the long name's copy outlives its
    // original (they share the side file) and then goes too.
    fs::rename(v.p(&format!("report{SYNCTHING}.txt")), v.p("report.txt")).unwrap();
    fs::remove_file(v.p(&format!("report{NEXTCLOUD}.txt"))).unwrap();
    fs::rename(v.p(&format!("report{DROPBOX}.txt")), v.p("kept.txt")).unwrap();
    fs::remove_file(v.p(&long)).unwrap();
    assert_eq!(fs::read(v.p(&long_copy)).unwrap(), b"long theirs");
    fs::remove_file(v.p(&long_copy)).unwrap();
    // A rename onto a copy's shown name replaces that copy.
    fs::write(v.p("new"), b"new").unwrap();
    fs::rename(v.p("new"), v.p(&format!("plain{NEXTCLOUD}"))).unwrap();
    assert_eq!(
        names(v.mnt.path()),
        [
            "kept.txt".to_owned(),
            "plain".to_owned(),
            format!("plain{NEXTCLOUD}"),
            "report.txt".to_owned()
        ]
        .into()
    );
    assert_eq!(fs::read(v.p("report.txt")).unwrap(), b"theirs");
    assert_eq!(fs::read(v.p("kept.txt")).unwrap(), b"theirs");
    assert_eq!(fs::read(v.p(&format!("plain{NEXTCLOUD}"))).unwrap(), b"new");
    v.mount.take().unwrap().unmount().unwrap();
    let mut listed = fsck_clean(v.backing.path());
    listed.sort();
    assert_eq!(
        listed,
        vec![
            format!("/plain{NEXTCLOUD}"),
            format!("backing:fscrypt{SYNCTHING}.dir"),
        ]
    );
    // No orphan left behind: the long name's side file went with the last
    // entry that used it.
    let leftovers: Vec<_> = fs::read_dir(v.backing.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with("fscrypt.long"))
        .collect();
    assert!(leftovers.is_empty(), "left behind: {leftovers:?}");
}

#[test]
fn a_name_that_only_looks_like_a_conflict_copy_is_an_ordinary_file() {
    need_fuse!();
    let v = Vault::new("sync-lookalike");
    let name = format!("notes{SYNCTHING}.txt");
    fs::write(v.p(&name), b"mine").unwrap();
    fs::write(v.p("notes.txt"), b"other").unwrap();
    assert_eq!(
        names(v.mnt.path()),
        [name.clone(), "notes.txt".to_owned()].into()
    );
    assert_eq!(fs::read(v.p(&name)).unwrap(), b"mine");
    fs::rename(v.p(&name), v.p("renamed")).unwrap();
    assert_eq!(fs::read(v.p("renamed")).unwrap(), b"mine");
    assert_eq!(fs::read(v.p("notes.txt")).unwrap(), b"other");
}

/// `unison A B` in batch mode with its archives in `archive`: its exit
/// status (0: in sync, 1: some conflicts skipped).
fn unison(a: &Path, b: &Path, archive: &Path) -> i32 {
    let out = Command::new("unison")
        .arg(a)
        .arg(b)
        .args(["-batch", "-ui", "text", "-confirmbigdel=false"])
        .env("UNISON", archive)
        .output()
        .expect("run unison");
    let code = out.status.code().unwrap_or(-1);
    assert!(
        code == 0 || code == 1,
        "unison failed ({code}): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    code
}

#[test]
fn unison_merges_replicas_changed_apart() {
    need_fuse!();
    if Command::new("unison").arg("-version").output().is_err() {
        eprintln!("skipped: unison is not installed (./scripts/setup.sh installs it)");
        return;
    }
    let mut v = Vault::new("unison-origin");
    fs::write(v.p("doc"), b"origin").unwrap();
    fs::write(v.p("gone"), b"origin").unwrap();
    fs::create_dir(v.p("old")).unwrap();
    fs::write(v.p("old/keep"), b"keep").unwrap();
    v.mount.take().unwrap().unmount().unwrap();
    let (a, b) = (TempDir::new("unison-a"), TempDir::new("unison-b"));
    copy_tree(v.backing.path(), a.path(), false);
    copy_tree(v.backing.path(), b.path(), false);
    let archive = TempDir::new("unison-archive");
    assert_eq!(unison(a.path(), b.path(), archive.path()), 0);
    // Apart: a new directory of the same name on both, one file edited on
    // both, one edited on A and deleted on B, new files in an old directory.
    for (replica, side) in [(&a, "A"), (&b, "B")] {
        with_mount(replica.path(), |m| {
            fs::create_dir(m.join("x")).unwrap();
            fs::write(m.join(format!("x/from-{side}")), side).unwrap();
            fs::write(m.join("doc"), format!("edit on {side}")).unwrap();
            fs::write(m.join(format!("old/new-{side}")), side).unwrap();
            if side == "A" {
                fs::write(m.join("gone"), b"edit on A").unwrap();
            } else {
                fs::remove_file(m.join("gone")).unwrap();
            }
        });
    }
    // The conflicts (doc on both; gone edited against deleted) are skipped
    // and reported by unison; everything else is merged.
    assert_eq!(unison(a.path(), b.path(), archive.path()), 1);
    for (replica, side) in [(&a, "A"), (&b, "B")] {
        with_mount(replica.path(), |m| {
            assert_eq!(
                names(&m.join("x")),
                ["from-A", "from-B"].map(String::from).into(),
                "replica {side}: names of the other side's x/ are lost"
            );
            assert_eq!(fs::read(m.join("x/from-A")).unwrap(), b"A");
            assert_eq!(fs::read(m.join("x/from-B")).unwrap(), b"B");
            assert_eq!(
                names(&m.join("old")),
                ["keep", "new-A", "new-B"].map(String::from).into()
            );
            assert_eq!(
                fs::read(m.join("doc")).unwrap(),
                format!("edit on {side}").as_bytes(),
                "replica {side}: its own edit of a conflicting file is kept"
            );
            match side {
                "A" => assert_eq!(fs::read(m.join("gone")).unwrap(), b"edit on A"),
                _ => assert!(!m.join("gone").exists()),
            }
        });
        assert!(fsck_clean(replica.path()).is_empty());
    }
}
