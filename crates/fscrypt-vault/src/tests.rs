//! Vault tests without mounting: init, open, unlock, tampering.

use std::path::Path;

use fscrypt::EncryptionMode;
use fscrypt_crypto::SecretBuf;

use crate::config::{self, CONFIG_NAME, ConfigError, ConfigRecord, ProtectorRecord};
use crate::protector::{self, MASTER_KEY_SIZE, SALT_SIZE};
use crate::wrap;
use crate::*;
use test_support::TempDir;

const CHEAP: Argon2Params = Argon2Params {
    m_cost_kib: 64,
    t_cost: 1,
    p_cost: 1,
};

fn opts(pass: Option<&[u8]>, key: Option<&[u8]>) -> InitOptions {
    InitOptions {
        passphrase: pass.map(SecretBuf::from_slice),
        key_file: key.map(SecretBuf::from_slice),
        argon2: Argon2Choice::Fixed(CHEAP),
        ..InitOptions::default()
    }
}

#[test]
fn init_open_unlock_both_protectors() {
    let t = TempDir::new("both");
    let report = Vault::init(t.path(), &opts(Some(b"pass phrase"), Some(&[3u8; 32]))).unwrap();
    assert_eq!(report.argon2.unwrap().0, CHEAP);
    assert_eq!(report.policy.master_key_identifier, report.key_identifier);
    assert_eq!(report.policy.contents_mode, EncryptionMode::AES_256_XTS);
    assert_eq!(report.policy.filenames_mode, EncryptionMode::AES_256_CTS);
    assert_eq!(report.policy.flags.padding(), 32);

    let vault = Vault::open(t.path()).unwrap();
    assert!(vault.has_passphrase() && vault.has_key_file());
    assert_eq!(vault.key_identifier(), report.key_identifier);
    assert_eq!(*vault.policy(), report.policy);
    let a = vault.unlock_with_passphrase(b"pass phrase").unwrap();
    let b = vault.unlock_with_key_file(&[3u8; 32]).unwrap();
    assert_eq!(a.identifier(), report.key_identifier);
    assert_eq!(a.as_bytes(), b.as_bytes());
    assert_eq!(a.as_bytes().len(), 64);

    assert!(matches!(
        vault.unlock_with_passphrase(b"pass phrasE"),
        Err(Error::WrongPassphrase)
    ));
    assert!(matches!(
        vault.unlock_with_key_file(&[4u8; 32]),
        Err(Error::WrongKeyFile)
    ));
    assert!(matches!(
        vault.unlock_with_key_file(&[3u8; 64]),
        Err(Error::WrongKeyFile)
    ));
    assert!(matches!(
        vault.unlock_with_key_file(&[3u8; 33]),
        Err(Error::Protector(ProtectorError::KeyFileSize(33)))
    ));
    assert!(Error::WrongPassphrase.is_wrong_secret() && Error::WrongKeyFile.is_wrong_secret());
}

#[test]
fn protector_kinds_are_separate() {
    let t = TempDir::new("kinds");
    Vault::init(t.path(), &opts(None, Some(&[1u8; 64]))).unwrap();
    let vault = Vault::open(t.path()).unwrap();
    assert!(matches!(
        vault.unlock_with_passphrase(b"x"),
        Err(Error::NoSuchProtector("passphrase"))
    ));
    assert!(vault.argon2_params().is_none());
}

#[test]
fn init_refusals_leave_nothing_behind() {
    let t = TempDir::new("refuse");
    assert!(matches!(
        Vault::init(t.path(), &opts(None, None)),
        Err(Error::NoProtector)
    ));
    for (lblk64, lblk32) in [(true, false), (false, true)] {
        let o = InitOptions {
            iv_ino_lblk_64: lblk64,
            iv_ino_lblk_32: lblk32,
            ..opts(None, Some(&[1; 32]))
        };
        assert!(matches!(
            Vault::init(t.path(), &o),
            Err(Error::InodeNumberFlags)
        ));
    }
    let o = InitOptions {
        padding: 12,
        ..opts(None, Some(&[1; 32]))
    };
    assert!(matches!(Vault::init(t.path(), &o), Err(Error::Padding(12))));
    let o = InitOptions {
        direct_key: true,
        ..opts(None, Some(&[1; 32]))
    };
    assert!(matches!(Vault::init(t.path(), &o), Err(Error::Policy(_))));
    let o = InitOptions {
        log2_data_unit_size: 13,
        ..opts(None, Some(&[1; 32]))
    };
    assert!(matches!(Vault::init(t.path(), &o), Err(Error::Policy(_))));
    assert!(matches!(
        Vault::init(t.path(), &opts(None, Some(&[1; 16]))),
        Err(Error::Protector(ProtectorError::KeyFileSize(16)))
    ));
    assert!(matches!(
        Vault::init(t.path(), &opts(Some(b""), None)),
        Err(Error::Protector(ProtectorError::EmptyPassphrase))
    ));
    assert_eq!(std::fs::read_dir(t.path()).unwrap().count(), 0);

    // Adiantum + DIRECT_KEY with 512-byte data units is a valid vault.
    let o = InitOptions {
        contents_mode: EncryptionMode::ADIANTUM,
        filenames_mode: EncryptionMode::ADIANTUM,
        direct_key: true,
        log2_data_unit_size: 9,
        ..opts(None, Some(&[1; 32]))
    };
    let r = Vault::init(t.path(), &o).unwrap();
    assert!(r.policy.flags.direct_key());
    assert_eq!(
        Vault::open(t.path()).unwrap().policy().log2_data_unit_size,
        9
    );

    // Now it is a vault: never initialised again.
    assert!(matches!(
        Vault::init(t.path(), &opts(None, Some(&[1; 32]))),
        Err(Error::AlreadyInitialized(_))
    ));
}

