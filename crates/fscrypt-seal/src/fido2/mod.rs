//! FIDO2 authenticators: the secret is encrypted under a key derived from
//! the authenticator's `hmac-secret` output for a credential made for this
//! protector (as `systemd-cryptenroll --fido2-device` does).
//!
//! # Scheme
//!
//! Client: libfido2 (`libfido2.so.1`, loaded at run time), which speaks
//! CTAP 2.0/2.1 over `/dev/hidraw*`: CTAPHID framing, the PIN/UV auth
//! protocol and the hmac-secret key agreement are all libfido2's.
//!
//! Seal (CTAP 2.1 §6.1, §6.2, §12.5 `hmac-secret`):
//! 1. `authenticatorMakeCredential`: relying party [`RP_ID`], a random
//!    32-byte user handle, ES256, non-resident (`rk` false), extension
//!    `hmac-secret: true`, with the PIN if the key has one set
//!    (`clientPin`); the key wants a touch.
//! 2. `authenticatorGetAssertion` for that credential only, user presence
//!    required, extension `hmac-secret` with one random 32-byte `salt`
//!    (and the PIN again if one is set, so the output is the key's
//!    `CredRandomWithUV` one and later needs the PIN); another touch.
//!    The output is `HMAC-SHA-256(CredRandom, salt)`, 32 bytes, that only
//!    this authenticator can compute.
//! 3. `wrap_key = HKDF-SHA512(salt = "fscrypt-rs fido2 v1",
//!    ikm = output).expand(info = "wrap", 32 bytes)` (RFC 5869);
//!    `wrapped = XChaCha20-Poly1305(wrap_key, nonce, ad, secret) ‖ tag`
//!    with a random 24-byte nonce and `ad = "fscrypt-rs fido2 v1\0" ‖
//!    rp_id ‖ 0 ‖ u16be(len(credential_id)) ‖ credential_id ‖ salt ‖
//!    pin (1 byte)`, so no stored field can be swapped.
//!
//! Unseal repeats step 2 with the stored credential id and salt (the PIN
//! if the record says one was used), derives the same key, and opens
//! `wrapped`. Another authenticator does not hold the credential
//! (`CTAP2_ERR_NO_CREDENTIALS`), a wrong PIN is refused by the key: both
//! are [`Error::WrongSecret`].
//!
//! Stored ([`Sealed`], JSON, all public): `rp_id`, `credential_id` (hex),
//! `salt` (hex, 32 bytes), `pin` (whether the PIN was used), `device` (the
//! product name, for display only), `nonce` (hex, 24 bytes) and `wrapped`
//! (hex, 48 bytes). The credential id is opaque to us: keys usually
//! encrypt their per-credential secret into it, so it is useless without
//! the authenticator.
//!
//! Several keys are several protectors, each with its own record; when
//! several keys are plugged in, unsealing asks each (silently, without a
//! touch) whether it holds the credential and uses the one that does.
//!
//! Devices: a `/dev/hidrawN` path, or, for tests only, `unix:/path` (see
//! [`unix`]): CTAPHID reports over a Unix socket to a software
//! authenticator.

mod ffi;
pub mod unix;

use std::ffi::{CStr, CString};
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use zeroize::Zeroizing;

use crate::{Error, Interaction, SECRET_SIZE, Secret};

use ffi::{Assert, Cred, Dev};

/// The relying-party id of every fscrypt-rs credential.
pub const RP_ID: &str = "fscrypt-rs";
/// Size in bytes of the hmac-secret salt (CTAP 2.1 §12.5: 32 bytes).
pub const SALT_SIZE: usize = 32;
/// The nonce size of XChaCha20-Poly1305.
pub const NONCE_SIZE: usize = fscrypt_crypto::aead::NONCE_SIZE;
/// Size of `wrapped`: the 32-byte secret and the 16-byte tag.
pub const WRAPPED_SIZE: usize = SECRET_SIZE + fscrypt_crypto::aead::TAG_SIZE;
/// Longest credential id accepted from a record (CTAP allows up to 1023
/// bytes; keys use 16 to about 250).
pub const MAX_CREDENTIAL_ID: usize = 1023;

/// Domain-separation label of the key derivation and the associated data.
const LABEL: &[u8] = b"fscrypt-rs fido2 v1";

