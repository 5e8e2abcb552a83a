//! FIDO2 protectors against a real client stack: libfido2 (the library
//! the module drives) talking CTAPHID over a Unix socket (`unix:` devices)
//! to a software CTAP 2.0 authenticator started by each test.
//!
//! The authenticator is `test_support::fido::SoftKey` (why it is our own,
//! and what it implements, is in its module documentation).
//!
//! With a real key: `FSCRYPT_RS_FIDO2_DEVICE=/dev/hidrawN cargo test -p
//! fscrypt-seal --test fido2 real_key` (and, if the key has a PIN,
//! `FSCRYPT_RS_FIDO2_PIN_FILE=FILE` holding it); it asks for touches.

use std::collections::VecDeque;
use std::time::Instant;

use fscrypt_seal::fido2::{self, SealOptions, UnsealOptions};
use fscrypt_seal::{Error, Interaction, Secret};
use test_support::TempDir;
use zeroize::Zeroizing;

use test_support::fido::SoftKey;

/// The protector's options that reach a [`SoftKey`].
trait Options {
    fn seal_options(&self) -> SealOptions;
    fn unseal_options(&self) -> UnsealOptions;
}

impl Options for SoftKey {
    fn seal_options(&self) -> SealOptions {
        SealOptions {
            device: Some(self.device()),
        }
    }

    fn unseal_options(&self) -> UnsealOptions {
        UnsealOptions {
            device: Some(self.device()),
        }
    }
}

/// Answers PIN prompts from a queue and records notices.
#[derive(Default)]
struct Ui {
    pins: VecDeque<&'static str>,
    asked: Vec<String>,
    notices: Vec<String>,
}

impl Ui {
    fn with_pins(pins: &[&'static str]) -> Ui {
        Ui {
            pins: pins.iter().copied().collect(),
            ..Ui::default()
        }
    }
}

impl Interaction for Ui {
    fn pin(&mut self, what: &str, _confirm: bool) -> Result<Zeroizing<String>, Error> {
        self.asked.push(what.to_string());
        self.pins
            .pop_front()
            .map(|p| Zeroizing::new(p.to_string()))
            .ok_or_else(|| Error::Io("no PIN left in the test".into()))
    }

