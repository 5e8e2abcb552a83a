//! Public API behaviour: bad input gives typed errors (never a panic, never a
//! partial write), round trips over random lengths and tweaks, and
//! differential tests between implementations of the same algorithm.

use fscrypt_crypto::registry::builtin_implementations;
use fscrypt_crypto::{Algorithm, CipherKey, Error, PreparedKey, SecretBox, aes128_ecb_encrypt};
use proptest::prelude::*;

fn key_for(alg: Algorithm, seed: u8) -> Vec<u8> {
    (0..alg.key_size())
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

#[test]
fn wrong_key_length_is_a_typed_error() {
    for alg in Algorithm::ALL {
        for len in [0, 1, alg.key_size() - 1, alg.key_size() + 1, 128] {
            let err = PreparedKey::new(alg, &vec![1u8; len]).unwrap_err();
            assert_eq!(
                err,
                Error::InvalidKeyLength {
                    algorithm: alg.name(),
                    expected: alg.key_size(),
                    actual: len
                },
                "{alg} key length {len}"
            );
        }
        for imp in builtin_implementations()
            .iter()
            .filter(|i| i.algorithm == alg)
        {
            assert!(
                matches!(
                    (imp.new_key)(&[1u8; 7]),
                    Err(Error::InvalidKeyLength { .. })
                ),
                "{}",
                imp.name
            );
        }
    }
}

#[test]
fn xts_weak_keys_are_refused() {
    for alg in [Algorithm::Aes256Xts, Algorithm::Sm4Xts] {
        let mut key = vec![0x5au8; alg.key_size()];
        assert_eq!(
            PreparedKey::new(alg, &key).unwrap_err(),
            Error::WeakKey { algorithm: alg }
        );
        key[0] ^= 1;
        PreparedKey::new(alg, &key).unwrap();
    }
}

#[test]
fn bad_messages_and_ivs_are_typed_errors_and_leave_data_unchanged() {
    for alg in Algorithm::ALL {
        let k = PreparedKey::new(alg, &key_for(alg, 3)).unwrap();
        let iv = vec![9u8; alg.iv_size()];
        for len in [0usize, 1, 15] {
            let mut d = vec![0xabu8; len];
            let e = k.encrypt(&iv, &mut d).unwrap_err();
            assert_eq!(
                e,
                Error::MessageTooShort {
                    algorithm: alg.name(),
                    min: 16,
                    actual: len
                }
            );
            assert!(k.decrypt(&iv, &mut d).is_err());
            assert!(d.iter().all(|&b| b == 0xab));
        }
        for bad_iv in [0usize, 8, 15, 17, 24, 33] {
            if bad_iv == alg.iv_size() {
                continue;
            }
            let mut d = [0xabu8; 64];
            let e = k.encrypt(&vec![0; bad_iv], &mut d).unwrap_err();
            assert_eq!(
                e,
                Error::InvalidIvLength {
                    algorithm: alg.name(),
                    expected: alg.iv_size(),
                    actual: bad_iv
                }
            );
            assert!(k.decrypt(&vec![0; bad_iv], &mut d).is_err());
            assert!(d.iter().all(|&b| b == 0xab));
        }
        // Implementations called directly also return errors rather than panic.
        for imp in builtin_implementations()
            .iter()
            .filter(|i| i.algorithm == alg)
        {
            let ck = (imp.new_key)(&key_for(alg, 3)).unwrap();
            assert!(ck.encrypt(&iv, &mut [0u8; 15]).is_err(), "{}", imp.name);
            assert!(
                ck.decrypt(&[0u8; 3], &mut [0u8; 32]).is_err(),
                "{}",
                imp.name
            );
        }
    }
}

#[test]
fn essiv_requires_whole_blocks() {
    let k = PreparedKey::new(Algorithm::Aes128CbcEssiv, &[4u8; 16]).unwrap();
    for len in [17usize, 31, 33, 4095] {
        let mut d = vec![0u8; len];
        assert_eq!(
            k.encrypt(&[0; 16], &mut d).unwrap_err(),
            Error::NotBlockAligned {
                algorithm: "AES-128-CBC-ESSIV",
                block: 16,
                actual: len
            }
        );
        assert!(k.decrypt(&[0; 16], &mut d).is_err());
    }
    assert!(matches!(
        aes128_ecb_encrypt(&[0; 16], &mut [0; 20]),
        Err(Error::NotBlockAligned { .. })
    ));
}

#[test]
fn debug_is_redacted() {
    let k = PreparedKey::new(Algorithm::Aes256CbcCts, &[0x42; 32]).unwrap();
    let s = format!("{k:?}");
    assert!(
        s.contains("redacted") && !s.contains("42, 42") && !s.contains("0x42"),
        "{s}"
    );
}

fn all_impls_of(alg: Algorithm, key: &[u8]) -> Vec<(&'static str, SecretBox<dyn CipherKey>)> {
    builtin_implementations()
        .iter()
        .filter(|i| i.algorithm == alg)
        .map(|i| (i.name, (i.new_key)(key).unwrap()))
        .collect()
}

/// aws-lc vs RustCrypto AES-256-XTS for every length 16..=4096 (step 1, so
/// every multiple of 16 and every ciphertext-stealing length), plus in-place
/// decryption back to the plaintext.
#[test]
fn xts_awslc_vs_rustcrypto_every_length() {
    let key = key_for(Algorithm::Aes256Xts, 11);
    let impls = all_impls_of(Algorithm::Aes256Xts, &key);
    assert!(impls.len() >= 2);
    let pt: Vec<u8> = (0..4096u32).map(|i| (i * 7 + i / 251) as u8).collect();
    let mut bufs: Vec<Vec<u8>> = vec![Vec::new(); impls.len()];
    for len in 16..=4096usize {
        let iv: [u8; 16] = core::array::from_fn(|i| (len + i) as u8);
        for (b, (name, k)) in bufs.iter_mut().zip(&impls) {
            b.clear();
            b.extend_from_slice(&pt[..len]);
            k.encrypt(&iv, b)
                .unwrap_or_else(|e| panic!("{name} len {len}: {e}"));
        }
        for (b, (name, _)) in bufs.iter().zip(&impls).skip(1) {
            assert!(
                b == &bufs[0],
                "{name} differs from {} at length {len}",
                impls[0].0
            );
        }
        for (b, (name, k)) in bufs.iter_mut().zip(&impls) {
            k.decrypt(&iv, b).unwrap();
            assert!(b[..] == pt[..len], "{name} round trip at length {len}");
        }
    }
}

/// All CBC-CTS implementations agree for every length 16..=600.
#[test]
fn cts_implementations_agree() {
    for alg in [
        Algorithm::Aes128CbcCts,
        Algorithm::Aes256CbcCts,
        Algorithm::Sm4CbcCts,
    ] {
        let key = key_for(alg, 5);
        let impls = all_impls_of(alg, &key);
        assert!(impls.len() >= 2, "{alg}");
        for len in 16..=600usize {
            let iv: [u8; 16] = core::array::from_fn(|i| (len * 3 + i) as u8);
            let pt: Vec<u8> = (0..len).map(|i| (i * 13 + len) as u8).collect();
            let mut first: Option<Vec<u8>> = None;
            for (name, k) in &impls {
                let mut b = pt.clone();
                k.encrypt(&iv, &mut b).unwrap();
                match &first {
                    None => first = Some(b.clone()),
                    Some(f) => assert!(f == &b, "{name} differs at length {len}"),
                }
                k.decrypt(&iv, &mut b).unwrap();
                assert!(b == pt, "{name} round trip at length {len}");
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, .. ProptestConfig::default() })]

    /// Round trip through every implementation of every algorithm for random
    /// lengths 16..=4096 (multiples of 16 for CBC-ESSIV), tweaks and keys;
    /// encryption must change the data and all implementations must agree.
    #[test]
    fn round_trip_every_algorithm(
        len in 16usize..=4096,
        seed in any::<u8>(),
        iv in proptest::collection::vec(any::<u8>(), 32),
        data in proptest::collection::vec(any::<u8>(), 4096),
    ) {
        for alg in Algorithm::ALL {
            let len = if alg.requires_block_multiple() { len / 16 * 16 } else { len };
            let key = key_for(alg, seed);
            let iv = &iv[..alg.iv_size()];
            let pt = &data[..len];
            let pk = PreparedKey::new(alg, &key).unwrap();
            let mut want = pt.to_vec();
            pk.encrypt(iv, &mut want).unwrap();
            prop_assert_ne!(&want[..], pt);
            for (name, k) in all_impls_of(alg, &key) {
                let mut b = pt.to_vec();
                k.encrypt(iv, &mut b).unwrap();
                prop_assert!(b == want, "{} differs for {} at length {}", name, alg, len);
                k.decrypt(iv, &mut b).unwrap();
                prop_assert!(b == pt, "{} round trip for {} at length {}", name, alg, len);
            }
        }
    }
}
