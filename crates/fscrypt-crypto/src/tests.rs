//! The shared-vector suite (`testdata/vectors/*.json`), run against every
//! registered implementation of each algorithm and, for key sizes fscrypt
//! does not use (AES-128-XTS, AES-192/256-ESSIV, AES-128/192-HCTR2), against
//! the generic constructions directly. A failure names the file and index.

use aes::{Aes128, Aes192, Aes256};
use serde_json::Value;

use crate::essiv::Essiv;
use crate::hctr2::Hctr2;
use crate::registry::{Registry, builtin_implementations};
use crate::xts::Xts;
use crate::{Algorithm, CipherKey, HkdfSha512, PreparedKey, SecretBox, hmac_sha512, siphash24};

/// Loads `file` and returns its entries.
pub(crate) fn entries(file: &str) -> Vec<Value> {
    let v = test_support::vectors::load(file);
    v["entries"].as_array().unwrap().clone()
}

pub(crate) fn hx(v: &Value, field: &str) -> Vec<u8> {
    hex::decode(v[field].as_str().unwrap_or("")).unwrap()
}

fn iv_of(e: &Value, len: usize) -> Vec<u8> {
    let iv = hx(e, "iv");
    if iv.is_empty() { vec![0u8; len] } else { iv }
}

/// Checks one cipher vector against one keyed instance, both directions.
fn check(what: &str, k: &dyn CipherKey, iv: &[u8], pt: &[u8], ct: &[u8]) {
    let mut buf = pt.to_vec();
    k.encrypt(iv, &mut buf)
        .unwrap_or_else(|e| panic!("{what}: encrypt: {e}"));
    assert_eq!(hex::encode(&buf), hex::encode(ct), "{what}: ciphertext");
    k.decrypt(iv, &mut buf)
        .unwrap_or_else(|e| panic!("{what}: decrypt: {e}"));
    assert_eq!(hex::encode(&buf), hex::encode(pt), "{what}: plaintext");
}

/// Runs a vector file against every built-in implementation of `alg` (entries
/// whose key size matches), plus the public `PreparedKey` path for keys the
/// API accepts. Returns how many (entry, implementation) pairs ran.
fn run_file(file: &str, alg: Algorithm) -> usize {
    let mut n = 0;
    for (i, e) in entries(file).iter().enumerate() {
        let key = hx(e, "key");
        if key.len() != alg.key_size() {
            continue;
        }
        let iv = iv_of(e, alg.iv_size());
        let (pt, ct) = (hx(e, "ptext"), hx(e, "ctext"));
        let mut ran_any = false;
        for imp in builtin_implementations()
            .iter()
            .filter(|i| i.algorithm == alg)
        {
            let what = format!("{file}[{i}] with {}", imp.name);
            let k = (imp.new_key)(&key).unwrap_or_else(|err| panic!("{what}: key setup: {err}"));
            check(&what, &*k, &iv, &pt, &ct);
            n += 1;
            ran_any = true;
        }
        assert!(ran_any, "{file}[{i}]: no implementation of {alg}");
        if alg.check_key(&key).is_ok() {
            let pk = PreparedKey::new(alg, &key).unwrap();
            let mut buf = pt.clone();
            pk.encrypt(&iv, &mut buf).unwrap();
            assert_eq!(buf, ct, "{file}[{i}] via PreparedKey");
            pk.decrypt(&iv, &mut buf).unwrap();
            assert_eq!(buf, pt, "{file}[{i}] via PreparedKey");
        }
    }
    n
}

#[test]
fn xts_aes_256_vectors() {
    assert!(run_file("xts_aes_256.json", Algorithm::Aes256Xts) >= 2);
    assert!(run_file("xts_aes_all_testmgr.json", Algorithm::Aes256Xts) >= 2);
}

#[test]
fn xts_aes_128_vectors_generic() {
    let mut n = 0;
    for (i, e) in entries("xts_aes_all_testmgr.json").iter().enumerate() {
        let key = hx(e, "key");
        if key.len() != 32 {
            continue;
        }
        let k = Xts::<Aes128>::new("xts-aes-128", &key).unwrap();
        check(
            &format!("xts_aes_all_testmgr.json[{i}]"),
            &k,
            &hx(e, "iv"),
            &hx(e, "ptext"),
            &hx(e, "ctext"),
        );
        n += 1;
    }
    assert_eq!(n, 4);
}

#[test]
fn xts_sm4_vectors() {
    assert_eq!(run_file("xts_sm4.json", Algorithm::Sm4Xts), 5);
}

#[test]
fn cts_aes_128_vectors() {
    assert_eq!(run_file("cts_cbc_aes.json", Algorithm::Aes128CbcCts), 6 * 3);
}

#[test]
fn cts_sm4_vectors() {
    assert_eq!(run_file("cts_cbc_sm4.json", Algorithm::Sm4CbcCts), 6 * 2);
}

