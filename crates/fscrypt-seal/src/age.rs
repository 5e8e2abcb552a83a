//! age: the secret in a standard age file to X25519 recipients, which
//! `age -d -i IDENTITY` opens.
//!
//! The scheme (issue 25, item 4) is the age v1 format itself
//! (<https://c2sp.org/age>, implemented by the `age` crate, rage's
//! library); nothing in it is ours:
//!
//! - **Seal**: each recipient (`age1...`, the Bech32 form of an X25519
//!   public key, as `age-keygen -y` prints it) is parsed; the 32-byte
//!   secret is the whole plaintext of one age file encrypted to all of
//!   them (one `X25519` stanza per recipient wrapping a random 16-byte file
//!   key; the header MAC and the ChaCha20-Poly1305 STREAM payload keyed
//!   from that file key), ASCII-armored (`-----BEGIN AGE ENCRYPTED
//!   FILE-----`, PEM-like, 64 base64 characters a line, `\n` line ends).
//!   Only X25519 recipients are accepted: no ssh, plugin or passphrase
//!   recipients, so every recipient needs only a plain `age-keygen`
//!   identity and Debian's `age` binary.
//! - **Stored** ([`Sealed`]): that armored file as a string, and the
//!   recipients it was sealed to (canonical lower-case `age1...`), only
//!   for `describe`. Both are public: an age file tells nothing without
//!   one of the identities.
//! - **Unseal**: the identity file (`--age-identity FILE`, as `age-keygen`
//!   writes it: `#` comments, blank lines and `AGE-SECRET-KEY-1...` lines;
//!   or such a file itself encrypted to a passphrase, as `age -p` writes
//!   it, the passphrase asked through [`Interaction::pin`]) is read, and
//!   the stored file is decrypted with every identity in it; the plaintext
//!   must be exactly [`SECRET_SIZE`] bytes. Any valid age v1 file to X25519
//!   recipients is accepted in the record, so a file re-encrypted by
//!   Debian's `age -r ... -a` (an administrator adding a user with only the
//!   user's public key) opens as well; the recipients list is then only
//!   what `describe` shows.
//!
//! Bounds: at most [`MAX_RECIPIENTS`] recipients, a stored file of at most
//! [`MAX_FILE_SIZE`] bytes, identity and recipients files of at most
//! [`MAX_KEY_FILE_SIZE`] bytes; anything larger is refused as
//! [`Error::Invalid`] before it is parsed.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::str::FromStr;

use age::armor::{ArmoredReader, ArmoredWriter, Format};
use age::secrecy::SecretString;
use age::{DecryptError, Decryptor, Encryptor, x25519};
use serde::{Deserialize, Serialize};
use zeroize::Zeroizing;

use crate::{Error, Interaction, SECRET_SIZE, Secret};

/// Most recipients one protector is sealed to (each adds about 130
/// armored characters, its stanza, to the stored file).
pub const MAX_RECIPIENTS: usize = 64;

/// Largest stored age file, in bytes (its armored text); [`MAX_RECIPIENTS`]
/// recipients need less than 10 KiB.
pub const MAX_FILE_SIZE: usize = 16 * 1024;

/// Largest identity or recipients file read, in bytes (`age-keygen` writes
/// about 190 bytes per identity).
pub const MAX_KEY_FILE_SIZE: u64 = 64 * 1024;

/// The Bech32 prefix (HRP and separator) of a secret key line, upper case
/// as `age-keygen` writes it.
const SECRET_KEY_PREFIX: &str = "AGE-SECRET-KEY-1";

/// Options of sealing: `protector add CIPHERDIR age --recipient age1...
/// | --recipients-file F`.
#[derive(Clone, Debug, Default)]
pub struct SealOptions {
    /// Recipients (`age1...`), from `--recipient` and `--recipients-file`
    /// (the latter read by [`read_recipients_file`]). Duplicates are sealed
    /// to once.
    pub recipients: Vec<String>,
}

/// Options of unsealing: `mount --age-identity FILE`.
#[derive(Clone, Debug, Default)]
pub struct UnsealOptions {
    /// The identity file (`AGE-SECRET-KEY-1...` lines, as `age-keygen`
    /// writes), or such a file encrypted with `age -p`. Required: an age
    /// record names no identity.
    pub identity: Option<PathBuf>,
}

