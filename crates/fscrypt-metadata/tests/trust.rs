//! [`Trust`] applied by [`Store`]: whose `.fscrypt` directories and files
//! are used, on a metadata directory built in a temp dir and chowned (as
//! root; skipped loudly otherwise). The CLI (`Trust::for_caller`) and the
//! PAM module (`Trust::for_login`) must find the same login protector.

use std::os::unix::fs::chown;
use std::path::Path;

use fscrypt_metadata::Error;
use fscrypt_metadata::login::login_protector;
use fscrypt_metadata::proto::{HashingCosts, SourceType, encode_protector};
use fscrypt_metadata::store::{SetupMode, Store};
use fscrypt_metadata::trust::Trust;
use test_support::tempdir::TempDir;

const VICTIM: u32 = 4301;
const ATTACKER: u32 = 4302;

fn costs() -> HashingCosts {
    HashingCosts {
        time: 1,
        memory: 64,
        parallelism: 1,
        truncation_fixed: true,
    }
}

/// A world-writable metadata directory with the victim's login protector
/// (owned by the victim) and one planted by the attacker that sorts first.
fn setup(tmp: &Path) -> (String, String) {
    let store = Store::new(tmp, Trust::everyone());
    store.setup(SetupMode::WorldWritable).unwrap();
    let (real, _) = fscrypt_metadata::actions::new_protector(
        SourceType::PamPassphrase,
        "",
        &costs(),
        b"pw",
        i64::from(VICTIM),
    )
    .unwrap();
    store.put_protector(&real).unwrap();
    chown(
        store.protector_dir().join(&real.protector_descriptor),
        Some(VICTIM),
        None,
    )
    .unwrap();
    let mut planted = real.clone();
    planted.protector_descriptor = "0000000000000000".into();
    let path = store.protector_dir().join(&planted.protector_descriptor);
    std::fs::write(&path, encode_protector(&planted)).unwrap();
    chown(&path, Some(ATTACKER), None).unwrap();
    (real.protector_descriptor, planted.protector_descriptor)
}

#[test]
fn cli_and_pam_find_the_same_login_protector() {
    if !test_support::skip::is_root() {
        test_support::skip::skip("trust_agreement", "needs root to chown");
        return;
    }
    let tmp = TempDir::new("trust_agreement");
    let (real, planted) = setup(tmp.path());
    let uid = i64::from(VICTIM);
    // The CLI as root (trusts everyone for its own reads), the CLI as the
    // victim, and the module at the victim's login: all take the real one.
    let root_cli = Trust::for_caller(false);
    for trust in [
        root_cli,
        Trust::user(VICTIM, false),
        Trust::for_login(VICTIM, false),
    ] {
        let p = login_protector(&Store::new(tmp.path(), trust), uid).unwrap();
        assert_eq!(p.unwrap().protector_descriptor, real, "{trust:?}");
    }
    // allow_cross_user_metadata: all of them consider the planted one.
    for trust in [Trust::user(VICTIM, true), Trust::for_login(VICTIM, true)] {
        let p = login_protector(&Store::new(tmp.path(), trust), uid).unwrap();
        assert_eq!(p.unwrap().protector_descriptor, planted, "{trust:?}");
    }
    // The victim's listing skips it; naming it is refused.
    let s = Store::new(tmp.path(), Trust::user(VICTIM, false));
    assert_eq!(s.protectors().unwrap(), vec![real.clone()]);
    assert!(matches!(
        s.protector(&planted),
        Err(Error::Untrusted {
            owner: ATTACKER,
            ..
        })
    ));
    assert!(!s.has_protector(&planted));
    // A third user sees neither the victim's nor the attacker's.
    let other = Store::new(tmp.path(), Trust::user(4303, false));
    assert!(other.protectors().unwrap().is_empty());
}

#[test]
fn a_metadata_directory_owned_by_another_user_is_refused() {
    if !test_support::skip::is_root() {
        test_support::skip::skip("trust_dirs", "needs root to chown");
        return;
    }
    let tmp = TempDir::new("trust_dirs");
    let store = Store::new(tmp.path(), Trust::everyone());
    store.setup(SetupMode::WorldWritable).unwrap();
    let victim = Store::new(tmp.path(), Trust::user(VICTIM, false));
    assert!(victim.check_setup().is_ok());
    for dir in [
        tmp.path().to_path_buf(),
        store.base_dir(),
        store.policy_dir(),
        store.protector_dir(),
    ] {
        chown(&dir, Some(ATTACKER), None).unwrap();
        let e = victim.check_setup().expect_err("another user's directory");
        assert!(
            matches!(&e, Error::UnsafeDirectory { path, owner: ATTACKER, .. } if *path == dir),
            "{e}"
        );
        assert!(e.to_string().contains("fscrypt-rs setup"), "{e}");
        assert!(victim.protectors().is_err() && victim.policies().is_err());
        // Its owner, root and allow_cross_user_metadata accept it.
        assert!(
            Store::new(tmp.path(), Trust::user(ATTACKER, false))
                .check_setup()
                .is_ok()
        );
        assert!(
            Store::new(tmp.path(), Trust::user(VICTIM, true))
                .check_setup()
                .is_ok()
        );
        chown(&dir, Some(0), None).unwrap();
        // The victim's own directory is fine too.
        chown(&dir, Some(VICTIM), None).unwrap();
        assert!(victim.check_setup().is_ok());
        chown(&dir, Some(0), None).unwrap();
    }
}
