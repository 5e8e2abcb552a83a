//! The format logic behind `fscrypt-rs crypt`, a drop-in for xfstests'
//! `fscrypt-crypt-util`: key derivation from the tool's options, the starting
//! IV, and the per-unit padding and IV stepping (spec §4, §5, §11.2).
//!
//! The tool is deliberately lower-level than [`crate::InodeCrypt`]: it takes a
//! cipher, a master key and explicit derivation options, and en/decrypts a
//! stream of data units (or, with data unit size 255 and a padding, one
//! filename). The CLI parses options and moves bytes; this module decides
//! keys, IVs and lengths. Errors carry the tool's wording so scripts see
//! familiar messages.

use fscrypt_crypto::{CipherKey, Error as CryptoError, PreparedKey, SecretBox, registry};
use zeroize::Zeroizing;

use crate::context::NONCE_SIZE;
use crate::error::Error;
use crate::hkdf::{FscryptHkdf, HkdfContext};
use crate::hw_wrapped;
use crate::iv::Iv;
use crate::mode::{EncryptionMode, MAX_IV_SIZE, MAX_MODE_KEY_SIZE, ModeInfo};
use crate::policy::KeyIdentifier;

/// Longest master key the tool accepts, in bytes.
pub const MAX_KEY_SIZE: usize = 64;

/// The `--kdf` choice.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Kdf {
    /// `none` (default): the master key (its first key-size bytes) is the key.
    #[default]
    None,
    /// `AES-128-ECB`: the v1 KDF with the file nonce (spec §4.2).
    Aes128Ecb,
    /// `HKDF-SHA512`: the v2 KDF (spec §4.3).
    HkdfSha512,
}

impl core::str::FromStr for Kdf {
    type Err = CryptUtilError;
    /// Parses `none`, `AES-128-ECB` or `HKDF-SHA512` (exact spelling).
    fn from_str(s: &str) -> Result<Self, CryptUtilError> {
        match s {
            "none" => Ok(Kdf::None),
            "AES-128-ECB" => Ok(Kdf::Aes128Ecb),
            "HKDF-SHA512" => Ok(Kdf::HkdfSha512),
            _ => Err(CryptUtilError::UnknownKdf(s.to_string())),
        }
    }
}

/// A refusal of the tool: it exits with status 1 on every one of these,
/// including the conditions the reference tool only catches with an internal
/// assertion (its `ASSERT`, which also exits 1).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CryptUtilError {
    /// `--kdf` value not recognised.
    #[error("Unknown KDF: {0} (use none, AES-128-ECB or HKDF-SHA512)")]
    UnknownKdf(String),
    /// The master key is longer than 64 bytes.
    #[error("Invalid master_key: {0} bytes (at most {MAX_KEY_SIZE})")]
    MasterKeyTooLong(usize),
    /// The master key (or software secret) is shorter than the cipher's key.
    #[error("Master key is too short for cipher {cipher} (need {need} bytes, have {have})")]
    MasterKeyTooShort {
        /// Cipher name.
        cipher: &'static str,
        /// Required bytes.
        need: usize,
        /// Given bytes.
        have: usize,
    },
    /// HKDF-SHA512 over an empty master key (the reference asserts
    /// `ikmlen > 0`).
    #[error("--kdf=HKDF-SHA512 needs a non-empty master key")]
    EmptyMasterKey,
    /// An option is required by another one.
    #[error("{option} requires {requirement}")]
    Requires {
        /// The option that needs something.
        option: &'static str,
        /// What it needs.
        requirement: &'static str,
    },
    /// More than one of `--direct-key`, `--iv-ino-lblk-64`,
    /// `--iv-ino-lblk-32`.
    #[error(
        "Conflicting IV methods specified (use at most one of --direct-key, --iv-ino-lblk-64, \
         --iv-ino-lblk-32)"
    )]
    ConflictingIvMethods,
    /// `--kdf=AES-128-ECB` with an IV method option.
    #[error(
        "--kdf=AES-128-ECB is incompatible with IV method options (drop --direct-key / \
         --iv-ino-lblk-*, or use --kdf=none or HKDF-SHA512)"
    )]
    EcbWithIvMethod,
    /// An IV_INO_LBLK value above 32 bits.
    #[error("{option} can't use {what} > UINT32_MAX")]
    Over32Bits {
        /// `--iv-ino-lblk-64` or `--iv-ino-lblk-32`.
        option: &'static str,
        /// `--inode-number` or `--data-unit-index`.
        what: &'static str,
    },
    /// `--use-inlinecrypt-key` with a cipher whose key is not 64 bytes.
    #[error("cipher {0} not compatible with --use-inlinecrypt-key")]
    InlinecryptKeyCipher(&'static str),
    /// `--enable-hw-kdf` needs a 32-byte key.
    #[error("--enable-hw-kdf requires a 32-byte master key (got {0} bytes)")]
    HwKdfKeySize(usize),
    /// The data unit size is below the cipher's minimum message size.
    #[error("Data unit size of {size} bytes is too small for cipher {cipher}")]
    DataUnitTooSmall {
        /// Data unit size in bytes.
        size: usize,
        /// Cipher name.
        cipher: &'static str,
    },
    /// A unit of a length the cipher cannot take (XTS and CBC-ESSIV: whole
    /// 16-byte blocks only; the reference asserts on it).
    #[error(
        "{cipher} can't en/decrypt a {len}-byte unit: it needs a multiple of 16 bytes \
         (choose --data-unit-size and --padding accordingly)"
    )]
    UnitNotBlockMultiple {
        /// Cipher name.
        cipher: &'static str,
        /// Unit length in bytes.
        len: usize,
    },
    /// The crypto or format layer failed.
    #[error(transparent)]
    Format(#[from] Error),
}

