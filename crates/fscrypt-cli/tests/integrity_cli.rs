//! The CLI side of vault format 3 (issue 22): `init --no-integrity` makes
//! a format 2 vault, `info` says what a vault's data format authenticates,
//! and `fsck --accept-rollback PATH` forgets the generations this machine
//! remembers for the files under PATH. Vaults are made as in `fsck.rs`
//! (shared in `fsck_common/mod.rs`).

#[allow(dead_code)] // shared with fsck.rs, which uses all of it
mod fsck_common;

use std::ffi::OsStr;
use std::process::Command;

use fsck_common::*;
use fscrypt_vault::integrity::generations::{GenerationStore, STATE_DIR_ENV, Seen};
use fscrypt_vault::layout::{DIR_META_NAME, Format, Header, HeaderKind};

fn info(v: &V) -> (String, serde_json::Value) {
    let out = run(&["info".as_ref(), v.cipher.as_os_str()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let json = run(&["info".as_ref(), v.cipher.as_os_str(), "--json".as_ref()]);
    assert!(json.status.success(), "{}", text(&json.stderr));
    (
        text(&out.stdout),
        serde_json::from_slice(&json.stdout).unwrap(),
    )
}

fn root_format(v: &V) -> Format {
    Header::parse(
        &std::fs::read(v.cipher.join(DIR_META_NAME)).unwrap(),
        HeaderKind::Directory,
    )
    .unwrap()
    .format
}

#[test]
fn init_no_integrity_makes_format_2_and_info_says_so() {
    let v = V::with_init("no-integrity", &["--no-integrity"]);
    assert_eq!(root_format(&v), Format::V2);
    let (t, j) = info(&v);
    assert!(t.contains("  data format: 2 ("), "{t}");
    assert!(t.contains("  integrity: none (format 2)"), "{t}");
    assert_eq!(j["data_format"], 2);
    assert_eq!(j["integrity"], "none (format 2)");
    // Without the flag: the latest format; `--integrity`: format 3.
    let w = V::new("latest");
    assert_eq!(root_format(&w), Format::LATEST);
    let a = V::with_init("integrity", &["--integrity"]);
    assert_eq!(root_format(&a), Format::V3);
}

#[test]
fn info_shows_a_format_3_vault_as_authenticated() {
    let v = V::with_init_format("info-v3", &[], Format::V3);
    let (t, j) = info(&v);
    assert!(t.contains("  data format: 3\n"), "{t}");
    let want = "authenticated (contents, sizes, names, file locations; rollback on this machine)";
    assert!(t.contains(&format!("  integrity: {want}\n")), "{t}");
    assert_eq!(j["data_format"], 3);
    assert_eq!(j["integrity"], want);
    let old = V::new_v1("info-v1");
    assert!(info(&old).0.contains("  integrity: none (format 1)"));
}

#[test]
fn accept_rollback_forgets_the_files_under_the_path() {
    let v = V::new("accept");
    let state = v._tmp.0.join("state");
    let vault = fscrypt_vault::Vault::open(&v.cipher).unwrap();
    let master = v.master();
    let nonce = |p: &str| {
        fscrypt_vault::fsck::file_nonces(&v.cipher, vault.policy(), Some(&master), p).unwrap()[0].1
    };
    let (hello, a) = (nonce("/hello.txt"), nonce("/docs/a.txt"));
    let dir = state
        .join("vaults")
        .join(vault.key_identifier().to_string());
    {
        let store = GenerationStore::open(&dir).unwrap();
        store.saw(&hello, 9).unwrap();
        store.saw(&a, 4).unwrap();
    }
    let accept = |path: &str| {
        Command::new(BIN)
            .env(STATE_DIR_ENV, &state)
            .args([
                "fsck".as_ref(),
                v.cipher.as_os_str(),
                "--key-file".as_ref(),
                v.key.as_os_str(),
                "--accept-rollback".as_ref(),
                OsStr::new(path),
            ])
            .output()
            .unwrap()
    };
    let out = accept("/hello.txt");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let t = text(&out.stdout);
    assert_eq!(
        t.lines().filter(|l| l.starts_with("accepted: ")).count(),
        1,
        "{t}"
    );
    assert!(
        t.contains("accepted: /hello.txt (generation 9 remembered"),
        "{t}"
    );
    let store = GenerationStore::open(&dir).unwrap();
    assert_eq!(store.check(&hello, 1), Seen::Fine);
    assert_eq!(store.check(&a, 1), Seen::RolledBack { seen: 4 });
    drop(store);
    // Again: nothing left there; then the rest under /docs.
    assert!(text(&accept("hello.txt").stdout).contains("nothing to accept"));
    let t = text(&accept("/docs").stdout);
    assert!(t.contains("accepted: /docs/a.txt (generation 4"), "{t}");
    let store = GenerationStore::open(&dir).unwrap();
    assert_eq!(store.check(&a, 1), Seen::Fine);
    // Without the key it is refused (names are needed).
    let out = run(&[
        "fsck".as_ref(),
        v.cipher.as_os_str(),
        "--no-key".as_ref(),
        "--accept-rollback".as_ref(),
        "/".as_ref(),
    ]);
    assert_eq!(out.status.code(), Some(2));
}
