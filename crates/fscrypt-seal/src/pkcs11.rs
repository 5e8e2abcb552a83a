//! PKCS#11 tokens: a key that never leaves the token wraps the secret
//! (AES key wrap or RSA-OAEP), through the `cryptoki` crate (PKCS#11
//! v2.40 / v3.x, OASIS).
//!
//! # Scheme
//!
//! Sealing opens the module (`dlopen`), finds the token whose
//! `CK_TOKEN_INFO.label` is `--token`, logs in as `CKU_USER` with the PIN
//! from [`Interaction::pin`] and picks the wrapping key:
//!
//! * `--key LABEL` names an existing key (`CKA_LABEL`). An AES secret key
//!   (`CKK_AES`, `CKA_WRAP` and `CKA_UNWRAP` true) gives
//!   [`Mechanism::AesKeyWrap`]; an RSA private key (`CKK_RSA`,
//!   `CKA_DECRYPT` true) with its public key (same `CKA_ID`) gives
//!   [`Mechanism::RsaOaepSha256`] (or [`Mechanism::RsaOaepSha1`] on a
//!   token that refuses SHA-256 OAEP parameters). The key must have a non-empty `CKA_ID`:
//!   unsealing finds it by that id.
//! * without `--key`, a new AES-256 key is generated on the token
//!   (`CKM_AES_KEY_GEN`, `CKA_TOKEN`, `CKA_PRIVATE`, `CKA_SENSITIVE` true,
//!   `CKA_EXTRACTABLE` false, only `CKA_WRAP`/`CKA_UNWRAP` allowed),
//!   labelled `fscrypt-rs <8 hex digits>` with a random 16-byte `CKA_ID`
//!   (destroyed again if the wrap then fails).
//!
//! The 32-byte secret is then bound to the key:
//!
//! * `aes-key-wrap` (`CKM_AES_KEY_WRAP`, RFC 3394 with the default IV
//!   `A6A6A6A6A6A6A6A6`): the secret is made a session object
//!   (`CKO_SECRET_KEY`, `CKK_GENERIC_SECRET`, `CKA_TOKEN` false,
//!   extractable), wrapped with `C_WrapKey` and destroyed. The 40 wrapped
//!   bytes are stored. Unsealing unwraps them with `C_UnwrapKey` into a
//!   session object, reads its `CKA_VALUE` and destroys it; RFC 3394's
//!   integrity check refuses any other key or altered bytes. Key wrap is
//!   chosen over AES-GCM because it is the mechanism PKCS#11 defines for
//!   exactly this (a key under a key), needs no IV to store, and is
//!   deterministic, so nothing depends on the token's random generator.
//! * `rsa-oaep-sha256` (`CKM_RSA_PKCS_OAEP`, RFC 8017 §7.1, hash SHA-256,
//!   MGF1-SHA-256, empty label): the token encrypts the secret with the
//!   public key (`C_Encrypt`); the ciphertext (the modulus size, 128 to
//!   1024 bytes) is stored. Unsealing decrypts it with the private key
//!   (`C_Decrypt`).
//! * `rsa-oaep-sha1`: the same with SHA-1 and MGF1-SHA-1, used only when
//!   the token answers `CKR_ARGUMENTS_BAD`, `CKR_MECHANISM_PARAM_INVALID`
//!   or `CKR_MECHANISM_INVALID` to the SHA-256 parameters (SoftHSM 2.6 and
//!   several smart cards accept only SHA-1 OAEP). OAEP's security does not
//!   rest on the hash's collision resistance, so SHA-1 is still sound here.
//!
//! The stored [`Sealed`] record holds only public data: the module path
//! (a hint), the token's label and serial, the key's label and `CKA_ID`
//! (hex), the mechanism and the wrapped bytes (hex). The wrapped bytes are
//! useless without the key, which never leaves the token.
//!
//! Unsealing takes the module and token label from [`UnsealOptions`] when
//! given, else from the record; it finds the token by the record's serial,
//! else by label, logs in, finds the key by class and `CKA_ID`, and
//! unwraps. Sessions are closed (and the user logged out, when this call
//! logged in) on every path.
//!
//! A PKCS#11 library is initialised once per process (`C_Initialize`) and
//! never finalised: the spec allows one initialisation per application,
//! and a `C_Finalize` would close the sessions of any other thread using
//! the same module. Login state is per token and per process (PKCS#11
//! §5.6), so two threads using the same token at once share it.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use cryptoki::context::{CInitializeArgs, CInitializeFlags, Pkcs11};
use cryptoki::error::{Error as CkError, RvError};
use cryptoki::mechanism::rsa::{PkcsMgfType, PkcsOaepParams, PkcsOaepSource};
use cryptoki::mechanism::{Mechanism as CkMechanism, MechanismType};
use cryptoki::object::{Attribute, AttributeType, KeyType, ObjectClass, ObjectHandle};
use cryptoki::session::{Session, UserType};
use cryptoki::slot::{Slot, TokenInfo};
use cryptoki::types::AuthPin;
use serde::{Deserialize, Serialize};
use zeroize::{Zeroize, Zeroizing};

