//! age protectors through the real binary (issue 25 items 4 and 5), with
//! Debian's `age` and `age-keygen`: an administrator adds a user with only
//! the user's public key; the user's identity unlocks; `age -d -i` opens
//! the stored age file (interop one way) and an age file made by Debian's
//! `age -r` for another identity unlocks the vault (the other way); a
//! non-recipient identity is refused with exit 12; the last standalone
//! protector is only removed with `--force`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use test_support::skip::tool_available;
use test_support::{TempDir, os_args as args, text};

const BIN: &str = env!("CARGO_BIN_EXE_fscrypt-rs");
const EXIT_WRONG_SECRET: i32 = 12;
const ARMOR_BEGIN: &str = "-----BEGIN AGE ENCRYPTED FILE-----";

fn run(args: &[&std::ffi::OsStr], stdin: &[u8], state: &Path) -> Output {
    test_support::run::output(
        Command::new(BIN)
            .args(args)
            .env(
                "FSCRYPT_RS_INSECURE_ARGON2_PARAMS",
                test_support::cli::CHEAP_ARGON2,
            )
            .env("FSCRYPT_RS_STATE_DIR", state),
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

fn config_json(cipher: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(cipher.join("fscrypt.vault.json")).unwrap()).unwrap()
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
    ok(&run(args!["init", cipher], b"admin pass\n", &state));
    let (alice, alice_pub) = keygen(t.path(), "alice.txt");
    let (bob, _) = keygen(t.path(), "bob.txt");
    let (_, carol_pub) = keygen(t.path(), "carol.txt");

    // The administrator adds Alice with her public key only.
    let out = ok(&run(
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
        &state,
    ));
    assert!(out.contains("Added age protector \"alice\""), "{out}");
    let config = config_json(&cipher);
    assert_eq!(config["version"], 3);
    let list = ok(&run(args!["protector", "list", cipher], b"", &state));
    assert!(
        list.contains("alice") && list.contains(&alice_pub),
        "{list}"
    );

    // Alice's identity unlocks (adding a recovery key needs an unlock).
    let out = ok(&run(
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
        &state,
    ));
    assert!(out.contains("rk2"), "{out}");
    // ... and the use is remembered on this machine.
    let list = ok(&run(args!["protector", "list", cipher], b"", &state));
    let alice_row = list.lines().find(|l| l.starts_with("alice")).unwrap();
    assert!(alice_row.contains("UTC"), "no last use in {alice_row:?}");

    // Bob is not a recipient: refused like a wrong passphrase.
    let out = run(
        args![
            "protector",
            "add",
            cipher,
            "recovery-key",
            "--age-identity",
            &bob
        ],
        b"",
        &state,
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
        &state,
    ));
    let out = run(
        args![
            "protector",
            "add",
            cipher,
            "recovery-key",
            "--age-identity",
            &alice
        ],
        b"",
        &state,
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
        args!["init", cipher, "--recipient", &public],
        b"",
        &state,
    ));
    assert!(out.contains("age protector"), "{out}");
    let names: Vec<String> = config_json(&cipher)["protectors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(names, ["age", "recovery-key"]);
    let before = std::fs::read(cipher.join("fscrypt.vault.json")).unwrap();
    let out = run(
        args![
            "protector",
            "remove",
            cipher,
            "recovery-key",
            "--age-identity",
            &id
        ],
        b"",
        &state,
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("--force"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(
        std::fs::read(cipher.join("fscrypt.vault.json")).unwrap(),
        before
    );
    ok(&run(
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
        &state,
    ));
    let list = ok(&run(args!["protector", "list", cipher], b"", &state));
    assert!(!list.contains("recovery-key"), "{list}");
}
