//! age protectors against Debian's `age` and `age-keygen` (age 1.1, the Go
//! reference implementation): identities from `age-keygen -o F`, files
//! from `age -r ... -a`, both directions of interop, the refusals of issue
//! 25 item 4. Each test runs the binaries in its own temporary directory
//! (removed on drop, even on panic); without them it prints a one-line
//! skip reason and returns.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use fscrypt_seal::age::{self, SealOptions, UnsealOptions};
use fscrypt_seal::{Error, Interaction, SECRET_SIZE, Sealed, Secret};
use test_support::run::{assert_ok, describe, output};
use test_support::{TempDir, skip};
use zeroize::Zeroizing;

/// No prompts: age identities from `age-keygen` have no passphrase.
struct NoUi;

impl Interaction for NoUi {
    fn pin(&mut self, what: &str, _confirm: bool) -> Result<Zeroizing<String>, Error> {
        panic!("unexpected prompt for {what}")
    }
    fn notice(&mut self, _message: &str) {}
}

/// Whether Debian's `age` and `age-keygen` are installed; a skip line when
/// not.
fn tools(test: &str) -> bool {
    skip::tool_available(test, "age", &["--version"], "age")
        && skip::tool_available(test, "age-keygen", &["--version"], "age")
}

/// A new identity from `age-keygen -o DIR/NAME` and its public key from
/// `age-keygen -y`.
fn keygen(dir: &TempDir, name: &str) -> (PathBuf, String) {
    let path = dir.path().join(name);
    let out = output(Command::new("age-keygen").arg("-o").arg(&path), b"");
    assert_ok(&out, "age-keygen -o");
    let out = output(Command::new("age-keygen").arg("-y").arg(&path), b"");
    assert_ok(&out, "age-keygen -y");
    let recipient = String::from_utf8(out.stdout).unwrap().trim().to_string();
    assert!(recipient.starts_with("age1"), "{recipient}");
    (path, recipient)
}

/// `age -d -i IDENTITY` of `file`: Ok(plaintext) or Err(what it printed).
fn debian_decrypt(identity: &Path, file: &str) -> Result<Vec<u8>, String> {
    let out = output(
        Command::new("age").arg("-d").arg("-i").arg(identity),
        file.as_bytes(),
    );
    if out.status.success() {
        Ok(out.stdout)
    } else {
        Err(describe(&out))
    }
}

/// `age -a -r R...` of `plain`: the armored file.
fn debian_encrypt(recipients: &[&str], plain: &[u8]) -> String {
    let mut cmd = Command::new("age");
    cmd.arg("-a");
    for r in recipients {
        cmd.arg("-r").arg(r);
    }
    let out = output(&mut cmd, plain);
    assert_ok(&out, "age -a -r");
    String::from_utf8(out.stdout).unwrap()
}

fn seal_to(recipients: &[&str], secret: &Secret) -> Result<age::Sealed, Error> {
    let options = SealOptions {
        recipients: recipients.iter().map(ToString::to_string).collect(),
    };
    age::seal(&options, secret, &mut NoUi)
}

fn unseal_with(sealed: &age::Sealed, identity: &Path) -> Result<Secret, Error> {
    let options = UnsealOptions {
        identity: Some(identity.to_path_buf()),
    };
    age::unseal(sealed, &options, &mut NoUi)
}

/// The record as the vault would load it from its JSON config.
fn record(recipients: &[&str], file: &str) -> age::Sealed {
    let json = serde_json::json!({"kind": "age", "recipients": recipients, "file": file});
    match Sealed::from_json(&json).unwrap() {
        Sealed::Age(s) => s,
        other => panic!("not an age record: {other:?}"),
    }
}

#[test]
fn our_seal_opens_with_debian_age() {
    if !tools(module_path!()) {
        return;
    }
    let dir = TempDir::new("age-it");
    let (identity, recipient) = keygen(&dir, "key.txt");
    let secret = Secret::random().unwrap();
    let sealed = seal_to(&[&recipient], &secret).unwrap();
    let exported = dir.path().join("protector.age");
    std::fs::write(&exported, age::armored(&sealed)).unwrap();
    let out = output(
        Command::new("age")
            .arg("-d")
            .arg("-i")
            .arg(&identity)
            .arg(&exported),
        b"",
    );
    assert_ok(&out, "age -d -i");
    assert_eq!(out.stdout, secret.as_bytes());
}

