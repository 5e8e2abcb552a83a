//! No-key names: how an encrypted directory entry is presented, and looked up,
//! without the directory's key (spec §8).
//!
//! Kernel: `struct fscrypt_nokey_name`, `fscrypt_fname_disk_to_usr()`,
//! `fscrypt_setup_filename()`, `fscrypt_match_name()` and
//! `fscrypt_base64url_encode/decode()`, fs/crypto/fname.c (≥ 5.15).
//!
//! The current format (§8.1) is the unpadded base64url encoding of
//!
//! | off | size | field |
//! |----:|-----:|-------|
//! | 0 | 4 | dirhash\[0\] (`hash`), host order — little-endian here |
//! | 4 | 4 | dirhash\[1\] (`minor_hash`) |
//! | 8 | ≤ 149 | first ≤ 149 ciphertext bytes |
//! | 157 | 32 | SHA-256 of ciphertext\[149..\], only if the ciphertext is longer than 149 bytes |
//!
//! Sizes: 8 + |c| ≤ 157 bytes → ≤ 210 characters; long names 189 bytes → 252
//! characters (≤ NAME_MAX). The [`legacy`] module reads and writes the 5.6–5.14
//! and pre-5.6 encodings, which the kernel no longer accepts.

use core::fmt;

use crate::base64url;
use crate::error::{Base64Error, NoKeyError};

/// How many leading ciphertext bytes a no-key name carries in full.
pub const NOKEY_BYTES: usize = 149;
/// Offset of the ciphertext bytes in the decoded struct (after the dirhash).
const BYTES_OFFSET: usize = 8;
/// Offset of the SHA-256 field in the decoded struct.
const SHA256_OFFSET: usize = BYTES_OFFSET + NOKEY_BYTES; // 157
/// Size of the decoded struct of a long name (`FSCRYPT_NOKEY_NAME_MAX`).
pub const NOKEY_STRUCT_MAX: usize = SHA256_OFFSET + 32; // 189
/// Longest encoded no-key name in characters: ceil(189 * 4 / 3) = 252.
pub const NOKEY_NAME_MAX: usize = base64_len(NOKEY_STRUCT_MAX);

/// Characters needed to encode `n` bytes in unpadded base64: ceil(8n / 6)
/// ([`crate::base64url::encoded_len`]).
pub const fn base64_len(n: usize) -> usize {
    base64url::encoded_len(n)
}

/// [`base64url::decode`] (the kernel's rules) with its errors as no-key
/// name errors (`TooLong` when `out` overflows).
fn base64url_decode(src: &[u8], out: &mut [u8]) -> Result<usize, NoKeyError> {
    base64url::decode(src, out).map_err(|e| match e {
        Base64Error::OutputTooSmall => NoKeyError::TooLong(src.len()),
        _ => NoKeyError::BadEncoding,
    })
}

/// An encoded no-key name: a stack buffer of at most 252 ASCII characters.
/// Derefs to `str`.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct NoKeyNameBuf {
    buf: [u8; NOKEY_NAME_MAX],
    len: u8,
}

impl core::ops::Deref for NoKeyNameBuf {
    type Target = str;
    fn deref(&self) -> &str {
        // Only base64url alphabet bytes are ever written.
        core::str::from_utf8(&self.buf[..self.len as usize]).unwrap_or("")
    }
}

impl AsRef<[u8]> for NoKeyNameBuf {
    fn as_ref(&self) -> &[u8] {
        &self.buf[..self.len as usize]
    }
}

impl fmt::Debug for NoKeyNameBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}
impl fmt::Display for NoKeyNameBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self)
    }
}

/// Builds the decoded struct of spec §8.1 into `out`, returning its size.
fn nokey_struct(
    ciphertext: &[u8],
    hash: u32,
    minor_hash: u32,
    out: &mut [u8; NOKEY_STRUCT_MAX],
) -> usize {
    out[0..4].copy_from_slice(&hash.to_le_bytes());
    out[4..8].copy_from_slice(&minor_hash.to_le_bytes());
    if ciphertext.len() <= NOKEY_BYTES {
        out[BYTES_OFFSET..BYTES_OFFSET + ciphertext.len()].copy_from_slice(ciphertext);
        BYTES_OFFSET + ciphertext.len()
    } else {
        out[BYTES_OFFSET..SHA256_OFFSET].copy_from_slice(&ciphertext[..NOKEY_BYTES]);
        out[SHA256_OFFSET..].copy_from_slice(&fscrypt_crypto::sha256(&ciphertext[NOKEY_BYTES..]));
        NOKEY_STRUCT_MAX
    }
}