use crate::{Error, Interaction, SECRET_SIZE, Secret};

/// Size in bytes of an AES key wrap (RFC 3394) of the 32-byte secret:
/// the secret plus the 8-byte integrity block.
const AES_WRAPPED_SIZE: usize = SECRET_SIZE + 8;

/// Smallest and largest RSA ciphertext accepted in a record, in bytes
/// (1024- to 8192-bit moduli).
const RSA_CIPHERTEXT_SIZES: std::ops::RangeInclusive<usize> = 128..=1024;

/// Longest `CKA_ID` accepted in a record, in bytes.
const MAX_KEY_ID_SIZE: usize = 256;

/// Size in bytes of the `CKA_ID` of a generated key.
const GENERATED_ID_SIZE: usize = 16;

/// Options of sealing (`protector add CIPHERDIR pkcs11 --module SO
/// --token LABEL [--key LABEL]`).
#[derive(Clone, Debug, Default)]
pub struct SealOptions {
    /// The PKCS#11 module (`/usr/lib/softhsm/libsofthsm2.so`, `opensc-pkcs11.so`).
    pub module: PathBuf,
    /// The token's label (`CK_TOKEN_INFO.label`, trailing blanks ignored).
    pub token: String,
    /// Label (`CKA_LABEL`) of an existing key on the token to seal with: an
    /// AES key (key wrap) or an RSA private key with its public key
    /// (RSA-OAEP). `None` generates a new non-extractable AES-256 key.
    pub key: Option<String>,
}

/// Options of unsealing that override the record.
#[derive(Clone, Debug, Default)]
pub struct UnsealOptions {
    /// Module overriding the record's.
    pub module: Option<PathBuf>,
    /// Token label overriding the record's: the token is then found by
    /// this label alone (not by the record's serial).
    pub token: Option<String>,
}

/// How the secret is bound to the token's key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Mechanism {
    /// `CKM_AES_KEY_WRAP` (RFC 3394) with an AES key: 40 wrapped bytes.
    #[serde(rename = "aes-key-wrap")]
    AesKeyWrap,
    /// `CKM_RSA_PKCS_OAEP` (RFC 8017) with SHA-256, MGF1-SHA-256 and an
    /// empty label, to an RSA key pair: a modulus-sized ciphertext.
    #[serde(rename = "rsa-oaep-sha256")]
    RsaOaepSha256,
    /// `CKM_RSA_PKCS_OAEP` with SHA-1, MGF1-SHA-1 and an empty label, for
    /// tokens without SHA-256 OAEP: a modulus-sized ciphertext.
    #[serde(rename = "rsa-oaep-sha1")]
    RsaOaepSha1,
}

impl Mechanism {
    /// The name stored in the record and shown by `describe`.
    pub fn label(self) -> &'static str {
        match self {
            Mechanism::AesKeyWrap => "aes-key-wrap",
            Mechanism::RsaOaepSha256 => "rsa-oaep-sha256",
            Mechanism::RsaOaepSha1 => "rsa-oaep-sha1",
        }
    }

    /// The object class of the key that unwraps.
    fn unwrapping_class(self) -> ObjectClass {
        match self {
            Mechanism::AesKeyWrap => ObjectClass::SECRET_KEY,
            Mechanism::RsaOaepSha256 | Mechanism::RsaOaepSha1 => ObjectClass::PRIVATE_KEY,
        }
    }

    /// The key type of the key that unwraps.
    fn key_type(self) -> KeyType {
        match self {
            Mechanism::AesKeyWrap => KeyType::AES,
            Mechanism::RsaOaepSha256 | Mechanism::RsaOaepSha1 => KeyType::RSA,
        }
    }
}

/// The stored record (JSON; all of it public).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sealed {
    /// Path of the PKCS#11 module used when sealing (a hint: `--module`
    /// overrides it).
    pub module: String,
    /// The token's label (`CK_TOKEN_INFO.label`, trailing blanks removed).
    pub token_label: String,
    /// The token's serial number (`CK_TOKEN_INFO.serialNumber`, trailing
    /// blanks removed); may be empty.
    pub token_serial: String,
    /// The wrapping key's label (`CKA_LABEL`), for display.
    pub key_label: String,
    /// The wrapping key's `CKA_ID`, hex (1 to 256 bytes): how unsealing
    /// finds it.
    pub key_id: String,
    /// How the secret is wrapped.
    pub mechanism: Mechanism,
    /// The wrapped secret, hex: 40 bytes for `aes-key-wrap`, 128 to 1024
    /// for `rsa-oaep-*`.
    pub wrapped: String,
}

