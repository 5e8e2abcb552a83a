//! Adiantum(XChaCha12, AES-256) with NH + Poly1305 (Crowley & Biggers, ToSC
//! 2018; Linux `adiantum` template), spec §2.4.
//!
//! The construction and NH are ours; XChaCha12 comes from RustCrypto
//! `chacha20`, AES-256 from `aes`, and the Poly1305 hash from `poly1305`
//! keyed with `r || zeros(16)`, which makes its final "+ s" a no-op and yields
//! exactly the spec's "Poly1305 hash without +s" (`h mod 2^130−5 mod 2^128`).

#![forbid(unsafe_code)]

use aes::Aes256;
use chacha20::XChaCha12;
use chacha20::cipher::{KeyIvInit, StreamCipher};
use cipher::{BlockCipherDecrypt, BlockCipherEncrypt, KeyInit};
use poly1305::Poly1305;
use poly1305::universal_hash::UniversalHash;
use zeroize::{Zeroize, Zeroizing};

use crate::block::{Block, load};
use crate::{CipherKey, Error};

const NAME: &str = "Adiantum";
/// Key size in bytes.
const KEY_SIZE: usize = 32;
/// Tweak size in bytes.
const TWEAK_SIZE: usize = 32;
/// NH processes the message in chunks of at most this many bytes.
const NH_CHUNK: usize = 1024;
/// NH key length in 32-bit words: 1024/16 units × 4 words + 3 × 4 extra
/// words for passes 1..3 (spec §2.4: 1072 bytes).
const NH_KEY_WORDS: usize = 268;
/// Bytes of XChaCha12 keystream used for subkeys: 32 + 16 + 16 + 1072.
const SUBKEY_BYTES: usize = 1136;

/// A prepared Adiantum key (spec §2.4 "Subkey derivation").
pub(crate) struct Adiantum {
    stream_key: Zeroizing<[u8; KEY_SIZE]>,
    aes: Aes256,
    poly_t: Poly1305,
    poly_m: Poly1305,
    nh_key: Zeroizing<[u32; NH_KEY_WORDS]>,
}

/// One NH chunk (≤ 1024 bytes, zero-padded to a multiple of 16): four passes
/// over the message in a single loop (spec §2.4 "NH").
#[inline]
fn nh_chunk(key: &[u32; NH_KEY_WORDS], msg: &[u8]) -> [u64; 4] {
    let mut s0: u64 = 0;
    let mut s1: u64 = 0;
    let mut s2: u64 = 0;
    let mut s3: u64 = 0;
    let mut unit = |j: usize, m: &[u8; 16]| {
        let m0 = u32::from_le_bytes([m[0], m[1], m[2], m[3]]);
        let m1 = u32::from_le_bytes([m[4], m[5], m[6], m[7]]);
        let m2 = u32::from_le_bytes([m[8], m[9], m[10], m[11]]);
        let m3 = u32::from_le_bytes([m[12], m[13], m[14], m[15]]);
        let k = &key[4 * j..4 * j + 16];
        let f = |k0: u32, k1: u32, k2: u32, k3: u32| -> u64 {
            u64::from(m0.wrapping_add(k0))
                .wrapping_mul(u64::from(m2.wrapping_add(k2)))
                .wrapping_add(
                    u64::from(m1.wrapping_add(k1)).wrapping_mul(u64::from(m3.wrapping_add(k3))),
                )
        };
        s0 = s0.wrapping_add(f(k[0], k[1], k[2], k[3]));
        s1 = s1.wrapping_add(f(k[4], k[5], k[6], k[7]));
        s2 = s2.wrapping_add(f(k[8], k[9], k[10], k[11]));
        s3 = s3.wrapping_add(f(k[12], k[13], k[14], k[15]));
    };
    let mut units = msg.chunks_exact(16);
    let mut j = 0;
    for m in &mut units {
        let mut u = [0u8; 16];
        u.copy_from_slice(m);
        unit(j, &u);
        j += 1;
    }
    let rest = units.remainder();
    if !rest.is_empty() {
        let mut u = [0u8; 16];
        u[..rest.len()].copy_from_slice(rest);
        unit(j, &u);
    }
    [s0, s1, s2, s3]
}

impl Adiantum {
    /// Derives the subkeys from the 32-byte key (spec §2.4).
    pub(crate) fn new(key: &[u8]) -> Result<Self, Error> {
        let key: &[u8; KEY_SIZE] = key.try_into().map_err(|_| Error::InvalidKeyLength {
            algorithm: NAME,
            expected: KEY_SIZE,
            actual: key.len(),
        })?;
        let mut nonce = [0u8; 24];
        nonce[0] = 1;
        let mut ks = Zeroizing::new([0u8; SUBKEY_BYTES]);
        XChaCha12::new(&(*key).into(), &nonce.into()).apply_keystream(&mut ks[..]);
        let mut ke = [0u8; 32];
        ke.copy_from_slice(&ks[..32]);
        let aes = Aes256::new(&ke.into());
        ke.zeroize();
        let mut pk = [0u8; 32];
        pk[..16].copy_from_slice(&ks[32..48]);
        let poly_t = Poly1305::new(&pk.into());
        pk[..16].copy_from_slice(&ks[48..64]);
        let poly_m = Poly1305::new(&pk.into());
        pk.zeroize();
        let mut nh_key = Zeroizing::new([0u32; NH_KEY_WORDS]);
        for (w, b) in nh_key.iter_mut().zip(ks[64..].chunks_exact(4)) {
            *w = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        }
        Ok(Adiantum {
            stream_key: Zeroizing::new(*key),
            aes,
            poly_t,
            poly_m,
            nh_key,
        })
    }

