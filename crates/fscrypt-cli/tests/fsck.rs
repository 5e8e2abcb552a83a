//! `fscrypt-rs fsck`: one case per kind of damage. A vault is made by the
//! real binary (`init --new-key-file`), filled through `EncryptedFs`
//! (no FUSE, no root needed), damaged by hand in the backing store, and
//! checked by the binary: the reported kind, backing path, plaintext path,
//! exit status; then `--repair` where that is safe, a clean check after it,
//! and the user's data untouched (backing bytes and plaintext read back).
//!
//! Vaults are of the default format (3) unless a case is about format 2's
//! untagged bytes. Exit statuses and refusals are in `fsck_exit_codes.rs`;
//! the shared vault in `fsck_common/mod.rs`.

mod fsck_common;

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

use fscrypt::{Context, InodeCrypt, InodeParams, Policy};
use fscrypt_fuse::layout::{self, Format, Header, HeaderKind};
use fscrypt_fuse::vault::integrity::{IntegrityKeys, names};
use fscrypt_fuse::{InodeNo, ROOT};
use std::os::unix::fs::FileExt;

use fsck_common::*;

/// Helpers only the damage cases need.
impl V {
    /// The backing path of a plaintext path: each name encrypted with its
    /// backing directory's key, as the filesystem does.
    fn backing(&self, plain: &str) -> PathBuf {
        let master = self.master();
        let keys = (self.format() == Format::V3).then(|| IntegrityKeys::derive(&master).unwrap());
        let mut dir = self.cipher.clone();
        for part in plain.trim_matches('/').split('/') {
            let (crypt, nonce) = dir_crypt(&master, &dir);
            let ct = crypt.encrypt_filename(part.as_bytes()).unwrap();
            let name = match &keys {
                Some(k) => names::backing_name(k, &nonce, &ct),
                None => layout::BackingName::from_ciphertext(&ct),
            };
            dir = dir.join(name.name);
        }
        dir
    }

    /// A vault of format 2 (`init --no-integrity`), for the damage kinds
    /// of its untagged names, symlinks and store objects, built by hand
    /// here: format 3 reports the same damage as a failed tag
    /// (`bad-name-tag`, `bad-symlink-tag`; `fscrypt-vault`'s
    /// `fsck/walk/tags/tests.rs`).
    fn format_2(tag: &str) -> V {
        V::with_init(tag, &["--no-integrity"])
    }

    /// The vault's format (its root's).
    fn format(&self) -> Format {
        let b = std::fs::read(self.cipher.join(layout::DIR_META_NAME)).unwrap();
        Header::parse(&b, HeaderKind::Directory).unwrap().format
    }

    /// Every backing entry (path → bytes, or the symlink target), except
    /// the clean marker.
    fn snapshot(&self) -> BTreeMap<PathBuf, Vec<u8>> {
        let mut out = BTreeMap::new();
        snap(&self.cipher, &self.cipher, &mut out);
        out.remove(&PathBuf::from(layout::CLEAN_MARKER));
        out
    }

    /// The user's files read back through the filesystem.
    fn assert_data_intact(&self) {
        let fs = self.fs();
        let read = |parent: InodeNo, name: &str| {
            let ino = InodeNo(fs.lookup(parent, OsStr::new(name)).unwrap().ino.0);
            let fh = fs.open(ino, 0).unwrap();
            let mut buf = Vec::new();
            let r = fs.read(fh, 0, 1 << 16, &mut buf).unwrap();
            fs.release(fh).unwrap();
            buf[r].to_vec()
        };
        assert_eq!(read(ROOT, "hello.txt"), CONTENT);
        let docs = InodeNo(fs.lookup(ROOT, OsStr::new("docs")).unwrap().ino.0);
        assert_eq!(read(docs, "a.txt"), b"a.txt");
        assert_eq!(read(docs, LONG_NAME), LONG_NAME.as_bytes());
        // (The store test removes /longlink itself.)
        if let Ok(a) = fs.lookup(ROOT, OsStr::new("longlink")) {
            assert_eq!(fs.readlink(InodeNo(a.ino.0)).unwrap(), long_target());
        }
    }
}

