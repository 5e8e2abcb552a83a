//! Sealed protectors on kernel directories (issue 25 item 6): a
//! directory encrypted google/fscrypt-style whose passphrase a TPM 2.0, a
//! PKCS#11 token or a FIDO2 authenticator releases, so `fscrypt-rs
//! unlock` needs no prompt, while google/fscrypt (0.3.x) still unlocks it
//! with the same passphrase typed in.
//!
//! # Scheme
//!
//! 1. A fresh 32-byte secret ([`fscrypt_seal::Secret::random`]) is sealed
//!    to the device ([`fscrypt_seal::seal`]): a [`fscrypt_seal::Sealed`]
//!    record, public data only.
//! 2. The secret, written as text by [`passphrase`], is the passphrase of
//!    an ordinary google/fscrypt `custom_passphrase` protector, made
//!    exactly as `encrypt --source custom_passphrase` makes one (Argon2id
//!    with the config's costs, a random salt, the protector key wrapped):
//!    google/fscrypt sees nothing but a custom passphrase protector.
//! 3. The record is kept in a *sidecar* file beside the metadata, keyed by
//!    the protector's descriptor ([`sidecar_path`]):
//!    `MOUNT/.fscrypt/fscrypt-rs/sealed/<protector descriptor>.json`.
//! 4. The passphrase is shown once as the *recovery passphrase*: when the
//!    device refuses (PCRs changed, token lost), `fscrypt unlock DIR` (or
//!    `fscrypt-rs unlock DIR`) and that passphrase typed in still unlock.
//!
//! Unlocking ([`unlock`]) walks the policy's protectors; for each one
//! with a sidecar (read where the protector itself is, links followed) it
//! unseals the secret, turns it into the passphrase and opens the
//! protector with it. A refusal is reported, not fatal: the caller falls
//! back to asking for a passphrase.
//!
//! # The passphrase
//!
//! The 32 bytes as Crockford base32 (alphabet `0-9a-z` without `i`, `l`,
//! `o`, `u`), lower case, most significant bit first, the last symbol
//! padded with zero bits: 52 symbols, in 13 groups of 4 joined by `-`
//! (64 ASCII characters), e.g. `0000-0000-...-000`. Why: all 256 bits of
//! the secret (so the passphrase is a pure function of the unsealed
//! secret and no weaker than it); an alphabet without look-alikes for the
//! day it is typed in by hand; plain ASCII, so google/fscrypt, which
//! hashes the bytes typed, gets exactly these bytes from any terminal;
//! shorter than hex (64 symbols). It is typed exactly as printed (lower
//! case, with the dashes).
//!
//! # The sidecar
//!
//! A JSON object (`deny_unknown_fields`):
//!
//! | field        | value |
//! |--------------|-------|
//! | `version`    | `1` |
//! | `protector`  | the protector's descriptor (16 lowercase hex digits), as in the file name |
//! | `passphrase` | `"crockford32-4"`: the encoding of [`passphrase`] |
//! | `sealed`     | the [`fscrypt_seal::Sealed`] record (tagged by `kind`) |
//!
//! google/fscrypt reads only `.fscrypt/policies` and `.fscrypt/protectors`
//! (and lists every name in them, so the sidecar cannot go there); it
//! ignores other entries of `.fscrypt`. The directories
//! `.fscrypt/fscrypt-rs` and `.fscrypt/fscrypt-rs/sealed` are made on
//! first use with the mode of `.fscrypt/protectors` (0755, or 01777 on a
//! world-writable setup), and must pass the same checks as it (a real
//! directory, owned by root or the trusted user, not world-writable
//! without the sticky bit). The file is written atomically (temporary
//! file, fsync, rename, directory fsync; never through a symlink) with
//! mode 0600, the mode of google/fscrypt 0.3's protector files: the
//! record is public in the sense that it holds no key, but on this
//! machine a TPM record without a PIN is as good as the passphrase to
//! whoever can reach the TPM, so it is no more readable than the
//! protector it opens. It is read as untrusted input: opened without
//! following symlinks, a regular file of a trusted owner, at most
//! [`MAX_SIDECAR_LEN`] bytes, every field checked ([`read`]).
//!
//! `metadata reseal` ([`reseal`]) seals the same secret again (new PCR
//! values, another PIN choice) from the recovery passphrase, which
//! [`secret_of_passphrase`] turns back into the secret; the protector and
//! its passphrase do not change.
//!
//! A sidecar is only ever consulted for a protector of the policy being
//! unlocked; one left behind by a removed protector is harmless (and
//! `metadata destroy --protector` removes it). After `metadata
//! change-passphrase` the sealed secret no longer opens the protector, so
//! the sidecar is removed there too.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use fscrypt_metadata::store::{self, Store};
use fscrypt_seal::{Interaction, Sealed, Secret, UnsealOptions};
use serde::{Deserialize, Serialize};
use zeroize::Zeroizing;