/// The tool's options that affect keys and IVs (`--mode-num=0` and
/// `--inode-number=0` mean "not given", as in the tool).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CryptUtilParams {
    /// `--kdf`.
    pub kdf: Kdf,
    /// `--mode-num` (0 = not given): the mode byte in HKDF infos.
    pub mode_num: u8,
    /// `--file-nonce`.
    pub file_nonce: Option<[u8; NONCE_SIZE]>,
    /// `--direct-key`: nonce in the IV (and HKDF ctx 3 with HKDF-SHA512).
    pub direct_key: bool,
    /// `--iv-ino-lblk-64`.
    pub iv_ino_lblk_64: bool,
    /// `--iv-ino-lblk-32`.
    pub iv_ino_lblk_32: bool,
    /// `--inode-number` (0 = not given).
    pub inode_number: u64,
    /// `--fs-uuid`.
    pub fs_uuid: Option<[u8; 16]>,
    /// `--data-unit-index`: index of the first unit.
    pub data_unit_index: u64,
    /// `--enable-hw-kdf`: the master key is a raw key imported as
    /// hardware-wrapped; derive its software secret with the xfstests model.
    pub enable_hw_kdf: bool,
    /// `--use-inlinecrypt-key`: encrypt with the modelled inline encryption key.
    pub use_inlinecrypt_key: bool,
}

/// The cipher of a `fscrypt-rs crypt` run, by its tool name
/// (`"AES-256-XTS"`, `"AES-256-CTS-CBC"`, …; [`ModeInfo::cipher_name`]), or
/// `None` for an unknown name.
pub fn cipher_by_name(name: &str) -> Option<&'static ModeInfo> {
    EncryptionMode::from_cipher_name(name).and_then(|m| m.info())
}

/// The smallest message the tool passes to `cipher`: 0 for the XTS modes
/// and AES-128-CBC-ESSIV (they are only refused per unit, when a unit is not
/// whole blocks), 16 for the others (the reference tool's `min_input_size`).
pub fn min_input_size(cipher: &ModeInfo) -> usize {
    if cipher.mode == EncryptionMode::AES_128_CBC || cipher.algorithm.is_xts() {
        0
    } else {
        16
    }
}

