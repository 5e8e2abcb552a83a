//! POLYVAL-then-AES-256: the deterministic MAC of the authenticated vault
//! format (fscrypt-rs's own, never the kernel's; design in
//! `docs/vault-format.md` §4b.2; the choice: `docs/design/vault-format-3.md`).
//!
//! The tag is AES-GCM-SIV's (RFC 8452 §4) without its per-nonce key
//! derivation and without encryption: `S = POLYVAL_H(pad16(aad) ‖
//! pad16(msg) ‖ le64(8·|aad|) ‖ le64(8·|msg|))`, `S ^= nonce ‖ 0⁴`, the top
//! bit of `S`'s last byte cleared, `tag = AES-256_K(S)`. With the record
//! keys of an RFC 8452 vector as `(H, K)` it gives that vector's tag (the
//! tests check Appendix C.2). A universal hash followed by a block cipher is
//! a PRF on distinct inputs up to the birthday bound (`q²·ℓ/2^128` for `q`
//! tags over messages of `ℓ` blocks), so a fixed (zero) nonce is safe: the
//! vault puts what makes each input unique (object nonce, unit index,
//! state) into `aad`.
//!
//! Block cipher and universal hash from RustCrypto (`aes`, `polyval`, the
//! crates HCTR2 uses); the composition is ours.

#![forbid(unsafe_code)]

use cipher::{BlockCipherEncrypt, KeyInit};
use polyval::Polyval;
use polyval::universal_hash::UniversalHash;
use zeroize::Zeroize;

use crate::Error;
use crate::block::Block;

/// Key size of [`PolyvalAes256Mac`], bytes: the 16-byte POLYVAL key `H`
/// followed by the 32-byte AES-256 key `K`.
pub const MAC_KEY_SIZE: usize = 48;

/// Tag size, bytes.
pub const MAC_TAG_SIZE: usize = 16;

/// Display name of the MAC algorithm, as error messages, `fscrypt-rs
/// providers` and `fscrypt-rs bench` show it.
pub const MAC_ALGORITHM_NAME: &str = "POLYVAL-AES-256-MAC";

/// A keyed POLYVAL-then-AES-256 MAC (module docs). Cloning-free and
/// allocation-free per tag; the POLYVAL key and the AES key schedule are
/// zeroized on drop (RustCrypto's `zeroize` features).
pub struct PolyvalAes256Mac {
    polyval: Polyval,
    aes: aes::Aes256,
}

impl PolyvalAes256Mac {
    /// Keys the MAC with `key` = `H (16) ‖ K (32)`.
    ///
    /// # Errors
    /// [`Error::InvalidKeyLength`] unless `key` is [`MAC_KEY_SIZE`] bytes.
    pub fn new(key: &[u8]) -> Result<Self, Error> {
        let (Some(h), Some(k)) = (key.get(..16), key.get(16..)) else {
            return Err(bad_length(key.len()));
        };
        if key.len() != MAC_KEY_SIZE {
            return Err(bad_length(key.len()));
        }
        let mut h = Block::try_from(h).map_err(|_| bad_length(key.len()))?;
        let polyval = Polyval::new(&h);
        h.zeroize();
        let aes = aes::Aes256::new_from_slice(k).map_err(|_| bad_length(key.len()))?;
        Ok(PolyvalAes256Mac { polyval, aes })
    }

    /// The tag of `(aad, msg)` with the zero nonce: what the vault format
    /// stores. `aad` and `msg` may have any length (each is zero-padded to
    /// 16 bytes and both lengths are hashed, so `(a, b)` and `(a ‖ b, "")`
    /// differ).
    pub fn tag(&self, aad: &[u8], msg: &[u8]) -> [u8; MAC_TAG_SIZE] {
        self.tag_with_nonce(&[0; 12], aad, msg)
    }

