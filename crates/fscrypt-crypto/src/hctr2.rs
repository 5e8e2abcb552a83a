//! HCTR2 (Crowley, Huckleberry, Biggers; ePrint 2021/1441) over an AES key of
//! any size, with a 32-byte tweak (spec §2.5). The mode is ours: AES block
//! calls from RustCrypto `aes` (XCTR batched through `encrypt_blocks`) and the
//! POLYVAL universal hash from RustCrypto `polyval`.
//!
//! fscrypt's mode 10 is AES-256 ([`crate::Algorithm::Aes256Hctr2`]); the
//! AES-128/192 instances exist so the testmgr vectors for them also run.

#![forbid(unsafe_code)]

use cipher::consts::U16;
use cipher::{BlockCipherDecrypt, BlockCipherEncrypt, KeyInit};
use polyval::Polyval;
use polyval::universal_hash::UniversalHash;

use crate::block::{BATCH, Block, as_blocks_mut, load, xor_bytes, xor_in};
use crate::{CipherKey, Error};

/// Tweak length used by fscrypt (spec §2.5), in bytes.
const TWEAK_SIZE: usize = 32;

/// An HCTR2 key: the block cipher, POLYVAL keyed with `h = E_K(0)`, and
/// `L = E_K(le128(1))`.
pub(crate) struct Hctr2<C> {
    cipher: C,
    polyval: Polyval,
    l: u128,
    name: &'static str,
}

impl<C> Hctr2<C>
where
    C: BlockCipherEncrypt<BlockSize = U16> + BlockCipherDecrypt<BlockSize = U16> + KeyInit,
{
    /// Sets up the key schedule and derives `h` and `L` (spec §2.5).
    pub(crate) fn new(name: &'static str, key: &[u8]) -> Result<Self, Error> {
        let cipher = C::new_from_slice(key).map_err(|_| Error::InvalidKeyLength {
            algorithm: name,
            expected: C::key_size(),
            actual: key.len(),
        })?;
        let mut h = Block::default();
        cipher.encrypt_block(&mut h);
        let polyval = Polyval::new(&h);
        let mut l = Block::from(1u128.to_le_bytes());
        cipher.encrypt_block(&mut l);
        let l_val = load(&l);
        // h and l are key-derived: wipe the stack copies.
        zeroize::Zeroize::zeroize(&mut h.0);
        zeroize::Zeroize::zeroize(&mut l.0);
        Ok(Hctr2 {
            cipher,
            polyval,
            l: l_val,
            name,
        })
    }

    /// `Hash(T, N)` of spec §2.5: POLYVAL over the length block, the tweak and
    /// `N`, padded with `01 || zeros` when `|N|` is not a multiple of 16.
    fn hash(&self, tweak: &[u8; TWEAK_SIZE], n: &[u8]) -> u128 {
        let mut p = self.polyval.clone();
        let partial = !n.len().is_multiple_of(16);
        let first = (2 * 8 * TWEAK_SIZE as u128) + if partial { 3 } else { 2 };
        let t0 = Block::try_from(&tweak[..16]).unwrap_or_default();
        let t1 = Block::try_from(&tweak[16..]).unwrap_or_default();
        p.update(&[Block::from(first.to_le_bytes()), t0, t1]);
        let (blocks, tail) = Block::slice_as_chunks(n);
        p.update(blocks);
        if partial {
            let mut last = Block::default();
            last[..tail.len()].copy_from_slice(tail);
            last[tail.len()] = 1;
            p.update(core::slice::from_ref(&last));
        }
        load(&p.finalize())
    }

    /// XORs `data` with the XCTR keystream `E_K(S ^ le128(i))`, i = 1, 2, …
    fn xctr(&self, s: u128, data: &mut [u8]) {
        // Filenames (≤ 255 bytes) use a small keystream buffer.
        if data.len() <= 16 * 16 {
            self.xctr_n::<16>(s, data)
        } else {
            self.xctr_n::<BATCH>(s, data)
        }
    }

    #[inline(always)]
    fn xctr_n<const N: usize>(&self, s: u128, data: &mut [u8]) {
        let mut ks = [Block::default(); N];
        let mut i: u128 = 1;
        for chunk in data.chunks_mut(16 * N) {
            let nblocks = chunk.len().div_ceil(16);
            for b in ks[..nblocks].iter_mut() {
                *b = Block::from((s ^ i).to_le_bytes());
                i += 1;
            }
            self.cipher.encrypt_blocks(&mut ks[..nblocks]);
            let (blocks, tail) = as_blocks_mut(chunk);
            let nfull = blocks.len();
            for (b, k) in blocks.iter_mut().zip(ks.iter()) {
                xor_in(b, load(k));
            }
            if let Some(k) = ks.get(nfull).filter(|_| !tail.is_empty()) {
                xor_bytes(tail, &k[..]);
            }
        }
    }

    fn check<'a>(&self, iv: &'a [u8], data: &[u8]) -> Result<&'a [u8; TWEAK_SIZE], Error> {
        let t: &[u8; TWEAK_SIZE] = iv.try_into().map_err(|_| Error::InvalidIvLength {
            algorithm: self.name,
            expected: TWEAK_SIZE,
            actual: iv.len(),
        })?;
        if data.len() < 16 {
            return Err(Error::MessageTooShort {
                algorithm: self.name,
                min: 16,
                actual: data.len(),
            });
        }
        Ok(t)
    }

    /// Encrypts `data = M || N` (≥ 16 bytes) in place (spec §2.5).
    pub(crate) fn encrypt(&self, iv: &[u8], data: &mut [u8]) -> Result<(), Error> {
        let t = self.check(iv, data)?;
        let (m, n) = data.split_at_mut(16);
        let mm = u128::from_le_bytes(m.try_into().unwrap_or_default()) ^ self.hash(t, n);
        let mut uu = Block::from(mm.to_le_bytes());
        self.cipher.encrypt_block(&mut uu);
        let uu = load(&uu);
        self.xctr(mm ^ uu ^ self.l, n);
        let u = uu ^ self.hash(t, n);
        m.copy_from_slice(&u.to_le_bytes());
        Ok(())
    }

    /// Decrypts `data = U || V` (≥ 16 bytes) in place (spec §2.5).
    pub(crate) fn decrypt(&self, iv: &[u8], data: &mut [u8]) -> Result<(), Error> {
        let t = self.check(iv, data)?;
        let (u, v) = data.split_at_mut(16);
        let mm = u128::from_le_bytes(u.try_into().unwrap_or_default()) ^ self.hash(t, v);
        let mut uu = Block::from(mm.to_le_bytes());
        self.cipher.decrypt_block(&mut uu);
        let uu = load(&uu);
        self.xctr(mm ^ uu ^ self.l, v);
        let m = uu ^ self.hash(t, v);
        u.copy_from_slice(&m.to_le_bytes());
        Ok(())
    }
}

impl<C> Drop for Hctr2<C> {
    fn drop(&mut self) {
        zeroize::Zeroize::zeroize(&mut self.l);
    }
}

impl<C> CipherKey for Hctr2<C>
where
    C: BlockCipherEncrypt<BlockSize = U16>
        + BlockCipherDecrypt<BlockSize = U16>
        + KeyInit
        + Send
        + Sync,
{
    fn encrypt(&self, iv: &[u8], data: &mut [u8]) -> Result<(), Error> {
        Hctr2::encrypt(self, iv, data)
    }
    fn decrypt(&self, iv: &[u8], data: &mut [u8]) -> Result<(), Error> {
        Hctr2::decrypt(self, iv, data)
    }
}