/// Options of sealing (`protector add CIPHERDIR fido2 [--device PATH]`).
#[derive(Clone, Debug, Default)]
pub struct SealOptions {
    /// The authenticator's hidraw device (`/dev/hidraw3`), or, for tests,
    /// `unix:/path/to/socket`; default: the only FIDO2 key present.
    pub device: Option<PathBuf>,
}

/// Options of unsealing (`mount --fido2 [--fido2-device PATH]`).
#[derive(Clone, Debug, Default)]
pub struct UnsealOptions {
    /// The device to ask (as [`SealOptions::device`]); default: every
    /// FIDO2 key present, the first that holds the credential.
    pub device: Option<PathBuf>,
}

/// The stored record (all public; see the module doc for how the fields
/// bind the secret).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sealed {
    /// The relying-party id the credential was made for ([`RP_ID`]).
    pub rp_id: String,
    /// The credential id the key returned, hex.
    pub credential_id: String,
    /// The hmac-secret salt, hex, [`SALT_SIZE`] bytes.
    pub salt: String,
    /// Whether the PIN was given (the key had one): unsealing then needs it.
    pub pin: bool,
    /// What the key called itself when sealing ("Yubico YubiKey OTP+FIDO+CCID"), for display.
    pub device: String,
    /// The XChaCha20-Poly1305 nonce, hex, [`NONCE_SIZE`] bytes.
    pub nonce: String,
    /// The encrypted secret and its tag, hex, [`WRAPPED_SIZE`] bytes.
    pub wrapped: String,
}

/// A record's fields, decoded and checked.
struct Parts {
    rp_id: CString,
    credential_id: Vec<u8>,
    salt: [u8; SALT_SIZE],
    nonce: [u8; NONCE_SIZE],
    wrapped: [u8; WRAPPED_SIZE],
}

fn hex_field<const N: usize>(name: &str, value: &str) -> Result<[u8; N], Error> {
    let bytes = hex::decode(value)
        .map_err(|_| Error::Invalid(format!("the fido2 record's {name} is not hex")))?;
    bytes.try_into().map_err(|b: Vec<u8>| {
        Error::Invalid(format!(
            "the fido2 record's {name} has {} bytes, not {N}",
            b.len()
        ))
    })
}

impl Sealed {
    /// Decodes and checks every field.
    fn parts(&self) -> Result<Parts, Error> {
        if self.rp_id.is_empty() || self.rp_id.len() > 255 || self.rp_id.contains('\0') {
            return Err(Error::Invalid(
                "the fido2 record's rp_id is empty, too long or has a NUL byte".into(),
            ));
        }
        let credential_id = hex::decode(&self.credential_id)
            .map_err(|_| Error::Invalid("the fido2 record's credential_id is not hex".into()))?;
        if credential_id.is_empty() || credential_id.len() > MAX_CREDENTIAL_ID {
            return Err(Error::Invalid(format!(
                "the fido2 record's credential_id has {} bytes, not 1 to {MAX_CREDENTIAL_ID}",
                credential_id.len()
            )));
        }
        Ok(Parts {
            rp_id: ffi::cstring(&self.rp_id)?,
            credential_id,
            salt: hex_field("salt", &self.salt)?,
            nonce: hex_field("nonce", &self.nonce)?,
            wrapped: hex_field("wrapped", &self.wrapped)?,
        })
    }
}

/// The associated data that binds the record's fields (module doc, step 3).
fn associated_data(
    rp_id: &str,
    credential_id: &[u8],
    salt: &[u8; SALT_SIZE],
    pin: bool,
) -> Vec<u8> {
    let mut ad = Vec::with_capacity(LABEL.len() + rp_id.len() + credential_id.len() + 40);
    ad.extend_from_slice(LABEL);
    ad.push(0);
    ad.extend_from_slice(rp_id.as_bytes());
    ad.push(0);
    // Credential ids are checked to be at most 1023 bytes.
    ad.extend_from_slice(&(credential_id.len() as u16).to_be_bytes());
    ad.extend_from_slice(credential_id);
    ad.extend_from_slice(salt);
    ad.push(u8::from(pin));
    ad
}

/// `wrap_key` from the hmac-secret output (module doc, step 3).
fn wrap_key(output: &[u8]) -> Result<Zeroizing<[u8; 32]>, Error> {
    let mut key = Zeroizing::new([0u8; 32]);
    fscrypt_crypto::HkdfSha512::extract(LABEL, output)
        .expand(&[b"wrap"], key.as_mut())
        .map_err(|e| Error::Device(format!("deriving the fido2 wrapping key failed: {e}")))?;
    Ok(key)
}