#[test]
fn a_debian_age_file_unseals_here() {
    if !tools(module_path!()) {
        return;
    }
    let dir = TempDir::new("age-it");
    let (identity, recipient) = keygen(&dir, "key.txt");
    let secret = Secret::random().unwrap();
    let file = debian_encrypt(&[&recipient], secret.as_bytes());
    let sealed = record(&[&recipient], &file);
    let started = Instant::now();
    let got = unseal_with(&sealed, &identity).unwrap();
    let took = started.elapsed();
    assert_eq!(got.as_bytes(), secret.as_bytes());
    eprintln!(
        "age: one unseal (read the identity file, decrypt a 1-recipient armored file) took {:.3} ms",
        took.as_secs_f64() * 1e3
    );
}

#[test]
fn an_administrator_adds_a_user_with_only_their_public_key() {
    if !tools(module_path!()) {
        return;
    }
    let dir = TempDir::new("age-it");
    let (admin, admin_pub) = keygen(&dir, "admin.txt");
    let (user, user_pub) = keygen(&dir, "user.txt");
    let secret = Secret::random().unwrap();
    let sealed = seal_to(&[&admin_pub], &secret).unwrap();
    assert!(unseal_with(&sealed, &user).unwrap_err().is_wrong_secret());
    // `age -d -i ADMIN | age -r USER -a`, as the issue describes it.
    let plain = Zeroizing::new(debian_decrypt(&admin, age::armored(&sealed)).unwrap());
    let file = debian_encrypt(&[&admin_pub, &user_pub], &plain);
    let sealed = record(&[&admin_pub, &user_pub], &file);
    for id in [&admin, &user] {
        assert_eq!(
            unseal_with(&sealed, id).unwrap().as_bytes(),
            secret.as_bytes()
        );
    }
}

#[test]
fn two_recipients_each_identity_opens() {
    if !tools(module_path!()) {
        return;
    }
    let dir = TempDir::new("age-it");
    let (one, one_pub) = keygen(&dir, "one.txt");
    let (two, two_pub) = keygen(&dir, "two.txt");
    let secret = Secret::random().unwrap();
    let sealed = seal_to(&[&one_pub, &two_pub], &secret).unwrap();
    assert_eq!(
        fscrypt_seal::Sealed::Age(sealed.clone()).describe(),
        [("recipients", format!("{one_pub},{two_pub}"))]
    );
    for id in [&one, &two] {
        assert_eq!(
            unseal_with(&sealed, id).unwrap().as_bytes(),
            secret.as_bytes()
        );
        assert_eq!(
            debian_decrypt(id, age::armored(&sealed)).unwrap(),
            secret.as_bytes()
        );
    }
    // An identity file holding both keys (as `cat one two` makes) opens too.
    let both = dir.path().join("both.txt");
    let text = [std::fs::read(&one).unwrap(), std::fs::read(&two).unwrap()].concat();
    std::fs::write(&both, text).unwrap();
    assert_eq!(
        unseal_with(&sealed, &both).unwrap().as_bytes(),
        secret.as_bytes()
    );
}

#[test]
fn a_non_recipient_identity_is_refused_as_wrong_secret() {
    if !tools(module_path!()) {
        return;
    }
    let dir = TempDir::new("age-it");
    let (_, recipient) = keygen(&dir, "key.txt");
    let (other, _) = keygen(&dir, "other.txt");
    let secret = Secret::random().unwrap();
    for sealed in [
        seal_to(&[&recipient], &secret).unwrap(),
        record(
            &[&recipient],
            &debian_encrypt(&[&recipient], secret.as_bytes()),
        ),
    ] {
        match unseal_with(&sealed, &other) {
            Err(Error::WrongSecret(m)) => {
                assert!(
                    m.contains("is not one of this protector's recipients"),
                    "{m}"
                )
            }
            r => panic!("expected WrongSecret, got {r:?}"),
        }
        // Debian's age agrees that it is not a recipient.
        assert!(debian_decrypt(&other, age::armored(&sealed)).is_err());
    }
}

#[test]
fn bad_recipients_are_invalid() {
    if !tools(module_path!()) {
        return;
    }
    let dir = TempDir::new("age-it");
    let (identity, recipient) = keygen(&dir, "key.txt");
    let secret = Secret::random().unwrap();
    // Debian's age accepts an ssh recipient; this protector does not.
    let ssh = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHsKLqeplhpW+uObz5dvMgjz1OxfM/XXUB+VHtZ6isGN";
    let typo = format!("{}x", &recipient[..recipient.len() - 1]);
    let secret_key = std::fs::read_to_string(&identity).unwrap();
    let secret_key = secret_key
        .lines()
        .find(|l| l.starts_with("AGE-SECRET-KEY-1"))
        .unwrap();
    for bad in [ssh, &typo, "age1", secret_key] {
        match seal_to(&[&recipient, bad], &secret) {
            Err(Error::Invalid(m)) => {
                assert!(m.starts_with("recipient "), "{m}");
                assert!(!m.contains(&recipient), "names only the bad one: {m}");
                assert!(
                    !m.contains(&secret_key[16..]),
                    "never shows a secret key: {m}"
                );
            }
            r => panic!("{bad}: expected Invalid, got {r:?}"),
        }
    }
}