use crate::context::Context;
use crate::error::{Error, Result};
use crate::policy::Target;
use crate::protector::{self, Located};

/// Directory of fscrypt-rs's own files inside `.fscrypt`.
pub const OWN_DIR: &str = "fscrypt-rs";
/// Subdirectory of [`OWN_DIR`] holding the sidecars.
pub const SEALED_DIR: &str = "sealed";
/// Suffix of a sidecar file (after the protector descriptor).
pub const SIDECAR_SUFFIX: &str = ".json";
/// The only sidecar version.
pub const VERSION: u32 = 1;
/// The name of the passphrase encoding in the sidecar.
pub const ENCODING: &str = "crockford32-4";
/// Largest sidecar read (a TPM2 record is about 1 KiB of hex; a PKCS#11
/// or FIDO2 one less).
pub const MAX_SIDECAR_LEN: u64 = 64 << 10;
/// Length of a [`passphrase`] in bytes: 52 symbols and 12 dashes.
pub const PASSPHRASE_LEN: usize = 64;
/// Mode of a sidecar file.
pub const SIDECAR_MODE: u32 = 0o600;

/// Crockford's base32 alphabet, lower case.
const ALPHABET: &[u8; 32] = b"0123456789abcdefghjkmnpqrstvwxyz";

/// The passphrase of a sealed protector: `secret` in Crockford base32
/// (see the module doc), 64 ASCII bytes.
pub fn passphrase(secret: &Secret) -> Zeroizing<Vec<u8>> {
    let mut out = Zeroizing::new(Vec::with_capacity(PASSPHRASE_LEN));
    let mut symbols = 0usize;
    let mut push = |out: &mut Vec<u8>, v: u32| {
        if symbols > 0 && symbols.is_multiple_of(4) {
            out.push(b'-');
        }
        out.push(ALPHABET[(v & 31) as usize]);
        symbols += 1;
    };
    let mut acc = Zeroizing::new(0u32);
    let mut bits = 0u32;
    for &b in secret.as_bytes() {
        *acc = (*acc << 8) | u32::from(b);
        bits += 8;
        while bits >= 5 {
            bits -= 5;
            push(&mut out, *acc >> bits);
        }
        *acc &= (1 << bits) - 1;
    }
    if bits > 0 {
        push(&mut out, *acc << (5 - bits));
    }
    out
}

/// The secret a [`passphrase`] was made from, read leniently as
/// Crockford's decoding rule says (upper or lower case, `i`/`l` read as
/// `1` and `o` as `0`, dashes and blanks ignored): `None` when it is not
/// 52 symbols of the alphabet whose last 4 padding bits are zero.
pub fn secret_of_passphrase(text: &[u8]) -> Option<Secret> {
    let mut out = Zeroizing::new([0u8; fscrypt_seal::SECRET_SIZE]);
    let mut acc = Zeroizing::new(0u32);
    let (mut bits, mut n, mut symbols) = (0u32, 0usize, 0usize);
    for &c in text {
        let c = match c.to_ascii_lowercase() {
            b'-' | b' ' | b'\t' => continue,
            b'i' | b'l' => b'1',
            b'o' => b'0',
            c => c,
        };
        let v = ALPHABET.iter().position(|&a| a == c)? as u32;
        symbols += 1;
        *acc = (*acc << 5) | v;
        bits += 5;
        if bits >= 8 {
            bits -= 8;
            if n == out.len() {
                return None;
            }
            out[n] = (*acc >> bits) as u8;
            n += 1;
            *acc &= (1 << bits) - 1;
        }
    }
    (symbols == 52 && n == out.len() && bits == 4 && *acc == 0).then(|| Secret::from_bytes(out))
}