/// Every AES-256-CTS filename of the fscrypt-level vectors (spec §13; cross-
/// checked with xfstests' fscrypt-crypt-util), against every implementation.
#[test]
fn cts_aes_256_fscrypt_filenames() {
    let v = test_support::vectors::load("fscrypt_format_vectors.json");
    let mut n = 0;
    for (i, e) in v["filenames"].as_array().unwrap().iter().enumerate() {
        if e["filenames_mode"].as_u64() != Some(4) {
            continue;
        }
        let name = e["name"].as_str().unwrap().as_bytes().to_vec();
        if name.len() as u64 != e["name_len"].as_u64().unwrap() {
            continue;
        }
        let clen = e["ctext_len"].as_u64().unwrap() as usize;
        let mut pt = name.clone();
        pt.resize(clen, 0);
        let key = hx(e, "dir_key");
        for imp in builtin_implementations()
            .iter()
            .filter(|i| i.algorithm == Algorithm::Aes256CbcCts)
        {
            let k = (imp.new_key)(&key).unwrap();
            check(
                &format!("filenames[{i}] with {}", imp.name),
                &*k,
                &hx(e, "iv"),
                &pt,
                &hx(e, "ctext"),
            );
            n += 1;
        }
    }
    assert!(n >= 30, "only {n} filename checks ran");
}

#[test]
fn essiv_vectors() {
    assert_eq!(
        run_file("essiv_cbc_aes_sha256.json", Algorithm::Aes128CbcEssiv),
        2
    );
    let mut n = 0;
    for (i, e) in entries("essiv_cbc_aes_sha256.json").iter().enumerate() {
        let key = hx(e, "key");
        let k: SecretBox<dyn CipherKey> = match key.len() {
            16 => SecretBox::cipher_key(Essiv::<Aes128>::new("essiv-128", &key).unwrap()),
            24 => SecretBox::cipher_key(Essiv::<Aes192>::new("essiv-192", &key).unwrap()),
            32 => SecretBox::cipher_key(Essiv::<Aes256>::new("essiv-256", &key).unwrap()),
            l => panic!("essiv_cbc_aes_sha256.json[{i}]: key length {l}"),
        };
        check(
            &format!("essiv_cbc_aes_sha256.json[{i}]"),
            &*k,
            &hx(e, "iv"),
            &hx(e, "ptext"),
            &hx(e, "ctext"),
        );
        n += 1;
    }
    assert_eq!(n, 5);
}

#[test]
fn adiantum_vectors() {
    assert_eq!(
        run_file("adiantum_xchacha12_aes.json", Algorithm::Adiantum),
        6
    );
}

#[test]
fn hctr2_vectors() {
    assert_eq!(run_file("hctr2_aes.json", Algorithm::Aes256Hctr2), 7);
    let mut n = 0;
    for (i, e) in entries("hctr2_aes.json").iter().enumerate() {
        let key = hx(e, "key");
        let k: SecretBox<dyn CipherKey> = match key.len() {
            16 => SecretBox::cipher_key(Hctr2::<Aes128>::new("hctr2-128", &key).unwrap()),
            24 => SecretBox::cipher_key(Hctr2::<Aes192>::new("hctr2-192", &key).unwrap()),
            32 => SecretBox::cipher_key(Hctr2::<Aes256>::new("hctr2-256", &key).unwrap()),
            l => panic!("hctr2_aes.json[{i}]: key length {l}"),
        };
        check(
            &format!("hctr2_aes.json[{i}]"),
            &*k,
            &hx(e, "iv"),
            &hx(e, "ptext"),
            &hx(e, "ctext"),
        );
        n += 1;
    }
    assert_eq!(n, 14);
}

#[test]
fn polyval_vectors() {
    use polyval::universal_hash::UniversalHash;
    let all = entries("polyval.json");
    for (i, e) in all.iter().enumerate() {
        let h: [u8; 16] = hx(e, "key").try_into().unwrap();
        let msg = hx(e, "ptext");
        let mut p = polyval::Polyval::new(&h.into());
        p.update_padded(&msg);
        assert_eq!(p.finalize().to_vec(), hx(e, "digest"), "polyval.json[{i}]");
    }
    assert_eq!(all.len(), 9);
}

#[test]
fn hmac_sha512_vectors() {
    let all = entries("hmac_sha512.json");
    for (i, e) in all.iter().enumerate() {
        assert_eq!(
            hmac_sha512(&hx(e, "key"), &hx(e, "ptext")).to_vec(),
            hx(e, "digest"),
            "hmac_sha512.json[{i}]"
        );
    }
    assert_eq!(all.len(), 4);
}

