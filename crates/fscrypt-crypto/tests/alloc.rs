//! Zero heap allocation on the hot paths: a counting global allocator shows
//! no allocation for en/decrypting a 4096-byte data unit and a 32-byte name
//! with an already prepared key (every algorithm, every built-in
//! implementation), nor for a 64-byte HKDF-SHA512 expand.
//!
//! This binary has a single test so no other test thread allocates while we
//! count; the counter is also per thread. (aws-lc allocates through C
//! `malloc`, which this counter cannot see; its per-call path —
//! `EVP_CipherInit_ex` with a NULL cipher and key, then `EVP_CipherUpdate`,
//! and `AES_cbc_encrypt` — works on the existing context only.)

use fscrypt_crypto::registry::builtin_implementations;
use fscrypt_crypto::{Algorithm, HkdfSha512, PreparedKey};
use test_support::alloc::{Counting, allocations_during};

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn hot_paths_do_not_allocate() {
    let mut unit = vec![0x11u8; 4096];
    let mut name = [0x22u8; 32];
    for alg in Algorithm::ALL {
        let key: Vec<u8> = (0..alg.key_size() as u8).collect();
        let iv = vec![3u8; alg.iv_size()];
        let pk = PreparedKey::new(alg, &key).unwrap();
        // Warm up (lazy CPU-feature detection and the like happen once).
        pk.encrypt(&iv, &mut unit).unwrap();
        pk.decrypt(&iv, &mut unit).unwrap();
        let n = allocations_during(|| {
            pk.encrypt(&iv, &mut unit).unwrap();
            pk.decrypt(&iv, &mut unit).unwrap();
            pk.encrypt(&iv, &mut name).unwrap();
            pk.decrypt(&iv, &mut name).unwrap();
        });
        assert_eq!(n, 0, "{alg} via {}", pk.implementation_name());
        for imp in builtin_implementations()
            .iter()
            .filter(|i| i.algorithm == alg)
        {
            let k = (imp.new_key)(&key).unwrap();
            k.encrypt(&iv, &mut unit).unwrap();
            k.decrypt(&iv, &mut unit).unwrap();
            let n = allocations_during(|| {
                k.encrypt(&iv, &mut unit).unwrap();
                k.decrypt(&iv, &mut unit).unwrap();
                k.encrypt(&iv, &mut name).unwrap();
                k.decrypt(&iv, &mut name).unwrap();
            });
            assert_eq!(n, 0, "{}", imp.name);
        }
    }
    assert!(
        unit.iter().all(|&b| b == 0x11),
        "round trips restored the unit"
    );
    assert!(
        name.iter().all(|&b| b == 0x22),
        "round trips restored the name"
    );

    let hkdf = HkdfSha512::extract(&[0u8; 64], &[7u8; 64]);
    let mut okm = [0u8; 64];
    hkdf.expand(&[b"fscrypt\0", &[1], b"info"], &mut okm)
        .unwrap();
    let n = allocations_during(|| {
        hkdf.expand(&[b"fscrypt\0", &[2], b"info"], &mut okm)
            .unwrap();
    });
    assert_eq!(n, 0, "HKDF-SHA512 64-byte expand");

    // The counter does see allocations (so the zeros above mean something).
    let n = allocations_during(|| {
        let v = std::hint::black_box(vec![1u8; 100]);
        drop(v);
    });
    assert_eq!(n, 1);
}