fn random<const N: usize>() -> Result<[u8; N], Error> {
    let mut b = [0u8; N];
    fscrypt_crypto::random_bytes(&mut b)
        .map_err(|e| Error::Device(format!("no random bytes: {e}")))?;
    Ok(b)
}

/// An opened authenticator and what it is called.
struct Opened {
    lib: &'static ffi::Lib,
    dev: Dev,
    name: String,
}

/// Opens `path` (hidraw or `unix:`).
fn open_path(lib: &'static ffi::Lib, path: &str, name: &str) -> Result<Opened, Error> {
    let (io, target) = match path.strip_prefix(unix::PREFIX) {
        Some(sock) => (Some(&unix::IO), sock),
        None => (None, path),
    };
    let mut dev = Dev::new(lib, io)?;
    dev.open(target).map_err(|r| {
        Error::Device(format!(
            "cannot open the FIDO2 device {path}: {} (is it plugged in, and readable by you?)",
            ffi::strerr(lib, r)
        ))
    })?;
    if !dev.is_fido2() {
        return Err(Error::Device(format!(
            "{path} is a U2F-only key; FIDO2 protectors need a FIDO2 key with hmac-secret"
        )));
    }
    Ok(Opened {
        lib,
        dev,
        name: name.to_string(),
    })
}

fn device_str(p: &std::path::Path) -> Result<&str, Error> {
    p.to_str()
        .ok_or_else(|| Error::Invalid(format!("the device path {} is not UTF-8", p.display())))
}

/// A PIN as libfido2 takes it: UTF-8 and a final NUL, zeroed on drop.
struct Pin(Zeroizing<Vec<u8>>);

impl Pin {
    fn as_cstr(&self) -> &CStr {
        // `ask_pin` checked there is no NUL before the final one.
        CStr::from_bytes_with_nul(&self.0).unwrap_or(c"")
    }
}

/// The PIN from `ui` if the key has one set.
fn pin_if_set(opened: &Opened, ui: &mut dyn Interaction) -> Result<Option<Pin>, Error> {
    if !opened.dev.has_pin() {
        return Ok(None);
    }
    ask_pin(opened, ui).map(Some)
}

/// Asks `ui` for the key's PIN.
fn ask_pin(opened: &Opened, ui: &mut dyn Interaction) -> Result<Pin, Error> {
    let pin = ui.pin(&format!("PIN of FIDO2 key '{}'", opened.name), false)?;
    if pin.as_bytes().contains(&0) {
        return Err(Error::Invalid("a PIN cannot contain a NUL byte".into()));
    }
    let mut bytes = Zeroizing::new(Vec::with_capacity(pin.len() + 1));
    bytes.extend_from_slice(pin.as_bytes());
    bytes.push(0);
    Ok(Pin(bytes))
}

/// Maps a libfido2 error of make_cred/get_assert to our kinds.
fn op_error(opened: &Opened, r: std::ffi::c_int, what: &str) -> Error {
    let lib = opened.lib;
    let name = &opened.name;
    match r {
        ffi::FIDO_ERR_PIN_INVALID => {
            let left = opened.dev.retry_count();
            Error::WrongSecret(match left {
                Some(n) => format!("wrong PIN for FIDO2 key '{name}' ({n} tries left)"),
                None => format!("wrong PIN for FIDO2 key '{name}'"),
            })
        }
        ffi::FIDO_ERR_PIN_AUTH_BLOCKED => Error::Device(format!(
            "FIDO2 key '{name}' refuses PINs after 3 wrong ones: unplug it and plug it back in"
        )),
        ffi::FIDO_ERR_PIN_BLOCKED => Error::Device(format!(
            "FIDO2 key '{name}' is locked (no PIN tries left): it must be reset, which loses its credentials"
        )),
        ffi::FIDO_ERR_PIN_REQUIRED | ffi::FIDO_ERR_PIN_AUTH_INVALID => Error::WrongSecret(format!(
            "FIDO2 key '{name}' wants its PIN for this protector, and it was not accepted"
        )),
        ffi::FIDO_ERR_PIN_NOT_SET => Error::WrongSecret(format!(
            "this protector was added with a PIN, but FIDO2 key '{name}' has none set now"
        )),
        ffi::FIDO_ERR_NO_CREDENTIALS => Error::WrongSecret(format!(
            "FIDO2 key '{name}' does not hold this protector's credential: use the key it was added with"
        )),
        ffi::FIDO_ERR_USER_ACTION_TIMEOUT | ffi::FIDO_ERR_ACTION_TIMEOUT => Error::Device(format!(
            "FIDO2 key '{name}' was not touched in time: try again and touch it"
        )),
        ffi::FIDO_ERR_OPERATION_DENIED => {
            Error::Device(format!("FIDO2 key '{name}' refused the {what}"))
        }
        ffi::FIDO_ERR_UNSUPPORTED_EXTENSION => Error::Device(format!(
            "FIDO2 key '{name}' has no hmac-secret extension: use another key"
        )),
        _ => Error::Device(format!(
            "FIDO2 {what} with key '{name}' failed: {}",
            ffi::strerr(lib, r)
        )),
    }
}

