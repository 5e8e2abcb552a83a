//! CBC building blocks (ours, over RustCrypto block ciphers) shared by
//! CBC-CTS (spec §2.2) and CBC-ESSIV (spec §2.3).

#![forbid(unsafe_code)]

use cipher::consts::U16;
use cipher::{BlockCipherDecrypt, BlockCipherEncrypt};

use crate::block::{BATCH, Block, load, xor_in};

/// CBC-encrypts whole blocks in place starting from chaining value `prev`;
/// returns the last ciphertext block (the next chaining value).
/// CBC encryption is inherently serial: one block call per block.
#[inline]
pub(crate) fn encrypt<C: BlockCipherEncrypt<BlockSize = U16>>(
    c: &C,
    mut prev: u128,
    blocks: &mut [Block],
) -> u128 {
    for b in blocks.iter_mut() {
        xor_in(b, prev);
        c.encrypt_block(b);
        prev = load(b);
    }
    prev
}

/// CBC-decrypts whole blocks in place, batched: each batch of ciphertext is
/// saved on the stack, decrypted with one `decrypt_blocks` call and then XORed
/// with the previous ciphertext blocks. Returns the last ciphertext block.
#[inline]
pub(crate) fn decrypt_batched<C: BlockCipherDecrypt<BlockSize = U16>>(
    c: &C,
    mut prev: u128,
    blocks: &mut [Block],
) -> u128 {
    let mut saved = [0u128; BATCH];
    for chunk in blocks.chunks_mut(BATCH) {
        for (s, b) in saved.iter_mut().zip(chunk.iter()) {
            *s = load(b);
        }
        c.decrypt_blocks(chunk);
        for (i, b) in chunk.iter_mut().enumerate() {
            xor_in(b, prev);
            prev = saved[i];
        }
    }
    prev
}

/// CBC-decrypts whole blocks in place one block call at a time (the simple
/// reference path). Returns the last ciphertext block.
#[inline]
pub(crate) fn decrypt_simple<C: BlockCipherDecrypt<BlockSize = U16>>(
    c: &C,
    mut prev: u128,
    blocks: &mut [Block],
) -> u128 {
    for b in blocks.iter_mut() {
        let ct = load(b);
        c.decrypt_block(b);
        xor_in(b, prev);
        prev = ct;
    }
    prev
}