/// The name-encryption state of the backing directory `dir`, and its
/// nonce.
fn dir_crypt(master: &fscrypt::MasterKey, dir: &Path) -> (InodeCrypt, [u8; 16]) {
    let b = std::fs::read(dir.join(layout::DIR_META_NAME)).unwrap();
    let h = Header::parse(&b, HeaderKind::Directory).unwrap();
    let ctx = Context::parse(&layout::context_bytes(&h.context)).unwrap();
    let crypt = InodeCrypt::new(
        master,
        &ctx,
        &InodeParams {
            file_type: fscrypt::FileType::Directory,
            ino: 0,
            fs_uuid: [0; 16],
            fs_block_size: 4096,
        },
    )
    .unwrap();
    (crypt, h.context.nonce)
}

fn snap(root: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        let p = e.path();
        let rel = p.strip_prefix(root).unwrap().to_path_buf();
        let t = e.file_type().unwrap();
        if t.is_symlink() {
            out.insert(
                rel,
                std::fs::read_link(&p)
                    .unwrap()
                    .into_os_string()
                    .into_encoded_bytes(),
            );
        } else if t.is_dir() {
            out.insert(rel, b"<dir>".to_vec());
            snap(root, &p, out);
        } else if t.is_file() {
            out.insert(rel, std::fs::read(&p).unwrap());
        } else {
            out.insert(rel, b"<special>".to_vec());
        }
    }
}

fn rel(v: &V, p: &Path) -> String {
    p.strip_prefix(&v.cipher).unwrap().display().to_string()
}

