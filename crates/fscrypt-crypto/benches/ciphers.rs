//! Criterion benchmarks: every algorithm on 4096-byte data units and 32-byte
//! names through the public API, each built-in implementation separately,
//! a raw aws-lc `EVP_aes_256_xts` call as the reference in the same run, and
//! a 64-byte HKDF-SHA512 expand.
//!
//! Run: `cargo bench -p fscrypt-crypto --bench ciphers`

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use fscrypt_crypto::awslc::RawAwsLcXts;
use fscrypt_crypto::registry::builtin_implementations;
use fscrypt_crypto::{Algorithm, HkdfSha512, PreparedKey};

fn key_for(alg: Algorithm) -> Vec<u8> {
    (0..alg.key_size()).map(|i| (i * 37 + 1) as u8).collect()
}

fn data_units(c: &mut Criterion) {
    let mut g = c.benchmark_group("unit4096");
    g.throughput(Throughput::Bytes(4096));
    let mut buf = vec![0x5au8; 4096];

    let key: [u8; 64] = key_for(Algorithm::Aes256Xts).try_into().unwrap();
    let mut raw = RawAwsLcXts::new(&key).unwrap();
    let iv = [7u8; 16];
    g.bench_function("raw-awslc-EVP_aes_256_xts/encrypt", |b| {
        b.iter(|| raw.encrypt(black_box(&iv), black_box(&mut buf)).unwrap())
    });

    for alg in Algorithm::ALL {
        let pk = PreparedKey::new(alg, &key_for(alg)).unwrap();
        let iv = vec![7u8; alg.iv_size()];
        g.bench_function(format!("{}/encrypt", alg.name()), |b| {
            b.iter(|| pk.encrypt(black_box(&iv), black_box(&mut buf)).unwrap())
        });
        g.bench_function(format!("{}/decrypt", alg.name()), |b| {
            b.iter(|| pk.decrypt(black_box(&iv), black_box(&mut buf)).unwrap())
        });
        for imp in builtin_implementations()
            .iter()
            .filter(|i| i.algorithm == alg)
        {
            if imp.name == pk.implementation_name() {
                continue;
            }
            let k = (imp.new_key)(&key_for(alg)).unwrap();
            g.bench_function(format!("{}/encrypt", imp.name), |b| {
                b.iter(|| k.encrypt(black_box(&iv), black_box(&mut buf)).unwrap())
            });
        }
    }
    g.finish();
}

fn names(c: &mut Criterion) {
    let mut g = c.benchmark_group("name32");
    g.throughput(Throughput::Bytes(32));
    let mut name = [0x61u8; 32];
    for alg in Algorithm::ALL {
        let pk = PreparedKey::new(alg, &key_for(alg)).unwrap();
        let iv = vec![0u8; alg.iv_size()];
        g.bench_function(format!("{}/encrypt+decrypt", alg.name()), |b| {
            b.iter(|| {
                pk.encrypt(black_box(&iv), black_box(&mut name)).unwrap();
                pk.decrypt(black_box(&iv), black_box(&mut name)).unwrap();
            })
        });
        for imp in builtin_implementations()
            .iter()
            .filter(|i| i.algorithm == alg)
        {
            if imp.name == pk.implementation_name() {
                continue;
            }
            let k = (imp.new_key)(&key_for(alg)).unwrap();
            g.bench_function(format!("{}/encrypt+decrypt", imp.name), |b| {
                b.iter(|| {
                    k.encrypt(black_box(&iv), black_box(&mut name)).unwrap();
                    k.decrypt(black_box(&iv), black_box(&mut name)).unwrap();
                })
            });
        }
    }
    g.finish();
}

fn hkdf(c: &mut Criterion) {
    let prk = HkdfSha512::extract(&[0u8; 64], &[0x11u8; 64]);
    let mut okm = [0u8; 64];
    c.bench_function("hkdf-sha512/expand64", |b| {
        b.iter(|| {
            prk.expand(
                black_box(&[b"fscrypt\0", &[2u8], &[0x22u8; 16]]),
                black_box(&mut okm),
            )
            .unwrap()
        })
    });
}

criterion_group!(benches, data_units, names, hkdf);
criterion_main!(benches);