#[test]
fn hkdf_sha512_vectors() {
    let mut n = 0;
    for (i, e) in entries("hkdf.json").iter().enumerate() {
        if e["algorithm"].as_str() != Some("hkdf(hmac(sha512))") {
            continue;
        }
        let okm_want = hx(e, "okm");
        let k = HkdfSha512::extract(&hx(e, "salt"), &hx(e, "ikm"));
        let info = hx(e, "info");
        let mut okm = vec![0u8; okm_want.len()];
        k.expand(&[&info], &mut okm).unwrap();
        assert_eq!(okm, okm_want, "hkdf.json[{i}]");
        // Split info into two parts: same output (parts are concatenated).
        let (a, b) = info.split_at(info.len() / 2);
        okm.fill(0);
        k.expand(&[a, b], &mut okm).unwrap();
        assert_eq!(okm, okm_want, "hkdf.json[{i}] split info");
        let k2 = HkdfSha512::from_prk(&hx(e, "prk")).unwrap();
        okm.fill(0);
        k2.expand(&[&info], &mut okm).unwrap();
        assert_eq!(okm, okm_want, "hkdf.json[{i}] from prk");
        n += 1;
    }
    assert_eq!(n, 5);
}

#[test]
fn siphash24_vectors() {
    let all = entries("siphash24.json");
    for (i, e) in all.iter().enumerate() {
        let key: [u8; 16] = hx(e, "key").try_into().unwrap();
        assert_eq!(
            siphash24(&key, &hx(e, "ptext")).to_le_bytes().to_vec(),
            hx(e, "ctext"),
            "siphash24.json[{i}]"
        );
    }
    assert_eq!(all.len(), 64);
}

/// Every embedded self-test vector fits the self-test buffer, and every
/// built-in implementation passes its self-test.
#[test]
fn builtin_self_tests_pass() {
    for alg in Algorithm::ALL {
        for v in crate::kat::for_algorithm(alg) {
            assert!(
                v.ptext.len() <= 1024 && v.ptext.len() == v.ctext.len(),
                "{}",
                v.source
            );
            assert_eq!(v.key.len(), alg.key_size(), "{}", v.source);
            assert_eq!(v.iv.len(), alg.iv_size(), "{}", v.source);
        }
    }
    let r = Registry::with_builtins();
    for imp in builtin_implementations() {
        let st = r.self_test(imp.name).unwrap();
        assert!(st.passed(), "{}: {st}", imp.name);
    }
    assert!(
        crate::kat::for_algorithm(Algorithm::Aes256CbcCts)
            .iter()
            .any(|v| v.ptext.len() == 32),
        "a 32-byte AES-256-CTS vector is embedded"
    );
}

/// Issue 20 item 7: a prepared key's schedule (the implementation object)
/// and the HKDF state keyed with the PRK lie in memory excluded from core
/// dumps, wiped on fork and locked (VmFlags `dd`, `wf`, `lo` of
/// /proc/self/smaps), not in the ordinary heap or stack.
#[test]
fn key_state_lives_in_locked_dontdump_memory() {
    let want = |what: &str, addr: usize| {
        let flags = crate::secret::tests::vm_flags_of(addr)
            .unwrap_or_else(|| panic!("{what}: {addr:#x} not in /proc/self/smaps"));
        assert!(flags.contains(" dd"), "{what}: not MADV_DONTDUMP: {flags}");
        assert!(
            flags.contains(" wf"),
            "{what}: not MADV_WIPEONFORK: {flags}"
        );
        if rustix::process::geteuid().is_root() {
            assert!(flags.contains(" lo"), "{what}: not locked: {flags}");
        }
    };
    for alg in Algorithm::ALL {
        let key: Vec<u8> = (0..alg.key_size() as u8).map(|b| b ^ 0x5a).collect();
        let pk = PreparedKey::new(alg, &key).unwrap();
        want(pk.implementation_name(), pk.state_addr());
        for imp in builtin_implementations()
            .iter()
            .filter(|i| i.algorithm == alg)
        {
            let k = (imp.new_key)(&key).unwrap();
            want(imp.name, &*k as *const dyn CipherKey as *const u8 as usize);
        }
    }
    let h = HkdfSha512::extract(&[], &[7u8; 64]);
    want("HKDF-SHA512 state", h.state_addr());
    let c = h.clone();
    want("cloned HKDF-SHA512 state", c.state_addr());
    want(
        "HKDF-SHA512 from a PRK",
        HkdfSha512::from_prk(&[9u8; 64]).unwrap().state_addr(),
    );
}

#[test]
fn secret_boxes_reuse_slots_and_zeroize() {
    // Many keys of mixed sizes: slots are reused after drop, and every
    // value reads back intact while alive.
    let mut keep = Vec::new();
    for i in 0..2000u32 {
        let small = SecretBox::new([i as u8; 24]);
        let big = SecretBox::new([i as u16; 3000]);
        assert!(small.iter().all(|&b| b == i as u8));
        assert!(big.iter().all(|&b| b == i as u16));
        if i % 10 == 0 {
            keep.push((small, big));
        }
    }
    for (i, (s, b)) in keep.iter().enumerate() {
        let i = (i * 10) as u32;
        assert!(s.iter().all(|&x| x == i as u8));
        assert!(b.iter().all(|&x| x == i as u16));
    }
    let huge = SecretBox::new([1u64; 5000]);
    assert!(huge.iter().all(|&x| x == 1));
    assert_eq!(format!("{huge:?}"), "SecretBox(<redacted>)");
}