#[test]
fn clean_vault_is_clean_with_and_without_the_key() {
    let v = V::new("clean");
    for key in [true, false] {
        let out = v.fsck(key, &[]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        let s = text(&out.stdout);
        assert!(s.contains("; clean"), "{s}");
        assert!(s.contains("4 files") || s.contains("files"), "{s}");
        let (code, r) = v.report(key, &[]);
        assert_eq!(code, 0);
        assert_eq!(r["clean"], true);
        assert_eq!(r["with_key"], key);
        assert_eq!(r["stats"]["symlinks"], 2);
        assert_eq!(r["stats"]["special"], 1);
        assert_eq!(r["stats"]["store_objects"], 1);
    }
}

/// Kinds only a check with the key can see.
const KEY_ONLY: &[&str] = &[
    "undecryptable-name",
    "non-canonical-name",
    "undecryptable-symlink",
];

/// What a case expects after `--repair`.
#[derive(PartialEq)]
enum After {
    /// Repaired; the backing store is then exactly the undamaged one.
    Original,
    /// Repaired; the store differs from the undamaged one (fresh metadata).
    Repaired,
    /// Not repaired: nothing at all changes.
    Untouched,
}

/// Checks a damaged vault: the problem `kind` at `backing` (relative to the
/// cipher directory), plaintext path `plain` with the key, exit status 1,
/// no-key path without it; then `--repair` and what it must leave.
fn case(
    v: &V,
    original: &BTreeMap<PathBuf, Vec<u8>>,
    kind: &str,
    backing: &str,
    plain: Option<&str>,
    after: After,
) {
    let want_status = if after == After::Untouched {
        "not-repaired"
    } else {
        "repairable"
    };
    let (code, r) = v.report(true, &[]);
    let got = problems(v, &r);
    assert_eq!(code, 1, "{got:?}");
    assert!(
        got.iter().any(|(k, b, p, s)| k == kind
            && b == backing
            && p.as_deref() == plain
            && s == want_status),
        "want {kind} {backing} {plain:?} {want_status}, got {got:?}"
    );
    assert_eq!(got.len(), 1, "exactly one problem: {got:?}");
    // Without the key: the same problem (unless only the key shows it),
    // and never a plaintext name.
    let (code, r) = v.report(false, &[]);
    let nokey = problems(v, &r);
    if KEY_ONLY.contains(&kind) {
        assert_eq!((code, nokey.len()), (0, 0), "{nokey:?}");
    } else {
        assert_eq!(code, 1);
        assert!(
            nokey.iter().any(|(k, b, _, _)| k == kind && b == backing),
            "{nokey:?}"
        );
    }
    if let Some(plain) = plain {
        let leaf = plain.rsplit('/').next().unwrap();
        assert!(
            nokey
                .iter()
                .all(|(_, _, p, _)| p.as_deref().is_none_or(|p| !p.contains(leaf))),
            "a plaintext name without the key: {nokey:?}"
        );
    }
    // The text line: kind, full backing path, plaintext path, action.
    let out = v.fsck(true, &[]);
    let line = text(&out.stdout);
    let full = format!("{}/{backing}", v.cipher.display());
    assert!(
        line.lines()
            .any(|l| l.starts_with(&format!("{kind}: {full}"))
                && plain.is_none_or(|p| l.contains(&format!("({p})")))
                && (l.contains("--repair would") || l.contains("not repaired: "))),
        "{line}"
    );
    assert!(line.contains("1 problem(s)"), "{line}");
    let before = v.snapshot();
    let out = v.fsck(true, &["--repair"]);
    let report = text(&out.stdout);
    match after {
        After::Untouched => {
            assert_eq!(out.status.code(), Some(1), "{report}");
            assert!(report.contains("0 repaired, 1 remaining"), "{report}");
            assert_eq!(v.snapshot(), before, "--repair changed something");
        }
        After::Original | After::Repaired => {
            assert_eq!(out.status.code(), Some(0), "{report}{}", text(&out.stderr));
            assert!(report.contains("1 repaired, 0 remaining"), "{report}");
            let (code, r) = v.report(true, &[]);
            assert_eq!(code, 0, "not clean after --repair: {:?}", problems(v, &r));
            if after == After::Original {
                assert_eq!(&v.snapshot(), original);
            }
            v.assert_data_intact();
        }
    }
}

fn write_at(p: &Path, off: u64, b: &[u8]) {
    std::fs::OpenOptions::new()
        .write(true)
        .open(p)
        .unwrap()
        .write_all_at(b, off)
        .unwrap();
}

#[test]
fn temporary_file_and_directory() {
    let v = V::new("tmp");
    let orig = v.snapshot();
    let docs = v.backing("/docs");
    std::fs::write(docs.join("fscrypt.tmp.AAAAAAAAAAAAAAAA"), b"half made").unwrap();
    case(
        &v,
        &orig,
        "temporary",
        &format!("{}/fscrypt.tmp.AAAAAAAAAAAAAAAA", rel(&v, &docs)),
        None,
        After::Original,
    );
    let t = v.cipher.join("fscrypt.tmp.BBBBBBBBBBBBBBBB");
    std::fs::create_dir_all(t.join("sub")).unwrap();
    std::fs::write(t.join("sub/x"), b"x").unwrap();
    std::os::unix::fs::symlink(&v.cipher, t.join("loop")).unwrap();
    case(
        &v,
        &orig,
        "temporary",
        "fscrypt.tmp.BBBBBBBBBBBBBBBB",
        None,
        After::Original,
    );
}

/// A `fscrypt.tmp.*` leftover directory of `v` with a tmpfs mounted on a
/// subdirectory holding one file: (leftover, mount point, the file, the
/// guard that detaches the tmpfs). `None` (skipped loudly) without root.
fn leftover_with_a_mount(
    v: &V,
    test: &str,
) -> Option<(PathBuf, PathBuf, PathBuf, test_support::BindGuard)> {
    if !test_support::skip::is_root() {
        test_support::skip::skip(test, "needs root to mount a tmpfs");
        return None;
    }
    let t = v.cipher.join("fscrypt.tmp.CCCCCCCCCCCCCCCC");
    let sub = t.join("sub");
    std::fs::create_dir_all(&sub).unwrap();
    std::fs::write(t.join("own"), b"leftover").unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=1m", "fscrypt-test-tmpfs"])
        .arg(&sub)
        .status()
        .unwrap();
    assert!(mounted.success(), "mount tmpfs on {}", sub.display());
    let guard = test_support::BindGuard(sub.clone());
    let precious = sub.join("precious");
    std::fs::write(&precious, PRECIOUS).unwrap();
    Some((t, sub, precious, guard))
}

const PRECIOUS: &[u8] = b"another filesystem's file";

/// `fsck --repair` never descends into a mount inside a `fscrypt.tmp.*`
/// leftover (issue 20 item 7): it reports the leftover as `repair-failed`
/// with what to do, and the mounted file survives; without the mount the
/// leftover goes.
#[test]
fn fsck_repair_never_crosses_a_mount_in_a_leftover() {
    let v = V::new("tmp-mount");
    let Some((t, sub, precious, guard)) =
        leftover_with_a_mount(&v, "fsck_repair_never_crosses_a_mount_in_a_leftover")
    else {
        return;
    };
    let (_, r) = v.report(true, &["--repair"]);
    assert_eq!(
        std::fs::read(&precious).ok().as_deref(),
        Some(PRECIOUS),
        "fsck --repair deleted a file of the tmpfs: {r}"
    );
    let got = problems(&v, &r);
    assert!(
        got.iter().any(|(k, b, _, s)| k == "temporary"
            && b == "fscrypt.tmp.CCCCCCCCCCCCCCCC"
            && s == "repair-failed"),
        "{got:?}"
    );
    assert!(
        r.to_string().contains("unmount it"),
        "the report says what to do: {r}"
    );
    assert!(test_support::is_mounted(&sub), "the tmpfs is still mounted");

    drop(guard);
    assert!(!test_support::is_mounted(&sub));
    let (_, r) = v.report(true, &["--repair"]);
    let got = problems(&v, &r);
    assert!(
        got.iter()
            .any(|(k, _, _, s)| k == "temporary" && s == "repaired"),
        "without the mount the leftover goes: {got:?}"
    );
    assert!(!t.exists());
}

/// The recovery pass of a read-write mount (no clean marker) never descends
/// into a mount inside a `fscrypt.tmp.*` leftover either (issue 20 item 7).
#[test]
fn recovery_pass_never_crosses_a_mount_in_a_leftover() {
    let v = V::new("tmp-mount-recovery");
    let Some((t, sub, precious, guard)) =
        leftover_with_a_mount(&v, "recovery_pass_never_crosses_a_mount_in_a_leftover")
    else {
        return;
    };
    let _ = std::fs::remove_file(v.cipher.join(layout::CLEAN_MARKER));
    drop(v.fs());
    assert_eq!(
        std::fs::read(&precious).ok().as_deref(),
        Some(PRECIOUS),
        "the recovery pass deleted a file of the tmpfs"
    );
    assert!(test_support::is_mounted(&sub), "the tmpfs is still mounted");
    assert!(
        t.exists(),
        "the leftover stays while something is mounted in it"
    );
    drop(guard);
    let _ = std::fs::remove_file(v.cipher.join(layout::CLEAN_MARKER));
    drop(v.fs());
    assert!(
        !t.exists(),
        "without the mount the recovery pass removes it"
    );
}

#[test]
fn orphan_side_file() {
    let v = V::new("orphan");
    let orig = v.snapshot();
    let name = format!("fscrypt.long.{}.name", "Q".repeat(43));
    std::fs::write(v.cipher.join(&name), [1u8; 200]).unwrap();
    case(&v, &orig, "orphan-side-file", &name, None, After::Original);
}

#[test]
fn headerless_file() {
    let v = V::new("headerless");
    let orig = v.snapshot();
    {
        let fs = v.fs();
        let (_, fh) = fs.create(ROOT, OsStr::new("zero"), 0o644, 2, me()).unwrap();
        fs.release(fh).unwrap();
    }
    let b = v.backing("/zero");
    std::fs::File::create(&b).unwrap();
    case(
        &v,
        &orig,
        "headerless-file",
        &rel(&v, &b),
        Some("/zero"),
        After::Original,
    );
}

#[test]
fn empty_directory_without_metadata() {
    let v = V::new("emptymeta");
    let orig = v.snapshot();
    let e = v.backing("/empty");
    std::fs::remove_file(e.join("fscrypt.dir")).unwrap();
    case(
        &v,
        &orig,
        "empty-dir-without-metadata",
        &rel(&v, &e),
        Some("/empty"),
        After::Repaired,
    );
    // An ordinary empty directory again: it takes new entries.
    let fs = v.fs();
    let ino = InodeNo(fs.lookup(ROOT, OsStr::new("empty")).unwrap().ino.0);
    fs.mkdir(ino, OsStr::new("new"), 0o755, me()).unwrap();
}

#[test]
fn directory_with_entries_without_metadata() {
    let v = V::new("dirmeta");
    let orig = v.snapshot();
    let d = v.backing("/docs");
    std::fs::remove_file(d.join("fscrypt.dir")).unwrap();
    case(
        &v,
        &orig,
        "dir-without-metadata",
        &rel(&v, &d),
        Some("/docs"),
        After::Untouched,
    );
}

#[test]
fn unreferenced_store_object_and_missing_one() {
    let v = V::format_2("store");
    let orig = v.snapshot();
    let link = v.backing("/longlink");
    let marker = std::fs::read_link(&link).unwrap();
    let id = marker
        .to_str()
        .unwrap()
        .strip_prefix("fscrypt.symlink.")
        .unwrap()
        .to_owned();
    // The object without its symlink (an unlink interrupted before the store).
    let saved = std::fs::read(v.cipher.join("fscrypt.symlinks").join(&id)).unwrap();
    std::fs::remove_file(&link).unwrap();
    let damaged = v.snapshot();
    let _ = orig;
    case(
        &v,
        &damaged,
        "unreferenced-store-object",
        &format!("fscrypt.symlinks/{id}"),
        None,
        After::Repaired,
    );
    // The symlink without its object: not repaired.
    std::os::unix::fs::symlink(&marker, &link).unwrap();
    let v2 = &v;
    let (code, r) = v2.report(true, &[]);
    assert_eq!(code, 1);
    assert_eq!(
        problems(v2, &r),
        [(
            "missing-store-object".to_owned(),
            rel(v2, &link),
            Some("/longlink".to_owned()),
            "not-repaired".to_owned()
        )]
    );
    // A damaged object.
    let mut bad = saved.clone();
    bad[60] ^= 1;
    std::fs::write(v.cipher.join("fscrypt.symlinks").join(&id), &bad).unwrap();
    let (_, r) = v.report(true, &[]);
    assert_eq!(problems(&v, &r)[0].0, "bad-store-object");
    assert_eq!(problems(&v, &r)[0].1, format!("fscrypt.symlinks/{id}"));
    std::fs::write(v.cipher.join("fscrypt.symlinks").join(&id), &saved).unwrap();
    assert_eq!(v.fsck(true, &[]).status.code(), Some(0));
    // A malformed marker.
    std::fs::remove_file(&link).unwrap();
    std::os::unix::fs::symlink("fscrypt.symlink.short", &link).unwrap();
    let (_, r) = v.report(false, &[]);
    let p = problems(&v, &r);
    assert!(
        p.iter()
            .any(|x| x.0 == "bad-symlink-marker" && x.1 == rel(&v, &link)),
        "{p:?}"
    );
}

#[test]
fn missing_clean_marker() {
    let v = V::new("clean-marker");
    let orig = v.snapshot();
    std::fs::remove_file(v.cipher.join("fscrypt.clean")).unwrap();
    case(
        &v,
        &orig,
        "missing-clean-marker",
        "fscrypt.clean",
        None,
        After::Original,
    );
    assert!(v.cipher.join("fscrypt.clean").is_file());
}

#[test]
fn excess_data_units() {
    // Format 1 only: in format 2 the length is the size.
    let v = V::new_v1("excess");
    let orig = v.snapshot();
    let b = v.backing("/hello.txt");
    let len = std::fs::metadata(&b).unwrap().len();
    write_at(&b, len, &[0x55; 4096]);
    case(
        &v,
        &orig,
        "excess-data-units",
        &rel(&v, &b),
        Some("/hello.txt"),
        After::Original,
    );
}

#[test]
fn header_damage_of_each_kind() {
    // Format 1's header and lengths (format 2's: fscrypt-vault's
    // tests/fixture_vault_v2.rs).
    let v = V::new_v1("header");
    let orig = v.snapshot();
    let b = v.backing("/hello.txt");
    let good = std::fs::read(&b).unwrap();
    let h = Header::parse(&good, HeaderKind::File).unwrap();
    let resum = |mut bytes: Vec<u8>| {
        // Recompute the checksum so that only the field is wrong.
        let sum = fscrypt_crypto::sha256(&bytes[0..64]);
        bytes[64..72].copy_from_slice(&sum[..8]);
        bytes
    };
    let mut other_policy = Policy::V2(
        match Context::parse(&layout::context_bytes(&h.context)).unwrap() {
            Context::V2(c) => c.policy,
            _ => unreachable!(),
        },
    );
    if let Policy::V2(p) = &mut other_policy {
        p.master_key_identifier.0[0] ^= 1;
    }
    let foreign_ctx = Context::new(&other_policy, [9; 16]).to_bytes();
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("bad-magic", {
            let mut x = good.clone();
            x[0] ^= 1;
            x
        }),
        (
            "bad-version",
            resum({
                let mut x = good.clone();
                x[8] = 2;
                x
            }),
        ),
        (
            "bad-kind",
            resum({
                let mut x = good.clone();
                x[9] = 7;
                x
            }),
        ),
        (
            "bad-header-field",
            resum({
                let mut x = good.clone();
                x[12] = 1;
                x
            }),
        ),
        ("bad-checksum", {
            let mut x = good.clone();
            x[70] ^= 1;
            x
        }),
        ("header-truncated", good[..40].to_vec()),
        ("bad-context", {
            let mut x = good.clone();
            x[..72].copy_from_slice(
                &Header {
                    context: layout::parse_context(&foreign_ctx).unwrap(),
                    ..h.clone()
                }
                .to_bytes(),
            );
            x
        }),
        ("bad-length", {
            let mut x = good.clone();
            x.extend_from_slice(&[1; 100]);
            x
        }),
    ];
    for (kind, bytes) in cases {
        std::fs::write(&b, &bytes).unwrap();
        case(
            &v,
            &orig,
            kind,
            &rel(&v, &b),
            Some("/hello.txt"),
            After::Untouched,
        );
        assert_eq!(
            std::fs::read(&b).unwrap(),
            bytes,
            "{kind}: the file was touched"
        );
    }
    std::fs::write(&b, &good).unwrap();
    // The directory metadata file: a damaged checksum.
    let meta = v.backing("/docs").join("fscrypt.dir");
    let m = std::fs::read(&meta).unwrap();
    let mut x = m.clone();
    x[70] ^= 1;
    std::fs::write(&meta, &x).unwrap();
    case(
        &v,
        &orig,
        "bad-checksum",
        &rel(&v, &meta),
        Some("/docs"),
        After::Untouched,
    );
    std::fs::write(&meta, &m).unwrap();
    assert_eq!(&v.snapshot(), &orig);
}

