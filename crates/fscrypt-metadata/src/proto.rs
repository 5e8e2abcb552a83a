//! The protobuf messages of google/fscrypt's metadata files (proto3, package
//! `metadata`), written by hand with the same field numbers and types, and
//! the checks google/fscrypt applies before trusting them.
//!
//! prost encodes fields in field-number order and omits proto3 defaults,
//! as Go's encoder does, so decoding then encoding a file written by
//! `fscrypt` gives back the same bytes (tested on files it wrote).

use prost::Message;

use crate::Error;

/// Length of a v1 policy descriptor and of a protector descriptor, in hex.
pub const DESCRIPTOR_LEN_V1: usize = 16;
/// Length of a v2 policy descriptor (a key identifier), in hex.
pub const DESCRIPTOR_LEN_V2: usize = 32;
/// Length of protector keys and wrapping keys (bytes).
pub const INTERNAL_KEY_LEN: usize = 32;
/// Length of a policy (master) key (bytes).
pub const POLICY_KEY_LEN: usize = 64;
/// Length of the CTR IV in [`WrappedKeyData`].
pub const IV_LEN: usize = 16;
/// Length of a passphrase protector's salt.
pub const SALT_LEN: usize = 16;
/// Length of the HMAC-SHA256 tag.
pub const HMAC_LEN: usize = 32;
/// Largest Argon2 parallelism google/fscrypt accepts.
pub const MAX_PARALLELISM: i64 = 255;

/// Argon2id costs (`HashingCosts`).
#[derive(Clone, PartialEq, Eq, Message)]
pub struct HashingCosts {
    /// Passes (t).
    #[prost(int64, tag = "2")]
    pub time: i64,
    /// Memory in KiB (m).
    #[prost(int64, tag = "3")]
    pub memory: i64,
    /// Lanes (p).
    #[prost(int64, tag = "4")]
    pub parallelism: i64,
    /// When false, parallelism is truncated to 8 bits (old releases).
    #[prost(bool, tag = "5")]
    pub truncation_fixed: bool,
}

/// A key wrapped by another (`WrappedKeyData`).
#[derive(Clone, PartialEq, Eq, Message)]
pub struct WrappedKeyData {
    /// The AES-CTR IV (16 bytes).
    #[prost(bytes = "vec", tag = "1")]
    pub iv: Vec<u8>,
    /// The encrypted key.
    #[prost(bytes = "vec", tag = "2")]
    pub encrypted_key: Vec<u8>,
    /// HMAC-SHA256 over IV ‖ encrypted key.
    #[prost(bytes = "vec", tag = "3")]
    pub hmac: Vec<u8>,
}

/// Where a protector's wrapping key comes from (`SourceType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum SourceType {
    /// Unset.
    Default = 0,
    /// The user's login passphrase.
    PamPassphrase = 1,
    /// A passphrase chosen for this protector.
    CustomPassphrase = 2,
    /// A 32-byte key file.
    RawKey = 3,
}

impl SourceType {
    /// The name google/fscrypt uses (`custom_passphrase`, ...).
    pub fn name(self) -> &'static str {
        match self {
            SourceType::Default => "default",
            SourceType::PamPassphrase => "pam_passphrase",
            SourceType::CustomPassphrase => "custom_passphrase",
            SourceType::RawKey => "raw_key",
        }
    }

    /// Parses a google/fscrypt source name.
    pub fn from_name(name: &str) -> Option<SourceType> {
        [
            SourceType::Default,
            SourceType::PamPassphrase,
            SourceType::CustomPassphrase,
            SourceType::RawKey,
        ]
        .into_iter()
        .find(|s| s.name() == name)
    }
}

/// A protector (`ProtectorData`): a random 32-byte protector key wrapped by
/// a key from a passphrase (Argon2id) or a raw key file.
#[derive(Clone, PartialEq, Eq, Message)]
pub struct ProtectorData {
    /// 16 hex digits, from the protector key.
    #[prost(string, tag = "1")]
    pub protector_descriptor: String,
    /// [`SourceType`].
    #[prost(enumeration = "SourceType", tag = "2")]
    pub source: i32,
    /// Name (custom passphrase and raw key protectors).
    #[prost(string, tag = "3")]
    pub name: String,
    /// Argon2id costs (passphrase protectors).
    #[prost(message, optional, tag = "4")]
    pub costs: Option<HashingCosts>,
    /// Argon2id salt (passphrase protectors).
    #[prost(bytes = "vec", tag = "5")]
    pub salt: Vec<u8>,
    /// The login user (pam_passphrase).
    #[prost(int64, tag = "6")]
    pub uid: i64,
    /// The protector key, wrapped.
    #[prost(message, optional, tag = "7")]
    pub wrapped_key: Option<WrappedKeyData>,
}