impl Opened {
    /// One hmac-secret assertion (step 2), with a touch.
    fn hmac_secret(
        &self,
        rp_id: &CString,
        credential_id: &[u8],
        salt: &[u8; SALT_SIZE],
        pin: Option<&Pin>,
        ui: &mut dyn Interaction,
    ) -> Result<Zeroizing<Vec<u8>>, Error> {
        let lib = self.lib;
        let cdh: [u8; 32] = random()?;
        let assert = Assert::new(lib, rp_id, credential_id, &cdh, Some(salt), true)?;
        ui.notice(&format!(
            "Touch your FIDO2 security key '{}' now",
            self.name
        ));
        let r = self.dev.get_assert(&assert, pin.map(Pin::as_cstr));
        if r != ffi::FIDO_OK {
            return Err(op_error(self, r, "assertion"));
        }
        let out = assert.hmac_secret().ok_or_else(|| {
            Error::Device(format!(
                "FIDO2 key '{}' returned no hmac-secret output",
                self.name
            ))
        })?;
        if out.len() != 32 {
            return Err(Error::Device(format!(
                "FIDO2 key '{}' returned a {}-byte hmac-secret output, not 32",
                self.name,
                out.len()
            )));
        }
        Ok(out)
    }

    /// Whether this key holds `credential_id` (an assertion without user
    /// presence, no touch, no PIN).
    fn holds(&self, rp_id: &CString, credential_id: &[u8]) -> bool {
        let lib = self.lib;
        let Ok(cdh) = random::<32>() else {
            return false;
        };
        let Ok(assert) = Assert::new(lib, rp_id, credential_id, &cdh, None, false) else {
            return false;
        };
        self.dev.get_assert(&assert, None) == ffi::FIDO_OK
    }
}