/// Whether `cipher` can en/decrypt a unit of `len` bytes (XTS and
/// CBC-ESSIV: whole 16-byte blocks; the others: at least 16 bytes).
///
/// # Errors
/// [`CryptUtilError::UnitNotBlockMultiple`].
pub fn check_unit_len(cipher: &ModeInfo, len: usize) -> Result<(), CryptUtilError> {
    let blocks_only = cipher.mode == EncryptionMode::AES_128_CBC || cipher.algorithm.is_xts();
    if (blocks_only && !len.is_multiple_of(16)) || len < min_input_size(cipher) {
        return Err(CryptUtilError::UnitNotBlockMultiple {
            cipher: cipher.cipher_name,
            len,
        });
    }
    Ok(())
}

/// How many bytes one unit is en/decrypted as, given `read` input bytes
/// (1..=data_unit_size): the full data unit without a padding, else
/// `max(read, min_input)` rounded up to `padding` and capped at the data unit
/// size (spec §11.2 step 6; this is §7.2 for `data_unit_size` 255).
pub fn crypt_len(
    read: usize,
    data_unit_size: usize,
    padding: Option<usize>,
    min_input: usize,
) -> usize {
    match padding {
        None => data_unit_size,
        Some(p) => read
            .max(min_input)
            .checked_next_multiple_of(p.max(1))
            .unwrap_or(usize::MAX)
            .min(data_unit_size),
    }
}

/// The key identifier `--dump-key-identifier` prints: HKDF ctx 1 over the
/// master key, or ctx 8 over the modelled software secret with
/// `--enable-hw-kdf` (spec §4.4).
///
/// # Errors
/// [`CryptUtilError::Requires`] unless `kdf` is HKDF-SHA512;
/// [`CryptUtilError::EmptyMasterKey`]; [`CryptUtilError::HwKdfKeySize`];
/// [`CryptUtilError::MasterKeyTooLong`].
pub fn key_identifier(
    master_key: &[u8],
    params: &CryptUtilParams,
) -> Result<KeyIdentifier, CryptUtilError> {
    let secret = software_secret(master_key, params)?;
    if params.kdf != Kdf::HkdfSha512 {
        return Err(CryptUtilError::Requires {
            option: "--dump-key-identifier",
            requirement: "--kdf=HKDF-SHA512",
        });
    }
    if secret.is_empty() {
        return Err(CryptUtilError::EmptyMasterKey);
    }
    let ctx = if params.enable_hw_kdf {
        HkdfContext::KeyIdentifierForHwWrappedKey
    } else {
        HkdfContext::KeyIdentifierForRawKey
    };
    let mut id = [0u8; 16];
    FscryptHkdf::new(&secret).expand(ctx, &[], &mut id)?;
    Ok(KeyIdentifier(id))
}

/// The master key, or with `--enable-hw-kdf` its modelled software secret.
fn software_secret(
    master_key: &[u8],
    params: &CryptUtilParams,
) -> Result<Zeroizing<Vec<u8>>, CryptUtilError> {
    if master_key.len() > MAX_KEY_SIZE {
        return Err(CryptUtilError::MasterKeyTooLong(master_key.len()));
    }
    if params.enable_hw_kdf {
        let s = hw_wrapped::derive_sw_secret(master_key)
            .map_err(|_| CryptUtilError::HwKdfKeySize(master_key.len()))?;
        Ok(Zeroizing::new(s.to_vec()))
    } else {
        Ok(Zeroizing::new(master_key.to_vec()))
    }
}

/// The real key of a run, prepared by the selected implementation. An XTS
/// key whose halves are equal is refused by [`PreparedKey`] (the kernel
/// forbids it) but accepted by the reference tool, so the tool keys it
/// through the implementation directly.
enum ToolKey {
    Prepared(PreparedKey),
    Unchecked(SecretBox<dyn CipherKey>),
}

