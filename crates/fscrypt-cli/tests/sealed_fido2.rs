//! FIDO2 protectors through the real binary (issue 25 item 3): two
//! software authenticators (`test_support::fido::SoftKey`, reached by
//! libfido2 through the test-only device `unix:<socket>`) as two
//! protectors; each unlocks with `--fido2 --device`, one with its PIN from
//! `--pin-file`; a key that holds no credential of the vault exits 12.

use std::path::Path;
use std::process::{Command, Output};

use test_support::fido::SoftKey;
use test_support::{TempDir, os_args as args, text};

const BIN: &str = env!("CARGO_BIN_EXE_fscrypt-rs");
const EXIT_WRONG_SECRET: i32 = 12;

fn run(state: &Path, a: &[&std::ffi::OsStr]) -> Output {
    test_support::run::output(
        Command::new(BIN)
            .args(a)
            .env(
                "FSCRYPT_RS_INSECURE_ARGON2_PARAMS",
                test_support::cli::CHEAP_ARGON2,
            )
            .env("FSCRYPT_RS_STATE_DIR", state),
        b"",
    )
}

fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "exit {:?}: {}{}",
        out.status.code(),
        text(&out.stdout),
        text(&out.stderr)
    );
    text(&out.stdout)
}

fn libfido2_present() -> bool {
    let found = [
        "/usr/lib/x86_64-linux-gnu",
        "/usr/lib/aarch64-linux-gnu",
        "/usr/lib",
        "/usr/lib64",
    ]
    .iter()
    .any(|d| Path::new(d).join("libfido2.so.1").exists());
    if !found {
        test_support::skip::skip(
            "sealed_fido2",
            "libfido2.so.1 is not installed (apt install libfido2-1)",
        );
    }
    found
}

#[test]
fn two_fido2_keys_are_two_protectors_and_a_stranger_is_refused() {
    if !libfido2_present() {
        return;
    }
    let t = TempDir::new("sealed-fido2");
    let state = t.sub("state");
    let cipher = t.sub("cipher");
    let key = t.join("vault.key");
    test_support::cli::init_with_key_file(Path::new(BIN), &cipher, &key);
    let plain = SoftKey::start(None);
    let with_pin = SoftKey::start(Some("8642"));
    let stranger = SoftKey::start(None);
    let pin = t.join("pin");
    std::fs::write(&pin, "8642\n").unwrap();

    let out = ok(&run(
        &state,
        args![
            "protector",
            "add",
            cipher,
            "fido2",
            "--device",
            plain.device(),
            "--key-file",
            key
        ],
    ));
    assert!(out.contains("Added fido2 protector \"fido2\""), "{out}");
    let out = run(
        &state,
        args![
            "protector",
            "add",
            cipher,
            "fido2",
            "--device",
            with_pin.device(),
            "--pin-file",
            pin,
            "--key-file",
            key
        ],
    );
    assert!(text(&out.stderr).contains("Touch"), "{}", text(&out.stderr));
    assert!(ok(&out).contains("\"fido2-2\""));

    // Each key opens the vault on its own (adding a recovery key needs the
    // master key); the PIN key with its PIN.
    ok(&run(
        &state,
        args![
            "protector",
            "add",
            cipher,
            "recovery-key",
            "--fido2",
            "--device",
            plain.device()
        ],
    ));
    ok(&run(
        &state,
        args![
            "protector",
            "add",
            cipher,
            "recovery-key",
            "--fido2",
            "--device",
            with_pin.device(),
            "--pin-file",
            pin
        ],
    ));
    assert!(plain.touches() >= 3 && with_pin.touches() >= 3);

    // A key that holds none of the vault's credentials: exit 12, each
    // protector's refusal named.
    let before = std::fs::read(cipher.join("fscrypt.vault.json")).unwrap();
    let out = run(
        &state,
        args![
            "protector",
            "add",
            cipher,
            "recovery-key",
            "--fido2",
            "--device",
            stranger.device()
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(EXIT_WRONG_SECRET),
        "{}",
        text(&out.stderr)
    );
    let err = text(&out.stderr);
    assert!(
        err.contains("\"fido2\"") && err.contains("\"fido2-2\""),
        "{err}"
    );
    assert_eq!(
        std::fs::read(cipher.join("fscrypt.vault.json")).unwrap(),
        before
    );

    let list = ok(&run(&state, args!["protector", "list", cipher]));
    assert!(list.contains("credential="), "{list}");
}