/// The stored record (JSON fields besides `"kind": "age"`); all public.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sealed {
    /// The recipients the file was sealed to, canonical `age1...` strings,
    /// for [`describe`] only (unsealing does not read them).
    pub recipients: Vec<String>,
    /// The age v1 file holding the 32-byte secret, ASCII-armored
    /// (`-----BEGIN AGE ENCRYPTED FILE-----` ... `-----END AGE ENCRYPTED
    /// FILE-----\n`); at most [`MAX_FILE_SIZE`] bytes.
    pub file: String,
}

/// Seals `secret` to every recipient in `options`: one armored age file.
///
/// # Errors
/// [`Error::Invalid`] for no recipients, more than [`MAX_RECIPIENTS`], or a
/// recipient that is not an age X25519 recipient (naming that one only:
/// an ssh or plugin recipient, a secret key given by mistake, a typo).
/// [`Error::Device`] if the age library fails to write the file (it does
/// not on valid recipients).
pub fn seal(
    options: &SealOptions,
    secret: &Secret,
    _ui: &mut dyn Interaction,
) -> Result<Sealed, Error> {
    let mut recipients: Vec<x25519::Recipient> = Vec::new();
    for text in &options.recipients {
        let recipient = parse_recipient(text)
            .map_err(|reason| Error::Invalid(format!("recipient {reason}")))?;
        if !recipients.contains(&recipient) {
            recipients.push(recipient);
        }
    }
    if recipients.is_empty() {
        return Err(Error::Invalid(
            "an age protector needs a recipient: give --recipient age1... or --recipients-file F"
                .into(),
        ));
    }
    if recipients.len() > MAX_RECIPIENTS {
        return Err(Error::Invalid(format!(
            "{} recipients are too many for one age protector: give at most {MAX_RECIPIENTS}",
            recipients.len()
        )));
    }
    let file = encrypt(&recipients, secret.as_bytes())
        .map_err(|e| Error::Device(format!("writing the age file failed: {e}")))?;
    Ok(Sealed {
        recipients: recipients.iter().map(ToString::to_string).collect(),
        file,
    })
}

/// Unseals `sealed` with the identity file of [`UnsealOptions::identity`].
///
/// # Errors
/// [`Error::Invalid`] with no identity file given ("give --age-identity
/// FILE"), an identity file that is too large or holds anything but age
/// X25519 identities, or a malformed stored file (bad armor or header,
/// altered, a passphrase file, a plaintext that is not 32 bytes).
/// [`Error::WrongSecret`] when no identity in the file is one of the
/// recipients, or for a wrong passphrase of an encrypted identity file.
/// [`Error::Io`] when the identity file cannot be read. The passphrase
/// prompt's own error is returned unchanged.
pub fn unseal(
    sealed: &Sealed,
    options: &UnsealOptions,
    ui: &mut dyn Interaction,
) -> Result<Secret, Error> {
    check_record(sealed)?;
    let path = options.identity.as_deref().ok_or_else(|| {
        Error::Invalid(
            "this protector is an age file: give --age-identity FILE (the identity of one of its recipients)"
                .into(),
        )
    })?;
    let identities = read_identities(path, ui)?;
    decrypt_secret(&sealed.file, &identities, path)
}

/// What `protector list` shows: ("recipients", the comma-separated
/// `age1...` list).
pub fn describe(sealed: &Sealed) -> Vec<(&'static str, String)> {
    vec![("recipients", sealed.recipients.join(","))]
}

/// The stored age file (ASCII-armored), as `protector export` writes it:
/// `age -d -i IDENTITY` opens it, `age -d -i OLD | age -r NEW -a`
/// re-encrypts it to other recipients.
pub fn armored(sealed: &Sealed) -> &str {
    &sealed.file
}

/// Reads a recipients file for `--recipients-file F`, in age's format:
/// one recipient (`age1...`) a line, lines starting with `#` and blank
/// lines ignored, at most [`MAX_KEY_FILE_SIZE`] bytes. Returns the
/// recipients in canonical form, in file order.
///
/// # Errors
/// [`Error::Io`] if the file cannot be read; [`Error::Invalid`] if it is
/// too large, not UTF-8, lists no recipient, or a line is not an age
/// X25519 recipient (an ssh or plugin recipient, a secret key: the
/// message names the line, never shows a secret key).
pub fn read_recipients_file(path: &Path) -> Result<Vec<String>, Error> {
    let bytes = read_limited(path, "recipients file")?;
    let text = std::str::from_utf8(&bytes)
        .map_err(|_| Error::Invalid(format!("{} is not a text file", path.display())))?;
    let mut recipients = Vec::new();
    for (n, line) in key_lines(text) {
        let recipient = parse_recipient(line).map_err(|reason| {
            Error::Invalid(format!("line {n} of {}: {reason}", path.display()))
        })?;
        recipients.push(recipient.to_string());
    }
    if recipients.is_empty() {
        return Err(Error::Invalid(format!(
            "{} lists no recipient (age1... lines)",
            path.display()
        )));
    }
    Ok(recipients)
}