#[test]
fn bad_names() {
    let v = V::format_2("names");
    let orig = v.snapshot();
    let hello = v.backing("/hello.txt");
    let bytes = std::fs::read(&hello).unwrap();
    // A foreign name.
    let foreign = v.cipher.join("notes.txt");
    std::fs::write(&foreign, b"someone's file").unwrap();
    case(&v, &orig, "bad-name", "notes.txt", None, After::Untouched);
    std::fs::remove_file(&foreign).unwrap();
    // A ciphertext length the 32-byte padding never produces (48 bytes).
    let mut buf = [0u8; 64];
    let n = fscrypt::base64url::encode(&[7u8; 48], &mut buf);
    let odd = std::str::from_utf8(&buf[..n]).unwrap().to_owned();
    std::fs::write(v.cipher.join(&odd), &bytes).unwrap();
    case(&v, &orig, "bad-name-length", &odd, None, After::Untouched);
    std::fs::remove_file(v.cipher.join(&odd)).unwrap();
    // A 32-byte ciphertext that does not decrypt to a valid name.
    let (crypt, _) = dir_crypt(&v.master(), &v.cipher);
    let mut ct = [0u8; 32];
    let ct = loop {
        fscrypt_crypto::random_bytes(&mut ct).unwrap();
        if crypt.decrypt_filename(&ct).is_err() {
            break ct;
        }
    };
    let n = fscrypt::base64url::encode(&ct, &mut buf);
    let bad = std::str::from_utf8(&buf[..n]).unwrap().to_owned();
    std::fs::write(v.cipher.join(&bad), &bytes).unwrap();
    let nk = fscrypt::nokey::encode(&ct, 0, 0).to_string();
    case(
        &v,
        &orig,
        "undecryptable-name",
        &bad,
        Some(&format!("/<no-key {nk}>")),
        After::Untouched,
    );
    std::fs::remove_file(v.cipher.join(&bad)).unwrap();
    assert_eq!(&v.snapshot(), &orig);
}