    /// The tag with a 12-byte `nonce` XORed in before the block cipher, as
    /// in AES-GCM-SIV (RFC 8452 §4); exists so the RFC's vectors test this
    /// code.
    pub fn tag_with_nonce(&self, nonce: &[u8; 12], aad: &[u8], msg: &[u8]) -> [u8; MAC_TAG_SIZE] {
        let mut p = self.polyval.clone();
        p.update_padded(aad);
        p.update_padded(msg);
        let mut lengths = Block::default();
        lengths[..8].copy_from_slice(&bit_len(aad).to_le_bytes());
        lengths[8..].copy_from_slice(&bit_len(msg).to_le_bytes());
        p.update(core::slice::from_ref(&lengths));
        let mut s = p.finalize();
        for (b, n) in s.iter_mut().zip(nonce) {
            *b ^= n;
        }
        s[15] &= 0x7f;
        self.aes.encrypt_block(&mut s);
        let mut out = [0; MAC_TAG_SIZE];
        out.copy_from_slice(&s);
        s.zeroize();
        out
    }
}

/// A keyed MAC implementation: what a registry
/// [`crate::registry::MacKeyConstructor`] returns. Implementations must not
/// allocate per tag and must zeroize their key material on drop.
pub trait MacKey: Send + Sync {
    /// The 16-byte tag of `(aad, msg)` with `nonce` XORed in before the
    /// final block cipher call (module docs).
    fn tag_with_nonce(&self, nonce: &[u8; 12], aad: &[u8], msg: &[u8]) -> [u8; MAC_TAG_SIZE];
}

impl MacKey for PolyvalAes256Mac {
    fn tag_with_nonce(&self, nonce: &[u8; 12], aad: &[u8], msg: &[u8]) -> [u8; MAC_TAG_SIZE] {
        PolyvalAes256Mac::tag_with_nonce(self, nonce, aad, msg)
    }
}

/// A MAC key prepared once by the implementation the registry selected
/// (self-tested, no refused property), kept in locked, dump-excluded memory:
/// the MAC counterpart of [`crate::PreparedKey`].
pub struct PreparedMac {
    implementation: &'static str,
    inner: crate::SecretBox<dyn MacKey>,
}

impl PreparedMac {
    /// Prepares `key` ([`MAC_KEY_SIZE`] bytes) with the implementation
    /// selected from the [default registry](crate::registry::default_registry).
    ///
    /// # Errors
    /// [`Error::InvalidKeyLength`]; [`Error::NoMacImplementation`] when every
    /// implementation is refused or failed its self-test.
    pub fn new(key: &[u8]) -> Result<PreparedMac, Error> {
        crate::registry::default_registry().prepare_mac(key)
    }

    pub(crate) fn from_parts(
        implementation: &'static str,
        inner: crate::SecretBox<dyn MacKey>,
    ) -> PreparedMac {
        PreparedMac {
            implementation,
            inner,
        }
    }

    /// The name of the implementation in use.
    pub fn implementation_name(&self) -> &'static str {
        self.implementation
    }

    /// The tag of `(aad, msg)` with the zero nonce (what the vault stores).
    pub fn tag(&self, aad: &[u8], msg: &[u8]) -> [u8; MAC_TAG_SIZE] {
        self.inner.tag_with_nonce(&[0; 12], aad, msg)
    }

    /// Whether `stored` (a 1..=16-byte prefix of a tag) is the tag of
    /// `(aad, msg)`; constant-time comparison.
    pub fn verify(&self, aad: &[u8], msg: &[u8], stored: &[u8]) -> bool {
        let full = self.tag(aad, msg);
        match full.get(..stored.len()) {
            Some(prefix) if !stored.is_empty() => {
                subtle::ConstantTimeEq::ct_eq(prefix, stored).into()
            }
            _ => false,
        }
    }
}

impl core::fmt::Debug for PreparedMac {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("PreparedMac")
            .field("implementation", &self.implementation)
            .finish_non_exhaustive()
    }
}

impl core::fmt::Debug for PolyvalAes256Mac {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("PolyvalAes256Mac { .. }")
    }
}

fn bit_len(data: &[u8]) -> u64 {
    (data.len() as u64).wrapping_mul(8)
}