impl ToolKey {
    fn new(cipher: &'static ModeInfo, key: &[u8]) -> Result<Self, CryptUtilError> {
        match PreparedKey::new(cipher.algorithm, key) {
            Ok(k) => Ok(ToolKey::Prepared(k)),
            Err(CryptoError::WeakKey { .. }) => {
                // The selected implementation first, then the others that
                // pass their self-test, by priority (an FFI backend may
                // refuse equal halves itself).
                let reg = registry::default_registry();
                let selected = reg.select(cipher.algorithm).map_err(Error::from)?;
                let mut others: Vec<&registry::Implementation> = reg
                    .implementations()
                    .filter(|i| i.algorithm == cipher.algorithm && i.name != selected.name)
                    .filter(|i| {
                        i.properties.intersection(reg.refused()).is_empty()
                            && reg.self_test(i.name).is_some_and(|st| st.passed())
                    })
                    .collect();
                others.sort_by_key(|i| core::cmp::Reverse(i.priority));
                let mut last = None;
                for imp in core::iter::once(selected).chain(others) {
                    match (imp.new_key)(key) {
                        Ok(k) => {
                            fscrypt_crypto::scrub_stack();
                            return Ok(ToolKey::Unchecked(k));
                        }
                        Err(e) => last = Some(e),
                    }
                }
                fscrypt_crypto::scrub_stack();
                Err(Error::from(last.unwrap_or(CryptoError::NoImplementation {
                    algorithm: cipher.algorithm,
                }))
                .into())
            }
            Err(e) => Err(Error::from(e).into()),
        }
    }

    fn crypt(&self, iv: &[u8], data: &mut [u8], decrypt: bool) -> Result<(), CryptoError> {
        match (self, decrypt) {
            (ToolKey::Prepared(k), false) => k.encrypt(iv, data),
            (ToolKey::Prepared(k), true) => k.decrypt(iv, data),
            (ToolKey::Unchecked(k), false) => k.encrypt(iv, data),
            (ToolKey::Unchecked(k), true) => k.decrypt(iv, data),
        }
    }
}

/// A prepared `fscrypt-rs crypt` run: the real key and the IV of the next
/// unit. Each [`UnitCrypter::crypt_unit`] call processes one unit and steps
/// the IV's index field (64-bit, or 32-bit wrapping for IV_INO_LBLK_*), exactly
/// like the tool.
pub struct UnitCrypter {
    cipher: &'static ModeInfo,
    key: ToolKey,
    iv: [u8; MAX_IV_SIZE],
    index_32bit: bool,
}

impl core::fmt::Debug for UnitCrypter {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("UnitCrypter")
            .field("cipher", &self.cipher.cipher_name)
            .field("index_32bit", &self.index_32bit)
            .finish_non_exhaustive()
    }
}