/// The no-key name of an on-disk ciphertext name (spec §8.1, Linux ≥ 5.15).
///
/// `hash`/`minor_hash` are the filesystem's dirhash words (0/0 for ext4 linear
/// directories and symlink targets; see spec §8.1). Any ciphertext length is
/// accepted; valid entries have 16..=255 bytes (symlink targets up to ~4 KiB).
/// Allocation-free.
///
/// Kernel: `fscrypt_fname_disk_to_usr()` without the key.
pub fn encode(ciphertext: &[u8], hash: u32, minor_hash: u32) -> NoKeyNameBuf {
    let mut s = [0u8; NOKEY_STRUCT_MAX];
    let size = nokey_struct(ciphertext, hash, minor_hash, &mut s);
    let mut buf = [0u8; NOKEY_NAME_MAX];
    let len = base64url::encode(&s[..size], &mut buf);
    NoKeyNameBuf {
        buf,
        len: len as u8,
    }
}

/// A decoded no-key name (spec §8.1): the dirhash words plus either the full
/// ciphertext (≤ 149 bytes) or its first 149 bytes and the SHA-256 of the rest.
#[derive(Clone, PartialEq, Eq)]
#[doc(alias = "fscrypt_nokey_name")]
pub struct NoKeyName {
    /// dirhash\[0\] (the filesystem's major hash).
    pub hash: u32,
    /// dirhash\[1\] (the filesystem's minor hash).
    pub minor_hash: u32,
    bytes: [u8; NOKEY_BYTES],
    bytes_len: u8,
    sha256: Option<[u8; 32]>,
}

impl fmt::Debug for NoKeyName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NoKeyName")
            .field("hash", &format_args!("{:#010x}", self.hash))
            .field("minor_hash", &format_args!("{:#010x}", self.minor_hash))
            .field("bytes_len", &self.bytes_len)
            .field("long", &self.sha256.is_some())
            .finish()
    }
}

impl NoKeyName {
    /// Decodes a presented no-key name (spec §8.1 "Lookup").
    ///
    /// # Errors
    /// [`NoKeyError::TooLong`] (> 252 characters), [`NoKeyError::BadEncoding`]
    /// (character outside base64url, or non-zero leftover bits),
    /// [`NoKeyError::BadDecodedSize`] (not 9..=157 or 189 bytes). The kernel
    /// answers all of them with ENOENT.
    pub fn decode(name: &[u8]) -> Result<NoKeyName, NoKeyError> {
        if name.len() > NOKEY_NAME_MAX {
            return Err(NoKeyError::TooLong(name.len()));
        }
        let mut s = [0u8; NOKEY_STRUCT_MAX];
        let size = base64url_decode(name, &mut s)?;
        Self::from_struct(&s[..size])
    }

    fn from_struct(s: &[u8]) -> Result<NoKeyName, NoKeyError> {
        let size = s.len();
        if size < BYTES_OFFSET + 1 || (size > SHA256_OFFSET && size != NOKEY_STRUCT_MAX) {
            return Err(NoKeyError::BadDecodedSize(size));
        }
        let hash = u32::from_le_bytes([s[0], s[1], s[2], s[3]]);
        let minor_hash = u32::from_le_bytes([s[4], s[5], s[6], s[7]]);
        let mut bytes = [0u8; NOKEY_BYTES];
        let (bytes_len, sha256) = if size == NOKEY_STRUCT_MAX {
            bytes.copy_from_slice(&s[BYTES_OFFSET..SHA256_OFFSET]);
            let mut d = [0u8; 32];
            d.copy_from_slice(&s[SHA256_OFFSET..]);
            (NOKEY_BYTES, Some(d))
        } else {
            let n = size - BYTES_OFFSET;
            bytes[..n].copy_from_slice(&s[BYTES_OFFSET..]);
            (n, None)
        };
        Ok(NoKeyName {
            hash,
            minor_hash,
            bytes,
            bytes_len: bytes_len as u8,
            sha256,
        })
    }

    /// The full ciphertext when the name carries all of it (≤ 149 bytes), else
    /// `None` (a long name carries a SHA-256 of its tail instead).
    pub fn ciphertext(&self) -> Option<&[u8]> {
        match self.sha256 {
            None => Some(&self.bytes[..self.bytes_len as usize]),
            Some(_) => None,
        }
    }

    /// The ciphertext bytes carried in full (all of a short name, the first 149
    /// bytes of a long one).
    pub fn ciphertext_prefix(&self) -> &[u8] {
        &self.bytes[..self.bytes_len as usize]
    }

    /// Whether a directory entry with this on-disk `ciphertext` name is the one
    /// the no-key name refers to (kernel `fscrypt_match_name()`): an exact
    /// compare for short names; for long names the first 149 bytes and the
    /// SHA-256 of the remainder.
    pub fn matches(&self, ciphertext: &[u8]) -> bool {
        match &self.sha256 {
            None => ciphertext == self.ciphertext_prefix(),
            Some(digest) => {
                ciphertext.len() > NOKEY_BYTES
                    && ciphertext[..NOKEY_BYTES] == self.bytes[..]
                    && fscrypt_crypto::sha256(&ciphertext[NOKEY_BYTES..]) == *digest
            }
        }
    }