#[test]
fn open_errors() {
    let t = TempDir::new("open");
    assert!(matches!(Vault::open(t.path()), Err(Error::NotAVault(_))));
    std::fs::write(t.join(CONFIG_NAME), b"{}").unwrap();
    assert!(matches!(
        Vault::open(t.path()),
        Err(Error::BadConfig { .. })
    ));
    std::fs::write(t.join(CONFIG_NAME), vec![b' '; 70_000]).unwrap();
    assert!(matches!(
        Vault::open(t.path()),
        Err(Error::BadConfig {
            source: ConfigError::TooLarge,
            ..
        })
    ));
}

fn edit_config(dir: &Path, f: impl FnOnce(&mut ConfigRecord)) {
    let path = Vault::config_path(dir);
    let mut record = ConfigRecord::parse(&std::fs::read(&path).unwrap()).unwrap();
    f(&mut record);
    std::fs::write(&path, record.to_json()).unwrap();
}

#[test]
fn tampering_is_detected() {
    let t = TempDir::new("tamper");
    let key = [9u8; 64];
    Vault::init(t.path(), &opts(None, Some(&key))).unwrap();
    let original = std::fs::read(Vault::config_path(t.path())).unwrap();

    // Policy edited (still valid): the associated data no longer matches.
    edit_config(t.path(), |r| r.policy.flags = 2);
    assert!(matches!(
        Vault::open(t.path()).unwrap().unlock_with_key_file(&key),
        Err(Error::WrongKeyFile)
    ));

    // IV_INO_LBLK flags in a stored policy are refused on open.
    std::fs::write(Vault::config_path(t.path()), &original).unwrap();
    edit_config(t.path(), |r| r.policy.flags = 3 | 8);
    assert!(matches!(
        Vault::open(t.path()),
        Err(Error::InodeNumberFlags)
    ));

    // An invalid mode pair is refused on open.
    std::fs::write(Vault::config_path(t.path()), &original).unwrap();
    edit_config(t.path(), |r| r.policy.filenames_mode = 1);
    assert!(matches!(
        Vault::open(t.path()),
        Err(Error::BadStoredPolicy { .. })
    ));

    // A wrapped key that authenticates but holds another master key (as a
    // forger with the key file could make): the identifier check catches it.
    std::fs::write(Vault::config_path(t.path()), &original).unwrap();
    edit_config(t.path(), |r| {
        let ad = wrap::associated_data(config::KIND_KEY_FILE, &r.policy.to_uapi_bytes());
        let salt = [5u8; SALT_SIZE];
        let wrapping = protector::key_file_wrapping_key(&key, &salt).unwrap();
        let (nonce, wrapped_key) = wrap::seal(&wrapping, &ad, &[0x42; MASTER_KEY_SIZE]).unwrap();
        r.protectors = vec![ProtectorRecord::KeyFile {
            salt,
            nonce,
            wrapped_key,
        }];
    });
    assert!(matches!(
        Vault::open(t.path()).unwrap().unlock_with_key_file(&key),
        Err(Error::IdentifierMismatch { .. })
    ));
}

#[test]
fn every_single_byte_corruption_of_the_config_is_an_error_or_harmless() {
    let t = TempDir::new("mutate");
    let key = [0x17u8; 32];
    let pass = b"mutation";
    let report = Vault::init(t.path(), &opts(Some(pass), Some(&key))).unwrap();
    let good = std::fs::read(Vault::config_path(t.path())).unwrap();
    let path = Vault::config_path(t.path());
    let (mut parsed, mut unlocked) = (0usize, 0usize);
    for i in 0..good.len() {
        let mut variants = Vec::new();
        let mut flipped = good.clone();
        flipped[i] ^= 0x01;
        variants.push(flipped);
        let mut quoted = good.clone();
        quoted[i] = b'"';
        variants.push(quoted);
        let mut deleted = good.clone();
        deleted.remove(i);
        variants.push(deleted);
        for bytes in variants {
            // Never a panic; when it opens and unlocks, it is the same key.
            let Ok(vault) = Vault::from_config_bytes(t.path(), path.clone(), &bytes) else {
                continue;
            };
            parsed += 1;
            let results = [
                vault.unlock_with_key_file(&key),
                vault.unlock_with_passphrase(pass),
            ];
            for master in results.into_iter().flatten() {
                unlocked += 1;
                assert_eq!(master.identifier(), report.key_identifier, "byte {i}");
            }
        }
    }
    // Some mutations are harmless (whitespace, the trailing newline), most are not.
    assert!(
        parsed > 0 && parsed < good.len(),
        "parsed {parsed} of {}",
        3 * good.len()
    );
    assert!(unlocked > 0);
}