/// Seals the secret of the located sealed protector `p` again, as
/// `options` say (e.g. to the TPM's current PCR values after a deliberate
/// firmware or boot change), and replaces its sidecar. The secret comes
/// from `pass`, its passphrase (the recovery passphrase, read as
/// [`secret_of_passphrase`] reads it), checked against the protector
/// first; the passphrase does not change, so google/fscrypt and the
/// recovery passphrase on paper are unaffected. Returns the new record.
///
/// # Errors
/// [`Error::Usage`] when `p` has no sidecar or `pass` is no passphrase of
/// this encoding; [`fscrypt_metadata::Error::WrongSecret`] when it does
/// not open the protector; [`Error::Seal`] from the device; the write.
pub fn reseal(
    p: &Located,
    pass: &[u8],
    options: &fscrypt_seal::SealOptions,
    ui: &mut dyn Interaction,
) -> Result<Sealed> {
    let d = &p.data.protector_descriptor;
    if of(p)?.is_none() {
        return Err(Error::Usage(format!(
            "protector {d} is not a sealed protector (it has no {})",
            sidecar_path(&p.store, d)?.display()
        )));
    }
    let Some(secret) = secret_of_passphrase(pass) else {
        return Err(Error::Usage(format!(
            "that is not the recovery passphrase of a sealed protector (52 symbols of \
             0-9a-z in groups of 4, as `encrypt` printed it) for protector {d}"
        )));
    };
    protector::open(&p.data, &passphrase(&secret))?;
    let sealed = fscrypt_seal::seal(options, &secret, ui)?;
    write(&p.store, d, &sealed)?;
    Ok(sealed)
}

/// The sidecar as stored (see the module doc).
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Sidecar {
    version: u32,
    protector: String,
    passphrase: String,
    sealed: serde_json::Value,
}

/// `MOUNT/.fscrypt/fscrypt-rs/sealed` of `store`.
pub fn sidecar_dir(store: &Store) -> PathBuf {
    store.base_dir().join(OWN_DIR).join(SEALED_DIR)
}

/// The sidecar of protector `d` on `store`:
/// `MOUNT/.fscrypt/fscrypt-rs/sealed/<d>.json`.
///
/// # Errors
/// [`fscrypt_metadata::Error::Invalid`] when `d` is not a protector
/// descriptor (16 lowercase hex digits).
pub fn sidecar_path(store: &Store, d: &str) -> Result<PathBuf> {
    check_descriptor(d)?;
    Ok(sidecar_dir(store).join(format!("{d}{SIDECAR_SUFFIX}")))
}

fn check_descriptor(d: &str) -> Result<()> {
    let ok = d.len() == fscrypt_metadata::proto::DESCRIPTOR_LEN_V1
        && d.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    if ok {
        Ok(())
    } else {
        Err(fscrypt_metadata::Error::Invalid(format!(
            "{d:?} is not a protector descriptor (16 lowercase hex digits)"
        ))
        .into())
    }
}

/// Checks one of the sidecar directories as `Store::check_setup` checks
/// `protectors/`: `Ok(false)` when absent.
fn check_dir(store: &Store, dir: &Path) -> Result<bool> {
    let md = match std::fs::symlink_metadata(dir) {
        Ok(md) => md,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(fscrypt_metadata::Error::io(dir, e).into()),
    };
    if let Some(reason) = fscrypt_metadata::store::unsafe_dir_reason(&md) {
        return Err(fscrypt_metadata::Error::Insecure {
            path: dir.to_path_buf(),
            reason: format!("{reason}; remove it (fscrypt-rs recreates it)"),
        }
        .into());
    }
    store.trust().check_dir(dir, md.uid())?;
    Ok(true)
}

