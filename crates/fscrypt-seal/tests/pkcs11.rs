//! `fscrypt_seal::pkcs11` against a real SoftHSM v2 token.
//!
//! Each test re-runs itself in a child process with its own private
//! softhsm2 (`test_support::softhsm::in_child`): SoftHSM reads
//! `SOFTHSM2_CONF` once per process, and the module is never finalised.
//! Skipped (one line) when softhsm2 is not installed.

use std::path::{Path, PathBuf};
use std::time::Instant;

use cryptoki::context::{CInitializeArgs, CInitializeFlags, Pkcs11};
use cryptoki::mechanism::Mechanism as CkMechanism;
use cryptoki::object::{Attribute, AttributeType, KeyType, ObjectClass};
use cryptoki::session::UserType;
use cryptoki::slot::Slot;
use cryptoki::types::AuthPin;
use fscrypt_seal::pkcs11::{Mechanism, SealOptions, Sealed, UnsealOptions};
use fscrypt_seal::{Error, Interaction, Secret};
use test_support::softhsm::{SoftHsm, in_child};
use zeroize::Zeroizing;

const PIN: &str = "1234-user";
const SO_PIN: &str = "5678-so";

/// Answers every PIN prompt with one PIN and remembers the prompts.
struct Pins {
    pin: &'static str,
    asked: Vec<String>,
}

impl Pins {
    fn new(pin: &'static str) -> Pins {
        Pins {
            pin,
            asked: Vec::new(),
        }
    }
}

impl Interaction for Pins {
    fn pin(&mut self, what: &str, confirm: bool) -> Result<Zeroizing<String>, Error> {
        assert!(!confirm, "a token PIN is never set here");
        self.asked.push(what.to_owned());
        Ok(Zeroizing::new(self.pin.to_owned()))
    }
    fn notice(&mut self, _: &str) {}
}

fn tokens(labels: &'static [&'static str]) -> impl FnOnce(&SoftHsm) {
    move |hsm| {
        for l in labels {
            hsm.init_token(l, PIN, SO_PIN);
        }
    }
}

fn secret(fill: u8) -> Secret {
    let mut s = Zeroizing::new([0u8; 32]);
    for (i, b) in s.iter_mut().enumerate() {
        *b = fill ^ i as u8;
    }
    Secret::from_bytes(s)
}

fn seal_options(module: &Path, token: &str, key: Option<&str>) -> SealOptions {
    SealOptions {
        module: module.to_owned(),
        token: token.to_owned(),
        key: key.map(str::to_owned),
    }
}

fn seal(module: &Path, token: &str, key: Option<&str>, s: &Secret) -> Sealed {
    fscrypt_seal::pkcs11::seal(&seal_options(module, token, key), s, &mut Pins::new(PIN))
        .unwrap_or_else(|e| panic!("seal to {token}: {e}"))
}

fn unseal(sealed: &Sealed, options: &UnsealOptions, pin: &'static str) -> Result<Secret, Error> {
    fscrypt_seal::pkcs11::unseal(sealed, options, &mut Pins::new(pin))
}

/// The test's own PKCS#11 view of the token `label`, logged in as user,
/// for making or checking keys beside the code under test.
struct Admin {
    _ctx: Pkcs11,
    session: cryptoki::session::Session,
}

impl Admin {
    fn open(module: &Path, label: &str) -> Admin {
        let ctx = Pkcs11::new(module).expect("load softhsm2");
        match ctx.initialize(CInitializeArgs::new(CInitializeFlags::OS_LOCKING_OK)) {
            Ok(()) => {}
            Err(cryptoki::error::Error::Pkcs11(
                cryptoki::error::RvError::CryptokiAlreadyInitialized,
                _,
            )) => {}
            Err(e) => panic!("C_Initialize: {e}"),
        }
        let slot: Slot = ctx
            .get_slots_with_token()
            .unwrap()
            .into_iter()
            .find(|s| ctx.get_token_info(*s).unwrap().label().trim_end() == label)
            .unwrap_or_else(|| panic!("no token {label}"));
        let session = ctx.open_rw_session(slot).unwrap();
        session
            .login(UserType::User, Some(&AuthPin::from(PIN)))
            .unwrap();
        Admin { _ctx: ctx, session }
    }

    fn serial(&self) -> String {
        let slot = self.session.get_session_info().unwrap().slot_id();
        self._ctx
            .get_token_info(slot)
            .unwrap()
            .serial_number()
            .trim_end()
            .to_owned()
    }