/// The lines of a key file that carry a key, with their 1-based numbers:
/// trimmed, without blank lines and `#` comments.
fn key_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines()
        .enumerate()
        .map(|(i, line)| (i + 1, line.trim()))
        .filter(|(_, line)| !line.is_empty() && !line.starts_with('#'))
}

/// Whether `s` starts with `prefix`, ignoring ASCII case.
fn starts_with_ignore_case(s: &str, prefix: &str) -> bool {
    s.get(..prefix.len())
        .is_some_and(|p| p.eq_ignore_ascii_case(prefix))
}

/// Parses one X25519 recipient; the error is the rest of a one-line
/// message that starts by showing `text` (never when it is a secret key).
fn parse_recipient(text: &str) -> Result<x25519::Recipient, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err("is empty: give an age X25519 recipient (age1...)".into());
    }
    if starts_with_ignore_case(text, "AGE-SECRET-KEY-")
        || starts_with_ignore_case(text, "AGE-PLUGIN-")
    {
        return Err(
            "is a secret key, not a recipient: give its public key (age-keygen -y FILE)".into(),
        );
    }
    let shown: String = if text.chars().count() > 80 {
        format!("{:?}...", text.chars().take(80).collect::<String>())
    } else {
        format!("{text:?}")
    };
    if text.starts_with("ssh-") || text.starts_with("ecdsa-") || text.starts_with("sk-") {
        return Err(format!(
            "{shown} is an ssh key: only age X25519 recipients (age1..., from age-keygen) are supported"
        ));
    }
    x25519::Recipient::from_str(text).map_err(|reason| {
        if starts_with_ignore_case(text, "age1") && reason == "incorrect HRP" {
            format!(
                "{shown} is a plugin or post-quantum age recipient: only age X25519 recipients (age1..., from age-keygen) are supported"
            )
        } else {
            format!("{shown} is not an age X25519 recipient (age1..., from age-keygen -y): {reason}")
        }
    })
}

/// Encrypts `plaintext` to `recipients` as one ASCII-armored age file.
fn encrypt(recipients: &[x25519::Recipient], plaintext: &[u8]) -> Result<String, String> {
    let encryptor = Encryptor::with_recipients(recipients.iter().map(|r| r as &dyn age::Recipient))
        .map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    let armor =
        ArmoredWriter::wrap_output(&mut out, Format::AsciiArmor).map_err(|e| e.to_string())?;
    let mut writer = encryptor.wrap_output(armor).map_err(|e| e.to_string())?;
    writer.write_all(plaintext).map_err(|e| e.to_string())?;
    writer
        .finish()
        .and_then(ArmoredWriter::finish)
        .map_err(|e| e.to_string())?;
    String::from_utf8(out).map_err(|e| e.to_string())
}

/// Checks the record's sizes before anything parses it.
fn check_record(sealed: &Sealed) -> Result<(), Error> {
    if sealed.file.len() > MAX_FILE_SIZE {
        return Err(Error::Invalid(format!(
            "the age protector's file is {} bytes, more than the {MAX_FILE_SIZE} of any sealed secret: the record is damaged; add the protector again",
            sealed.file.len()
        )));
    }
    if sealed.file.trim().is_empty() {
        return Err(Error::Invalid(
            "the age protector's record has no file: the record is damaged; add the protector again"
                .into(),
        ));
    }
    Ok(())
}

