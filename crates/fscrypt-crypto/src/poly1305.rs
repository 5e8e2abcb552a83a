//! The Poly1305 *hash* used by Adiantum (spec §2.4): `h = Σ (m_i + 2^128)·r^…
//! mod 2^130 − 5`, output `h mod 2^128` with no final "+ s".
//!
//! Ours (radix 2^44, three 64-bit limbs, 128-bit products — the classic
//! "donna-64" layout) because Adiantum hashes only ~10 blocks per 4096-byte
//! unit and the `poly1305` crate's AVX2 backend spends more time in setup
//! and finalization than in hashing for inputs that short. Checked against
//! the `poly1305` crate (keyed with `r ‖ zeros(16)`) in the unit tests and by
//! the Adiantum vectors.

#![forbid(unsafe_code)]

use zeroize::Zeroize;

const M44: u64 = (1 << 44) - 1;
const M42: u64 = (1 << 42) - 1;

/// A clamped Poly1305 key `r` in radix 2^44, with the `20·r` multiples
/// precomputed. Zeroized on drop.
#[derive(Clone)]
pub(crate) struct PolyKey {
    r: [u64; 3],
    s: [u64; 2],
}

impl Drop for PolyKey {
    fn drop(&mut self) {
        self.r.zeroize();
        self.s.zeroize();
    }
}

/// A running Poly1305 hash state (accumulator `h`, radix 2^44).
pub(crate) struct PolyState<'k> {
    key: &'k PolyKey,
    h: [u64; 3],
}

impl PolyKey {
    /// Clamps and loads the 16-byte key `r` (spec §2.4:
    /// `r = le128(key) & 0x0ffffffc0ffffffc0ffffffc0fffffff`).
    pub(crate) fn new(key: &[u8; 16]) -> PolyKey {
        let mut b0 = [0u8; 8];
        let mut b1 = [0u8; 8];
        b0.copy_from_slice(&key[..8]);
        b1.copy_from_slice(&key[8..]);
        let t0 = u64::from_le_bytes(b0);
        let t1 = u64::from_le_bytes(b1);
        let r0 = t0 & 0xffc_0fff_ffff;
        let r1 = ((t0 >> 44) | (t1 << 20)) & 0xfff_ffc0_ffff;
        let r2 = (t1 >> 24) & 0x00f_ffff_fc0f;
        PolyKey {
            r: [r0, r1, r2],
            s: [r1 * 20, r2 * 20],
        }
    }

    /// Starts a hash with `h = 0`.
    pub(crate) fn start(&self) -> PolyState<'_> {
        PolyState {
            key: self,
            h: [0; 3],
        }
    }
}

impl PolyState<'_> {
    /// Absorbs one full 16-byte block (with the 2^128 pad bit).
    #[inline(always)]
    pub(crate) fn block(&mut self, m: &[u8; 16]) {
        let mut b0 = [0u8; 8];
        let mut b1 = [0u8; 8];
        b0.copy_from_slice(&m[..8]);
        b1.copy_from_slice(&m[8..]);
        self.block_u64(u64::from_le_bytes(b0), u64::from_le_bytes(b1));
    }

    /// Absorbs one full block given as two little-endian 64-bit halves.
    #[inline(always)]
    pub(crate) fn block_u64(&mut self, t0: u64, t1: u64) {
        let [r0, r1, r2] = self.key.r;
        let [s1, s2] = self.key.s;
        let [mut h0, mut h1, mut h2] = self.h;
        h0 += t0 & M44;
        h1 += ((t0 >> 44) | (t1 << 20)) & M44;
        h2 += ((t1 >> 24) & M42) | (1 << 40);
        let m = |a: u64, b: u64| u128::from(a) * u128::from(b);
        let d0 = m(h0, r0) + m(h1, s2) + m(h2, s1);
        let mut d1 = m(h0, r1) + m(h1, r0) + m(h2, s2);
        let mut d2 = m(h0, r2) + m(h1, r1) + m(h2, r0);
        h0 = (d0 as u64) & M44;
        d1 += d0 >> 44;
        h1 = (d1 as u64) & M44;
        d2 += d1 >> 44;
        h2 = (d2 as u64) & M42;
        h0 += ((d2 >> 42) as u64) * 5;
        h1 += h0 >> 44;
        h0 &= M44;
        self.h = [h0, h1, h2];
    }

    /// Fully reduces `h` modulo 2^130 − 5 and returns it mod 2^128
    /// (no "+ s", spec §2.4).
    pub(crate) fn finish(self) -> u128 {
        let [mut h0, mut h1, mut h2] = self.h;
        h2 += h1 >> 44;
        h1 &= M44;
        h0 += (h2 >> 42) * 5;
        h2 &= M42;
        h1 += h0 >> 44;
        h0 &= M44;
        h2 += h1 >> 44;
        h1 &= M44;
        h0 += (h2 >> 42) * 5;
        h2 &= M42;
        h1 += h0 >> 44;
        h0 &= M44;
        // g = h + 5 - 2^130; use g if it did not underflow (h >= p).
        let mut g0 = h0 + 5;
        let mut g1 = h1 + (g0 >> 44);
        g0 &= M44;
        let g2 = (h2 + (g1 >> 44)).wrapping_sub(1 << 42);
        g1 &= M44;
        let use_g = (g2 >> 63).wrapping_sub(1); // all ones if g2 >= 0
        let keep_h = !use_g;
        h0 = (h0 & keep_h) | (g0 & use_g);
        h1 = (h1 & keep_h) | (g1 & use_g);
        h2 = (h2 & keep_h) | (g2 & use_g & M42);
        u128::from(h0) | (u128::from(h1) << 44) | (u128::from(h2) << 88)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use poly1305::universal_hash::{KeyInit, UniversalHash};

    fn reference(r: &[u8; 16], msg: &[u8]) -> u128 {
        let mut key = [0u8; 32];
        key[..16].copy_from_slice(r);
        let mut p = poly1305::Poly1305::new(&key.into());
        p.update_padded(msg);
        u128::from_le_bytes(p.finalize().into())
    }

    /// Against the `poly1305` crate with `s = 0`, for many keys and lengths,
    /// including all-0xff keys/messages that exercise the final reduction.
    #[test]
    fn matches_poly1305_crate_with_zero_s() {
        let mut seed = 0x1234_5678_9abc_def0u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for case in 0..300 {
            let mut r = [0u8; 16];
            let blocks = case % 40;
            let mut msg = vec![0u8; 16 * blocks];
            if case % 3 == 0 {
                r = [0xff; 16];
                msg.fill(0xff);
            } else {
                r.iter_mut().for_each(|b| *b = next() as u8);
                msg.iter_mut().for_each(|b| *b = next() as u8);
            }
            let k = PolyKey::new(&r);
            let mut st = k.start();
            for b in msg.chunks_exact(16) {
                st.block(b.try_into().unwrap());
            }
            assert_eq!(st.finish(), reference(&r, &msg), "case {case}");
        }
    }
}