/// Makes (when missing) and checks the two sidecar directories, with the
/// mode of `protectors/`.
fn ensure_dirs(store: &Store) -> Result<PathBuf> {
    store.check_setup()?;
    let pdir = store.protector_dir();
    let mode = std::fs::metadata(&pdir)
        .map_err(|e| fscrypt_metadata::Error::io(&pdir, e))?
        .mode()
        & 0o1777;
    let own = store.base_dir().join(OWN_DIR);
    let sealed = sidecar_dir(store);
    for dir in [&own, &sealed] {
        if check_dir(store, dir)? {
            continue;
        }
        match std::fs::create_dir(dir) {
            Ok(()) => {
                std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode))
                    .map_err(|e| fscrypt_metadata::Error::io(dir, e))?;
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                return Err(Error::Usage(format!(
                    "cannot create {}: {e}; as root, create it with the mode of {} \
                     (`install -d -m {mode:o} {}`)",
                    dir.display(),
                    pdir.display(),
                    sealed.display()
                )));
            }
            Err(e) => return Err(fscrypt_metadata::Error::io(dir, e).into()),
        }
        check_dir(store, dir)?;
    }
    Ok(sealed)
}

/// Stores `sealed` as the sidecar of protector `d` on `store`, atomically
/// (see the module doc), replacing any earlier one.
///
/// # Errors
/// A bad descriptor; the metadata not set up or insecure; a sidecar
/// directory that is unsafe or cannot be created ([`Error::Usage`] with
/// the command that makes it); the write.
pub fn write(store: &Store, d: &str, sealed: &Sealed) -> Result<PathBuf> {
    write_json(store, d, sealed.to_json())
}

/// [`write`] of a record already as JSON.
fn write_json(store: &Store, d: &str, sealed: serde_json::Value) -> Result<PathBuf> {
    let path = sidecar_path(store, d)?;
    ensure_dirs(store)?;
    if let Ok(md) = std::fs::symlink_metadata(&path)
        && !md.is_file()
    {
        return Err(fscrypt_metadata::Error::Insecure {
            path,
            reason: "it is not a regular file".into(),
        }
        .into());
    }
    let record = Sidecar {
        version: VERSION,
        protector: d.to_owned(),
        passphrase: ENCODING.to_owned(),
        sealed,
    };
    let mut text = serde_json::to_vec_pretty(&record)
        .map_err(|e| fscrypt_metadata::Error::Invalid(format!("sealed record: {e}")))?;
    text.push(b'\n');
    store::write_atomic(&path, &text, SIDECAR_MODE)?;
    Ok(path)
}

/// The sealed record of protector `d` on `store`, if it has a sidecar.
///
/// # Errors
/// [`fscrypt_metadata::Error::Insecure`] (a symlink, not a regular file,
/// an unsafe directory), [`fscrypt_metadata::Error::Untrusted`] (another
/// user's file), [`fscrypt_metadata::Error::Corrupt`] (too large, not
/// JSON, an unknown version or encoding, another descriptor, a malformed
/// sealed record); the metadata not set up.
pub fn read(store: &Store, d: &str) -> Result<Option<Sealed>> {
    let Some((path, value)) = read_json(store, d)? else {
        return Ok(None);
    };
    Sealed::from_json(&value)
        .map(Some)
        .map_err(|e| corrupt(&path, e.to_string()))
}

/// [`read`] up to the sealed record, left as JSON: the file's path and
/// the record.
fn read_json(store: &Store, d: &str) -> Result<Option<(PathBuf, serde_json::Value)>> {
    let path = sidecar_path(store, d)?;
    store.check_setup()?;
    if !check_dir(store, &store.base_dir().join(OWN_DIR))?
        || !check_dir(store, &sidecar_dir(store))?
    {
        return Ok(None);
    }
    let bytes = match store::read_trusted(&path, MAX_SIDECAR_LEN, store.trust()) {
        Ok(b) => b,
        Err(fscrypt_metadata::Error::Io { source, .. })
            if source.kind() == std::io::ErrorKind::NotFound =>
        {
            return Ok(None);
        }
        Err(e) => return Err(e.into()),
    };
    let value = parse(&path, d, &bytes)?;
    Ok(Some((path, value)))
}

fn corrupt(path: &Path, reason: String) -> Error {
    fscrypt_metadata::Error::Corrupt {
        path: path.to_path_buf(),
        reason: format!("{reason}; remove it and unlock with the recovery passphrase"),
    }
    .into()
}

