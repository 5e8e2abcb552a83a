//! Hashes, MACs and KDF building blocks fscrypt needs besides the ciphers:
//! SHA-256 (ESSIV, v1 key descriptors), HMAC-SHA512 / HKDF-SHA512 (v2 key
//! hierarchy, spec §4.3), SipHash-2-4 (dirhash and IV_INO_LBLK_32, spec §5, §9),
//! AES-128-ECB (v1 KDF, spec §4.2) and AES-256-CMAC (the xfstests model of the
//! hardware-wrapped-key KDF, spec §4.6).
//!
//! All are thin wrappers over RustCrypto crates except CMAC, which is the
//! RFC 4493 mode over RustCrypto AES-256.

#![forbid(unsafe_code)]

use core::fmt;
use core::hash::Hasher;

use aes::{Aes128, Aes256};
use cipher::{BlockCipherEncrypt, KeyInit};
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256, Sha512};
use zeroize::Zeroize;

use crate::block::{Block, as_blocks_mut, load, store};
use crate::{Error, SecretBox, scrub_stack};

/// SHA-256 of `data` (FIPS 180-4). Returns the 32-byte digest.
pub fn sha256(data: &[u8]) -> [u8; 32] {
    Sha256::digest(data).into()
}

/// SHA-512 of `data` (FIPS 180-4). Returns the 64-byte digest. Used for the
/// e4crypt-style v1 key descriptor (spec §4.2), not by the kernel format.
pub fn sha512(data: &[u8]) -> [u8; 64] {
    Sha512::digest(data).into()
}

/// HMAC-SHA512 (RFC 2104) of `data` under `key` (any length). Returns the
/// 64-byte tag. Source: the HKDF building block of spec §4.3.
pub fn hmac_sha512(key: &[u8], data: &[u8]) -> [u8; 64] {
    // `new_from_slice` accepts every key length for HMAC.
    let mut mac = match <Hmac<Sha512> as hmac::KeyInit>::new_from_slice(key) {
        Ok(m) => m,
        Err(_) => unreachable_hmac(),
    };
    mac.update(data);
    mac.finalize().into_bytes().into()
}

#[cold]
fn unreachable_hmac() -> ! {
    // HMAC accepts keys of any length (RFC 2104 §2), so `InvalidLength` cannot occur.
    unreachable!("HMAC accepts keys of every length")
}

/// Maximum HKDF-SHA512 output: 255 × 64 bytes (RFC 5869 §2.3).
pub const HKDF_SHA512_MAX_OUTPUT: usize = 255 * 64;

/// An HKDF-SHA512 pseudorandom key (RFC 5869), ready to expand.
///
/// fscrypt v2 extracts once per master key with an all-zero 64-byte salt
/// (spec §4.3, §14 item 2) and then expands with `info = "fscrypt\0" ‖ ctx ‖ …`.
/// The HMAC state keyed with the PRK (key-equivalent) lives in locked,
/// dump-excluded memory ([`SecretBox`]) and is zeroized on drop; `Debug`
/// is redacted.
pub struct HkdfSha512 {
    hkdf: SecretBox<hkdf::Hkdf<Sha512>>,
}

impl Clone for HkdfSha512 {
    fn clone(&self) -> Self {
        let hkdf = SecretBox::new((*self.hkdf).clone());
        scrub_stack();
        HkdfSha512 { hkdf }
    }
}

impl HkdfSha512 {
    /// HKDF-Extract(salt, ikm) (RFC 5869 §2.2). An empty salt means
    /// "HashLen zero bytes", exactly as RFC 5869 specifies.
    pub fn extract(salt: &[u8], ikm: &[u8]) -> Self {
        let salt = if salt.is_empty() { None } else { Some(salt) };
        let hkdf = {
            let (mut prk, hkdf) = hkdf::Hkdf::<Sha512>::extract(salt, ikm);
            prk.as_mut_slice().zeroize();
            SecretBox::new(hkdf)
        };
        scrub_stack();
        HkdfSha512 { hkdf }
    }

    /// Builds the expander from a 64-byte PRK (e.g. one that was cached).
    ///
    /// # Errors
    /// [`Error::InvalidKeyLength`] if `prk` is shorter than 64 bytes.
    pub fn from_prk(prk: &[u8]) -> Result<Self, Error> {
        let hkdf = hkdf::Hkdf::<Sha512>::from_prk(prk)
            .map(SecretBox::new)
            .map_err(|_| Error::InvalidKeyLength {
                algorithm: "HKDF-SHA512 PRK",
                expected: 64,
                actual: prk.len(),
            });
        scrub_stack();
        Ok(HkdfSha512 { hkdf: hkdf? })
    }

    /// Address of the HMAC state, for the test that it lies in locked memory.
    #[cfg(test)]
    pub(crate) fn state_addr(&self) -> usize {
        &*self.hkdf as *const hkdf::Hkdf<Sha512> as usize
    }

    /// HKDF-Expand(PRK, info, L = okm.len()) (RFC 5869 §2.3), where `info` is
    /// the concatenation of the parts. Fills `okm`; no heap allocation.
    ///
    /// # Errors
    /// [`Error::HkdfOutputTooLong`] if `okm.len() > 16320`.
    pub fn expand(&self, info: &[&[u8]], okm: &mut [u8]) -> Result<(), Error> {
        self.hkdf
            .expand_multi_info(info, okm)
            .map_err(|_| Error::HkdfOutputTooLong {
                max: HKDF_SHA512_MAX_OUTPUT,
                requested: okm.len(),
            })
    }
}

impl fmt::Debug for HkdfSha512 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("HkdfSha512 { prk: <redacted> }")
    }
}

