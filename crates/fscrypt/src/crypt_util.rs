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

use fscrypt_crypto::PreparedKey;
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

/// A failed precondition of the tool (it exits with status 1 on these).
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
    /// An option is required by another one.
    #[error("{option} requires {requirement}")]
    Requires {
        /// The option that needs something.
        option: &'static str,
        /// What it needs.
        requirement: &'static str,
    },
    /// `--iv-ino-lblk-64` together with `--iv-ino-lblk-32`.
    #[error("--iv-ino-lblk-64 and --iv-ino-lblk-32 are mutually exclusive")]
    LblkExclusive,
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

/// The smallest message the tool passes to `cipher` (16 for every fscrypt
/// cipher except AES-128-CBC-ESSIV, which only needs whole blocks).
pub fn min_input_size(cipher: &ModeInfo) -> usize {
    if cipher.mode == EncryptionMode::AES_128_CBC {
        0
    } else {
        16
    }
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
/// [`CryptUtilError::HwKdfKeySize`]; [`CryptUtilError::MasterKeyTooLong`].
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

/// A prepared `fscrypt-rs crypt` run: the real key and the IV of the next
/// unit. Each [`UnitCrypter::crypt_unit`] call processes one unit and steps
/// the IV's index field (64-bit, or 32-bit wrapping for IV_INO_LBLK_*), exactly
/// like the tool.
pub struct UnitCrypter {
    cipher: &'static ModeInfo,
    key: PreparedKey,
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
    /// dependency the tool checks, in the same order.
    ///
    /// # Errors
    /// Every [`CryptUtilError`] precondition; [`Error::Crypto`] if the
    /// provider refuses the key (e.g. XTS halves equal).
    pub fn new(
        cipher: &'static ModeInfo,
        master_key: &[u8],
        p: &CryptUtilParams,
    ) -> Result<Self, CryptUtilError> {
        let secret = software_secret(master_key, p)?;
        let lblk = p.iv_ino_lblk_64 || p.iv_ino_lblk_32;
        let lblk_opt = if p.iv_ino_lblk_64 {
            "--iv-ino-lblk-64"
        } else {
            "--iv-ino-lblk-32"
        };
        if lblk {
            if p.iv_ino_lblk_64 && p.iv_ino_lblk_32 {
                return Err(CryptUtilError::LblkExclusive);
            }
            let req = |requirement| CryptUtilError::Requires {
                option: lblk_opt,
                requirement,
            };
            if p.kdf != Kdf::HkdfSha512 {
                return Err(req("--kdf=HKDF-SHA512"));
            }
            if p.fs_uuid.is_none() {
                return Err(req("--fs-uuid"));
            }
            if p.inode_number == 0 {
                return Err(req("--inode-number"));
            }
            if p.mode_num == 0 {
                return Err(req("--mode-num"));
            }
            if p.inode_number > u32::MAX as u64 {
                return Err(CryptUtilError::Over32Bits {
                    option: lblk_opt,
                    what: "--inode-number",
                });
            }
        }

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
                                option: "--direct-key with --kdf=HKDF-SHA512",
                                requirement: "--mode-num",
                            });
                        }
                        info[0] = p.mode_num;
                        (HkdfContext::DirectKey, 1)
                    } else if lblk {
                        info[0] = p.mode_num;
                        info[1..].copy_from_slice(&p.fs_uuid.unwrap_or_default());
                        let ctx = if p.iv_ino_lblk_64 {
                            HkdfContext::IvInoLblk64Key
                        } else {
                            HkdfContext::IvInoLblk32Key
                        };
                        (ctx, 17)
                    } else {
                        let nonce = p.file_nonce.ok_or(CryptUtilError::Requires {
                            option: "--kdf=HKDF-SHA512",
                            requirement: "--file-nonce (or --direct-key / --iv-ino-lblk-*)",
                        })?;
                        info[..16].copy_from_slice(&nonce);
                        (HkdfContext::PerFileEncKey, 16)
                    };
                    hkdf.expand(ctx, &info[..info_len], &mut real[..ks])?;
                }
            }
        }
        let key = PreparedKey::new(cipher.algorithm, &real[..ks]).map_err(Error::from)?;

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
            let idx32 = u32::try_from(idx).map_err(|_| CryptUtilError::Over32Bits {
                option: lblk_opt,
                what: "--data-unit-index",
            })?;
            if p.iv_ino_lblk_64 {
                iv[..4].copy_from_slice(&idx32.to_le_bytes());
                iv[4..8].copy_from_slice(&(p.inode_number as u32).to_le_bytes());
            } else {
                let hkdf = FscryptHkdf::new(&secret);
                let mut hk = Zeroizing::new([0u8; 16]);
                hkdf.expand(HkdfContext::InodeHashKey, &[], &mut hk[..])?;
                let hashed = fscrypt_crypto::siphash24(&hk, &p.inode_number.to_le_bytes()) as u32;
                iv[..4].copy_from_slice(&hashed.wrapping_add(idx32).to_le_bytes());
            }
        } else {
            iv[..8].copy_from_slice(&idx.to_le_bytes());
        }
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
    /// [`Error::Crypto`] if the cipher refuses the length (e.g. an ESSIV unit
    /// that is not a multiple of 16 bytes).
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
        let iv = &self.iv[..self.cipher.iv_size];
        if decrypt {
            self.key.decrypt(iv, &mut buf[..len]).map_err(Error::from)?;
        } else {
            self.key.encrypt(iv, &mut buf[..len]).map_err(Error::from)?;
        }
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
        Ok(len)
    }
}