impl Sealed {
    /// The `CKA_ID` and the wrapped bytes, checked against the mechanism.
    ///
    /// # Errors
    /// [`Error::Invalid`] for bad hex or sizes.
    fn decoded(&self) -> Result<(Vec<u8>, Vec<u8>), Error> {
        let key_id = hex::decode(&self.key_id)
            .map_err(|e| Error::Invalid(format!("the pkcs11 record's key_id is not hex ({e})")))?;
        if key_id.is_empty() || key_id.len() > MAX_KEY_ID_SIZE {
            return Err(Error::Invalid(format!(
                "the pkcs11 record's key_id has {} bytes, not 1 to {MAX_KEY_ID_SIZE}",
                key_id.len()
            )));
        }
        let wrapped = hex::decode(&self.wrapped).map_err(|e| {
            Error::Invalid(format!(
                "the pkcs11 record's wrapped secret is not hex ({e})"
            ))
        })?;
        let ok = match self.mechanism {
            Mechanism::AesKeyWrap => wrapped.len() == AES_WRAPPED_SIZE,
            Mechanism::RsaOaepSha256 | Mechanism::RsaOaepSha1 => {
                RSA_CIPHERTEXT_SIZES.contains(&wrapped.len())
            }
        };
        if !ok {
            return Err(Error::Invalid(format!(
                "the pkcs11 record's wrapped secret has {} bytes, wrong for {}",
                wrapped.len(),
                self.mechanism.label()
            )));
        }
        Ok((key_id, wrapped))
    }
}

/// Seals `secret` with a key on the token `options` name.
///
/// # Errors
/// [`Error::Invalid`] for empty options, a `--key` label that matches no
/// usable key (or several) or a key without `CKA_ID`;
/// [`Error::WrongSecret`] for a wrong PIN (with the tries left when the
/// token says); [`Error::Device`] when the module cannot be loaded, the
/// token is absent, its PIN is locked, or the token fails; whatever
/// [`Interaction::pin`] returns.
pub fn seal(
    options: &SealOptions,
    secret: &Secret,
    ui: &mut dyn Interaction,
) -> Result<Sealed, Error> {
    if options.module.as_os_str().is_empty() {
        return Err(Error::Invalid(
            "pkcs11 needs --module (the token's PKCS#11 library)".into(),
        ));
    }
    if options.token.is_empty() {
        return Err(Error::Invalid(
            "pkcs11 needs --token (the token's label)".into(),
        ));
    }
    let module = options.module.to_str().ok_or_else(|| {
        Error::Invalid(format!(
            "the module path {} is not UTF-8; give another path to it",
            options.module.display()
        ))
    })?;
    let ctx = context(&options.module)?;
    let (slot, info) = find_token(&ctx, &options.module, None, &options.token)?;
    let session = ctx.open_rw_session(slot).map_err(|e| {
        device(
            &format!("cannot open a session on token '{}'", options.token),
            e,
        )
    })?;
    let login = Login::new(&ctx, &session, slot, &info, ui)?;

    let (key, key_label, key_id, mechanism) = match &options.key {
        Some(label) => existing_key(&session, &options.token, label)?,
        None => generate_key(&session, &options.token)?,
    };
    let wrapped = match mechanism {
        Mechanism::AesKeyWrap => aes_wrap(&session, key, secret).map(|w| (w, mechanism)),
        Mechanism::RsaOaepSha256 | Mechanism::RsaOaepSha1 => {
            public_key(&session, &key_id, &key_label)
                .and_then(|public| rsa_encrypt(&session, public, secret, &key_label))
        }
    };
    let (wrapped, mechanism) = match wrapped {
        Ok(w) => w,
        Err(e) => {
            // A key generated for this seal and left unused would only
            // clutter the token.
            if options.key.is_none() {
                let _ = session.destroy_object(key);
            }
            return Err(e);
        }
    };
    login.finish();
    Ok(Sealed {
        module: module.to_owned(),
        token_label: info.label().trim_end().to_owned(),
        token_serial: info.serial_number().trim_end().to_owned(),
        key_label,
        key_id: hex::encode(key_id),
        mechanism,
        wrapped: hex::encode(wrapped),
    })
}