    /// Re-encodes the name (the inverse of [`NoKeyName::decode`]).
    pub fn encode(&self) -> NoKeyNameBuf {
        let mut s = [0u8; NOKEY_STRUCT_MAX];
        s[0..4].copy_from_slice(&self.hash.to_le_bytes());
        s[4..8].copy_from_slice(&self.minor_hash.to_le_bytes());
        let n = self.bytes_len as usize;
        s[BYTES_OFFSET..BYTES_OFFSET + n].copy_from_slice(&self.bytes[..n]);
        let size = match &self.sha256 {
            Some(d) => {
                s[SHA256_OFFSET..].copy_from_slice(d);
                NOKEY_STRUCT_MAX
            }
            None => BYTES_OFFSET + n,
        };
        let mut buf = [0u8; NOKEY_NAME_MAX];
        let len = base64url::encode(&s[..size], &mut buf);
        NoKeyNameBuf {
            buf,
            len: len as u8,
        }
    }
}

/// The no-key name encodings older kernels used (spec §8.2, §8.3), for reading
/// old logs and for compatibility tests. The kernel accepts neither today.
///
/// Both use fscrypt's historical "base64": alphabet `A–Z a–z 0–9 + ,`,
/// LSB-first bit packing, no padding.
pub mod legacy {
    use super::{BYTES_OFFSET, NOKEY_STRUCT_MAX, NoKeyName, nokey_struct};
    use crate::error::NoKeyError;

    const TABLE: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+,";

    /// Encodes `src` with the historical LSB-first alphabet.
    pub fn base64_encode(src: &[u8]) -> String {
        let mut out = String::with_capacity(super::base64_len(src.len()));
        let mut ac: u32 = 0;
        let mut bits = 0u32;
        for &b in src {
            ac |= (b as u32) << bits;
            bits += 8;
            loop {
                out.push(TABLE[(ac & 0x3f) as usize] as char);
                ac >>= 6;
                bits -= 6;
                if bits < 6 {
                    break;
                }
            }
        }
        if bits > 0 {
            out.push(TABLE[(ac & 0x3f) as usize] as char);
        }
        out
    }

    /// Decodes the historical LSB-first alphabet.
    ///
    /// # Errors
    /// [`NoKeyError::BadEncoding`] for a character outside the alphabet or
    /// non-zero leftover bits.
    pub fn base64_decode(src: &[u8]) -> Result<Vec<u8>, NoKeyError> {
        let mut out = Vec::with_capacity(src.len() * 3 / 4);
        let mut ac: u32 = 0;
        let mut bits = 0u32;
        for &c in src {
            let v = TABLE
                .iter()
                .position(|&t| t == c)
                .ok_or(NoKeyError::BadEncoding)?;
            ac |= (v as u32) << bits;
            bits += 6;
            if bits >= 8 {
                out.push(ac as u8);
                ac >>= 8;
                bits -= 8;
            }
        }
        if ac != 0 {
            return Err(NoKeyError::BadEncoding);
        }
        Ok(out)
    }

    /// The 5.6–5.14 no-key name: the §8.1 struct in the historical encoding.
    pub fn encode_v5_6(ciphertext: &[u8], hash: u32, minor_hash: u32) -> String {
        let mut s = [0u8; NOKEY_STRUCT_MAX];
        let size = nokey_struct(ciphertext, hash, minor_hash, &mut s);
        base64_encode(&s[..size])
    }

    /// Decodes a 5.6–5.14 no-key name into the same struct as the current one.
    ///
    /// # Errors
    /// As [`NoKeyName::decode`].
    pub fn decode_v5_6(name: &[u8]) -> Result<NoKeyName, NoKeyError> {
        if name.len() > super::NOKEY_NAME_MAX {
            return Err(NoKeyError::TooLong(name.len()));
        }
        NoKeyName::from_struct(&base64_decode(name)?)
    }

    /// Offset of the digest block of a pre-5.6 long name: the second-to-last
    /// 16-byte CTS block, `16 * floor((len - 17) / 16)`.
    fn digest_offset(len: usize) -> usize {
        16 * ((len - 17) / 16)
    }