/// Encryption modes of `EncryptionOptions.Mode` (the kernel's
/// `FSCRYPT_MODE_*` numbers).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum Mode {
    /// Unset.
    Default = 0,
    /// AES-256-XTS.
    Aes256Xts = 1,
    /// AES-256-GCM (never used by the kernel).
    Aes256Gcm = 2,
    /// AES-256-CBC.
    Aes256Cbc = 3,
    /// AES-256-CTS.
    Aes256Cts = 4,
    /// AES-128-CBC.
    Aes128Cbc = 5,
    /// AES-128-CTS.
    Aes128Cts = 6,
    /// Adiantum.
    Adiantum = 9,
    /// AES-256-HCTR2.
    Aes256Hctr2 = 10,
}

impl Mode {
    /// The name google/fscrypt uses (`AES_256_XTS`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Mode::Default => "default",
            Mode::Aes256Xts => "AES_256_XTS",
            Mode::Aes256Gcm => "AES_256_GCM",
            Mode::Aes256Cbc => "AES_256_CBC",
            Mode::Aes256Cts => "AES_256_CTS",
            Mode::Aes128Cbc => "AES_128_CBC",
            Mode::Aes128Cts => "AES_128_CTS",
            Mode::Adiantum => "Adiantum",
            Mode::Aes256Hctr2 => "AES_256_HCTR2",
        }
    }

    /// Parses a google/fscrypt mode name.
    pub fn from_name(name: &str) -> Option<Mode> {
        (0..=10)
            .filter_map(|n| Mode::try_from(n).ok())
            .find(|m| m.name() == name)
    }
}

/// Policy options (`EncryptionOptions`).
#[derive(Clone, PartialEq, Eq, Message)]
pub struct EncryptionOptions {
    /// Filename padding: 4, 8, 16 or 32.
    #[prost(int64, tag = "1")]
    pub padding: i64,
    /// Contents mode ([`Mode`]).
    #[prost(enumeration = "Mode", tag = "2")]
    pub contents: i32,
    /// Filenames mode ([`Mode`]).
    #[prost(enumeration = "Mode", tag = "3")]
    pub filenames: i32,
    /// 1 or 2 (0 means 1).
    #[prost(int64, tag = "4")]
    pub policy_version: i64,
}

impl EncryptionOptions {
    /// google/fscrypt's defaults: padding 32, AES-256-XTS/AES-256-CTS, with
    /// the given policy version.
    pub fn defaults(policy_version: i64) -> EncryptionOptions {
        EncryptionOptions {
            padding: 32,
            contents: Mode::Aes256Xts as i32,
            filenames: Mode::Aes256Cts as i32,
            policy_version,
        }
    }

    /// The policy version, 0 read as 1.
    pub fn version(&self) -> i64 {
        if self.policy_version == 0 {
            1
        } else {
            self.policy_version
        }
    }
}

/// A policy key wrapped by one protector (`WrappedPolicyKey`).
#[derive(Clone, PartialEq, Eq, Message)]
pub struct WrappedPolicyKey {
    /// The protector.
    #[prost(string, tag = "1")]
    pub protector_descriptor: String,
    /// The 64-byte policy key wrapped by the protector key.
    #[prost(message, optional, tag = "2")]
    pub wrapped_key: Option<WrappedKeyData>,
}

/// A policy (`PolicyData`).
#[derive(Clone, PartialEq, Eq, Message)]
pub struct PolicyData {
    /// v1: 16 hex digits (descriptor); v2: 32 (key identifier).
    #[prost(string, tag = "1")]
    pub key_descriptor: String,
    /// Options.
    #[prost(message, optional, tag = "2")]
    pub options: Option<EncryptionOptions>,
    /// One slot per protector.
    #[prost(message, repeated, tag = "3")]
    pub wrapped_policy_keys: Vec<WrappedPolicyKey>,
}

fn bad(reason: impl Into<String>) -> Error {
    Error::Invalid(reason.into())
}