#[test]
fn a_recipients_file_with_comments_reads_as_debian_age_reads_it() {
    if !tools(module_path!()) {
        return;
    }
    let dir = TempDir::new("age-it");
    let (one, one_pub) = keygen(&dir, "one.txt");
    let (two, two_pub) = keygen(&dir, "two.txt");
    let file = dir.path().join("recipients.txt");
    std::fs::write(
        &file,
        format!("# the team\n\n# alice\n{one_pub}\n\n# bob\n{two_pub}\n"),
    )
    .unwrap();
    let recipients = age::read_recipients_file(&file).unwrap();
    assert_eq!(recipients, [one_pub.clone(), two_pub.clone()]);
    // Debian's age takes the same file (-R).
    let out = output(Command::new("age").arg("-a").arg("-R").arg(&file), b"x");
    assert_ok(&out, "age -R");
    let secret = Secret::random().unwrap();
    let sealed = age::seal(&SealOptions { recipients }, &secret, &mut NoUi).unwrap();
    for id in [&one, &two] {
        assert_eq!(
            debian_decrypt(id, age::armored(&sealed)).unwrap(),
            secret.as_bytes()
        );
    }
    // An ssh recipient in the file: Debian's age would take it, we refuse.
    std::fs::write(
        &file,
        format!("{one_pub}\nssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHsKLqeplhpW+uObz5dvMgjz1OxfM/XXUB+VHtZ6isGN\n"),
    )
    .unwrap();
    match age::read_recipients_file(&file) {
        Err(Error::Invalid(m)) => assert!(m.contains("line 2 of") && m.contains("ssh"), "{m}"),
        r => panic!("expected Invalid, got {r:?}"),
    }
}

#[test]
fn a_missing_identity_option_is_invalid() {
    if !tools(module_path!()) {
        return;
    }
    let dir = TempDir::new("age-it");
    let (_, recipient) = keygen(&dir, "key.txt");
    let sealed = seal_to(&[&recipient], &Secret::random().unwrap()).unwrap();
    match age::unseal(&sealed, &UnsealOptions::default(), &mut NoUi) {
        Err(Error::Invalid(m)) => assert!(m.contains("give --age-identity FILE"), "{m}"),
        r => panic!("expected Invalid, got {r:?}"),
    }
}

#[test]
fn malformed_records_are_invalid_without_a_panic() {
    if !tools(module_path!()) {
        return;
    }
    let dir = TempDir::new("age-it");
    let (identity, recipient) = keygen(&dir, "key.txt");
    let good = debian_encrypt(&[&recipient], &[9u8; SECRET_SIZE]);
    assert_eq!(
        unseal_with(&record(&[&recipient], &good), &identity)
            .unwrap()
            .as_bytes(),
        &[9u8; SECRET_SIZE]
    );
    let body_at = good.find('\n').unwrap() + 10;
    let mut altered = good.clone().into_bytes();
    altered[body_at] = if altered[body_at] == b'A' { b'B' } else { b'A' };
    let altered = String::from_utf8(altered).unwrap();
    let half = good[..good.len() / 2].to_string();
    let short = debian_encrypt(&[&recipient], &[9u8; SECRET_SIZE - 1]);
    let long = debian_encrypt(&[&recipient], &[9u8; 4096]);
    for (file, what) in [
        (altered.as_str(), "altered"),
        (half.as_str(), "truncated"),
        ("not an age file", "garbage"),
        (short.as_str(), "31-byte plaintext"),
        (long.as_str(), "4096-byte plaintext"),
    ] {
        match unseal_with(&record(&[&recipient], file), &identity) {
            Err(Error::Invalid(m)) => assert!(!m.contains('\n'), "{what}: one line: {m}"),
            r => panic!("{what}: expected Invalid, got {r:?}"),
        }
    }
    // Records that do not even parse.
    for json in [
        serde_json::json!({"kind": "age", "recipients": [recipient], "file": 7}),
        serde_json::json!({"kind": "age", "file": good}),
        serde_json::json!({"kind": "age", "recipients": [], "file": good, "extra": 1}),
    ] {
        assert!(matches!(Sealed::from_json(&json), Err(Error::Invalid(_))));
    }
}