/// Unseals `sealed` with its key on the token.
///
/// # Errors
/// [`Error::Invalid`] for a malformed record; [`Error::WrongSecret`] for a
/// wrong PIN (with the tries left when the token says), a token without
/// the key (`CKA_ID`), or a key that does not unwrap these bytes;
/// [`Error::Device`] when the module cannot be loaded, the token is absent,
/// its PIN is locked, or the token fails; whatever [`Interaction::pin`]
/// returns.
pub fn unseal(
    sealed: &Sealed,
    options: &UnsealOptions,
    ui: &mut dyn Interaction,
) -> Result<Secret, Error> {
    let (key_id, wrapped) = sealed.decoded()?;
    let module = options
        .module
        .clone()
        .unwrap_or_else(|| PathBuf::from(&sealed.module));
    if module.as_os_str().is_empty() {
        return Err(Error::Invalid(
            "the pkcs11 record names no module; pass --module".into(),
        ));
    }
    let (serial, label) = match &options.token {
        Some(label) => (None, label.as_str()),
        None => (
            Some(sealed.token_serial.as_str()).filter(|s| !s.is_empty()),
            sealed.token_label.as_str(),
        ),
    };
    let ctx = context(&module)?;
    let (slot, info) = find_token(&ctx, &module, serial, label)?;
    let label = info.label().trim_end().to_owned();
    let session = ctx
        .open_ro_session(slot)
        .map_err(|e| device(&format!("cannot open a session on token '{label}'"), e))?;
    let login = Login::new(&ctx, &session, slot, &info, ui)?;

    let mechanism = sealed.mechanism;
    let key = find_one(
        &session,
        &[
            Attribute::Class(mechanism.unwrapping_class()),
            Attribute::KeyType(mechanism.key_type()),
            Attribute::Id(key_id),
        ],
    )
    .map_err(|e| device(&format!("cannot search token '{label}' for keys"), e))?
    .ok_or_else(|| {
        Error::WrongSecret(format!(
            "token '{label}' has no key with id {}; is it the right token?",
            sealed.key_id
        ))
    })?;
    let secret = match mechanism {
        Mechanism::AesKeyWrap => aes_unwrap(&session, key, &wrapped, &label)?,
        Mechanism::RsaOaepSha256 | Mechanism::RsaOaepSha1 => {
            let plain = Zeroizing::new(
                session
                    .decrypt(&oaep(mechanism), key, &wrapped)
                    .map_err(|e| refused_or_device(&label, e))?,
            );
            Secret::from_slice(&plain)?
        }
    };
    login.finish();
    Ok(secret)
}

/// See [`crate::Sealed::describe`]: the token, module, key and mechanism.
pub fn describe(sealed: &Sealed) -> Vec<(&'static str, String)> {
    vec![
        (
            "device",
            if sealed.token_serial.is_empty() {
                format!("pkcs11 token {}", sealed.token_label)
            } else {
                format!(
                    "pkcs11 token {} (serial {})",
                    sealed.token_label, sealed.token_serial
                )
            },
        ),
        ("module", sealed.module.clone()),
        ("key", sealed.key_label.clone()),
        ("mechanism", sealed.mechanism.label().to_owned()),
    ]
}

/// The process's context for `module`, loaded and initialised on first
/// use (see the module doc for why it is never finalised).
fn context(module: &Path) -> Result<Pkcs11, Error> {
    static CONTEXTS: Mutex<Vec<(PathBuf, Pkcs11)>> = Mutex::new(Vec::new());
    let mut contexts = CONTEXTS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some((_, ctx)) = contexts.iter().find(|(p, _)| p == module) {
        return Ok(ctx.clone());
    }
    let ctx = Pkcs11::new(module).map_err(|e| {
        Error::Device(format!(
            "cannot load the PKCS#11 module {} ({e}); install it or pass --module",
            module.display()
        ))
    })?;
    match ctx.initialize(CInitializeArgs::new(CInitializeFlags::OS_LOCKING_OK)) {
        Ok(()) | Err(CkError::Pkcs11(RvError::CryptokiAlreadyInitialized, _)) => {}
        Err(e) => {
            return Err(device(
                &format!("the PKCS#11 module {} failed to start", module.display()),
                e,
            ));
        }
    }
    contexts.push((module.to_owned(), ctx.clone()));
    Ok(ctx)
}

/// The slot of the token with this serial (if given and present), else
/// with this label.
fn find_token(
    ctx: &Pkcs11,
    module: &Path,
    serial: Option<&str>,
    label: &str,
) -> Result<(Slot, TokenInfo), Error> {
    let slots = ctx.get_slots_with_token().map_err(|e| {
        device(
            &format!("the PKCS#11 module {} lists no slots", module.display()),
            e,
        )
    })?;
    let mut tokens = Vec::new();
    for slot in slots {
        // A slot whose token went away between the two calls is skipped.
        if let Ok(info) = ctx.get_token_info(slot) {
            tokens.push((slot, info));
        }
    }
    let by_serial = serial.and_then(|s| {
        tokens
            .iter()
            .position(|(_, i)| i.serial_number().trim_end() == s)
    });
    let found = by_serial.or_else(|| {
        tokens
            .iter()
            .position(|(_, i)| i.label().trim_end() == label.trim_end())
    });
    match found {
        Some(n) => Ok(tokens.swap_remove(n)),
        None => Err(Error::Device(format!(
            "no token '{label}' in the PKCS#11 module {}; insert it or pass --token/--module",
            module.display()
        ))),
    }
}

/// A user login on a token, logged out by [`Login::finish`] or on drop
/// when this login made it.
struct Login<'a> {
    session: &'a Session,
    logged_in: bool,
}

