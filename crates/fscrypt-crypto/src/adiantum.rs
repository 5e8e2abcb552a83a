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
use zeroize::{Zeroize, Zeroizing};

use crate::block::{Block, load};
use crate::poly1305::PolyKey;
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
    poly_t: PolyKey,
    poly_m: PolyKey,
    nh_key: Zeroizing<[u32; NH_KT_WORDS]>,
}

/// NH key words re-laid out so that, for message unit `j` and word `i`, the
/// four passes' key words are contiguous: `kt[16j + 4i + p] = K_N[4j + 4p + i]`.
/// This turns NH's inner loop into 4-lane vector adds and 32×32→64 multiplies
/// that LLVM vectorizes without target-specific code.
const NH_KT_WORDS: usize = (NH_CHUNK / 16) * 16;

/// Transposes the 268 NH key words into the [`NH_KT_WORDS`] layout.
fn transpose_nh_key(key: &[u32; NH_KEY_WORDS]) -> Zeroizing<[u32; NH_KT_WORDS]> {
    let mut kt = Zeroizing::new([0u32; NH_KT_WORDS]);
    for j in 0..NH_CHUNK / 16 {
        for i in 0..4 {
            for p in 0..4 {
                kt[16 * j + 4 * i + p] = key[4 * j + 4 * p + i];
            }
        }
    }
    kt
}

/// NH of one 16-byte unit `j` against the transposed key: adds the four
/// passes' products into `s` (spec §2.4 "NH").
#[inline(always)]
fn nh_unit(kt: &[u32; 16], m: &[u8; 16], s: &mut [u64; 4]) {
    let w = |i: usize| u32::from_le_bytes([m[4 * i], m[4 * i + 1], m[4 * i + 2], m[4 * i + 3]]);
    let (m0, m1, m2, m3) = (w(0), w(1), w(2), w(3));
    for p in 0..4 {
        let a = u64::from(m0.wrapping_add(kt[p]));
        let b = u64::from(m1.wrapping_add(kt[4 + p]));
        let c = u64::from(m2.wrapping_add(kt[8 + p]));
        let d = u64::from(m3.wrapping_add(kt[12 + p]));
        s[p] = s[p].wrapping_add(a * c).wrapping_add(b * d);
    }
}

/// One NH chunk (≤ 1024 bytes, zero-padded to a multiple of 16): the four
/// passes computed together in one loop over the message (spec §2.4 "NH").
#[inline]
fn nh_chunk(kt: &[u32; NH_KT_WORDS], msg: &[u8]) -> [u64; 4] {
    let mut s = [0u64; 4];
    let (units, rest) = msg.as_chunks::<16>();
    let (kunits, _) = kt.as_chunks::<16>();
    for (m, k) in units.iter().zip(kunits) {
        nh_unit(k, m, &mut s);
    }
    if let (false, Some(k)) = (rest.is_empty(), kunits.get(units.len())) {
        let mut u = [0u8; 16];
        u[..rest.len()].copy_from_slice(rest);
        nh_unit(k, &u, &mut s);
    }
    s
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
        let mut pk = [0u8; 16];
        pk.copy_from_slice(&ks[32..48]);
        let poly_t = PolyKey::new(&pk);
        pk.copy_from_slice(&ks[48..64]);
        let poly_m = PolyKey::new(&pk);
        pk.zeroize();
        let mut nh_key = Zeroizing::new([0u32; NH_KEY_WORDS]);
        for (w, b) in nh_key.iter_mut().zip(ks[64..].chunks_exact(4)) {
            *w = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        }
        let nh_key = transpose_nh_key(&nh_key);
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
        let mut pt = self.poly_t.start();
        pt.block_u64(8 * l.len() as u64, 0);
        let mut t0 = [0u8; 16];
        t0.copy_from_slice(&t[..16]);
        pt.block(&t0);
        t0.copy_from_slice(&t[16..]);
        pt.block(&t0);
        let a = pt.finish();
        let mut pm = self.poly_m.start();
        for chunk in l.chunks(NH_CHUNK) {
            let s = nh_chunk(&self.nh_key, chunk);
            pm.block_u64(s[0], s[1]);
            pm.block_u64(s[2], s[3]);
        }
        a.wrapping_add(pm.finish())
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
        let got = nh_chunk(&transpose_nh_key(&key), &msg);
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