/// Reads a whole key file of at most [`MAX_KEY_FILE_SIZE`] bytes into
/// memory that is zeroed on drop; `what` names it in errors.
fn read_limited(path: &Path, what: &str) -> Result<Zeroizing<Vec<u8>>, Error> {
    let shown = path.display();
    let file = std::fs::File::open(path)
        .map_err(|e| Error::Io(format!("cannot open the {what} {shown}: {e}")))?;
    let meta = file
        .metadata()
        .map_err(|e| Error::Io(format!("cannot stat the {what} {shown}: {e}")))?;
    if !meta.is_file() {
        return Err(Error::Invalid(format!(
            "the {what} {shown} is not a regular file"
        )));
    }
    let too_large = || {
        Error::Invalid(format!(
            "the {what} {shown} is larger than {MAX_KEY_FILE_SIZE} bytes: give a key file as age-keygen writes it"
        ))
    };
    if meta.len() > MAX_KEY_FILE_SIZE {
        return Err(too_large());
    }
    // The capacity covers every read below, so the buffer never moves
    // (leaving a copy behind) while it fills.
    let limit = MAX_KEY_FILE_SIZE as usize + 1;
    let mut bytes = Zeroizing::new(Vec::with_capacity(limit));
    file.take(limit as u64)
        .read_to_end(&mut bytes)
        .map_err(|e| Error::Io(format!("cannot read the {what} {shown}: {e}")))?;
    if bytes.len() >= limit {
        return Err(too_large());
    }
    Ok(bytes)
}

/// Whether a key file's text is an age file (binary or armored) rather
/// than a list of keys: an identity file encrypted with `age -p`.
fn is_age_file(bytes: &[u8]) -> bool {
    let start = bytes.trim_ascii_start();
    start.starts_with(b"age-encryption.org/")
        || start.starts_with(b"-----BEGIN AGE ENCRYPTED FILE-----")
}

/// Reads the X25519 identities of the identity file at `path`, asking
/// for its passphrase through `ui` if it is encrypted.
fn read_identities(path: &Path, ui: &mut dyn Interaction) -> Result<Vec<x25519::Identity>, Error> {
    let mut bytes = read_limited(path, "identity file")?;
    if is_age_file(&bytes) {
        bytes = decrypt_identity_file(&bytes, path, ui)?;
    }
    let shown = path.display();
    let text = std::str::from_utf8(&bytes)
        .map_err(|_| Error::Invalid(format!("the identity file {shown} is not a text file")))?;
    let mut identities = Vec::new();
    for (n, line) in key_lines(text) {
        if starts_with_ignore_case(line, SECRET_KEY_PREFIX) {
            let identity = x25519::Identity::from_str(line).map_err(|_| {
                Error::Invalid(format!(
                    "line {n} of {shown} is not a valid age secret key (AGE-SECRET-KEY-1...)"
                ))
            })?;
            identities.push(identity);
        } else if starts_with_ignore_case(line, "AGE-PLUGIN-") {
            return Err(Error::Invalid(format!(
                "line {n} of {shown} is an age plugin identity: only age-keygen identities (AGE-SECRET-KEY-1...) are supported"
            )));
        } else if line.starts_with("-----BEGIN") {
            return Err(Error::Invalid(format!(
                "{shown} is not an age identity file (an ssh key?): give one that age-keygen wrote"
            )));
        } else {
            return Err(Error::Invalid(format!(
                "line {n} of {shown} is not an age identity (AGE-SECRET-KEY-1...) nor a # comment"
            )));
        }
    }
    if identities.is_empty() {
        return Err(Error::Invalid(format!(
            "{shown} holds no age identity (AGE-SECRET-KEY-1...): give a file that age-keygen wrote"
        )));
    }
    Ok(identities)
}

/// Decrypts an identity file that `age -p` encrypted to a passphrase.
fn decrypt_identity_file(
    bytes: &[u8],
    path: &Path,
    ui: &mut dyn Interaction,
) -> Result<Zeroizing<Vec<u8>>, Error> {
    let shown = path.display();
    let decryptor = Decryptor::new_buffered(ArmoredReader::new(bytes)).map_err(|e| {
        Error::Invalid(format!(
            "the identity file {shown} is a damaged age file: {}",
            one_line(&e.to_string())
        ))
    })?;
    if !decryptor.is_scrypt() {
        return Err(Error::Invalid(format!(
            "{shown} is an age file encrypted to recipients, not an identity file: give the identity itself"
        )));
    }
    let passphrase = ui.pin(&format!("passphrase of the age identity {shown}"), false)?;
    let identity = age::scrypt::Identity::new(SecretString::from(passphrase.as_str()));
    let reader = decryptor
        .decrypt(std::iter::once(&identity as &dyn age::Identity))
        .map_err(|e| match e {
            DecryptError::DecryptionFailed | DecryptError::NoMatchingKeys => {
                Error::WrongSecret(format!("wrong passphrase for the age identity {shown}"))
            }
            e => Error::Invalid(format!(
                "the identity file {shown} does not decrypt: {}",
                one_line(&e.to_string())
            )),
        })?;
    let limit = MAX_KEY_FILE_SIZE as usize + 1;
    let mut plain = Zeroizing::new(Vec::with_capacity(limit));
    reader
        .take(limit as u64)
        .read_to_end(&mut plain)
        .map_err(|_| {
            Error::Invalid(format!(
                "the identity file {shown} is altered or truncated: its payload does not decrypt"
            ))
        })?;
    if plain.len() >= limit {
        return Err(Error::Invalid(format!(
            "the identity file {shown} holds more than {MAX_KEY_FILE_SIZE} bytes: give one that age-keygen wrote"
        )));
    }
    Ok(plain)
}