impl<'a> Login<'a> {
    /// Logs in as `CKU_USER`: through the token's PIN pad when it has one
    /// (`CKF_PROTECTED_AUTHENTICATION_PATH`), else with the PIN from `ui`.
    /// A session of this process already logged in is used as it is.
    fn new(
        ctx: &Pkcs11,
        session: &'a Session,
        slot: Slot,
        info: &TokenInfo,
        ui: &mut dyn Interaction,
    ) -> Result<Login<'a>, Error> {
        let label = info.label().trim_end();
        if !info.login_required() {
            return Ok(Login {
                session,
                logged_in: false,
            });
        }
        if info.user_pin_locked() {
            return Err(pin_locked(label));
        }
        let result = if info.protected_authentication_path() {
            ui.notice(&format!("enter the PIN of token '{label}' on its PIN pad"));
            session.login(UserType::User, None)
        } else {
            let pin = ui.pin(&format!("PIN of token '{label}'"), false)?;
            let pin = AuthPin::from(pin.as_str());
            session.login(UserType::User, Some(&pin))
        };
        match result {
            Ok(()) => Ok(Login {
                session,
                logged_in: true,
            }),
            Err(CkError::Pkcs11(RvError::UserAlreadyLoggedIn, _)) => Ok(Login {
                session,
                logged_in: false,
            }),
            Err(CkError::Pkcs11(RvError::PinIncorrect, _)) => {
                Err(wrong_pin(label, ctx.get_token_info(slot).ok().as_ref()))
            }
            Err(CkError::Pkcs11(RvError::PinLocked, _)) => Err(pin_locked(label)),
            Err(e) => Err(device(&format!("cannot log in to token '{label}'"), e)),
        }
    }

    /// Logs out now (an error logging out is of no use to the caller: the
    /// session is closed right after, which ends the login too).
    fn finish(mut self) {
        self.logout();
    }

    fn logout(&mut self) {
        if self.logged_in {
            self.logged_in = false;
            let _ = self.session.logout();
        }
    }
}

impl Drop for Login<'_> {
    fn drop(&mut self) {
        self.logout();
    }
}

/// The refusal of a wrong PIN, with what the token's flags say of the
/// tries left (`CKF_USER_PIN_FINAL_TRY`, `CKF_USER_PIN_COUNT_LOW`,
/// `CKF_USER_PIN_LOCKED`).
fn wrong_pin(label: &str, info: Option<&TokenInfo>) -> Error {
    let tries = match info {
        Some(i) if i.user_pin_locked() => return pin_locked(label),
        Some(i) if i.user_pin_final_try() => "; one try left before the PIN locks",
        Some(i) if i.user_pin_count_low() => "; few tries left before the PIN locks",
        _ => "",
    };
    Error::WrongSecret(format!("wrong PIN for token '{label}'{tries}"))
}

/// The refusal of a locked user PIN.
fn pin_locked(label: &str) -> Error {
    Error::Device(format!(
        "the user PIN of token '{label}' is locked; unblock it with the SO PIN"
    ))
}

/// A one-line [`Error::Device`]: `what` and the PKCS#11 return value.
fn device(what: &str, e: CkError) -> Error {
    Error::Device(format!("{what}: {}", short(&e)))
}

/// A short form of a `cryptoki` error: `C_Login: PinIncorrect` rather
/// than the spec's paragraph.
fn short(e: &CkError) -> String {
    match e {
        CkError::Pkcs11(rv, f) => format!("C_{f:?} returned {rv:?}"),
        other => other.to_string(),
    }
}

/// A decryption or unwrap failure: the key found does not open these
/// bytes ([`Error::WrongSecret`]: bad data, bad length, or
/// `CKR_GENERAL_ERROR`, which SoftHSM returns for a failed RFC 3394
/// integrity check) or the token failed ([`Error::Device`]).
fn refused_or_device(label: &str, e: CkError) -> Error {
    match e {
        CkError::Pkcs11(
            RvError::EncryptedDataInvalid
            | RvError::EncryptedDataLenRange
            | RvError::WrappedKeyInvalid
            | RvError::WrappedKeyLenRange
            // SoftHSM's answer to a failed RFC 3394 integrity check.
            | RvError::GeneralError,
            _,
        ) => Error::WrongSecret(format!(
            "the key on token '{label}' does not unwrap this secret; is it the right token?"
        )),
        e => device(&format!("token '{label}' cannot unwrap the secret"), e),
    }
}

/// The one object matching `template` (the first, when the token has
/// several), or `None`.
fn find_one(session: &Session, template: &[Attribute]) -> Result<Option<ObjectHandle>, CkError> {
    Ok(session.find_objects(template)?.into_iter().next())
}

/// A key's `CKA_ID`, or `None` when it has none (or an empty one).
fn key_id(session: &Session, key: ObjectHandle) -> Result<Option<Vec<u8>>, CkError> {
    let attrs = session.get_attributes(key, &[AttributeType::Id])?;
    Ok(attrs.into_iter().find_map(|a| match a {
        Attribute::Id(id) if !id.is_empty() => Some(id),
        _ => None,
    }))
}

/// Whether every one of these boolean attributes of `key` is true.
fn all_true(session: &Session, key: ObjectHandle, types: &[AttributeType]) -> bool {
    let Ok(attrs) = session.get_attributes(key, types) else {
        return false;
    };
    attrs.len() == types.len()
        && attrs.iter().all(|a| {
            matches!(
                a,
                Attribute::Wrap(true) | Attribute::Unwrap(true) | Attribute::Decrypt(true)
            )
        })
}