impl UnitCrypter {
    /// Derives the real key and the first IV from the master key and the
    /// options (the tool's `get_key_and_iv()`), checking every option
    /// dependency the tool checks, in the same order: at most one IV method;
    /// none with AES-128-ECB; then the key derivation's needs (inline
    /// encryption key, key length, nonce, mode number, UUID); then the IV's
    /// (nonce for `--direct-key`; 32-bit index and inode number for
    /// IV_INO_LBLK_*; HKDF-SHA512 for IV_INO_LBLK_32's inode hash).
    /// `--iv-ino-lblk-64` and `--direct-key` work with every KDF but
    /// AES-128-ECB, as in the tool.
    ///
    /// # Errors
    /// Every [`CryptUtilError`] precondition; [`Error::Crypto`] if no
    /// implementation can take the key.
    pub fn new(
        cipher: &'static ModeInfo,
        master_key: &[u8],
        p: &CryptUtilParams,
    ) -> Result<Self, CryptUtilError> {
        let secret = software_secret(master_key, p)?;
        let methods = [p.direct_key, p.iv_ino_lblk_64, p.iv_ino_lblk_32]
            .iter()
            .filter(|&&m| m)
            .count();
        if methods > 1 {
            return Err(CryptUtilError::ConflictingIvMethods);
        }
        if methods > 0 && p.kdf == Kdf::Aes128Ecb {
            return Err(CryptUtilError::EcbWithIvMethod);
        }
        let lblk = p.iv_ino_lblk_64 || p.iv_ino_lblk_32;

        // The tool's derive_real_key().
        let ks = cipher.key_size;
        let mut real = Zeroizing::new([0u8; MAX_MODE_KEY_SIZE]);
        if p.use_inlinecrypt_key {
            if !p.enable_hw_kdf {
                return Err(CryptUtilError::Requires {
                    option: "--use-inlinecrypt-key",
                    requirement: "--enable-hw-kdf",
                });
            }
            if !lblk {
                return Err(CryptUtilError::Requires {
                    option: "--use-inlinecrypt-key",
                    requirement: "one of --iv-ino-lblk-{64,32}",
                });
            }
            if ks != hw_wrapped::INLINE_ENCRYPTION_KEY_SIZE {
                return Err(CryptUtilError::InlinecryptKeyCipher(cipher.cipher_name));
            }
            let k = hw_wrapped::derive_inline_encryption_key(master_key)
                .map_err(|_| CryptUtilError::HwKdfKeySize(master_key.len()))?;
            real[..ks].copy_from_slice(&k[..]);
        } else {
            if secret.len() < ks {
                return Err(CryptUtilError::MasterKeyTooShort {
                    cipher: cipher.cipher_name,
                    need: ks,
                    have: secret.len(),
                });
            }
            match p.kdf {
                Kdf::None => real[..ks].copy_from_slice(&secret[..ks]),
                Kdf::Aes128Ecb => {
                    let nonce = p.file_nonce.ok_or(CryptUtilError::Requires {
                        option: "--kdf=AES-128-ECB",
                        requirement: "--file-nonce",
                    })?;
                    let k = crate::keysetup_v1::derive_v1_file_key(&secret, &nonce, ks)?;
                    real[..ks].copy_from_slice(&k[..ks]);
                }
                Kdf::HkdfSha512 => {
                    let hkdf = FscryptHkdf::new(&secret);
                    let mut info = [0u8; 17];
                    let (ctx, info_len) = if p.direct_key {
                        if p.mode_num == 0 {
                            return Err(CryptUtilError::Requires {
                                option: "--direct-key with KDF",
                                requirement: "--mode-num",
                            });
                        }
                        info[0] = p.mode_num;
                        (HkdfContext::DirectKey, 1)
                    } else if lblk {
                        let option = if p.iv_ino_lblk_64 {
                            "--iv-ino-lblk-64 with KDF"
                        } else {
                            "--iv-ino-lblk-32 with KDF"
                        };
                        if p.mode_num == 0 {
                            return Err(CryptUtilError::Requires {
                                option,
                                requirement: "--mode-num",
                            });
                        }
                        let uuid = p.fs_uuid.ok_or(CryptUtilError::Requires {
                            option,
                            requirement: "--fs-uuid",
                        })?;
                        info[0] = p.mode_num;
                        info[1..].copy_from_slice(&uuid);
                        let ctx = if p.iv_ino_lblk_64 {
                            HkdfContext::IvInoLblk64Key
                        } else {
                            HkdfContext::IvInoLblk32Key
                        };
                        (ctx, 17)
                    } else {
                        let nonce = p.file_nonce.ok_or(CryptUtilError::Requires {
                            option: "--kdf=HKDF-SHA512",
                            requirement: "--file-nonce or --iv-ino-lblk-{64,32}",
                        })?;
                        info[..16].copy_from_slice(&nonce);
                        (HkdfContext::PerFileEncKey, 16)
                    };
                    hkdf.expand(ctx, &info[..info_len], &mut real[..ks])?;
                }
            }
        }

        // The tool's generate_iv().
        let mut iv = [0u8; MAX_IV_SIZE];
        let idx = p.data_unit_index;
        if p.direct_key {
            let nonce = p.file_nonce.ok_or(CryptUtilError::Requires {
                option: "--direct-key",
                requirement: "--file-nonce",
            })?;
            iv[..8].copy_from_slice(&idx.to_le_bytes());
            iv[8..24].copy_from_slice(&nonce);
        } else if lblk {
            let option = if p.iv_ino_lblk_64 {
                "--iv-ino-lblk-64"
            } else {
                "--iv-ino-lblk-32"
            };
            let idx32 = u32::try_from(idx).map_err(|_| CryptUtilError::Over32Bits {
                option,
                what: "--data-unit-index",
            })?;
            if p.inode_number == 0 {
                return Err(CryptUtilError::Requires {
                    option,
                    requirement: "--inode-number",
                });
            }
            if p.iv_ino_lblk_64 {
                let ino =
                    u32::try_from(p.inode_number).map_err(|_| CryptUtilError::Over32Bits {
                        option,
                        what: "--inode-number",
                    })?;
                iv[..4].copy_from_slice(&idx32.to_le_bytes());
                iv[4..8].copy_from_slice(&ino.to_le_bytes());
            } else {
                if p.kdf != Kdf::HkdfSha512 {
                    return Err(CryptUtilError::Requires {
                        option,
                        requirement: "--kdf=HKDF-SHA512",
                    });
                }
                let hkdf = FscryptHkdf::new(&secret);
                let mut hk = Zeroizing::new([0u8; 16]);
                hkdf.expand(HkdfContext::InodeHashKey, &[], &mut hk[..])?;
                let hashed = fscrypt_crypto::siphash24(&hk, &p.inode_number.to_le_bytes()) as u32;
                iv[..4].copy_from_slice(&hashed.wrapping_add(idx32).to_le_bytes());
            }
        } else {
            iv[..8].copy_from_slice(&idx.to_le_bytes());
        }
        let key = ToolKey::new(cipher, &real[..ks])?;
        Ok(Self {
            cipher,
            key,
            iv,
            index_32bit: lblk && !p.direct_key,
        })
    }