/// SipHash-2-4 (Aumasson & Bernstein) of `data` under a 16-byte key; returns
/// the 64-bit output (serialize it little-endian to get the reference
/// vectors' bytes). Source: spec §5 (IV_INO_LBLK_32 inode hash) and §9 (dirhash).
pub fn siphash24(key: &[u8; 16], data: &[u8]) -> u64 {
    let mut h = siphasher::sip::SipHasher24::new_with_key(key);
    h.write(data);
    h.finish()
}

/// AES-128-ECB encryption in place (v1 KDF, spec §4.2): each 16-byte block is
/// encrypted independently with `key`.
///
/// # Errors
/// [`Error::NotBlockAligned`] if `data.len()` is not a multiple of 16.
pub fn aes128_ecb_encrypt(key: &[u8; 16], data: &mut [u8]) -> Result<(), Error> {
    if !data.len().is_multiple_of(16) {
        return Err(Error::NotBlockAligned {
            algorithm: "AES-128-ECB",
            block: 16,
            actual: data.len(),
        });
    }
    let cipher = Aes128::new(&(*key).into());
    let (blocks, _) = as_blocks_mut(data);
    cipher.encrypt_blocks(blocks);
    Ok(())
}

/// CMAC subkey doubling (RFC 4493 §2.3): big-endian shift left by one,
/// XOR 0x87 into the last byte if the top bit was set.
fn cmac_dbl(b: u128) -> u128 {
    (b << 1) ^ ((b >> 127) * 0x87)
}

/// AES-256-CMAC (NIST SP 800-38B, RFC 4493 with a 256-bit key) of `data`;
/// returns the 16-byte tag. Used to model the hardware-wrapped-key KDF of
/// xfstests (spec §4.6).
pub fn aes256_cmac(key: &[u8; 32], data: &[u8]) -> [u8; 16] {
    let cipher = Aes256::new(&(*key).into());
    let mut l = Block::default();
    cipher.encrypt_block(&mut l);
    // CMAC works on big-endian integers.
    let k1 = cmac_dbl(u128::from_be_bytes(l.0));
    let k2 = cmac_dbl(k1);
    let n = data.len().div_ceil(16).max(1);
    let mut x = Block::default();
    for (i, chunk) in data.chunks(16).enumerate() {
        let mut m = [0u8; 16];
        m[..chunk.len()].copy_from_slice(chunk);
        let mut mv = u128::from_be_bytes(m);
        if i == n - 1 {
            if chunk.len() == 16 {
                mv ^= k1;
            } else {
                m[chunk.len()] = 0x80;
                mv = u128::from_be_bytes(m) ^ k2;
            }
        }
        let v = load(&x) ^ u128::from_le_bytes(mv.to_be_bytes());
        store(&mut x, v);
        cipher.encrypt_block(&mut x);
    }
    if data.is_empty() {
        let mut m = [0u8; 16];
        m[0] = 0x80;
        let mv = u128::from_be_bytes(m) ^ k2;
        x = Block::from(mv.to_be_bytes());
        cipher.encrypt_block(&mut x);
    }
    x.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(s: &str) -> Vec<u8> {
        hex::decode(s.replace(' ', "")).unwrap()
    }

    /// NIST SP 800-38B Appendix D.3 (AES-256 examples 1–4).
    #[test]
    fn cmac_aes256_nist_examples() {
        let key: [u8; 32] =
            h("603deb10 15ca71be 2b73aef0 857d7781 1f352c07 3b6108d7 2d9810a3 0914dff4")
                .try_into()
                .unwrap();
        let msg = h(
            "6bc1bee2 2e409f96 e93d7e11 7393172a ae2d8a57 1e03ac9c 9eb76fac 45af8e51 \
                     30c81c46 a35ce411 e5fbc119 1a0a52ef f69f2445 df4f9b17 ad2b417b e66c3710",
        );
        let cases = [
            (0, "028962f6 1b7bf89e fc6b551f 4667d983"),
            (16, "28a7023f 452e8f82 bd4bf28d 8c37c35c"),
            (40, "aaf3d8f1 de5640c2 32f5b169 b9c911e6"),
            (64, "e1992190 549f6ed5 696a2c05 6c315410"),
        ];
        for (len, tag) in cases {
            assert_eq!(aes256_cmac(&key, &msg[..len]).to_vec(), h(tag), "len {len}");
        }
    }

    /// FIPS-197 Appendix C.1 (AES-128), twice to check multi-block ECB.
    #[test]
    fn ecb_fips197() {
        let key: [u8; 16] = h("000102030405060708090a0b0c0d0e0f").try_into().unwrap();
        let mut data = h("00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff");
        aes128_ecb_encrypt(&key, &mut data).unwrap();
        let ct = h("69c4e0d86a7b0430d8cdb78070b4c55a");
        assert_eq!(&data[..16], &ct[..]);
        assert_eq!(&data[16..], &ct[..]);
        assert!(matches!(
            aes128_ecb_encrypt(&key, &mut [0u8; 17]),
            Err(Error::NotBlockAligned { .. })
        ));
    }

    /// FIPS 180-4 example "abc".
    #[test]
    fn sha256_abc() {
        assert_eq!(
            sha256(b"abc").to_vec(),
            h("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        );
    }

    #[test]
    fn hkdf_output_limit() {
        let k = HkdfSha512::extract(&[], b"ikm");
        let mut big = vec![0u8; HKDF_SHA512_MAX_OUTPUT + 1];
        assert!(matches!(
            k.expand(&[b"x"], &mut big),
            Err(Error::HkdfOutputTooLong { .. })
        ));
        assert!(
            k.expand(&[b"x"], &mut big[..HKDF_SHA512_MAX_OUTPUT])
                .is_ok()
        );
        assert!(format!("{k:?}").contains("redacted"));
    }
}