    /// An RSA-2048 key pair labelled `label` with CKA_ID `id`.
    fn rsa_pair(&self, label: &str, id: &[u8]) {
        let common = |private: bool| {
            vec![
                Attribute::Token(true),
                Attribute::Private(private),
                Attribute::Label(label.as_bytes().to_vec()),
                Attribute::Id(id.to_vec()),
            ]
        };
        let mut public = common(false);
        public.extend([
            Attribute::ModulusBits(2048.into()),
            Attribute::PublicExponent(vec![1, 0, 1]),
            Attribute::Encrypt(true),
        ]);
        let mut private = common(true);
        private.extend([Attribute::Decrypt(true), Attribute::Sensitive(true)]);
        self.session
            .generate_key_pair(&CkMechanism::RsaPkcsKeyPairGen, &public, &private)
            .expect("generate an RSA key pair");
    }

    /// An AES-256 key labelled `label`, with CKA_ID `id` when given.
    fn aes_key(&self, label: &str, id: Option<&[u8]>, wrap: bool) {
        let mut t = vec![
            Attribute::Class(ObjectClass::SECRET_KEY),
            Attribute::KeyType(KeyType::AES),
            Attribute::ValueLen(32.into()),
            Attribute::Token(true),
            Attribute::Private(true),
            Attribute::Label(label.as_bytes().to_vec()),
            Attribute::Wrap(wrap),
            Attribute::Unwrap(wrap),
        ];
        if let Some(id) = id {
            t.push(Attribute::Id(id.to_vec()));
        }
        self.session
            .generate_key(&CkMechanism::AesKeyGen, &t)
            .expect("generate an AES key");
    }

    /// The boolean attributes (sensitive, extractable) of the secret key
    /// with CKA_ID `id`.
    fn aes_flags(&self, id: &[u8]) -> (bool, bool) {
        let keys = self
            .session
            .find_objects(&[
                Attribute::Class(ObjectClass::SECRET_KEY),
                Attribute::Id(id.to_vec()),
            ])
            .unwrap();
        assert_eq!(keys.len(), 1, "one key with that id");
        let attrs = self
            .session
            .get_attributes(
                keys[0],
                &[AttributeType::Sensitive, AttributeType::Extractable],
            )
            .unwrap();
        match attrs.as_slice() {
            [Attribute::Sensitive(s), Attribute::Extractable(e)] => (*s, *e),
            other => panic!("{other:?}"),
        }
    }
}

impl Drop for Admin {
    fn drop(&mut self) {
        let _ = self.session.logout();
    }
}

#[test]
fn round_trip_with_a_generated_aes_key() {
    let Some(module) = in_child("round_trip_with_a_generated_aes_key", tokens(&["fs-gen"])) else {
        return;
    };
    let s = secret(0x11);
    let mut pins = Pins::new(PIN);
    let sealed = fscrypt_seal::pkcs11::seal(&seal_options(&module, "fs-gen", None), &s, &mut pins)
        .expect("seal");
    assert_eq!(pins.asked, ["PIN of token 'fs-gen'"]);
    assert_eq!(sealed.mechanism, Mechanism::AesKeyWrap);
    assert_eq!(sealed.wrapped.len(), 2 * 40);
    assert_eq!(sealed.token_label, "fs-gen");
    assert!(
        sealed.key_label.starts_with("fscrypt-rs "),
        "{}",
        sealed.key_label
    );
    assert_eq!(sealed.module, module.to_str().unwrap());
    // The record holds nothing of the secret.
    let json = fscrypt_seal::Sealed::Pkcs11(sealed.clone())
        .to_json()
        .to_string();
    assert!(!json.contains(&hex::encode(s.as_bytes())));

    let admin = Admin::open(&module, "fs-gen");
    assert_eq!(sealed.token_serial, admin.serial());
    // The generated key is sensitive and never leaves the token.
    assert_eq!(
        admin.aes_flags(&hex::decode(&sealed.key_id).unwrap()),
        (true, false)
    );
    drop(admin);

    let start = Instant::now();
    let back = unseal(&sealed, &UnsealOptions::default(), PIN).expect("unseal");
    let took = start.elapsed();
    assert_eq!(back.as_bytes(), s.as_bytes());
    println!(
        "pkcs11 unseal (softhsm2, aes-key-wrap; token search, login, unwrap, logout): {took:?}"
    );
    let start = Instant::now();
    unseal(&sealed, &UnsealOptions::default(), PIN).expect("unseal again");
    println!(
        "pkcs11 unseal again (softhsm2, aes-key-wrap): {:?}",
        start.elapsed()
    );

    // A second seal makes a second key: another id, another wrap.
    let again = seal(&module, "fs-gen", None, &s);
    assert_ne!(again.key_id, sealed.key_id);
    assert_ne!(again.wrapped, sealed.wrapped);

    // Through the crate's dispatch and the JSON record too.
    let stored = fscrypt_seal::Sealed::from_json(&serde_json::from_str(&json).unwrap()).unwrap();
    let back = fscrypt_seal::unseal(
        &stored,
        &fscrypt_seal::UnsealOptions::default(),
        &mut Pins::new(PIN),
    )
    .expect("unseal through the dispatch");
    assert_eq!(back.as_bytes(), s.as_bytes());
}