/// Parses and checks a sidecar's bytes (see [`read`]): its sealed
/// record, still as JSON.
fn parse(path: &Path, d: &str, bytes: &[u8]) -> Result<serde_json::Value> {
    let corrupt = |reason: String| corrupt(path, reason);
    let s: Sidecar = serde_json::from_slice(bytes)
        .map_err(|e| corrupt(format!("not a sealed protector record: {e}")))?;
    if s.version != VERSION {
        return Err(corrupt(format!(
            "version {} (this fscrypt-rs reads version {VERSION})",
            s.version
        )));
    }
    if s.protector != d {
        return Err(corrupt(format!(
            "it is for protector {:?}, not {d}",
            s.protector
        )));
    }
    if s.passphrase != ENCODING {
        return Err(corrupt(format!(
            "unknown passphrase encoding {:?} (this fscrypt-rs knows {ENCODING:?})",
            s.passphrase
        )));
    }
    Ok(s.sealed)
}

/// Removes the sidecar of protector `d` on `store`: whether there was
/// one.
///
/// # Errors
/// A bad descriptor; the removal.
pub fn remove(store: &Store, d: &str) -> Result<bool> {
    let path = sidecar_path(store, d)?;
    match std::fs::remove_file(&path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(fscrypt_metadata::Error::io(&path, e).into()),
    }
}

/// The sealed record of the located protector `p`, read where the
/// protector is (on the filesystem its link points to, for a linked one).
///
/// # Errors
/// As [`read`].
pub fn of(p: &Located) -> Result<Option<Sealed>> {
    read(&p.store, &p.data.protector_descriptor)
}

/// The passphrase of the located protector `p` from its device: `None`
/// when it has no sidecar.
///
/// # Errors
/// [`Error::Seal`] when the device refuses or cannot be reached; a bad
/// sidecar ([`read`]).
pub fn unseal(
    p: &Located,
    options: &UnsealOptions,
    ui: &mut dyn Interaction,
) -> Result<Option<Zeroizing<Vec<u8>>>> {
    let Some(sealed) = of(p)? else {
        return Ok(None);
    };
    let secret = fscrypt_seal::unseal(&sealed, options, ui)?;
    Ok(Some(passphrase(&secret)))
}

/// What [`unlock`] did.
#[derive(Debug, Default)]
pub struct Attempt {
    /// The protector that unlocked the directory and its kind, if one did.
    pub unlocked: Option<(String, fscrypt_seal::Kind)>,
    /// Each sealed protector that did not, as `(descriptor, kind, one-line
    /// reason)`, in policy order.
    pub refused: Vec<(String, Option<fscrypt_seal::Kind>, String)>,
}

impl Attempt {
    /// Whether any protector of the policy had a sidecar.
    pub fn tried(&self) -> bool {
        self.unlocked.is_some() || !self.refused.is_empty()
    }
}

/// Unlocks `target` with its sealed protectors (only `only`, when given),
/// in policy order, until one opens it: each one's record is unsealed
/// ([`unseal`]), its passphrase opens the protector, the policy key goes
/// into the keyring ([`Target::unlock`]). A refusal (the device says no,
/// cannot be reached, a bad sidecar, a passphrase that no longer opens
/// the protector) is recorded and the next one tried; protectors that
/// cannot be located or have no sidecar are skipped.
///
/// # Errors
/// Only what is no refusal of one protector: the keyring, a policy key
/// that does not unwrap with a right passphrase.
pub fn unlock(
    ctx: &Context,
    target: &Target,
    only: Option<&str>,
    options: &UnsealOptions,
    ui: &mut dyn Interaction,
) -> Result<Attempt> {
    let mut attempt = Attempt::default();
    let slots: Vec<String> = target.slots().iter().map(|s| (*s).to_owned()).collect();
    for d in slots
        .iter()
        .filter(|d| only.is_none_or(|o| o == d.as_str()))
    {
        let Ok(located) = protector::locate(ctx, &target.store, d) else {
            continue;
        };
        let sealed = match of(&located) {
            Ok(Some(s)) => s,
            Ok(None) => continue,
            Err(e) => {
                attempt.refused.push((d.clone(), None, e.to_string()));
                continue;
            }
        };
        let kind = Some(sealed.kind());
        let secret = match fscrypt_seal::unseal(&sealed, options, ui) {
            Ok(s) => s,
            Err(e) => {
                attempt.refused.push((d.clone(), kind, e.to_string()));
                continue;
            }
        };
        match target.unlock(ctx, &located, &passphrase(&secret)) {
            Ok(()) => {
                attempt.unlocked = Some((d.clone(), sealed.kind()));
                return Ok(attempt);
            }
            Err(Error::Metadata(fscrypt_metadata::Error::WrongSecret { .. })) => {
                attempt.refused.push((
                    d.clone(),
                    kind,
                    "the unsealed passphrase does not open this protector (was its passphrase \
                     changed?); unlock with the recovery passphrase"
                        .to_owned(),
                ));
            }
            Err(e) => return Err(e),
        }
    }
    Ok(attempt)
}

