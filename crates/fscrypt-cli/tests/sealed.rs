//! Sealed protectors through the real binary (issue 25), each kind against
//! a real peer started privately by its test:
//!
//! * **TPM2**, a private swtpm on loopback (`test_support::swtpm`):
//!   `init --tpm2` (no passphrase, a recovery key), unlock with `--tpm2`
//!   and no prompt (and, with root and /dev/fuse, a real mount), refusal
//!   after `tpm2_pcrextend 7` naming PCR 7 with exit 12, `protector
//!   reseal` after unlocking with the recovery key, a PIN protector (right
//!   PIN, wrong PIN exit 12, the TPM's dictionary-attack lockout), and
//!   `protector list` showing the PCRs and the last use.
//! * **PKCS#11**, a private SoftHSM2 token (`test_support::softhsm`):
//!   added after unlocking with a key file, then unlocking with `--pkcs11
//!   --pin-file F` alone (module and token remembered); a wrong PIN exits 12
//!   and changes nothing; `info --json` and `protector list` show the token.
//! * **FIDO2**, software authenticators (`test_support::fido::SoftKey`,
//!   reached by libfido2 through the test-only device `unix:<socket>`):
//!   two keys as two protectors, one with a PIN; a key that holds no
//!   credential of the vault exits 12.
//! * **age**, Debian's `age` and `age-keygen`: an administrator adds a
//!   user with only the public key; the identity unlocks; `age -d -i`
//!   opens the stored file and a file made by `age -r` for another identity
//!   unlocks (interop both ways); a non-recipient exits 12; the last
//!   standalone protector is removed only with `--force`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Instant;

use test_support::fido::SoftKey;
use test_support::skip::tool_available;
use test_support::softhsm::SoftHsm;
use test_support::swtpm::SwTpm;
use test_support::{TempDir, os_args as args, text};

const BIN: &str = env!("CARGO_BIN_EXE_fscrypt-rs");
const EXIT_WRONG_SECRET: i32 = 12;
const ARMOR_BEGIN: &str = "-----BEGIN AGE ENCRYPTED FILE-----";
const PIN: &str = "4711-fscrypt";

/// Runs the binary with cheap Argon2id costs, its own state directory (the
/// last-use record), `stdin` piped in, no TCTI from the environment, and
/// `env` added.
fn run_with(state: &Path, a: &[&std::ffi::OsStr], stdin: &[u8], env: &[(&str, &Path)]) -> Output {
    let mut cmd = Command::new(BIN);
    cmd.args(a)
        .env(
            "FSCRYPT_RS_INSECURE_ARGON2_PARAMS",
            test_support::cli::CHEAP_ARGON2,
        )
        .env("FSCRYPT_RS_STATE_DIR", state)
        .env_remove("TPM2TOOLS_TCTI")
        .env_remove("TCTI");
    for (k, v) in env {
        cmd.env(k, v);
    }
    test_support::run::output(&mut cmd, stdin)
}

fn run(state: &Path, a: &[&std::ffi::OsStr], stdin: &[u8]) -> Output {
    run_with(state, a, stdin, &[])
}

fn run_env(state: &Path, a: &[&std::ffi::OsStr], env: &[(&str, &Path)]) -> Output {
    run_with(state, a, b"", env)
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

/// Asserts exit 12 (a wrong secret); returns stderr.
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

/// Asserts exit 1 (an error that is not a wrong secret); returns stderr.
fn failed(out: &Output) -> String {
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    text(&out.stderr)
}

/// The protector names in the config, in order.
fn names(cipher: &Path) -> Vec<String> {
    config_json(cipher)["protectors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_owned())
        .collect()
}

fn config(cipher: &Path) -> Vec<u8> {
    std::fs::read(cipher.join("fscrypt.vault.json")).unwrap()
}

fn config_json(cipher: &Path) -> serde_json::Value {
    serde_json::from_slice(&config(cipher)).unwrap()
}

// ---- TPM2 ----

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
    assert_eq!(names(&cipher), ["tpm2", "recovery-key"]);
    assert_eq!(config_json(&cipher)["version"], 3);

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
    let err = failed(&out);
    assert!(err.contains("--force"), "{err}");
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
    let err = failed(&out);
    assert!(err.contains("locked out"), "{err}");
}

// ---- PKCS#11 ----

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

    let out = ok(&run_env(
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
        &[hsm.env()],
    ));
    assert!(out.contains("Added pkcs11 protector \"pkcs11\""), "{out}");

    // Module and token are remembered: --pkcs11 and the PIN suffice.
    let out = ok(&run_env(
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
        &[hsm.env()],
    ));
    assert!(out.contains("recovery-key"), "{out}");

    // A wrong PIN: exit 12, the config unchanged, the PIN never echoed.
    let before = config(&cipher);
    let out = run_env(
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
        &[hsm.env()],
    );
    assert_eq!(
        out.status.code(),
        Some(EXIT_WRONG_SECRET),
        "{}",
        text(&out.stderr)
    );
    assert!(text(&out.stderr).contains("PIN"), "{}", text(&out.stderr));
    assert!(!text(&out.stderr).contains("1234"), "{}", text(&out.stderr));
    assert_eq!(config(&cipher), before);

    // The token is shown, with the last use on this machine.
    let info: serde_json::Value = serde_json::from_str(&ok(&run_env(
        &state,
        args!["info", cipher, "--json"],
        &[hsm.env()],
    )))
    .unwrap();
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
    let list = ok(&run_env(
        &state,
        args!["protector", "list", cipher],
        &[hsm.env()],
    ));
    assert!(list.contains("vault-token"), "{list}");

    // Without the token's module the unlock fails in one line, not exit 12.
    let out = run_env(
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
        &[hsm.env()],
    );
    failed(&out);
}