#[test]
fn non_canonical_name() {
    // A vault with 4-byte padding; "ab" encrypted with 32-byte padding
    // (same key: v2 keys do not depend on the padding flags) decrypts but
    // re-encrypts to 16 bytes.
    let v = V::with_init("canon", &["--padding", "4", "--no-integrity"]);
    let orig = v.snapshot();
    let b = std::fs::read(v.cipher.join("fscrypt.dir")).unwrap();
    let h = Header::parse(&b, HeaderKind::Directory).unwrap();
    let Context::V2(c) = Context::parse(&layout::context_bytes(&h.context)).unwrap() else {
        unreachable!()
    };
    let mut p32 = c.policy;
    p32.flags = fscrypt::PolicyFlags((p32.flags.bits() & !3) | 3);
    let ctx32 = Context::new(&Policy::V2(p32), c.nonce);
    let crypt32 = InodeCrypt::new(
        &v.master(),
        &ctx32,
        &InodeParams {
            file_type: fscrypt::FileType::Directory,
            ino: 0,
            fs_uuid: [0; 16],
            fs_block_size: 4096,
        },
    )
    .unwrap();
    let ct = crypt32.encrypt_filename(b"ab").unwrap();
    assert_eq!(ct.len(), 32);
    let name = layout::BackingName::from_ciphertext(&ct).name;
    let bytes = std::fs::read(v.backing("/hello.txt")).unwrap();
    std::fs::write(v.cipher.join(&name), &bytes).unwrap();
    case(
        &v,
        &orig,
        "non-canonical-name",
        &name,
        Some("/ab"),
        After::Untouched,
    );
}

