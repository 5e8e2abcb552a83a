//! PKCS#11 protectors through the real binary (issue 25 item 2), on a
//! private SoftHSM2 token: `protector add CIPHERDIR pkcs11 --module SO
//! --token LABEL --pin-file F` after unlocking with a key file, then the
//! vault unlocks with `--pkcs11 --pin-file F` alone (module and token are
//! remembered); a wrong PIN exits 12 and changes nothing; `info --json`
//! and `protector list` show the token.

use std::path::Path;
use std::process::{Command, Output};

use test_support::softhsm::SoftHsm;
use test_support::{TempDir, os_args as args, text};

const BIN: &str = env!("CARGO_BIN_EXE_fscrypt-rs");
const EXIT_WRONG_SECRET: i32 = 12;
const PIN: &str = "4711-fscrypt";

fn run(hsm: &SoftHsm, state: &Path, a: &[&std::ffi::OsStr]) -> Output {
    let (var, conf) = hsm.env();
    test_support::run::output(
        Command::new(BIN)
            .args(a)
            .env(
                "FSCRYPT_RS_INSECURE_ARGON2_PARAMS",
                test_support::cli::CHEAP_ARGON2,
            )
            .env("FSCRYPT_RS_STATE_DIR", state)
            .env(var, conf),
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

#[test]
fn pkcs11_token_unlocks_with_its_pin_and_refuses_a_wrong_one() {
    if !test_support::softhsm::available(
        "pkcs11_token_unlocks_with_its_pin_and_refuses_a_wrong_one",
    ) {
        return;
    }
    let t = TempDir::new("sealed-pkcs11");
    let hsm = SoftHsm::new("cli");
    hsm.init_token("vault-token", PIN, "so-pin-0000");
    let state = t.sub("state");
    let cipher = t.sub("cipher");
    let key = t.join("vault.key");
    let pin = t.join("pin");
    std::fs::write(&pin, format!("{PIN}\n")).unwrap();
    let wrong = t.join("wrong-pin");
    std::fs::write(&wrong, "1234\n").unwrap();
    test_support::cli::init_with_key_file(Path::new(BIN), &cipher, &key);

    let out = ok(&run(
        &hsm,
        &state,
        args![
            "protector",
            "add",
            cipher,
            "pkcs11",
            "--module",
            hsm.module(),
            "--token",
            "vault-token",
            "--pin-file",
            pin,
            "--key-file",
            key
        ],
    ));
    assert!(out.contains("Added pkcs11 protector \"pkcs11\""), "{out}");

    // Module and token are remembered: --pkcs11 and the PIN suffice.
    let out = ok(&run(
        &hsm,
        &state,
        args![
            "protector",
            "add",
            cipher,
            "recovery-key",
            "--pkcs11",
            "--pin-file",
            pin
        ],
    ));
    assert!(out.contains("recovery-key"), "{out}");

    // A wrong PIN: exit 12, the config unchanged, the PIN never echoed.
    let before = std::fs::read(cipher.join("fscrypt.vault.json")).unwrap();
    let out = run(
        &hsm,
        &state,
        args![
            "protector",
            "add",
            cipher,
            "recovery-key",
            "--pkcs11",
            "--pin-file",
            wrong
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(EXIT_WRONG_SECRET),
        "{}",
        text(&out.stderr)
    );
    assert!(text(&out.stderr).contains("PIN"), "{}", text(&out.stderr));
    assert!(!text(&out.stderr).contains("1234"), "{}", text(&out.stderr));
    assert_eq!(
        std::fs::read(cipher.join("fscrypt.vault.json")).unwrap(),
        before
    );

    // The token is shown, with the last use on this machine.
    let info: serde_json::Value =
        serde_json::from_str(&ok(&run(&hsm, &state, args!["info", cipher, "--json"]))).unwrap();
    let p = info["protectors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["kind"] == "pkcs11")
        .unwrap();
    assert!(
        p["sealed"]["device"]
            .as_str()
            .unwrap()
            .contains("vault-token"),
        "{p}"
    );
    assert!(p["last_used"].as_u64().is_some(), "{p}");
    let list = ok(&run(&hsm, &state, args!["protector", "list", cipher]));
    assert!(list.contains("vault-token"), "{list}");

    // Without the token's module the unlock fails in one line, not exit 12.
    let out = run(
        &hsm,
        &state,
        args![
            "protector",
            "add",
            cipher,
            "recovery-key",
            "--pkcs11",
            "--pin-file",
            pin,
            "--module",
            "/nonexistent/libpkcs11.so"
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
}