// ---- FIDO2 ----

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
        b"",
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
        b"",
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
        b"",
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
        b"",
    ));
    assert!(plain.touches() >= 3 && with_pin.touches() >= 3);

    // A key that holds none of the vault's credentials: exit 12, each
    // protector's refusal named.
    let before = config(&cipher);
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
        b"",
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
    assert_eq!(config(&cipher), before);

    let list = ok(&run(&state, args!["protector", "list", cipher], b""));
    assert!(list.contains("credential="), "{list}");
}

// ---- age ----

/// A new age identity file made by `age-keygen`, and its public key.
fn keygen(dir: &Path, name: &str) -> (PathBuf, String) {
    let path = dir.join(name);
    let out = Command::new("age-keygen")
        .arg("-o")
        .arg(&path)
        .output()
        .unwrap();
    assert!(out.status.success(), "age-keygen: {}", text(&out.stderr));
    let out = Command::new("age-keygen")
        .arg("-y")
        .arg(&path)
        .output()
        .unwrap();
    assert!(out.status.success(), "age-keygen -y: {}", text(&out.stderr));
    (path, text(&out.stdout).trim().to_owned())
}

/// The protector named `name` in the config, and the path of the string
/// field of its sealed record that holds the armored age file.
fn age_file(config: &serde_json::Value, name: &str) -> (usize, String, String) {
    let protectors = config["protectors"].as_array().unwrap();
    let i = protectors.iter().position(|p| p["name"] == name).unwrap();
    let sealed = protectors[i]["sealed"].as_object().unwrap();
    let (field, armored) = sealed
        .iter()
        .find_map(|(k, v)| {
            v.as_str()
                .filter(|s| s.starts_with(ARMOR_BEGIN))
                .map(|s| (k.clone(), s.to_owned()))
        })
        .unwrap_or_else(|| panic!("no armored age file in {sealed:?}"));
    (i, field, armored)
}

fn have_age(test: &str) -> bool {
    tool_available(test, "age", &["--version"], "age")
        && tool_available(test, "age-keygen", &["--version"], "age")
}