    /// `H(T, L)` of spec §2.4, as a little-endian 128-bit integer.
    fn hash(&self, t: &[u8; TWEAK_SIZE], l: &[u8]) -> u128 {
        let mut pt = self.poly_t.clone();
        let mut head = [Block::default(); 3];
        head[0][..8].copy_from_slice(&(8 * l.len() as u64).to_le_bytes());
        head[1].copy_from_slice(&t[..16]);
        head[2].copy_from_slice(&t[16..]);
        pt.update(&head);
        let a = load(&pt.finalize());
        let mut pm = self.poly_m.clone();
        for chunk in l.chunks(NH_CHUNK) {
            let s = nh_chunk(&self.nh_key, chunk);
            let mut out = [Block::default(); 2];
            out[0][..8].copy_from_slice(&s[0].to_le_bytes());
            out[0][8..].copy_from_slice(&s[1].to_le_bytes());
            out[1][..8].copy_from_slice(&s[2].to_le_bytes());
            out[1][8..].copy_from_slice(&s[3].to_le_bytes());
            pm.update(&out);
        }
        let b = load(&pm.finalize());
        a.wrapping_add(b)
    }

    /// XORs `data` with `XChaCha12(K, C_M || 01 || zeros(7))`.
    fn stream(&self, c_m: u128, data: &mut [u8]) {
        let mut nonce = [0u8; 24];
        nonce[..16].copy_from_slice(&c_m.to_le_bytes());
        nonce[16] = 1;
        XChaCha12::new(&(*self.stream_key).into(), &nonce.into()).apply_keystream(data);
    }

    fn check<'a>(iv: &'a [u8], data: &[u8]) -> Result<&'a [u8; TWEAK_SIZE], Error> {
        let t: &[u8; TWEAK_SIZE] = iv.try_into().map_err(|_| Error::InvalidIvLength {
            algorithm: NAME,
            expected: TWEAK_SIZE,
            actual: iv.len(),
        })?;
        if data.len() < 16 {
            return Err(Error::MessageTooShort {
                algorithm: NAME,
                min: 16,
                actual: data.len(),
            });
        }
        Ok(t)
    }

    /// Encrypts `data = P_L || P_R` (≥ 16 bytes) in place (spec §2.4).
    pub(crate) fn encrypt(&self, iv: &[u8], data: &mut [u8]) -> Result<(), Error> {
        let t = Self::check(iv, data)?;
        let split = data.len() - 16;
        let (l, r) = data.split_at_mut(split);
        let p_r = u128::from_le_bytes(<[u8; 16]>::try_from(&*r).unwrap_or_default());
        let p_m = p_r.wrapping_add(self.hash(t, l));
        let mut c_m = Block::from(p_m.to_le_bytes());
        self.aes.encrypt_block(&mut c_m);
        let c_m = load(&c_m);
        self.stream(c_m, l);
        let c_r = c_m.wrapping_sub(self.hash(t, l));
        r.copy_from_slice(&c_r.to_le_bytes());
        Ok(())
    }

    /// Decrypts `data = C_L || C_R` (≥ 16 bytes) in place (spec §2.4).
    pub(crate) fn decrypt(&self, iv: &[u8], data: &mut [u8]) -> Result<(), Error> {
        let t = Self::check(iv, data)?;
        let split = data.len() - 16;
        let (l, r) = data.split_at_mut(split);
        let c_r = u128::from_le_bytes(<[u8; 16]>::try_from(&*r).unwrap_or_default());
        let c_m = c_r.wrapping_add(self.hash(t, l));
        self.stream(c_m, l);
        let mut p_m = Block::from(c_m.to_le_bytes());
        self.aes.decrypt_block(&mut p_m);
        let p_r = load(&p_m).wrapping_sub(self.hash(t, l));
        r.copy_from_slice(&p_r.to_le_bytes());
        Ok(())
    }
}

impl CipherKey for Adiantum {
    fn encrypt(&self, iv: &[u8], data: &mut [u8]) -> Result<(), Error> {
        Adiantum::encrypt(self, iv, data)
    }
    fn decrypt(&self, iv: &[u8], data: &mut [u8]) -> Result<(), Error> {
        Adiantum::decrypt(self, iv, data)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// NH of one 16-byte unit, computed by hand from the definition.
    #[test]
    fn nh_single_unit_matches_definition() {
        let mut key = [0u32; NH_KEY_WORDS];
        for (i, k) in key.iter_mut().enumerate() {
            *k = (i as u32).wrapping_mul(0x9e37_79b9);
        }
        let msg: [u8; 16] = core::array::from_fn(|i| (i * 17 + 1) as u8);
        let m: [u32; 4] =
            core::array::from_fn(|i| u32::from_le_bytes(msg[4 * i..4 * i + 4].try_into().unwrap()));
        let got = nh_chunk(&key, &msg);
        for p in 0..4 {
            let k = &key[4 * p..4 * p + 4];
            let want = (u64::from(m[0].wrapping_add(k[0])) * u64::from(m[2].wrapping_add(k[2])))
                .wrapping_add(
                    u64::from(m[1].wrapping_add(k[1])) * u64::from(m[3].wrapping_add(k[3])),
                );
            assert_eq!(got[p], want, "pass {p}");
        }
    }
}