    /// The IV the next unit will use.
    pub fn next_iv(&self) -> Iv {
        Iv::from_bytes(self.iv)
    }

    /// The cipher.
    pub fn cipher(&self) -> &'static ModeInfo {
        self.cipher
    }

    /// En/decrypts one unit in place: `buf[..read]` holds the input, the rest
    /// of `buf[..len]` is zeroed first, where `len` =
    /// [`crypt_len`]`(read, buf.len(), padding, min_input)`; returns `len`, the
    /// number of output bytes. Then steps the IV index. Allocation-free.
    ///
    /// `buf.len()` is the data unit size.
    ///
    /// # Errors
    /// As for [`UnitCrypter::crypt_exact`].
    pub fn crypt_unit(
        &mut self,
        buf: &mut [u8],
        read: usize,
        padding: Option<usize>,
        decrypt: bool,
    ) -> Result<usize, CryptUtilError> {
        let len = crypt_len(read, buf.len(), padding, min_input_size(self.cipher));
        let read = read.min(len);
        buf[read..len].fill(0);
        self.crypt_exact(&mut buf[..len], decrypt)?;
        Ok(len)
    }

    /// En/decrypts `unit` (already zero-padded to its [`crypt_len`]) in
    /// place with the current IV, then steps the IV index. Allocation-free.
    ///
    /// # Errors
    /// [`CryptUtilError::UnitNotBlockMultiple`] if the cipher cannot take
    /// `unit.len()` bytes (the IV is not stepped); [`Error::Crypto`] if the
    /// implementation fails.
    pub fn crypt_exact(&mut self, unit: &mut [u8], decrypt: bool) -> Result<(), CryptUtilError> {
        check_unit_len(self.cipher, unit.len())?;
        let iv = &self.iv[..self.cipher.iv_size];
        self.key.crypt(iv, unit, decrypt).map_err(Error::from)?;
        if self.index_32bit {
            let v = u32::from_le_bytes([self.iv[0], self.iv[1], self.iv[2], self.iv[3]])
                .wrapping_add(1);
            self.iv[..4].copy_from_slice(&v.to_le_bytes());
        } else {
            let mut b = [0u8; 8];
            b.copy_from_slice(&self.iv[..8]);
            let v = u64::from_le_bytes(b).wrapping_add(1);
            self.iv[..8].copy_from_slice(&v.to_le_bytes());
        }
        Ok(())
    }
}