#[test]
fn round_trip_with_an_existing_rsa_key_pair() {
    let Some(module) = in_child(
        "round_trip_with_an_existing_rsa_key_pair",
        tokens(&["fs-rsa"]),
    ) else {
        return;
    };
    Admin::open(&module, "fs-rsa").rsa_pair("my-rsa", &[0xa1, 0xb2]);
    let s = secret(0x22);
    let sealed = seal(&module, "fs-rsa", Some("my-rsa"), &s);
    // SoftHSM 2.6 has only SHA-1 OAEP; later versions take SHA-256.
    assert!(
        matches!(
            sealed.mechanism,
            Mechanism::RsaOaepSha256 | Mechanism::RsaOaepSha1
        ),
        "{:?}",
        sealed.mechanism
    );
    assert_eq!(sealed.key_label, "my-rsa");
    assert_eq!(sealed.key_id, "a1b2");
    assert_eq!(sealed.wrapped.len(), 2 * 256, "RSA-2048 ciphertext");
    let start = Instant::now();
    let back = unseal(&sealed, &UnsealOptions::default(), PIN).expect("unseal");
    println!(
        "pkcs11 unseal (softhsm2, {} RSA-2048; token search, login, decrypt, logout): {:?}",
        sealed.mechanism.label(),
        start.elapsed()
    );
    assert_eq!(back.as_bytes(), s.as_bytes());

    // Another ciphertext of the right size is refused as a wrong secret.
    let mut other = sealed.clone();
    other.wrapped = "5a".repeat(256);
    match unseal(&other, &UnsealOptions::default(), PIN) {
        Err(Error::WrongSecret(m)) => assert!(m.contains("does not unwrap"), "{m}"),
        r => panic!("{r:?}"),
    }
}

#[test]
fn round_trip_with_an_existing_aes_key_and_refusals_of_unusable_keys() {
    let Some(module) = in_child(
        "round_trip_with_an_existing_aes_key_and_refusals_of_unusable_keys",
        tokens(&["fs-aes"]),
    ) else {
        return;
    };
    {
        let admin = Admin::open(&module, "fs-aes");
        admin.aes_key("my-aes", Some(&[7; 8]), true);
        admin.aes_key("no-id", None, true);
        admin.aes_key("no-wrap", Some(&[8; 8]), false);
        admin.aes_key("twice", Some(&[9; 8]), true);
        admin.aes_key("twice", Some(&[10; 8]), true);
    }
    let s = secret(0x33);
    let sealed = seal(&module, "fs-aes", Some("my-aes"), &s);
    assert_eq!(sealed.mechanism, Mechanism::AesKeyWrap);
    assert_eq!(sealed.key_id, "07".repeat(8));
    let back = unseal(&sealed, &UnsealOptions::default(), PIN).expect("unseal");
    assert_eq!(back.as_bytes(), s.as_bytes());

    // One changed byte fails RFC 3394's integrity check.
    let mut tampered = sealed.clone();
    let mut w = hex::decode(&tampered.wrapped).unwrap();
    w[20] ^= 1;
    tampered.wrapped = hex::encode(w);
    match unseal(&tampered, &UnsealOptions::default(), PIN) {
        Err(Error::WrongSecret(m)) => assert!(m.contains("does not unwrap"), "{m}"),
        r => panic!("{r:?}"),
    }

    for (key, says) in [
        (
            "missing",
            "no AES key or RSA private key labelled 'missing'",
        ),
        ("no-id", "has no CKA_ID"),
        ("no-wrap", "may not be used to wrap"),
        ("twice", "several keys labelled 'twice'"),
    ] {
        let r = fscrypt_seal::pkcs11::seal(
            &seal_options(&module, "fs-aes", Some(key)),
            &s,
            &mut Pins::new(PIN),
        );
        match r {
            Err(Error::Invalid(m)) => assert!(m.contains(says), "{key}: {m}"),
            r => panic!("{key}: {r:?}"),
        }
    }
}