    /// The pre-5.6 ("digested") no-key name (spec §8.3): the encoded
    /// ciphertext when it has at most 32 bytes, else `'_'` followed by the
    /// encoding of `hash ‖ minor_hash ‖ digest` (24 bytes, 33 characters).
    pub fn encode_pre_5_6(ciphertext: &[u8], hash: u32, minor_hash: u32) -> String {
        if ciphertext.len() <= 32 {
            return base64_encode(ciphertext);
        }
        let off = digest_offset(ciphertext.len());
        let mut d = [0u8; 24];
        d[0..4].copy_from_slice(&hash.to_le_bytes());
        d[4..8].copy_from_slice(&minor_hash.to_le_bytes());
        d[8..24].copy_from_slice(&ciphertext[off..off + 16]);
        let mut s = String::from("_");
        s.push_str(&base64_encode(&d));
        s
    }

    /// A decoded pre-5.6 no-key name.
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub enum DigestedName {
        /// A name of at most 32 ciphertext bytes, carried in full.
        Full(Vec<u8>),
        /// A longer name: dirhash words and the second-to-last CTS block.
        Digested {
            /// Major hash.
            hash: u32,
            /// Minor hash.
            minor_hash: u32,
            /// Ciphertext bytes `[off..off + 16]` (see spec §8.3).
            digest: [u8; 16],
        },
    }

    impl DigestedName {
        /// Whether the on-disk `ciphertext` name has this pre-5.6 no-key name.
        pub fn matches(&self, ciphertext: &[u8]) -> bool {
            match self {
                DigestedName::Full(c) => c == ciphertext,
                DigestedName::Digested { digest, .. } => {
                    ciphertext.len() > 32 && {
                        let off = digest_offset(ciphertext.len());
                        ciphertext[off..off + 16] == digest[..]
                    }
                }
            }
        }
    }

    /// Decodes a pre-5.6 no-key name.
    ///
    /// # Errors
    /// [`NoKeyError::BadEncoding`]; [`NoKeyError::BadDecodedSize`] for a
    /// digested name that is not 24 bytes or a full name outside 16..=32 bytes.
    pub fn decode_pre_5_6(name: &[u8]) -> Result<DigestedName, NoKeyError> {
        if let Some(rest) = name.strip_prefix(b"_") {
            let d = base64_decode(rest)?;
            if d.len() != 24 {
                return Err(NoKeyError::BadDecodedSize(d.len()));
            }
            let mut digest = [0u8; 16];
            digest.copy_from_slice(&d[BYTES_OFFSET..]);
            Ok(DigestedName::Digested {
                hash: u32::from_le_bytes([d[0], d[1], d[2], d[3]]),
                minor_hash: u32::from_le_bytes([d[4], d[5], d[6], d[7]]),
                digest,
            })
        } else {
            let c = base64_decode(name)?;
            if !(16..=32).contains(&c.len()) {
                return Err(NoKeyError::BadDecodedSize(c.len()));
            }
            Ok(DigestedName::Full(c))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64url_round_trip_all_lengths() {
        for n in 0..=NOKEY_STRUCT_MAX {
            let src: Vec<u8> = (0..n).map(|i| (i * 37 + 11) as u8).collect();
            let mut enc = [0u8; NOKEY_NAME_MAX];
            let len = base64url::encode(&src, &mut enc);
            assert_eq!(len, base64_len(n));
            let mut dec = [0u8; NOKEY_STRUCT_MAX];
            let m = base64url_decode(&enc[..len], &mut dec).unwrap();
            assert_eq!(&dec[..m], &src[..]);
        }
        assert_eq!(NOKEY_NAME_MAX, 252);
    }

    #[test]
    fn decode_rejects() {
        assert_eq!(
            NoKeyName::decode(b"AAAA!AAAAAAAA"),
            Err(NoKeyError::BadEncoding)
        );
        // "AB" = 000000 000001: 8 bits out, 4 leftover bits "0001" are non-zero.
        assert_eq!(
            base64url_decode(b"AB", &mut [0u8; 4]),
            Err(NoKeyError::BadEncoding)
        );
        assert_eq!(
            NoKeyName::decode(b"AAAAAAAAAAA"),
            Err(NoKeyError::BadDecodedSize(8))
        );
        assert_eq!(
            NoKeyName::decode(&[b'A'; 253]),
            Err(NoKeyError::TooLong(253))
        );
        // 158 decoded bytes: between 157 and 189.
        let mut buf = [0u8; NOKEY_NAME_MAX];
        let n = base64url::encode(&[1u8; 158], &mut buf);
        assert_eq!(
            NoKeyName::decode(&buf[..n]),
            Err(NoKeyError::BadDecodedSize(158))
        );
    }

    #[test]
    fn legacy_base64_round_trip() {
        for n in 0..64 {
            let src: Vec<u8> = (0..n).map(|i| (i * 91 + 3) as u8).collect();
            assert_eq!(
                legacy::base64_decode(legacy::base64_encode(&src).as_bytes()).unwrap(),
                src
            );
        }
    }
}