fn bad_length(actual: usize) -> Error {
    Error::InvalidKeyLength {
        algorithm: MAC_ALGORITHM_NAME,
        expected: MAC_KEY_SIZE,
        actual,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 8452 §4's derivation of the record keys from a key-generating
    /// key and a nonce (AES-256): counters 0..1 give `H`, 2..5 give `K`,
    /// 8 bytes of each block. Test-only: it turns the RFC's end-to-end
    /// vectors into `(H, K)` for [`PolyvalAes256Mac`].
    fn record_keys(kgk: &[u8; 32], nonce: &[u8; 12]) -> [u8; MAC_KEY_SIZE] {
        let aes = aes::Aes256::new_from_slice(kgk).unwrap();
        let mut out = [0; MAC_KEY_SIZE];
        for (i, chunk) in out.chunks_mut(8).enumerate() {
            let mut b = Block::default();
            b[..4].copy_from_slice(&(i as u32).to_le_bytes());
            b[4..].copy_from_slice(nonce);
            aes.encrypt_block(&mut b);
            chunk.copy_from_slice(&b[..8]);
        }
        out
    }

    fn unhex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    /// RFC 8452 Appendix C.2 (AEAD_AES_256_GCM_SIV): key, nonce, AAD,
    /// plaintext and the result (ciphertext ‖ tag).
    const RFC8452_C2: &[(&str, &str, &str, &str, &str)] = &[
        (
            "0100000000000000000000000000000000000000000000000000000000000000",
            "030000000000000000000000",
            "",
            "",
            "07f5f4169bbf55a8400cd47ea6fd400f",
        ),
        (
            "0100000000000000000000000000000000000000000000000000000000000000",
            "030000000000000000000000",
            "01",
            "0200000000000000",
            "1de22967237a813291213f267e3b452f02d01ae33e4ec854",
        ),
        (
            "e66021d5eb8e4f4066d4adb9c33560e4f46e44bb3da0015c94f7088736864200",
            "e0eaf5284d884a0e77d31646",
            "",
            "",
            "169fbb2fbf389a995f6390af22228a62",
        ),
        (
            "3c535de192eaed3822a2fbbe2ca9dfc88255e14a661b8aa82cc54236093bbc23",
            "688089e55540db1872504e1c",
            "734320ccc9d9bbbb19cb81b2af4ecbc3e72834321f7aa0f70b7282b4f33df23f167541",
            "ced532ce4159b035277d4dfbb7db62968b13cd4eec",
            "626660c26ea6612fb17ad91e8e767639edd6c9faee9d6c7029675b89eaf4ba1ded1a286594",
        ),
    ];

    #[test]
    fn rfc8452_appendix_c2_tags() {
        for (kgk, nonce, aad, pt, result) in RFC8452_C2 {
            let kgk: [u8; 32] = unhex(kgk).try_into().unwrap();
            let nonce: [u8; 12] = unhex(nonce).try_into().unwrap();
            let mac = PolyvalAes256Mac::new(&record_keys(&kgk, &nonce)).unwrap();
            let tag = mac.tag_with_nonce(&nonce, &unhex(aad), &unhex(pt));
            let result = unhex(result);
            assert_eq!(&tag[..], &result[result.len() - 16..], "vector {kgk:02x?}");
        }
    }

    #[test]
    fn every_input_bit_and_the_split_change_the_tag() {
        let mac = PolyvalAes256Mac::new(&[7; MAC_KEY_SIZE]).unwrap();
        let aad = [1u8; 32];
        let msg = [2u8; 4096];
        let base = mac.tag(&aad, &msg);
        for i in [0, 31] {
            let mut a = aad;
            a[i] ^= 1;
            assert_ne!(mac.tag(&a, &msg), base);
        }
        for i in [0, 2048, 4095] {
            let mut m = msg;
            m[i] ^= 0x80;
            assert_ne!(mac.tag(&aad, &m), base);
        }
        let mut joined = aad.to_vec();
        joined.extend_from_slice(&msg);
        assert_ne!(mac.tag(&joined, &[]), base);
        assert_ne!(mac.tag(&aad, &msg[..4095]), base);
        let other = PolyvalAes256Mac::new(&[8; MAC_KEY_SIZE]).unwrap();
        assert_ne!(other.tag(&aad, &msg), base);
    }

    #[test]
    fn wrong_key_sizes_are_refused() {
        for n in [0, 16, 32, 47, 49, 64] {
            assert!(matches!(
                PolyvalAes256Mac::new(&vec![0; n]),
                Err(Error::InvalidKeyLength { actual, .. }) if actual == n
            ));
        }
    }
}