/// The key labelled `label`: an AES key (key wrap) or an RSA private key
/// (OAEP), with its `CKA_ID`.
fn existing_key(
    session: &Session,
    token: &str,
    label: &str,
) -> Result<(ObjectHandle, String, Vec<u8>, Mechanism), Error> {
    let search = |class: ObjectClass, key_type: KeyType| {
        session
            .find_objects(&[
                Attribute::Class(class),
                Attribute::KeyType(key_type),
                Attribute::Label(label.as_bytes().to_vec()),
            ])
            .map_err(|e| device(&format!("cannot search token '{token}' for keys"), e))
    };
    let aes = search(ObjectClass::SECRET_KEY, KeyType::AES)?;
    let rsa = search(ObjectClass::PRIVATE_KEY, KeyType::RSA)?;
    let (key, mechanism, needs) = match (aes.as_slice(), rsa.as_slice()) {
        ([key], []) => (
            *key,
            Mechanism::AesKeyWrap,
            &[AttributeType::Wrap, AttributeType::Unwrap][..],
        ),
        ([], [key]) => (
            *key,
            Mechanism::RsaOaepSha256,
            &[AttributeType::Decrypt][..],
        ),
        ([], []) => {
            return Err(Error::Invalid(format!(
                "token '{token}' has no AES key or RSA private key labelled '{label}'; \
                 check --key (or leave it out to generate a key)"
            )));
        }
        _ => {
            return Err(Error::Invalid(format!(
                "token '{token}' has several keys labelled '{label}'; relabel them or pick another"
            )));
        }
    };
    if !all_true(session, key, needs) {
        return Err(Error::Invalid(format!(
            "key '{label}' on token '{token}' may not be used to {}; pick another key",
            match mechanism {
                Mechanism::AesKeyWrap => "wrap and unwrap keys",
                Mechanism::RsaOaepSha256 | Mechanism::RsaOaepSha1 => "decrypt",
            }
        )));
    }
    let id = key_id(session, key)
        .map_err(|e| device(&format!("cannot read key '{label}' on token '{token}'"), e))?
        .ok_or_else(|| {
            Error::Invalid(format!(
                "key '{label}' on token '{token}' has no CKA_ID to find it by; give it one \
                 (pkcs11-tool --id) or pick another key"
            ))
        })?;
    if id.len() > MAX_KEY_ID_SIZE {
        return Err(Error::Invalid(format!(
            "key '{label}' on token '{token}' has a CKA_ID of {} bytes, more than \
             {MAX_KEY_ID_SIZE}; pick another key",
            id.len()
        )));
    }
    Ok((key, label.to_owned(), id, mechanism))
}

/// The RSA public key with this `CKA_ID` (the private key's pair).
fn public_key(session: &Session, id: &[u8], label: &str) -> Result<ObjectHandle, Error> {
    find_one(
        session,
        &[
            Attribute::Class(ObjectClass::PUBLIC_KEY),
            Attribute::KeyType(KeyType::RSA),
            Attribute::Id(id.to_vec()),
        ],
    )
    .map_err(|e| device("cannot search the token for the public key", e))?
    .ok_or_else(|| {
        Error::Invalid(format!(
            "RSA key '{label}' has no public key with the same CKA_ID on the token; import it"
        ))
    })
}

/// Generates the non-extractable AES-256 wrapping key, labelled
/// `fscrypt-rs <8 hex digits>` with a random 16-byte `CKA_ID`.
fn generate_key(
    session: &Session,
    token: &str,
) -> Result<(ObjectHandle, String, Vec<u8>, Mechanism), Error> {
    let mut id = vec![0u8; GENERATED_ID_SIZE];
    fscrypt_crypto::random_bytes(&mut id)
        .map_err(|e| Error::Device(format!("no random bytes: {e}")))?;
    let label = format!("fscrypt-rs {}", hex::encode(&id[..4]));
    let template = [
        Attribute::Class(ObjectClass::SECRET_KEY),
        Attribute::KeyType(KeyType::AES),
        Attribute::ValueLen(32.into()),
        Attribute::Token(true),
        Attribute::Private(true),
        Attribute::Sensitive(true),
        Attribute::Extractable(false),
        Attribute::Wrap(true),
        Attribute::Unwrap(true),
        Attribute::Encrypt(false),
        Attribute::Decrypt(false),
        Attribute::Sign(false),
        Attribute::Verify(false),
        Attribute::Derive(false),
        Attribute::Label(label.clone().into_bytes()),
        Attribute::Id(id.clone()),
    ];
    let key = session
        .generate_key(&CkMechanism::AesKeyGen, &template)
        .map_err(|e| {
            device(
                &format!("token '{token}' cannot generate an AES-256 key"),
                e,
            )
        })?;
    Ok((key, label, id, Mechanism::AesKeyWrap))
}