#[test]
fn long_names_and_side_files() {
    let v = V::new("long");
    let orig = v.snapshot();
    let entry = v.backing(&format!("/docs/{LONG_NAME}"));
    let side = PathBuf::from(format!("{}.name", entry.display()));
    let saved = std::fs::read(&side).unwrap();
    std::fs::write(&side, [0x41; 200]).unwrap();
    case(
        &v,
        &orig,
        "bad-side-file",
        &rel(&v, &side),
        None,
        After::Untouched,
    );
    std::fs::remove_file(&side).unwrap();
    case(
        &v,
        &orig,
        "long-name-without-side-file",
        &rel(&v, &entry),
        None,
        After::Untouched,
    );
    std::fs::create_dir(&side).unwrap();
    case(
        &v,
        &orig,
        "wrong-type",
        &rel(&v, &side),
        None,
        After::Untouched,
    );
    std::fs::remove_dir(&side).unwrap();
    std::fs::write(&side, &saved).unwrap();
    assert_eq!(&v.snapshot(), &orig);
}

#[test]
fn bad_symlinks() {
    let v = V::format_2("symlinks");
    let orig = v.snapshot();
    let link = v.backing("/link");
    let saved = std::fs::read_link(&link).unwrap();
    std::fs::remove_file(&link).unwrap();
    // A target that points out of the vault is never followed: it is just
    // not base64url.
    std::os::unix::fs::symlink("/etc/passwd", &link).unwrap();
    case(
        &v,
        &orig,
        "bad-symlink",
        &rel(&v, &link),
        Some("/link"),
        After::Untouched,
    );
    // A blob whose length field overruns it.
    let (ctx, mut blob) = layout::decode_symlink(saved.as_os_str().as_encoded_bytes()).unwrap();
    blob[0] = 0xff;
    std::fs::remove_file(&link).unwrap();
    std::os::unix::fs::symlink(layout::encode_symlink(&ctx, &blob), &link).unwrap();
    case(
        &v,
        &orig,
        "bad-symlink",
        &rel(&v, &link),
        Some("/link"),
        After::Untouched,
    );
    std::fs::remove_file(&link).unwrap();
    std::os::unix::fs::symlink(&saved, &link).unwrap();
    assert_eq!(&v.snapshot(), &orig);
}