/// Decrypts the stored age file with `identities` (read from `path`) and
/// returns its 32-byte plaintext.
fn decrypt_secret(
    file: &str,
    identities: &[x25519::Identity],
    path: &Path,
) -> Result<Secret, Error> {
    let decryptor =
        Decryptor::new_buffered(ArmoredReader::new(file.as_bytes())).map_err(damaged_record)?;
    if decryptor.is_scrypt() {
        return Err(Error::Invalid(
            "the age protector's file is encrypted to a passphrase, not to recipients: re-encrypt it with age -r age1... -a"
                .into(),
        ));
    }
    let reader = decryptor
        .decrypt(identities.iter().map(|i| i as &dyn age::Identity))
        .map_err(|e| match e {
            DecryptError::NoMatchingKeys => Error::WrongSecret(format!(
                "{} is not one of this protector's recipients: give the identity of one of them",
                path.display()
            )),
            e => damaged_record(e),
        })?;
    // One byte more than a secret tells a longer plaintext from ours;
    // reading up to the end of the 32 bytes also checks the final chunk's tag.
    let mut plain = Zeroizing::new(Vec::with_capacity(SECRET_SIZE + 1));
    reader
        .take(SECRET_SIZE as u64 + 1)
        .read_to_end(&mut plain)
        .map_err(|_| {
            Error::Invalid(
                "the age protector's file is altered or truncated: its payload does not decrypt; restore the record or add the protector again"
                    .into(),
            )
        })?;
    if plain.len() != SECRET_SIZE {
        return Err(Error::Invalid(format!(
            "the age protector's file holds {}{} bytes, not a {SECRET_SIZE}-byte secret: it is not one of our protectors",
            if plain.len() > SECRET_SIZE {
                "more than "
            } else {
                ""
            },
            plain.len().min(SECRET_SIZE)
        )));
    }
    Secret::from_slice(&plain)
}

/// The error for a stored age file the library refuses.
fn damaged_record(e: DecryptError) -> Error {
    let what = match e {
        DecryptError::InvalidHeader => "has a malformed header".to_string(),
        DecryptError::InvalidMac => "fails its header MAC (it was altered)".to_string(),
        DecryptError::UnknownFormat => "is not an age v1 file".to_string(),
        DecryptError::DecryptionFailed => "does not decrypt (it was altered)".to_string(),
        e => format!("is unreadable ({})", one_line(&e.to_string())),
    };
    Error::Invalid(format!(
        "the age protector's file {what}: restore the record or add the protector again"
    ))
}