/// The attributes of the session object that carries the secret in and
/// out of `C_WrapKey`/`C_UnwrapKey`; with `value`, to create it.
fn secret_template(value: Option<&[u8]>) -> Vec<Attribute> {
    let mut t = vec![
        Attribute::Class(ObjectClass::SECRET_KEY),
        Attribute::KeyType(KeyType::GENERIC_SECRET),
        Attribute::Token(false),
        Attribute::Private(true),
        Attribute::Sensitive(false),
        Attribute::Extractable(true),
    ];
    if let Some(v) = value {
        t.push(Attribute::Value(v.to_vec()));
    }
    t
}

/// Zeroes the `CKA_VALUE` bytes of a template.
fn wipe(template: &mut [Attribute]) {
    for a in template {
        if let Attribute::Value(v) = a {
            v.zeroize();
        }
    }
}

/// A session object destroyed on drop.
struct Temporary<'a>(&'a Session, ObjectHandle);

impl Drop for Temporary<'_> {
    fn drop(&mut self) {
        let _ = self.0.destroy_object(self.1);
    }
}

/// `C_WrapKey(CKM_AES_KEY_WRAP)` of the secret, as a temporary session
/// object, under `key`.
fn aes_wrap(session: &Session, key: ObjectHandle, secret: &Secret) -> Result<Vec<u8>, Error> {
    let mut template = secret_template(Some(secret.as_bytes()));
    let created = session.create_object(&template);
    wipe(&mut template);
    let object =
        created.map_err(|e| device("the token refused the secret as a session object", e))?;
    let object = Temporary(session, object);
    let wrapped = session
        .wrap_key(&CkMechanism::AesKeyWrap, key, object.1)
        .map_err(|e| device("the token cannot AES-key-wrap the secret", e))?;
    if wrapped.len() != AES_WRAPPED_SIZE {
        return Err(Error::Device(format!(
            "the token's AES key wrap gave {} bytes, not {AES_WRAPPED_SIZE}",
            wrapped.len()
        )));
    }
    Ok(wrapped)
}

/// `C_UnwrapKey(CKM_AES_KEY_WRAP)` into a temporary session object, whose
/// value is read and returned.
fn aes_unwrap(
    session: &Session,
    key: ObjectHandle,
    wrapped: &[u8],
    label: &str,
) -> Result<Secret, Error> {
    let template = secret_template(None);
    let object = session
        .unwrap_key(&CkMechanism::AesKeyWrap, key, wrapped, &template)
        .map_err(|e| refused_or_device(label, e))?;
    let object = Temporary(session, object);
    let mut attrs = session
        .get_attributes(object.1, &[AttributeType::Value])
        .map_err(|e| {
            device(
                &format!("cannot read the unwrapped secret on token '{label}'"),
                e,
            )
        })?;
    let secret = match attrs.as_slice() {
        [Attribute::Value(v)] => Secret::from_slice(v),
        _ => Err(Error::Device(format!(
            "token '{label}' did not return the unwrapped secret"
        ))),
    };
    wipe(&mut attrs);
    secret
}

/// `CKM_RSA_PKCS_OAEP` for an `rsa-oaep-*` mechanism (SHA-1 for
/// anything else, which no caller passes), with an empty label.
fn oaep(mechanism: Mechanism) -> CkMechanism<'static> {
    let (hash, mgf) = match mechanism {
        Mechanism::RsaOaepSha256 => (MechanismType::SHA256, PkcsMgfType::MGF1_SHA256),
        Mechanism::RsaOaepSha1 | Mechanism::AesKeyWrap => {
            (MechanismType::SHA1, PkcsMgfType::MGF1_SHA1)
        }
    };
    CkMechanism::RsaPkcsOaep(PkcsOaepParams::new(hash, mgf, PkcsOaepSource::empty()))
}