#[cfg(test)]
mod tests {
    use super::*;
    use fscrypt_metadata::trust::Trust;

    fn secret(bytes: [u8; 32]) -> Secret {
        Secret::from_bytes(Zeroizing::new(bytes))
    }

    #[test]
    fn passphrase_decodes_back_leniently() {
        let mut b = [0u8; 32];
        for (i, x) in b.iter_mut().enumerate() {
            *x = (i as u8).wrapping_mul(37).wrapping_add(5);
        }
        let p = passphrase(&secret(b));
        let back = secret_of_passphrase(&p).unwrap();
        assert_eq!(back.as_bytes(), &b);
        let upper: Vec<u8> = p
            .iter()
            .filter(|&&c| c != b'-')
            .map(u8::to_ascii_uppercase)
            .collect();
        assert_eq!(secret_of_passphrase(&upper).unwrap().as_bytes(), &b);
        // Crockford's aliases: o for 0, i and l for 1.
        let zeros = "0000-0000-0000-0000-0000-0000-0000-0000-0000-0000-0000-0000-0000";
        let aliased = zeros.replacen('0', "o", 3).replacen('0', "O", 1);
        assert_eq!(
            secret_of_passphrase(aliased.as_bytes()).unwrap().as_bytes(),
            &[0; 32]
        );
        // Too short, too long, a letter outside the alphabet, padding bits
        // set.
        assert!(secret_of_passphrase(&zeros.as_bytes()[..zeros.len() - 1]).is_none());
        assert!(secret_of_passphrase(format!("{zeros}0").as_bytes()).is_none());
        assert!(secret_of_passphrase(zeros.replacen('0', "u", 1).as_bytes()).is_none());
        let mut padded = zeros.to_owned();
        padded.pop();
        padded.push('1');
        assert!(secret_of_passphrase(padded.as_bytes()).is_none());
        assert!(secret_of_passphrase(b"").is_none());
    }

    #[test]
    fn passphrase_encoding() {
        let p = passphrase(&secret([0; 32]));
        assert_eq!(p.len(), PASSPHRASE_LEN);
        assert_eq!(
            std::str::from_utf8(&p).unwrap(),
            "0000-0000-0000-0000-0000-0000-0000-0000-0000-0000-0000-0000-0000"
        );
        // 255 bits of ones, then the 256th and four zero bits of padding.
        let p = passphrase(&secret([0xff; 32]));
        assert_eq!(
            std::str::from_utf8(&p).unwrap(),
            "zzzz-zzzz-zzzz-zzzz-zzzz-zzzz-zzzz-zzzz-zzzz-zzzz-zzzz-zzzz-zzzg"
        );
        // Bytes 0..32: RFC 4648 base32 of them is
        // AAAQEAYEAUDAOCAJBIFQYDIOB4IBCEQTCQKRMFYYDENBWHA5DYPQ====, the
        // same 5-bit values in Crockford's alphabet.
        let mut b = [0u8; 32];
        for (i, x) in b.iter_mut().enumerate() {
            *x = i as u8;
        }
        let p = passphrase(&secret(b));
        assert_eq!(
            std::str::from_utf8(&p).unwrap(),
            "000g-40r4-0m30-e209-185g-r38e-1w81-24gk-2gah-c5rr-34d1-p70x-3rfg"
        );
        assert!(
            p.iter()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        );
        assert!(!p.iter().any(|c| b"ilou".contains(c)));
    }