#[test]
fn internal_names_and_types() {
    let v = V::new("internal");
    let orig = v.snapshot();
    let docs = v.backing("/docs");
    std::fs::write(docs.join("fscrypt.bogus"), b"?").unwrap();
    case(
        &v,
        &orig,
        "unknown-internal-name",
        &format!("{}/fscrypt.bogus", rel(&v, &docs)),
        None,
        After::Untouched,
    );
    std::fs::remove_file(docs.join("fscrypt.bogus")).unwrap();
    std::fs::write(v.cipher.join("fscrypt.vault.json.tmp-0011"), b"{}").unwrap();
    case(
        &v,
        &orig,
        "config-temporary",
        "fscrypt.vault.json.tmp-0011",
        None,
        After::Untouched,
    );
    std::fs::remove_file(v.cipher.join("fscrypt.vault.json.tmp-0011")).unwrap();
    // A FIFO as a directory's metadata file: reported, never opened (no hang).
    let e = v.backing("/empty");
    let meta = std::fs::read(e.join("fscrypt.dir")).unwrap();
    std::fs::remove_file(e.join("fscrypt.dir")).unwrap();
    let st = Command::new("mkfifo")
        .arg(e.join("fscrypt.dir"))
        .status()
        .unwrap();
    assert!(st.success());
    case(
        &v,
        &orig,
        "wrong-type",
        &format!("{}/fscrypt.dir", rel(&v, &e)),
        Some("/empty"),
        After::Untouched,
    );
    std::fs::remove_file(e.join("fscrypt.dir")).unwrap();
    std::fs::write(e.join("fscrypt.dir"), &meta).unwrap();
    // The clean marker as a directory.
    std::fs::remove_file(v.cipher.join("fscrypt.clean")).unwrap();
    std::fs::create_dir(v.cipher.join("fscrypt.clean")).unwrap();
    case(
        &v,
        &orig,
        "wrong-type",
        "fscrypt.clean",
        None,
        After::Untouched,
    );
}