    fn notice(&mut self, message: &str) {
        self.notices.push(message.to_string());
    }
}

fn libfido2_missing() -> bool {
    let missing = !std::path::Path::new("/usr/lib/x86_64-linux-gnu/libfido2.so.1").exists()
        && !std::path::Path::new("/usr/lib/libfido2.so.1").exists()
        && !std::path::Path::new("/usr/lib64/libfido2.so.1").exists();
    if missing {
        test_support::skip::skip(
            "fido2",
            "libfido2.so.1 is not installed (apt install libfido2-1)",
        );
    }
    missing
}

fn secret() -> Secret {
    Secret::random().unwrap()
}

#[test]
fn round_trip_without_pin() {
    if libfido2_missing() {
        return;
    }
    let key = SoftKey::start(None);
    let s = secret();
    let mut ui = Ui::default();
    let sealed = fido2::seal(&key.seal_options(), &s, &mut ui).unwrap();
    assert!(!sealed.pin);
    assert!(ui.asked.is_empty(), "no PIN is asked of a key without one");
    assert_eq!(
        key.touches(),
        2,
        "makeCredential and getAssertion each want a touch"
    );
    assert_eq!(
        ui.notices.len(),
        2,
        "each touch is announced: {:?}",
        ui.notices
    );
    assert_eq!(sealed.salt.len(), 64);
    assert_eq!(sealed.nonce.len(), 48);
    assert_eq!(sealed.wrapped.len(), 96);
    // Nothing secret in the record: the secret's hex appears nowhere.
    let json = fscrypt_seal::Sealed::Fido2(sealed.clone())
        .to_json()
        .to_string();
    assert!(!json.contains(&hex::encode(s.as_bytes())));

    let mut ui = Ui::default();
    let t = Instant::now();
    let back = fido2::unseal(&sealed, &key.unseal_options(), &mut ui).unwrap();
    eprintln!(
        "fido2 unseal against the software key over libfido2: {:?}",
        t.elapsed()
    );
    assert_eq!(back.as_bytes(), s.as_bytes());
    assert_eq!(key.touches(), 3);
    assert_eq!(ui.notices.len(), 1);

    // Through the crate's dispatch and the JSON form too.
    let record =
        fscrypt_seal::Sealed::from_json(&fscrypt_seal::Sealed::Fido2(sealed).to_json()).unwrap();
    let opts = fscrypt_seal::UnsealOptions {
        fido2: key.unseal_options(),
        ..Default::default()
    };
    let back = fscrypt_seal::unseal(&record, &opts, &mut Ui::default()).unwrap();
    assert_eq!(back.as_bytes(), s.as_bytes());
    let d = record.describe();
    assert_eq!(d[0].0, "device");
    assert_eq!(d[1].0, "credential");
    assert_eq!(d[1].1.len(), 8);
}

#[test]
fn round_trip_with_pin() {
    if libfido2_missing() {
        return;
    }
    let key = SoftKey::start(Some("4321"));
    let s = secret();
    let mut ui = Ui::with_pins(&["4321"]);
    let sealed = fido2::seal(&key.seal_options(), &s, &mut ui).unwrap();
    assert!(sealed.pin, "the PIN was used, so the record says so");
    assert_eq!(ui.asked.len(), 1, "one PIN prompt for sealing");
    let mut ui = Ui::with_pins(&["4321"]);
    let back = fido2::unseal(&sealed, &key.unseal_options(), &mut ui).unwrap();
    assert_eq!(back.as_bytes(), s.as_bytes());
    assert_eq!(ui.asked.len(), 1);
}

#[test]
fn wrong_pin_is_refused_with_tries_left() {
    if libfido2_missing() {
        return;
    }
    let key = SoftKey::start(Some("4321"));
    let s = secret();
    let sealed = fido2::seal(&key.seal_options(), &s, &mut Ui::with_pins(&["4321"])).unwrap();
    let err = fido2::unseal(
        &sealed,
        &key.unseal_options(),
        &mut Ui::with_pins(&["0000"]),
    )
    .unwrap_err();
    assert!(err.is_wrong_secret(), "{err:?}");
    assert!(err.to_string().contains("7 tries left"), "{err}");
    assert!(!err.to_string().contains("0000"));
    // The right PIN still opens it (and resets the count).
    let back = fido2::unseal(
        &sealed,
        &key.unseal_options(),
        &mut Ui::with_pins(&["4321"]),
    )
    .unwrap();
    assert_eq!(back.as_bytes(), s.as_bytes());
}

#[test]
fn wrong_pin_when_sealing_is_refused() {
    if libfido2_missing() {
        return;
    }
    let key = SoftKey::start(Some("4321"));
    let err = fido2::seal(
        &key.seal_options(),
        &secret(),
        &mut Ui::with_pins(&["1111"]),
    )
    .unwrap_err();
    assert!(err.is_wrong_secret(), "{err:?}");
}

#[test]
fn another_authenticator_is_refused() {
    if libfido2_missing() {
        return;
    }
    let (a, b) = (SoftKey::start(None), SoftKey::start(None));
    let sealed = fido2::seal(&a.seal_options(), &secret(), &mut Ui::default()).unwrap();
    let err = fido2::unseal(&sealed, &b.unseal_options(), &mut Ui::default()).unwrap_err();
    assert!(err.is_wrong_secret(), "{err:?}");
    assert!(err.to_string().contains("does not hold"), "{err}");
}

#[test]
fn two_protectors_on_two_authenticators_each_open_their_own() {
    if libfido2_missing() {
        return;
    }
    let (a, b) = (SoftKey::start(None), SoftKey::start(Some("2468")));
    let s = secret();
    let on_a = fido2::seal(&a.seal_options(), &s, &mut Ui::default()).unwrap();
    let on_b = fido2::seal(&b.seal_options(), &s, &mut Ui::with_pins(&["2468"])).unwrap();
    assert_ne!(on_a.credential_id, on_b.credential_id);
    let back_a = fido2::unseal(&on_a, &a.unseal_options(), &mut Ui::default()).unwrap();
    let back_b = fido2::unseal(&on_b, &b.unseal_options(), &mut Ui::with_pins(&["2468"])).unwrap();
    assert_eq!(back_a.as_bytes(), s.as_bytes());
    assert_eq!(back_b.as_bytes(), s.as_bytes());
    let err = fido2::unseal(&on_b, &a.unseal_options(), &mut Ui::default()).unwrap_err();
    assert!(err.is_wrong_secret(), "{err:?}");
}

#[test]
fn altered_record_is_refused() {
    if libfido2_missing() {
        return;
    }
    let key = SoftKey::start(None);
    let sealed = fido2::seal(&key.seal_options(), &secret(), &mut Ui::default()).unwrap();
    // Another salt: the key answers, but with another output.
    let mut other_salt = sealed.clone();
    other_salt.salt = hex::encode([7u8; 32]);
    let err = fido2::unseal(&other_salt, &key.unseal_options(), &mut Ui::default()).unwrap_err();
    assert!(err.is_wrong_secret(), "{err:?}");
    // A flipped ciphertext bit.
    let mut flipped = sealed.clone();
    let mut w = hex::decode(&flipped.wrapped).unwrap();
    w[0] ^= 1;
    flipped.wrapped = hex::encode(w);
    let err = fido2::unseal(&flipped, &key.unseal_options(), &mut Ui::default()).unwrap_err();
    assert!(err.is_wrong_secret(), "{err:?}");
}

#[test]
fn malformed_records_are_invalid() {
    // No device is reached: the record is checked first.
    let good = fido2::Sealed {
        rp_id: "fscrypt-rs".into(),
        credential_id: "00".repeat(32),
        salt: "11".repeat(32),
        pin: false,
        device: "x".into(),
        nonce: "22".repeat(24),
        wrapped: "33".repeat(48),
    };
    let cases: Vec<(&str, fido2::Sealed)> = vec![
        (
            "salt not hex",
            fido2::Sealed {
                salt: "zz".repeat(32),
                ..good.clone()
            },
        ),
        (
            "short salt",
            fido2::Sealed {
                salt: "11".repeat(31),
                ..good.clone()
            },
        ),
        (
            "long nonce",
            fido2::Sealed {
                nonce: "22".repeat(25),
                ..good.clone()
            },
        ),
        (
            "short wrapped",
            fido2::Sealed {
                wrapped: "33".repeat(32),
                ..good.clone()
            },
        ),
        (
            "empty credential",
            fido2::Sealed {
                credential_id: String::new(),
                ..good.clone()
            },
        ),
        (
            "huge credential",
            fido2::Sealed {
                credential_id: "00".repeat(2000),
                ..good.clone()
            },
        ),
        (
            "odd hex",
            fido2::Sealed {
                credential_id: "abc".into(),
                ..good.clone()
            },
        ),
        (
            "empty rp",
            fido2::Sealed {
                rp_id: String::new(),
                ..good.clone()
            },
        ),
        (
            "NUL in rp",
            fido2::Sealed {
                rp_id: "a\0b".into(),
                ..good.clone()
            },
        ),
    ];
    let opts = UnsealOptions {
        device: Some("unix:/nonexistent/fscrypt-rs-test.sock".into()),
    };
    for (what, rec) in cases {
        let err = fido2::unseal(&rec, &opts, &mut Ui::default()).unwrap_err();
        assert!(matches!(err, Error::Invalid(_)), "{what}: {err:?}");
    }
    // Unknown or missing fields in the stored JSON.
    let mut json = fscrypt_seal::Sealed::Fido2(good.clone()).to_json();
    json["extra"] = serde_json_value("1");
    assert!(matches!(
        fscrypt_seal::Sealed::from_json(&json),
        Err(Error::Invalid(_))
    ));
    let mut json = fscrypt_seal::Sealed::Fido2(good).to_json();
    json.as_object_mut().unwrap().remove("salt");
    assert!(matches!(
        fscrypt_seal::Sealed::from_json(&json),
        Err(Error::Invalid(_))
    ));
}

fn serde_json_value(s: &str) -> serde_json::Value {
    serde_json::from_str(s).unwrap()
}

#[test]
fn unreachable_device_is_a_device_error() {
    if libfido2_missing() {
        return;
    }
    let dir = TempDir::new("fido2-nokey");
    let opts = SealOptions {
        device: Some(format!("unix:{}", dir.join("none.sock").display()).into()),
    };
    let err = fido2::seal(&opts, &secret(), &mut Ui::default()).unwrap_err();
    assert!(matches!(err, Error::Device(_)), "{err:?}");
}

/// A round trip with a real key named by `FSCRYPT_RS_FIDO2_DEVICE`.
#[test]
fn real_key_round_trip() {
    let Some(dev) = std::env::var_os("FSCRYPT_RS_FIDO2_DEVICE") else {
        test_support::skip::skip(
            "real_key_round_trip",
            "set FSCRYPT_RS_FIDO2_DEVICE=/dev/hidrawN to use a real key",
        );
        return;
    };
    if libfido2_missing() {
        return;
    }
    struct RealUi(Option<Zeroizing<String>>);
    impl Interaction for RealUi {
        fn pin(&mut self, _what: &str, _confirm: bool) -> Result<Zeroizing<String>, Error> {
            self.0
                .clone()
                .ok_or_else(|| Error::Io("the key has a PIN: set FSCRYPT_RS_FIDO2_PIN_FILE".into()))
        }
        fn notice(&mut self, message: &str) {
            eprintln!("{message}");
        }
    }
    let pin = std::env::var_os("FSCRYPT_RS_FIDO2_PIN_FILE")
        .map(|f| Zeroizing::new(std::fs::read_to_string(f).unwrap().trim_end().to_string()));
    let mut ui = RealUi(pin);
    let s = secret();
    let sealed = fido2::seal(
        &SealOptions {
            device: Some(dev.clone().into()),
        },
        &s,
        &mut ui,
    )
    .unwrap();
    let t = Instant::now();
    let back = fido2::unseal(
        &sealed,
        &UnsealOptions {
            device: Some(dev.into()),
        },
        &mut ui,
    )
    .unwrap();
    eprintln!(
        "fido2 unseal with the real key (touch included): {:?}",
        t.elapsed()
    );
    assert_eq!(back.as_bytes(), s.as_bytes());
}

#[test]
fn three_wrong_pins_lock_until_replugged() {
    if libfido2_missing() {
        return;
    }
    let key = SoftKey::start(Some("4321"));
    let sealed = fido2::seal(
        &key.seal_options(),
        &secret(),
        &mut Ui::with_pins(&["4321"]),
    )
    .unwrap();
    for _ in 0..2 {
        let err = fido2::unseal(
            &sealed,
            &key.unseal_options(),
            &mut Ui::with_pins(&["0000"]),
        )
        .unwrap_err();
        assert!(err.is_wrong_secret(), "{err:?}");
    }
    let err = fido2::unseal(
        &sealed,
        &key.unseal_options(),
        &mut Ui::with_pins(&["0000"]),
    )
    .unwrap_err();
    assert!(matches!(err, Error::Device(_)), "{err:?}");
    assert!(err.to_string().contains("unplug"), "{err}");
    // Even the right PIN is refused until then.
    let err = fido2::unseal(
        &sealed,
        &key.unseal_options(),
        &mut Ui::with_pins(&["4321"]),
    )
    .unwrap_err();
    assert!(matches!(err, Error::Device(_)), "{err:?}");
}

#[test]
fn a_pin_protector_on_a_key_without_pin_is_refused() {
    if libfido2_missing() {
        return;
    }
    let (with_pin, without) = (SoftKey::start(Some("4321")), SoftKey::start(None));
    let sealed = fido2::seal(
        &with_pin.seal_options(),
        &secret(),
        &mut Ui::with_pins(&["4321"]),
    )
    .unwrap();
    let mut ui = Ui::default();
    let err = fido2::unseal(&sealed, &without.unseal_options(), &mut ui).unwrap_err();
    assert!(err.is_wrong_secret(), "{err:?}");
    assert!(
        ui.asked.is_empty(),
        "no PIN is asked of a key that has none"
    );
}