    fn fake_mount(tmp: &Path) -> Store {
        for d in ["policies", "protectors"] {
            std::fs::create_dir_all(tmp.join(".fscrypt").join(d)).unwrap();
        }
        Store::new(tmp, Trust::for_caller(false))
    }

    fn tmpdir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "fscrypt-actions-sealed-{name}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// A stand-in sealed record (the sidecar code does not look inside).
    fn record() -> serde_json::Value {
        serde_json::json!({"kind": "tpm2", "anything": "0a0b"})
    }

    const D: &str = "0123456789abcdef";

    #[test]
    fn sidecar_round_trip_and_removal() {
        let tmp = tmpdir("round");
        let store = fake_mount(&tmp);
        assert!(read(&store, D).unwrap().is_none());
        assert!(read_json(&store, D).unwrap().is_none());
        let path = write_json(&store, D, record()).unwrap();
        assert_eq!(
            path,
            tmp.join(".fscrypt/fscrypt-rs/sealed/0123456789abcdef.json")
        );
        assert_eq!(
            std::fs::metadata(&path).unwrap().mode() & 0o777,
            SIDECAR_MODE
        );
        assert_eq!(
            std::fs::metadata(sidecar_dir(&store)).unwrap().mode() & 0o1777,
            std::fs::metadata(store.protector_dir()).unwrap().mode() & 0o1777
        );
        assert_eq!(
            read_json(&store, D).unwrap(),
            Some((path.clone(), record()))
        );
        assert!(remove(&store, D).unwrap());
        assert!(!remove(&store, D).unwrap());
        assert!(read(&store, D).unwrap().is_none());
        assert!(sidecar_path(&store, "../../x").is_err());
        let _ = std::fs::remove_dir_all(&tmp);
    }

    #[test]
    fn malformed_sidecars_are_refused_not_panicked_on() {
        let tmp = tmpdir("bad");
        let store = fake_mount(&tmp);
        let path = write_json(&store, D, record()).unwrap();
        let good: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        let cases = [
            serde_json::json!("not an object"),
            {
                let mut v = good.clone();
                v["version"] = 2.into();
                v
            },
            {
                let mut v = good.clone();
                v["protector"] = "fedcba9876543210".into();
                v
            },
            {
                let mut v = good.clone();
                v["passphrase"] = "hex".into();
                v
            },
            {
                let mut v = good.clone();
                v["extra"] = 1.into();
                v
            },
            {
                let mut v = good.clone();
                v["sealed"] = serde_json::json!({"kind": "enigma"});
                v
            },
        ];
        for v in cases {
            std::fs::write(&path, serde_json::to_vec(&v).unwrap()).unwrap();
            let e = read(&store, D).unwrap_err();
            assert!(read_json(&store, D).is_err() || v["sealed"]["kind"] == "enigma");
            assert!(
                matches!(e, Error::Metadata(fscrypt_metadata::Error::Corrupt { .. })),
                "{v}: {e}"
            );
        }
        std::fs::write(&path, b"\xff\xfe").unwrap();
        assert!(read(&store, D).is_err());
        std::fs::write(&path, vec![b' '; MAX_SIDECAR_LEN as usize + 1]).unwrap();
        assert!(read(&store, D).is_err());
        // A symlink in place of the file or of the directory is refused.
        std::fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", &path).unwrap();
        assert!(matches!(
            read(&store, D).unwrap_err(),
            Error::Metadata(fscrypt_metadata::Error::Insecure { .. })
        ));
        assert!(write_json(&store, D, record()).is_err());
        std::fs::remove_file(&path).unwrap();
        let dir = sidecar_dir(&store);
        std::fs::remove_dir(&dir).unwrap();
        std::os::unix::fs::symlink(&tmp, &dir).unwrap();
        assert!(read(&store, D).is_err());
        assert!(write_json(&store, D, record()).is_err());
        let _ = std::fs::remove_dir_all(&tmp);
    }
}