/// `s` on one line (the age library's messages may span several).
fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use test_support::TempDir;

    /// Answers passphrase prompts with a fixed passphrase (or refuses).
    struct Ui(Option<&'static str>);

    impl Interaction for Ui {
        fn pin(&mut self, _what: &str, _confirm: bool) -> Result<Zeroizing<String>, Error> {
            self.0
                .map(|p| Zeroizing::new(p.to_string()))
                .ok_or_else(|| Error::Io("no passphrase here".into()))
        }
        fn notice(&mut self, _message: &str) {}
    }

    /// A new identity written as `age-keygen` writes it, and its recipient.
    fn keygen(dir: &TempDir, name: &str) -> (PathBuf, String) {
        use age::secrecy::ExposeSecret;
        let identity = x25519::Identity::generate();
        let recipient = identity.to_public().to_string();
        let path = dir.path().join(name);
        let text = format!(
            "# created: 2026-12-06T22:00:00Z\n# public key: {recipient}\n{}\n",
            identity.to_string().expose_secret()
        );
        std::fs::write(&path, text).unwrap();
        (path, recipient)
    }

    fn options(recipients: &[&str]) -> SealOptions {
        SealOptions {
            recipients: recipients.iter().map(ToString::to_string).collect(),
        }
    }

    fn with_identity(path: &Path) -> UnsealOptions {
        UnsealOptions {
            identity: Some(path.to_path_buf()),
        }
    }

    fn invalid(r: Result<impl std::fmt::Debug, Error>) -> String {
        match r {
            Err(Error::Invalid(m)) => m,
            other => panic!("expected Error::Invalid, got {other:?}"),
        }
    }

    #[test]
    fn seal_then_unseal_with_each_recipient() {
        let dir = TempDir::new("age-unit");
        let (id1, r1) = keygen(&dir, "one");
        let (id2, r2) = keygen(&dir, "two");
        let secret = Secret::random().unwrap();
        let sealed = seal(&options(&[&r1, &r2, &r1]), &secret, &mut Ui(None)).unwrap();
        assert_eq!(sealed.recipients, [r1.clone(), r2.clone()], "deduplicated");
        assert!(
            sealed
                .file
                .starts_with("-----BEGIN AGE ENCRYPTED FILE-----\n")
        );
        assert!(sealed.file.ends_with("-----END AGE ENCRYPTED FILE-----\n"));
        assert_eq!(armored(&sealed), sealed.file);
        assert_eq!(describe(&sealed), [("recipients", format!("{r1},{r2}"))]);
        for id in [&id1, &id2] {
            let got = unseal(&sealed, &with_identity(id), &mut Ui(None)).unwrap();
            assert_eq!(got.as_bytes(), secret.as_bytes());
        }
    }

    #[test]
    fn the_record_round_trips_as_json_tagged_age() {
        let dir = TempDir::new("age-unit");
        let (_, r1) = keygen(&dir, "one");
        let sealed = seal(&options(&[&r1]), &Secret::random().unwrap(), &mut Ui(None)).unwrap();
        let json = crate::Sealed::Age(sealed.clone()).to_json();
        assert_eq!(json["kind"], "age");
        assert_eq!(json["recipients"][0], r1.as_str());
        assert_eq!(json["file"], sealed.file.as_str());
        assert_eq!(
            crate::Sealed::from_json(&json).unwrap(),
            crate::Sealed::Age(sealed)
        );
        let mut extra = json.clone();
        extra["pcrs"] = serde_json::json!("7");
        invalid(crate::Sealed::from_json(&extra));
        let mut missing = json;
        missing.as_object_mut().unwrap().remove("file");
        invalid(crate::Sealed::from_json(&missing));
    }

    #[test]
    fn a_non_recipient_identity_is_a_wrong_secret() {
        let dir = TempDir::new("age-unit");
        let (_, r1) = keygen(&dir, "one");
        let (other, _) = keygen(&dir, "other");
        let sealed = seal(&options(&[&r1]), &Secret::random().unwrap(), &mut Ui(None)).unwrap();
        match unseal(&sealed, &with_identity(&other), &mut Ui(None)) {
            Err(Error::WrongSecret(m)) => {
                assert!(
                    m.contains("is not one of this protector's recipients"),
                    "{m}"
                );
                assert!(m.contains(&other.display().to_string()), "{m}");
            }
            r => panic!("expected WrongSecret, got {r:?}"),
        }
    }

    #[test]
    fn bad_recipients_are_refused_naming_only_the_bad_one() {
        let dir = TempDir::new("age-unit");
        let (_, good) = keygen(&dir, "one");
        let secret = Secret::random().unwrap();
        let ssh =
            "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHsKLqeplhpW+uObz5dvMgjz1OxfM/XXUB+VHtZ6isGN";
        for (bad, says) in [
            ("age1notbech32", "is not an age X25519 recipient"),
            (ssh, "is an ssh key"),
            // A YubiKey plugin recipient: valid Bech32, another HRP.
            (
                "age1yubikey1qwt50d05nh5vutpdzmlg5wn80xq5negm4uj9ghv0snvdd3yysf5yw3rhl3t",
                "plugin",
            ),
            ("", "is empty"),
        ] {
            let m = invalid(seal(&options(&[&good, bad]), &secret, &mut Ui(None)));
            assert!(m.contains(says), "{bad}: {m}");
            assert!(!m.contains(&good), "names only the bad one: {m}");
        }
        assert!(invalid(seal(&options(&[]), &secret, &mut Ui(None))).contains("--recipient"));
        let many: Vec<String> = (0..=MAX_RECIPIENTS)
            .map(|_| x25519::Identity::generate().to_public().to_string())
            .collect();
        let many = SealOptions { recipients: many };
        assert!(invalid(seal(&many, &secret, &mut Ui(None))).contains("too many"));
    }

    #[test]
    fn a_secret_key_given_as_recipient_is_not_echoed() {
        use age::secrecy::ExposeSecret;
        let key = x25519::Identity::generate().to_string();
        let key = key.expose_secret();
        let m = invalid(seal(
            &options(&[key]),
            &Secret::random().unwrap(),
            &mut Ui(None),
        ));
        assert!(m.contains("is a secret key"), "{m}");
        assert!(!m.contains(&key[16..]), "{m}");
        let dir = TempDir::new("age-unit");
        let file = dir.path().join("recipients");
        std::fs::write(&file, format!("# oops\n{key}\n")).unwrap();
        let m = invalid(read_recipients_file(&file));
        assert!(
            m.contains("line 2 of") && m.contains("is a secret key"),
            "{m}"
        );
        assert!(!m.contains(&key[16..]), "{m}");
    }

    #[test]
    fn recipients_files_skip_comments_and_refuse_other_keys() {
        let dir = TempDir::new("age-unit");
        let (_, r1) = keygen(&dir, "one");
        let (_, r2) = keygen(&dir, "two");
        let file = dir.path().join("recipients");
        std::fs::write(
            &file,
            format!("# team\n\n{r1}\r\n  # alice\n  {}  \n", r2.to_uppercase()),
        )
        .unwrap();
        assert_eq!(read_recipients_file(&file).unwrap(), [r1.clone(), r2]);
        std::fs::write(&file, format!("{r1}\nssh-rsa AAAAB3NzaC1yc2E\n")).unwrap();
        let m = invalid(read_recipients_file(&file));
        assert!(m.contains("line 2 of") && m.contains("ssh"), "{m}");
        std::fs::write(&file, "# nobody\n\n").unwrap();
        assert!(invalid(read_recipients_file(&file)).contains("lists no recipient"));
        std::fs::write(&file, vec![b'#'; MAX_KEY_FILE_SIZE as usize + 1]).unwrap();
        assert!(invalid(read_recipients_file(&file)).contains("larger than"));
        assert!(matches!(
            read_recipients_file(&dir.path().join("absent")),
            Err(Error::Io(_))
        ));
    }

    #[test]
    fn identity_files_are_checked() {
        let dir = TempDir::new("age-unit");
        let (_, r1) = keygen(&dir, "one");
        let sealed = seal(&options(&[&r1]), &Secret::random().unwrap(), &mut Ui(None)).unwrap();
        let m = invalid(unseal(&sealed, &UnsealOptions::default(), &mut Ui(None)));
        assert!(m.contains("give --age-identity FILE"), "{m}");
        let file = dir.path().join("identity");
        for (text, says) in [
            ("# only a comment\n", "holds no age identity"),
            ("AGE-SECRET-KEY-1NOTBECH32\n", "line 1 of"),
            ("# x\nAGE-PLUGIN-YUBIKEY-1QQQQQQ\n", "plugin identity"),
            ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbn\n", "ssh key"),
            ("hello\n", "not an age identity"),
        ] {
            std::fs::write(&file, text).unwrap();
            let m = invalid(unseal(&sealed, &with_identity(&file), &mut Ui(None)));
            assert!(m.contains(says), "{text}: {m}");
        }
        std::fs::write(&file, [0xff, 0xfe]).unwrap();
        assert!(invalid(unseal(&sealed, &with_identity(&file), &mut Ui(None))).contains("text"));
        std::fs::write(&file, vec![b'#'; MAX_KEY_FILE_SIZE as usize + 1]).unwrap();
        assert!(invalid(unseal(&sealed, &with_identity(&file), &mut Ui(None))).contains("larger"));
        assert!(
            invalid(unseal(&sealed, &with_identity(dir.path()), &mut Ui(None))).contains("regular")
        );
        assert!(matches!(
            unseal(
                &sealed,
                &with_identity(&dir.path().join("absent")),
                &mut Ui(None)
            ),
            Err(Error::Io(_))
        ));
    }

    /// An identity file encrypted to a passphrase, as `age -p` writes it
    /// (with a cheap scrypt work factor).
    fn encrypt_with_passphrase(plain: &[u8], passphrase: &str) -> Vec<u8> {
        let mut recipient = age::scrypt::Recipient::new(SecretString::from(passphrase));
        recipient.set_work_factor(10);
        let encryptor =
            Encryptor::with_recipients(std::iter::once(&recipient as &dyn age::Recipient)).unwrap();
        let mut out = Vec::new();
        let armor = ArmoredWriter::wrap_output(&mut out, Format::AsciiArmor).unwrap();
        let mut w = encryptor.wrap_output(armor).unwrap();
        w.write_all(plain).unwrap();
        w.finish().and_then(ArmoredWriter::finish).unwrap();
        out
    }

    #[test]
    fn an_identity_file_encrypted_to_a_passphrase_asks_for_it() {
        let dir = TempDir::new("age-unit");
        let (id1, r1) = keygen(&dir, "one");
        let secret = Secret::random().unwrap();
        let sealed = seal(&options(&[&r1]), &secret, &mut Ui(None)).unwrap();
        let locked = dir.path().join("one.age");
        std::fs::write(
            &locked,
            encrypt_with_passphrase(&std::fs::read(&id1).unwrap(), "hunter2"),
        )
        .unwrap();
        let got = unseal(&sealed, &with_identity(&locked), &mut Ui(Some("hunter2"))).unwrap();
        assert_eq!(got.as_bytes(), secret.as_bytes());
        match unseal(&sealed, &with_identity(&locked), &mut Ui(Some("hunter3"))) {
            Err(Error::WrongSecret(m)) => assert!(m.contains("wrong passphrase"), "{m}"),
            r => panic!("expected WrongSecret, got {r:?}"),
        }
        // The prompt's own error comes back unchanged.
        assert!(matches!(
            unseal(&sealed, &with_identity(&locked), &mut Ui(None)),
            Err(Error::Io(m)) if m == "no passphrase here"
        ));
        // A file encrypted to recipients is not an identity file.
        std::fs::write(&locked, &sealed.file).unwrap();
        assert!(
            invalid(unseal(&sealed, &with_identity(&locked), &mut Ui(None)))
                .contains("not an identity file")
        );
    }

    #[test]
    fn malformed_records_are_invalid_never_a_panic() {
        let dir = TempDir::new("age-unit");
        let (id1, r1) = keygen(&dir, "one");
        let good = seal(&options(&[&r1]), &Secret::random().unwrap(), &mut Ui(None)).unwrap();
        let with = |file: String| Sealed {
            recipients: vec![r1.clone()],
            file,
        };
        let lines: Vec<&str> = good.file.lines().collect();
        let mut altered = good.file.clone().into_bytes();
        // A base64 character in the middle of the body, kept base64.
        let at = good.file.len() / 2;
        altered[at] = if altered[at] == b'A' { b'B' } else { b'A' };
        let cases = [
            String::new(),
            "hello".to_string(),
            "age-encryption.org/v1\n-> X25519\n--- \n".to_string(),
            "age-encryption.org/v2\n".to_string(),
            lines[..lines.len() - 1].join("\n"),
            format!("{}\n{}\n", lines[0], lines[lines.len() - 1]),
            String::from_utf8(altered).unwrap(),
            "A".repeat(MAX_FILE_SIZE + 1),
            // Our format with a plaintext of the wrong size.
            encrypt(&[r1.parse().unwrap()], &[7u8; 31]).unwrap(),
            encrypt(&[r1.parse().unwrap()], &[7u8; 33]).unwrap(),
            encrypt(&[r1.parse().unwrap()], &[]).unwrap(),
            // A passphrase file.
            String::from_utf8(encrypt_with_passphrase(&[0; 32], "pw")).unwrap(),
        ];
        for file in cases {
            let m = invalid(unseal(
                &with(file.clone()),
                &with_identity(&id1),
                &mut Ui(None),
            ));
            assert!(!m.contains('\n'), "one line: {m}");
            assert!(
                m.contains("age protector's file") || m.contains("record"),
                "{file:?}: {m}"
            );
        }
        // Every truncation of the armored file, and every single-byte change
        // of it, stays an error (never a panic, never a secret).
        // (Only the final line end may go: the armor's end line without
        // it is still the whole file.)
        for end in 0..good.file.len() - 1 {
            let r = unseal(
                &with(good.file[..end].to_string()),
                &with_identity(&id1),
                &mut Ui(None),
            );
            assert!(r.is_err(), "the first {end} bytes unseal");
        }
        let bytes = good.file.as_bytes();
        for i in (0..bytes.len()).step_by(7) {
            let mut b = bytes.to_vec();
            b[i] ^= 0x01;
            if let Ok(file) = String::from_utf8(b) {
                let r = unseal(&with(file), &with_identity(&id1), &mut Ui(None));
                assert!(r.is_err(), "byte {i} changed still unseals");
            }
        }
    }
}