#[test]
fn age_recipient_unlocks_and_debian_age_reads_and_writes_the_protector() {
    if !have_age("age_recipient_unlocks_and_debian_age_reads_and_writes_the_protector") {
        return;
    }
    let t = TempDir::new("sealed-age");
    let state = t.sub("state");
    let cipher = t.sub("cipher");
    ok(&run(&state, args!["init", cipher], b"admin pass\n"));
    let (alice, alice_pub) = keygen(t.path(), "alice.txt");
    let (bob, _) = keygen(t.path(), "bob.txt");
    let (_, carol_pub) = keygen(t.path(), "carol.txt");

    // The administrator adds Alice with her public key only.
    let out = ok(&run(
        &state,
        args![
            "protector",
            "add",
            cipher,
            "age",
            "--recipient",
            &alice_pub,
            "--name",
            "alice"
        ],
        b"admin pass\n",
    ));
    assert!(out.contains("Added age protector \"alice\""), "{out}");
    let config = config_json(&cipher);
    assert_eq!(config["version"], 3);
    let list = ok(&run(&state, args!["protector", "list", cipher], b""));
    assert!(
        list.contains("alice") && list.contains(&alice_pub),
        "{list}"
    );

    // Alice's identity unlocks (adding a recovery key needs an unlock).
    let out = ok(&run(
        &state,
        args![
            "protector",
            "add",
            cipher,
            "recovery-key",
            "--age-identity",
            &alice,
            "--name",
            "rk2"
        ],
        b"",
    ));
    assert!(out.contains("rk2"), "{out}");
    // ... and the use is remembered on this machine.
    let list = ok(&run(&state, args!["protector", "list", cipher], b""));
    let alice_row = list.lines().find(|l| l.starts_with("alice")).unwrap();
    assert!(alice_row.contains("UTC"), "no last use in {alice_row:?}");

    // Bob is not a recipient: refused like a wrong passphrase.
    let out = run(
        &state,
        args![
            "protector",
            "add",
            cipher,
            "recovery-key",
            "--age-identity",
            &bob
        ],
        b"",
    );
    assert_eq!(
        out.status.code(),
        Some(EXIT_WRONG_SECRET),
        "{}",
        text(&out.stderr)
    );
    assert!(text(&out.stderr).contains("alice"), "{}", text(&out.stderr));

    // Interop, one way: Debian's age opens the stored file with Alice's key.
    let (i, field, armored) = age_file(&config, "alice");
    let file = t.join("alice.age");
    std::fs::write(&file, &armored).unwrap();
    let out = Command::new("age")
        .arg("-d")
        .arg("-i")
        .arg(&alice)
        .arg(&file)
        .output()
        .unwrap();
    assert!(out.status.success(), "age -d: {}", text(&out.stderr));
    let secret = out.stdout;
    assert_eq!(secret.len(), 32);

    // The other way: the same secret encrypted by Debian's age to Carol...
    let plain = t.join("secret.bin");
    std::fs::write(&plain, &secret).unwrap();
    let out = Command::new("age")
        .args(["-a", "-r", &carol_pub, "-o"])
        .arg(t.join("carol.age"))
        .arg(&plain)
        .output()
        .unwrap();
    assert!(out.status.success(), "age -r: {}", text(&out.stderr));
    std::fs::remove_file(&plain).unwrap();
    let mut edited = config_json(&cipher);
    edited["protectors"][i]["sealed"][&field] =
        std::fs::read_to_string(t.join("carol.age")).unwrap().into();
    std::fs::write(
        cipher.join("fscrypt.vault.json"),
        serde_json::to_vec_pretty(&edited).unwrap(),
    )
    .unwrap();
    // ... unlocks with Carol's identity, and no longer with Alice's.
    let carol = t.join("carol.txt");
    ok(&run(
        &state,
        args![
            "protector",
            "add",
            cipher,
            "recovery-key",
            "--age-identity",
            &carol,
            "--name",
            "rk3"
        ],
        b"",
    ));
    let out = run(
        &state,
        args![
            "protector",
            "add",
            cipher,
            "recovery-key",
            "--age-identity",
            &alice
        ],
        b"",
    );
    assert_eq!(
        out.status.code(),
        Some(EXIT_WRONG_SECRET),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn the_last_standalone_protector_is_removed_only_with_force() {
    if !have_age("the_last_standalone_protector_is_removed_only_with_force") {
        return;
    }
    let t = TempDir::new("sealed-force");
    let state = t.sub("state");
    let cipher = t.sub("cipher");
    let (id, public) = keygen(t.path(), "id.txt");
    // init with an age recipient: a recovery key too, no passphrase.
    let out = ok(&run(
        &state,
        args!["init", cipher, "--recipient", &public],
        b"",
    ));
    assert!(out.contains("age protector"), "{out}");
    assert_eq!(names(&cipher), ["age", "recovery-key"]);
    let before = config(&cipher);
    let out = run(
        &state,
        args![
            "protector",
            "remove",
            cipher,
            "recovery-key",
            "--age-identity",
            &id
        ],
        b"",
    );
    let err = failed(&out);
    assert!(err.contains("--force"), "{err}");
    assert_eq!(config(&cipher), before);
    ok(&run(
        &state,
        args![
            "protector",
            "remove",
            cipher,
            "recovery-key",
            "--age-identity",
            &id,
            "--force"
        ],
        b"",
    ));
    let list = ok(&run(&state, args!["protector", "list", cipher], b""));
    assert!(!list.contains("recovery-key"), "{list}");
}