/// RSA-OAEP encryption of the secret to `public`: SHA-256, or SHA-1 when
/// the token refuses SHA-256's parameters.
fn rsa_encrypt(
    session: &Session,
    public: ObjectHandle,
    secret: &Secret,
    label: &str,
) -> Result<(Vec<u8>, Mechanism), Error> {
    let fail = |e| {
        device(
            &format!("the token cannot RSA-OAEP encrypt with key '{label}'"),
            e,
        )
    };
    match session.encrypt(&oaep(Mechanism::RsaOaepSha256), public, secret.as_bytes()) {
        Ok(c) => Ok((c, Mechanism::RsaOaepSha256)),
        Err(CkError::Pkcs11(
            RvError::ArgumentsBad | RvError::MechanismParamInvalid | RvError::MechanismInvalid,
            _,
        )) => session
            .encrypt(&oaep(Mechanism::RsaOaepSha1), public, secret.as_bytes())
            .map(|c| (c, Mechanism::RsaOaepSha1))
            .map_err(fail),
        Err(e) => Err(fail(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> Sealed {
        Sealed {
            module: "/usr/lib/softhsm/libsofthsm2.so".into(),
            token_label: "tok".into(),
            token_serial: "0123456789abcdef".into(),
            key_label: "fscrypt-rs 01020304".into(),
            key_id: "0102030405060708090a0b0c0d0e0f10".into(),
            mechanism: Mechanism::AesKeyWrap,
            wrapped: "ab".repeat(AES_WRAPPED_SIZE),
        }
    }

    #[test]
    fn json_round_trip_and_tags() {
        let sealed = crate::Sealed::Pkcs11(record());
        let json = sealed.to_json();
        assert_eq!(json["kind"], "pkcs11");
        assert_eq!(json["mechanism"], "aes-key-wrap");
        assert_eq!(crate::Sealed::from_json(&json).unwrap(), sealed);
        let mut rsa = record();
        rsa.mechanism = Mechanism::RsaOaepSha256;
        assert_eq!(
            serde_json::to_value(&rsa).unwrap()["mechanism"],
            "rsa-oaep-sha256"
        );
    }

    #[test]
    fn unknown_fields_and_mechanisms_are_refused() {
        let mut json = crate::Sealed::Pkcs11(record()).to_json();
        json["extra"] = 1.into();
        assert!(matches!(
            crate::Sealed::from_json(&json),
            Err(Error::Invalid(_))
        ));
        let mut json = crate::Sealed::Pkcs11(record()).to_json();
        json["mechanism"] = "aes-gcm".into();
        assert!(matches!(
            crate::Sealed::from_json(&json),
            Err(Error::Invalid(_))
        ));
    }

    #[test]
    fn decoded_checks_hex_and_sizes() {
        assert!(record().decoded().is_ok());
        let bad = |f: fn(&mut Sealed)| {
            let mut r = record();
            f(&mut r);
            r.decoded()
        };
        for r in [
            bad(|r| r.key_id = "zz".into()),
            bad(|r| r.key_id = String::new()),
            bad(|r| r.key_id = "00".repeat(MAX_KEY_ID_SIZE + 1)),
            bad(|r| r.wrapped = "0".into()),
            bad(|r| r.wrapped = "ab".repeat(AES_WRAPPED_SIZE - 1)),
            bad(|r| r.mechanism = Mechanism::RsaOaepSha256),
            bad(|r| {
                r.mechanism = Mechanism::RsaOaepSha256;
                r.wrapped = "ab".repeat(1025);
            }),
        ] {
            assert!(matches!(r, Err(Error::Invalid(_))), "{r:?}");
        }
        let mut rsa = record();
        rsa.mechanism = Mechanism::RsaOaepSha256;
        rsa.wrapped = "ab".repeat(256);
        assert!(rsa.decoded().is_ok());
    }

    #[test]
    fn describe_names_token_module_key_mechanism() {
        let d = describe(&record());
        assert_eq!(
            d,
            vec![
                (
                    "device",
                    "pkcs11 token tok (serial 0123456789abcdef)".to_owned()
                ),
                ("module", "/usr/lib/softhsm/libsofthsm2.so".to_owned()),
                ("key", "fscrypt-rs 01020304".to_owned()),
                ("mechanism", "aes-key-wrap".to_owned()),
            ]
        );
        let mut no_serial = record();
        no_serial.token_serial = String::new();
        assert_eq!(describe(&no_serial)[0].1, "pkcs11 token tok");
    }

    struct NoPin;
    impl Interaction for NoPin {
        fn pin(&mut self, _: &str, _: bool) -> Result<Zeroizing<String>, Error> {
            panic!("no PIN may be asked before the options are checked")
        }
        fn notice(&mut self, _: &str) {}
    }

    #[test]
    fn seal_refuses_empty_options_and_missing_module() {
        let secret = Secret::from_slice(&[7; SECRET_SIZE]).unwrap();
        let none = SealOptions::default();
        assert!(matches!(
            seal(&none, &secret, &mut NoPin),
            Err(Error::Invalid(_))
        ));
        let no_token = SealOptions {
            module: "/nonexistent/libpkcs11.so".into(),
            ..SealOptions::default()
        };
        assert!(matches!(
            seal(&no_token, &secret, &mut NoPin),
            Err(Error::Invalid(_))
        ));
        let missing = SealOptions {
            module: "/nonexistent/libpkcs11.so".into(),
            token: "tok".into(),
            key: None,
        };
        match seal(&missing, &secret, &mut NoPin) {
            Err(Error::Device(m)) => assert!(m.contains("/nonexistent/libpkcs11.so"), "{m}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn unseal_checks_the_record_before_loading_anything() {
        let mut r = record();
        r.wrapped = "nothex".into();
        assert!(matches!(
            unseal(&r, &UnsealOptions::default(), &mut NoPin),
            Err(Error::Invalid(_))
        ));
        let mut r = record();
        r.module = String::new();
        assert!(matches!(
            unseal(&r, &UnsealOptions::default(), &mut NoPin),
            Err(Error::Invalid(_))
        ));
    }

    #[test]
    fn wrong_pin_messages_follow_the_token_flags() {
        match wrong_pin("tok", None) {
            Error::WrongSecret(m) => assert_eq!(m, "wrong PIN for token 'tok'"),
            other => panic!("{other:?}"),
        }
        assert!(matches!(pin_locked("tok"), Error::Device(m) if m.contains("SO PIN")));
    }
}