/// Opens the device to seal to: the option's, or the only one present.
fn open_for_seal(
    lib: &'static ffi::Lib,
    device: Option<&std::path::Path>,
) -> Result<Opened, Error> {
    if let Some(p) = device {
        let path = device_str(p)?;
        let name = ffi::manifest(lib)
            .ok()
            .and_then(|l| l.into_iter().find(|d| d.path == path))
            .map_or_else(|| path.to_string(), |d| d.product);
        return open_path(lib, path, &name);
    }
    let found = ffi::manifest(lib)?;
    match found.as_slice() {
        [] => Err(Error::Device(
            "no FIDO2 security key found: plug one in (or name it with --device /dev/hidrawN)"
                .into(),
        )),
        [d] => open_path(lib, &d.path, &d.product),
        several => Err(Error::Invalid(format!(
            "{} FIDO2 keys are plugged in ({}): choose one with --device",
            several.len(),
            several
                .iter()
                .map(|d| d.path.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// Seals `secret` to a FIDO2 authenticator (module doc: two touches, and
/// the PIN through `ui` if the key has one).
///
/// # Errors
/// [`Error::Device`] when libfido2 or the key is missing, the key lacks
/// hmac-secret, or it was not touched; [`Error::WrongSecret`] for a wrong
/// PIN (with the tries left); [`Error::Invalid`] when several keys are
/// present and none was chosen.
pub fn seal(
    options: &SealOptions,
    secret: &Secret,
    ui: &mut dyn Interaction,
) -> Result<Sealed, Error> {
    let lib = ffi::lib()?;
    let opened = open_for_seal(lib, options.device.as_deref())?;
    match opened.dev.extensions() {
        Ok(ext) if ext.iter().any(|e| e == "hmac-secret") => {}
        Ok(_) => {
            return Err(Error::Device(format!(
                "FIDO2 key '{}' has no hmac-secret extension: use another key",
                opened.name
            )));
        }
        Err(r) => return Err(op_error(&opened, r, "authenticatorGetInfo")),
    }
    let pin = pin_if_set(&opened, ui)?;
    let rp_id = ffi::cstring(RP_ID)?;
    let user_id: [u8; 32] = random()?;
    let cdh: [u8; 32] = random()?;
    let cred = Cred::new(lib, &rp_id, &user_id, &cdh)?;
    ui.notice(&format!(
        "Touch your FIDO2 security key '{}' to make the protector's credential",
        opened.name
    ));
    let r = opened.dev.make_cred(&cred, pin.as_ref().map(Pin::as_cstr));
    if r != ffi::FIDO_OK {
        return Err(op_error(&opened, r, "credential creation"));
    }
    let credential_id = cred.id();
    if credential_id.is_empty() || credential_id.len() > MAX_CREDENTIAL_ID {
        return Err(Error::Device(format!(
            "FIDO2 key '{}' returned a {}-byte credential id",
            opened.name,
            credential_id.len()
        )));
    }
    let salt: [u8; SALT_SIZE] = random()?;
    let output = opened.hmac_secret(&rp_id, &credential_id, &salt, pin.as_ref(), ui)?;
    let key = wrap_key(&output)?;
    let nonce: [u8; NONCE_SIZE] = random()?;
    let ad = associated_data(RP_ID, &credential_id, &salt, pin.is_some());
    let mut wrapped = Zeroizing::new([0u8; WRAPPED_SIZE]);
    wrapped[..SECRET_SIZE].copy_from_slice(secret.as_bytes());
    let tag = fscrypt_crypto::aead::seal(&key, &nonce, &ad, &mut wrapped[..SECRET_SIZE])
        .map_err(|e| Error::Device(format!("encrypting the secret failed: {e}")))?;
    wrapped[SECRET_SIZE..].copy_from_slice(&tag);
    Ok(Sealed {
        rp_id: RP_ID.to_string(),
        credential_id: hex::encode(&credential_id),
        salt: hex::encode(salt),
        pin: pin.is_some(),
        device: opened.name.clone(),
        nonce: hex::encode(nonce),
        wrapped: hex::encode(*wrapped),
    })
}

/// Opens the device to unseal with: the option's, else the only key
/// present, else the first present that holds the credential.
fn open_for_unseal(
    lib: &'static ffi::Lib,
    device: Option<&std::path::Path>,
    parts: &Parts,
) -> Result<Opened, Error> {
    if let Some(p) = device {
        let path = device_str(p)?;
        return open_path(lib, path, path);
    }
    let found = ffi::manifest(lib)?;
    match found.as_slice() {
        [] => Err(Error::Device(
            "no FIDO2 security key found: plug in the key this protector was added with".into(),
        )),
        [d] => open_path(lib, &d.path, &d.product),
        several => {
            for d in several {
                if let Ok(o) = open_path(lib, &d.path, &d.product)
                    && o.holds(&parts.rp_id, &parts.credential_id)
                {
                    return Ok(o);
                }
            }
            Err(Error::WrongSecret(format!(
                "none of the {} FIDO2 keys plugged in holds this protector's credential",
                several.len()
            )))
        }
    }
}

/// Unseals `sealed` (one touch, and the PIN through `ui` if the record
/// says the key had one).
///
/// # Errors
/// [`Error::WrongSecret`] when the key does not hold the credential, the
/// PIN is wrong (with the tries left), or the output does not open the
/// record; [`Error::Device`] when libfido2 or the key is missing, locked,
/// or not touched; [`Error::Invalid`] for a malformed record.
pub fn unseal(
    sealed: &Sealed,
    options: &UnsealOptions,
    ui: &mut dyn Interaction,
) -> Result<Secret, Error> {
    let parts = sealed.parts()?;
    let lib = ffi::lib()?;
    let opened = open_for_unseal(lib, options.device.as_deref(), &parts)?;
    let pin = if sealed.pin {
        if !opened.dev.has_pin() {
            return Err(Error::WrongSecret(format!(
                "this protector was added with a PIN, but FIDO2 key '{}' has none set now: it is not the same key, or it was reset",
                opened.name
            )));
        }
        Some(ask_pin(&opened, ui)?)
    } else {
        None
    };
    let output = opened.hmac_secret(
        &parts.rp_id,
        &parts.credential_id,
        &parts.salt,
        pin.as_ref(),
        ui,
    )?;
    let key = wrap_key(&output)?;
    let ad = associated_data(&sealed.rp_id, &parts.credential_id, &parts.salt, sealed.pin);
    let mut plain = Zeroizing::new([0u8; SECRET_SIZE]);
    plain.copy_from_slice(&parts.wrapped[..SECRET_SIZE]);
    let mut tag = [0u8; fscrypt_crypto::aead::TAG_SIZE];
    tag.copy_from_slice(&parts.wrapped[SECRET_SIZE..]);
    fscrypt_crypto::aead::open(&key, &parts.nonce, &ad, plain.as_mut(), &tag).map_err(|_| {
        Error::WrongSecret(format!(
            "FIDO2 key '{}' answered, but not with this protector's secret (another key, a reset key, or an altered record)",
            opened.name
        ))
    })?;
    Ok(Secret::from_bytes(plain))
}

/// See [`crate::Sealed::describe`]: the key's name when sealing and the
/// first 8 hex digits of the credential id.
pub fn describe(sealed: &Sealed) -> Vec<(&'static str, String)> {
    vec![
        ("device", sealed.device.clone()),
        ("credential", sealed.credential_id.chars().take(8).collect()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> Sealed {
        Sealed {
            rp_id: RP_ID.into(),
            credential_id: "ab".repeat(40),
            salt: "11".repeat(SALT_SIZE),
            pin: true,
            device: "Test Key".into(),
            nonce: "22".repeat(NONCE_SIZE),
            wrapped: "33".repeat(WRAPPED_SIZE),
        }
    }

    #[test]
    fn associated_data_layout() {
        let ad = associated_data("rp", &[9, 8, 7], &[5; SALT_SIZE], true);
        let mut want = b"fscrypt-rs fido2 v1\0rp\0\x00\x03\x09\x08\x07".to_vec();
        want.extend_from_slice(&[5; SALT_SIZE]);
        want.push(1);
        assert_eq!(ad, want);
        assert_ne!(
            ad,
            associated_data("rp", &[9, 8, 7], &[5; SALT_SIZE], false)
        );
    }

    #[test]
    fn wrap_key_depends_on_the_output() {
        let a = wrap_key(&[1; 32]).unwrap();
        assert_eq!(*a, *wrap_key(&[1; 32]).unwrap());
        assert_ne!(*a, *wrap_key(&[2; 32]).unwrap());
        assert_ne!(*a, [0; 32]);
    }

    #[test]
    fn parts_of_a_good_record() {
        let p = record().parts().unwrap();
        assert_eq!(p.credential_id, vec![0xab; 40]);
        assert_eq!(p.salt, [0x11; SALT_SIZE]);
        assert_eq!(p.nonce, [0x22; NONCE_SIZE]);
        assert_eq!(p.wrapped, [0x33; WRAPPED_SIZE]);
        assert_eq!(p.rp_id.as_bytes(), RP_ID.as_bytes());
    }

    #[test]
    fn parts_refuse_bad_fields() {
        let bad = [
            Sealed {
                salt: "11".repeat(33),
                ..record()
            },
            Sealed {
                nonce: "2".into(),
                ..record()
            },
            Sealed {
                wrapped: "xx".repeat(WRAPPED_SIZE),
                ..record()
            },
            Sealed {
                credential_id: "ab".repeat(MAX_CREDENTIAL_ID + 1),
                ..record()
            },
            Sealed {
                credential_id: String::new(),
                ..record()
            },
            Sealed {
                rp_id: "r".repeat(256),
                ..record()
            },
        ];
        for s in bad {
            assert!(matches!(s.parts(), Err(Error::Invalid(_))), "{s:?}");
        }
    }

    #[test]
    fn describe_shows_device_and_credential_prefix() {
        assert_eq!(
            describe(&record()),
            vec![
                ("device", "Test Key".to_string()),
                ("credential", "abababab".to_string())
            ]
        );
    }

    #[test]
    fn record_json_round_trip_and_unknown_fields() {
        let s = record();
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(serde_json::from_value::<Sealed>(v.clone()).unwrap(), s);
        let mut extra = v;
        extra["secret"] = serde_json::Value::Bool(true);
        assert!(serde_json::from_value::<Sealed>(extra).is_err());
    }

    #[test]
    fn pin_is_nul_terminated() {
        let pin = Pin(Zeroizing::new(b"1234\0".to_vec()));
        assert_eq!(pin.as_cstr().to_bytes(), b"1234");
    }
}