fn is_hex(s: &str, len: usize) -> bool {
    s.len() == len
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

impl HashingCosts {
    /// The parallelism Argon2 is run with: truncated to 8 bits unless
    /// `truncation_fixed`, as google/fscrypt does.
    pub fn effective_parallelism(&self) -> u32 {
        (self.parallelism as u8) as u32
    }

    /// google/fscrypt's checks: 1 <= p <= 255 (a larger p is accepted and
    /// truncated when `truncation_fixed` is false, unless it truncates to
    /// 0), 1 <= t, 8·p <= m; then the bounds every stored Argon2id cost
    /// of fscrypt-rs obeys (those of vault configs, from
    /// [`fscrypt_crypto::ARGON2_MAX_T_COST`],
    /// [`fscrypt_crypto::ARGON2_MAX_M_COST_KIB`] and
    /// [`fscrypt_crypto::ARGON2_MAX_WORK_KIB`]): t <= 1000, m <= 4 GiB,
    /// m·t <= 32 GiB, so that a damaged or planted protector or config is
    /// refused before any hashing instead of running for hours
    /// (google/fscrypt bounds only the type, 2^32). google/fscrypt's own
    /// calibration (1 s at most a fraction of the RAM) stays far below.
    ///
    /// # Errors
    /// [`Error::Invalid`] naming the cost.
    pub fn check(&self) -> Result<(), Error> {
        let p = self.effective_parallelism() as i64;
        if (self.parallelism < 1 || self.parallelism > MAX_PARALLELISM)
            && (self.truncation_fixed || p == 0)
        {
            return Err(bad(format!(
                "parallelism cost {} is out of range",
                self.parallelism
            )));
        }
        if self.time < 1 || self.time > u32::MAX as i64 {
            return Err(bad(format!("time cost {} is out of range", self.time)));
        }
        if self.memory < 8 * p || self.memory > u32::MAX as i64 {
            return Err(bad(format!(
                "memory cost {} KiB is out of range",
                self.memory
            )));
        }
        if self.time > i64::from(fscrypt_crypto::ARGON2_MAX_T_COST) {
            return Err(bad(format!(
                "time cost {} is more than the {} passes fscrypt-rs accepts",
                self.time,
                fscrypt_crypto::ARGON2_MAX_T_COST
            )));
        }
        if self.memory > i64::from(fscrypt_crypto::ARGON2_MAX_M_COST_KIB) {
            return Err(bad(format!(
                "memory cost {} KiB is more than the {} KiB fscrypt-rs accepts",
                self.memory,
                fscrypt_crypto::ARGON2_MAX_M_COST_KIB
            )));
        }
        if self.time as u64 * self.memory as u64 > fscrypt_crypto::ARGON2_MAX_WORK_KIB {
            return Err(bad(format!(
                "work time × memory ({} × {} KiB) is more than the {} KiB-passes fscrypt-rs \
                 accepts (it would take minutes)",
                self.time,
                self.memory,
                fscrypt_crypto::ARGON2_MAX_WORK_KIB
            )));
        }
        Ok(())
    }
}

impl WrappedKeyData {
    /// Non-empty key, 16-byte IV, 32-byte HMAC.
    ///
    /// # Errors
    /// [`Error::Invalid`].
    pub fn check(&self) -> Result<(), Error> {
        if self.encrypted_key.is_empty() {
            return Err(bad("wrapped key is empty"));
        }
        if self.iv.len() != IV_LEN {
            return Err(bad(format!("IV is {} bytes, not {IV_LEN}", self.iv.len())));
        }
        if self.hmac.len() != HMAC_LEN {
            return Err(bad(format!(
                "HMAC is {} bytes, not {HMAC_LEN}",
                self.hmac.len()
            )));
        }
        Ok(())
    }
}

impl ProtectorData {
    /// The source, or an error for an unknown number.
    pub fn source_type(&self) -> SourceType {
        SourceType::try_from(self.source).unwrap_or(SourceType::Default)
    }

    /// The wrapped protector key (present after [`ProtectorData::check`]).
    pub fn wrapped(&self) -> &WrappedKeyData {
        static EMPTY: WrappedKeyData = WrappedKeyData {
            iv: Vec::new(),
            encrypted_key: Vec::new(),
            hmac: Vec::new(),
        };
        self.wrapped_key.as_ref().unwrap_or(&EMPTY)
    }

    /// google/fscrypt's checks on a protector.
    ///
    /// # Errors
    /// [`Error::Invalid`] naming the field.
    pub fn check(&self) -> Result<(), Error> {
        match SourceType::try_from(self.source) {
            Ok(SourceType::Default) | Err(_) => {
                return Err(bad(format!("protector source {} is unknown", self.source)));
            }
            Ok(SourceType::PamPassphrase | SourceType::CustomPassphrase) => {
                if self.uid < 0 {
                    return Err(bad(format!("UID {} is negative", self.uid)));
                }
                self.costs
                    .as_ref()
                    .ok_or_else(|| bad("passphrase hashing costs are missing"))?
                    .check()?;
                if self.salt.len() != SALT_LEN {
                    return Err(bad(format!(
                        "salt is {} bytes, not {SALT_LEN}",
                        self.salt.len()
                    )));
                }
            }
            Ok(SourceType::RawKey) => {}
        }
        let w = self
            .wrapped_key
            .as_ref()
            .ok_or_else(|| bad("wrapped protector key is missing"))?;
        w.check()?;
        if !is_hex(&self.protector_descriptor, DESCRIPTOR_LEN_V1) {
            return Err(bad("protector descriptor is not 16 hex digits"));
        }
        if w.encrypted_key.len() != INTERNAL_KEY_LEN {
            return Err(bad("wrapped protector key is not 32 bytes"));
        }
        Ok(())
    }
}

impl EncryptionOptions {
    /// Padding 4/8/16/32, known modes, version 1 or 2.
    ///
    /// # Errors
    /// [`Error::Invalid`].
    pub fn check(&self) -> Result<(), Error> {
        if ![4, 8, 16, 32].contains(&self.padding) {
            return Err(bad(format!("padding {} is invalid", self.padding)));
        }
        for (what, m) in [("contents", self.contents), ("filenames", self.filenames)] {
            match Mode::try_from(m) {
                Ok(Mode::Default) | Err(_) => {
                    return Err(bad(format!("{what} encryption mode {m} is unknown")));
                }
                Ok(_) => {}
            }
        }
        if !matches!(self.version(), 1 | 2) {
            return Err(bad(format!(
                "policy version {} is invalid",
                self.policy_version
            )));
        }
        Ok(())
    }
}

impl PolicyData {
    /// The options (present after [`PolicyData::check`]).
    pub fn opts(&self) -> EncryptionOptions {
        self.options
            .clone()
            .unwrap_or_else(|| EncryptionOptions::defaults(1))
    }

    /// google/fscrypt's checks on a policy.
    ///
    /// # Errors
    /// [`Error::Invalid`] naming the field.
    pub fn check(&self) -> Result<(), Error> {
        for (i, slot) in self.wrapped_policy_keys.iter().enumerate() {
            let w = slot
                .wrapped_key
                .as_ref()
                .ok_or_else(|| bad(format!("policy key slot {i} is empty")))?;
            w.check()?;
            if w.encrypted_key.len() != POLICY_KEY_LEN {
                return Err(bad(format!("policy key slot {i} is not 64 bytes")));
            }
            if !is_hex(&slot.protector_descriptor, DESCRIPTOR_LEN_V1) {
                return Err(bad(format!("policy key slot {i} names no valid protector")));
            }
        }
        let o = self
            .options
            .as_ref()
            .ok_or_else(|| bad("policy options are missing"))?;
        o.check()?;
        let len = if o.version() == 1 {
            DESCRIPTOR_LEN_V1
        } else {
            DESCRIPTOR_LEN_V2
        };
        if !is_hex(&self.key_descriptor, len) {
            return Err(bad(format!("policy descriptor is not {len} hex digits")));
        }
        Ok(())
    }
}

/// A protector file's bytes, as written (no checks: [`ProtectorData::check`]
/// is the writer's, e.g. [`crate::store::Store::put_protector`]).
pub fn encode_protector(p: &ProtectorData) -> Vec<u8> {
    p.encode_to_vec()
}

/// A policy file's bytes, as written (no checks, as [`encode_protector`]).
pub fn encode_policy(p: &PolicyData) -> Vec<u8> {
    p.encode_to_vec()
}

/// Decodes and checks a protector file's bytes.
///
/// # Errors
/// [`Error::Invalid`] for undecodable or invalid bytes.
pub fn decode_protector(bytes: &[u8]) -> Result<ProtectorData, Error> {
    let p = ProtectorData::decode(bytes).map_err(|e| bad(format!("not a protector: {e}")))?;
    p.check()?;
    Ok(p)
}

/// Decodes and checks a policy file's bytes.
///
/// # Errors
/// [`Error::Invalid`] for undecodable or invalid bytes.
pub fn decode_policy(bytes: &[u8]) -> Result<PolicyData, Error> {
    let p = PolicyData::decode(bytes).map_err(|e| bad(format!("not a policy: {e}")))?;
    p.check()?;
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn costs(time: i64, memory: i64) -> HashingCosts {
        HashingCosts {
            time,
            memory,
            parallelism: 1,
            truncation_fixed: true,
        }
    }

    #[test]
    fn hashing_costs_are_bounded_like_vault_configs() {
        // google/fscrypt accepts all of these (below 2^32); fscrypt-rs
        // refuses them before hashing, as it does for vault configs.
        assert!(costs(1, 64).check().is_ok());
        assert!(costs(1000, 1 << 15).check().is_ok());
        assert!(costs(8, 4 << 20).check().is_ok());
        let refused = [
            costs(1001, 64),
            costs(1 << 31, 64),
            costs(1, (4 << 20) + 1),
            costs(9, 4 << 20),
            costs(1000, 1 << 16),
        ];
        for c in refused {
            let e = c.check().expect_err("out of bounds").to_string();
            assert!(e.contains("fscrypt-rs accepts"), "{e}");
            // No hashing either (it would take minutes or hours).
            let t = std::time::Instant::now();
            assert!(crate::keys::passphrase_hash(b"pw", &[0; 16], &c).is_err());
            assert!(t.elapsed() < std::time::Duration::from_secs(1));
        }
    }
}