#[test]
fn wrong_pin_is_refused_as_a_wrong_secret() {
    let Some(module) = in_child(
        "wrong_pin_is_refused_as_a_wrong_secret",
        tokens(&["fs-pin"]),
    ) else {
        return;
    };
    let s = secret(0x44);
    let sealed = seal(&module, "fs-pin", None, &s);
    match unseal(&sealed, &UnsealOptions::default(), "not-the-pin") {
        Err(Error::WrongSecret(m)) => {
            assert!(m.starts_with("wrong PIN for token 'fs-pin'"), "{m}");
            assert!(!m.contains("not-the-pin"), "{m}");
        }
        r => panic!("{r:?}"),
    }
    let r = fscrypt_seal::pkcs11::seal(
        &seal_options(&module, "fs-pin", None),
        &s,
        &mut Pins::new("not-the-pin"),
    );
    assert!(matches!(r, Err(Error::WrongSecret(_))), "{r:?}");
    // The right PIN still works after the refusals.
    let back = unseal(&sealed, &UnsealOptions::default(), PIN).expect("unseal");
    assert_eq!(back.as_bytes(), s.as_bytes());
}

#[test]
fn another_token_or_no_token_is_refused() {
    let Some(module) = in_child(
        "another_token_or_no_token_is_refused",
        tokens(&["fs-one", "fs-two"]),
    ) else {
        return;
    };
    let s = secret(0x55);
    let sealed = seal(&module, "fs-one", None, &s);

    let other = UnsealOptions {
        token: Some("fs-two".into()),
        ..UnsealOptions::default()
    };
    match unseal(&sealed, &other, PIN) {
        Err(Error::WrongSecret(m)) => {
            assert!(m.contains("token 'fs-two' has no key with id"), "{m}");
            assert!(m.contains(&sealed.key_id), "{m}");
        }
        r => panic!("{r:?}"),
    }

    let absent = UnsealOptions {
        token: Some("fs-absent".into()),
        ..UnsealOptions::default()
    };
    match unseal(&sealed, &absent, PIN) {
        Err(Error::Device(m)) => {
            assert!(m.contains("'fs-absent'"), "{m}");
            assert!(m.contains(module.to_str().unwrap()), "{m}");
        }
        r => panic!("{r:?}"),
    }

    // A record whose serial is gone finds the token by its label.
    let mut reinitialised = sealed.clone();
    reinitialised.token_serial = "0000000000000000".into();
    let back = unseal(&reinitialised, &UnsealOptions::default(), PIN).expect("by label");
    assert_eq!(back.as_bytes(), s.as_bytes());

    // A module that is not there.
    let moved = UnsealOptions {
        module: Some(PathBuf::from("/nonexistent/libsofthsm2.so")),
        ..UnsealOptions::default()
    };
    match unseal(&sealed, &moved, PIN) {
        Err(Error::Device(m)) => assert!(m.contains("/nonexistent/libsofthsm2.so"), "{m}"),
        r => panic!("{r:?}"),
    }
}

#[test]
fn malformed_records_are_invalid() {
    let Some(module) = in_child("malformed_records_are_invalid", tokens(&["fs-bad"])) else {
        return;
    };
    let sealed = seal(&module, "fs-bad", None, &secret(0x66));
    let good = fscrypt_seal::Sealed::Pkcs11(sealed).to_json();
    let edits: [(&str, serde_json::Value); 8] = [
        ("wrapped", "zz".into()),
        ("wrapped", "00".repeat(39).into()),
        ("wrapped", "".into()),
        ("key_id", "".into()),
        ("key_id", "0g".into()),
        ("key_id", "00".repeat(257).into()),
        ("mechanism", "rsa-oaep-sha256".into()),
        ("module", "".into()),
    ];
    for (field, value) in edits {
        let mut json = good.clone();
        json[field] = value.clone();
        let record = fscrypt_seal::Sealed::from_json(&json).expect("parses");
        let r = fscrypt_seal::unseal(
            &record,
            &fscrypt_seal::UnsealOptions::default(),
            &mut Pins::new(PIN),
        );
        assert!(
            matches!(r, Err(Error::Invalid(_))),
            "{field}={value}: {r:?}"
        );
    }
    for json in [
        serde_json::json!({"kind": "pkcs11"}),
        serde_json::json!({"kind": "pkcs11", "wrapped": 5}),
        {
            let mut j = good.clone();
            j["mechanism"] = "des".into();
            j
        },
        {
            let mut j = good.clone();
            j["pin"] = "1234".into();
            j
        },
    ] {
        assert!(
            matches!(
                fscrypt_seal::Sealed::from_json(&json),
                Err(Error::Invalid(_))
            ),
            "{json}"
        );
    }
}
