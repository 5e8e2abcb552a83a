//! TPM2 protectors through the real binary (issue 25 items 1, 5, 7), on a
//! private swtpm on loopback: `init --tpm2` (no passphrase, a recovery
//! key), unlock with `--tpm2` and no prompt (and, with root and
//! /dev/fuse, a real mount), refusal after `tpm2_pcrextend 7` naming
//! PCR 7 with exit 12, `protector reseal` after unlocking with the
//! recovery key, a PIN protector (right PIN, wrong PIN exit 12, the TPM's
//! dictionary-attack lockout), and `protector list` / `info` showing the
//! PCRs.

use std::path::Path;
use std::process::{Command, Output};
use std::time::Instant;

use test_support::swtpm::SwTpm;
use test_support::{TempDir, os_args as args, text};

const BIN: &str = env!("CARGO_BIN_EXE_fscrypt-rs");
const EXIT_WRONG_SECRET: i32 = 12;

fn run(state: &Path, a: &[&std::ffi::OsStr], stdin: &[u8]) -> Output {
    test_support::run::output(
        Command::new(BIN)
            .args(a)
            .env(
                "FSCRYPT_RS_INSECURE_ARGON2_PARAMS",
                test_support::cli::CHEAP_ARGON2,
            )
            .env("FSCRYPT_RS_STATE_DIR", state)
            .env_remove("TPM2TOOLS_TCTI")
            .env_remove("TCTI"),
        stdin,
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

fn refused(out: &Output) -> String {
    assert_eq!(
        out.status.code(),
        Some(EXIT_WRONG_SECRET),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    text(&out.stderr)
}

/// The recovery key printed by `init`.
fn recovery_key_in(stdout: &str) -> String {
    stdout
        .lines()
        .map(str::trim)
        .find(|l| l.len() == 69 && l.split('-').count() == 14)
        .unwrap_or_else(|| panic!("no recovery key in {stdout}"))
        .to_owned()
}

/// Unlocks with `--tpm2` by adding a key file (an operation that needs the
/// master key) and returns the command's output.
fn unlock_tpm2(state: &Path, cipher: &Path, tcti: &str, extra: &[&str], key: &Path) -> Output {
    let mut a: Vec<std::ffi::OsString> = ["protector", "add"].map(Into::into).to_vec();
    a.push(cipher.into());
    a.extend(["key-file", "--new-key-file"].map(Into::into));
    a.push(key.into());
    a.extend(["--tpm2", "--tcti", tcti].map(Into::into));
    a.extend(extra.iter().map(Into::into));
    let refs: Vec<&std::ffi::OsStr> = a.iter().map(|s| s.as_os_str()).collect();
    run(state, &refs, b"")
}

#[test]
fn tpm2_protector_unlocks_refuses_after_a_pcr_change_and_reseals() {
    let Some(tpm) = SwTpm::start("tpm2_protector_unlocks_refuses_after_a_pcr_change_and_reseals")
    else {
        return;
    };
    let tcti = tpm.tcti();
    let t = TempDir::new("sealed-tpm2");
    let state = t.sub("state");
    let cipher = t.sub("cipher");

    // init --tpm2: no passphrase asked (stdin empty), a recovery key made.
    let out = ok(&run(
        &state,
        args!["init", cipher, "--tpm2", "--tcti", &tcti],
        b"",
    ));
    let rk = recovery_key_in(&out);
    assert!(
        out.contains("tpm2 protector") && out.contains("sha256:7"),
        "{out}"
    );
    let config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(cipher.join("fscrypt.vault.json")).unwrap()).unwrap();
    let names: Vec<&str> = config["protectors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["tpm2", "recovery-key"]);
    assert_eq!(config["version"], 3);

    // Unlocks with no prompt; print how long the whole command takes.
    let start = Instant::now();
    ok(&unlock_tpm2(&state, &cipher, &tcti, &[], &t.join("k1")));
    eprintln!(
        "fscrypt-rs protector add ... --tpm2 (one TPM2 unlock, swtpm): {:.0} ms",
        start.elapsed().as_secs_f64() * 1000.0
    );
    if test_support::skip::can_mount(
        "tpm2_protector_unlocks_refuses_after_a_pcr_change_and_reseals",
    ) {
        let mnt = t.sub("mnt");
        ok(&run(
            &state,
            args!["mount", cipher, mnt, "--tpm2", "--tcti", &tcti],
            b"",
        ));
        let _guard = test_support::MountGuard::new(BIN, &mnt);
        std::fs::write(mnt.join("sealed.txt"), b"opened by the TPM").unwrap();
        assert_eq!(
            std::fs::read(mnt.join("sealed.txt")).unwrap(),
            b"opened by the TPM"
        );
    }

    // A boot change: PCR 7 moves, the TPM refuses, the message says what to do.
    tpm.pcr_extend(7, &"ab".repeat(32));
    let err = refused(&unlock_tpm2(&state, &cipher, &tcti, &[], &t.join("k2")));
    assert!(err.contains("PCR 7") && err.contains("reseal"), "{err}");
    assert!(
        !t.join("k2").exists(),
        "a refused unlock left its new key file"
    );

    // Reseal after unlocking with the recovery key; the TPM opens it again.
    let out = ok(&run(
        &state,
        args![
            "protector",
            "reseal",
            cipher,
            "tpm2",
            "--recovery-key",
            "--tcti",
            &tcti
        ],
        format!("{rk}\n").as_bytes(),
    ));
    assert!(out.contains("tpm2"), "{out}");
    ok(&unlock_tpm2(&state, &cipher, &tcti, &[], &t.join("k3")));

    // Shown with its PCRs and its last use.
    let list = ok(&run(&state, args!["protector", "list", cipher], b""));
    let row = list.lines().find(|l| l.starts_with("tpm2")).unwrap();
    assert!(
        row.contains("pcrs=sha256:7") && row.contains("UTC"),
        "{row}"
    );

    // The recovery key is the last standalone protector (the key files
    // added above are standalone too: remove them first).
    for k in ["key-file", "key-file-2"] {
        ok(&run(
            &state,
            args!["protector", "remove", cipher, k, "--recovery-key"],
            format!("{rk}\n").as_bytes(),
        ));
    }
    let out = run(
        &state,
        args![
            "protector",
            "remove",
            cipher,
            "recovery-key",
            "--tpm2",
            "--tcti",
            &tcti
        ],
        b"",
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("--force"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn tpm2_pin_right_wrong_and_lockout() {
    let Some(tpm) = SwTpm::start("tpm2_pin_right_wrong_and_lockout") else {
        return;
    };
    let tcti = tpm.tcti();
    let t = TempDir::new("sealed-tpm2-pin");
    let state = t.sub("state");
    let cipher = t.sub("cipher");
    let key = t.join("vault.key");
    test_support::cli::init_with_key_file(Path::new(BIN), &cipher, &key);
    let pin = t.join("pin");
    std::fs::write(&pin, "2468\n").unwrap();
    let wrong = t.join("wrong");
    std::fs::write(&wrong, "1357\n").unwrap();
    ok(&run(
        &state,
        args![
            "protector",
            "add",
            cipher,
            "tpm2",
            "--pin",
            "--pcrs",
            "7,14",
            "--tcti",
            &tcti,
            "--pin-file",
            pin,
            "--key-file",
            key
        ],
        b"",
    ));
    let list = ok(&run(&state, args!["protector", "list", cipher], b""));
    assert!(
        list.contains("pcrs=sha256:7,14") && list.contains("pin=yes"),
        "{list}"
    );

    ok(&unlock_tpm2(
        &state,
        &cipher,
        &tcti,
        &["--pin-file", pin.to_str().unwrap()],
        &t.join("k1"),
    ));
    let err = refused(&unlock_tpm2(
        &state,
        &cipher,
        &tcti,
        &["--pin-file", wrong.to_str().unwrap()],
        &t.join("k2"),
    ));
    assert!(err.contains("PIN") && !err.contains("1357"), "{err}");
    assert!(!err.contains("ERROR:esys"), "TSS log noise: {err}");

    // Two failures allowed: the next wrong PIN locks the TPM, and then even
    // the right PIN is refused (not as a wrong secret: exit 1).
    tpm.dictionary_lockout(&[
        "--setup-parameters",
        "--max-tries=2",
        "--recovery-time=600",
        "--lockout-recovery-time=600",
    ]);
    for k in ["k3", "k4"] {
        let _ = unlock_tpm2(
            &state,
            &cipher,
            &tcti,
            &["--pin-file", wrong.to_str().unwrap()],
            &t.join(k),
        );
    }
    let out = unlock_tpm2(
        &state,
        &cipher,
        &tcti,
        &["--pin-file", pin.to_str().unwrap()],
        &t.join("k5"),
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("locked out"),
        "{}",
        text(&out.stderr)
    );
}
