//! Known answers from files written by the real google/fscrypt 0.3.3 (see
//! testdata/README.md): byte-exact round trips, unwrapping with the known
//! passphrase and raw key, descriptors, the config's JSON.

use fscrypt_metadata::actions;
use fscrypt_metadata::config::Config;
use fscrypt_metadata::keys;
use fscrypt_metadata::proto::{self, SourceType};
use prost::Message;

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/v2");
const PASS_PROTECTOR: &str = "aa806f959e8d01d5";
const RAW_PROTECTOR: &str = "e78d218578519290";
const PASS_POLICY: &str = "7c2a354cf465ac67ade347b95d8c6cfd";
const RAW_POLICY: &str = "c483e4fc2930bf5c8e04c88f1912570e";

fn read(name: &str) -> Vec<u8> {
    std::fs::read(format!("{DIR}/{name}")).unwrap()
}

#[test]
fn files_round_trip_byte_exact() {
    for p in [PASS_PROTECTOR, RAW_PROTECTOR] {
        let bytes = read(p);
        let decoded = proto::decode_protector(&bytes).unwrap();
        assert_eq!(decoded.protector_descriptor, p);
        assert_eq!(decoded.encode_to_vec(), bytes, "protector {p}");
    }
    for p in [PASS_POLICY, RAW_POLICY] {
        let bytes = read(p);
        let decoded = proto::decode_policy(&bytes).unwrap();
        assert_eq!(decoded.key_descriptor, p);
        assert_eq!(decoded.opts().version(), 2);
        assert_eq!(decoded.encode_to_vec(), bytes, "policy {p}");
    }
}

#[test]
fn passphrase_protector_unwraps_policy() {
    let prot = proto::decode_protector(&read(PASS_PROTECTOR)).unwrap();
    assert_eq!(prot.source_type(), SourceType::CustomPassphrase);
    assert_eq!(prot.name, "pp");
    let key = actions::open_protector(&prot, b"hunter2").unwrap();
    assert!(matches!(
        actions::open_protector(&prot, b"hunter3"),
        Err(fscrypt_metadata::Error::WrongSecret { .. })
    ));
    let pol = proto::decode_policy(&read(PASS_POLICY)).unwrap();
    let pk = actions::open_policy(&pol, PASS_PROTECTOR, &key).unwrap();
    assert_eq!(keys::policy_descriptor(&pk[..], 2).unwrap(), PASS_POLICY);
}

#[test]
fn raw_key_protector_unwraps_policy() {
    let prot = proto::decode_protector(&read(RAW_PROTECTOR)).unwrap();
    assert_eq!(prot.source_type(), SourceType::RawKey);
    let key = actions::open_protector(&prot, &read("rk.key")).unwrap();
    let pol = proto::decode_policy(&read(RAW_POLICY)).unwrap();
    actions::open_policy(&pol, RAW_PROTECTOR, &key).unwrap();
    let mut wrong = read("rk.key");
    wrong[0] ^= 1;
    assert!(actions::open_protector(&prot, &wrong).is_err());
}

#[test]
fn config_json_is_what_fscrypt_writes() {
    let text = String::from_utf8(read("fscrypt.conf")).unwrap();
    let c = Config::parse(&text).unwrap();
    assert_eq!(c.hash_costs.parallelism, 2);
    assert_eq!(c.options.policy_version, 2);
    assert_eq!(c.to_json(), text);
}

#[test]
fn new_metadata_round_trips_and_opens() {
    let costs = proto::HashingCosts {
        time: 1,
        memory: 64,
        parallelism: 1,
        truncation_fixed: true,
    };
    let (prot, key) =
        actions::new_protector(SourceType::CustomPassphrase, "n", &costs, b"pw", 0).unwrap();
    let bytes = prot.encode_to_vec();
    let back = proto::decode_protector(&bytes).unwrap();
    assert_eq!(back, prot);
    assert_eq!(*actions::open_protector(&back, b"pw").unwrap(), *key);
    for v in [1, 2] {
        let (pol, pk) = actions::new_policy(
            &proto::EncryptionOptions::defaults(v),
            &prot.protector_descriptor,
            &key,
        )
        .unwrap();
        let back = proto::decode_policy(&pol.encode_to_vec()).unwrap();
        let pk2 = actions::open_policy(&back, &prot.protector_descriptor, &key).unwrap();
        assert_eq!(*pk, *pk2);
    }
}

#[test]
fn wrap_known_answer() {
    // Deterministic wrap: unwrap inverts it, and a flipped bit anywhere fails.
    let w = keys::wrap_with_iv(&[7u8; 32], &[9u8; 64], [1u8; 16]);
    assert_eq!(&*keys::unwrap(&[7u8; 32], &w).unwrap(), &[9u8; 64][..]);
    let mut bad = w.clone();
    bad.encrypted_key[3] ^= 0x80;
    assert!(keys::unwrap(&[7u8; 32], &bad).is_none());
}

#[test]
fn truncated_and_garbage_files_are_refused() {
    let bytes = read(PASS_PROTECTOR);
    for n in 0..bytes.len() {
        assert!(proto::decode_protector(&bytes[..n]).is_err(), "prefix {n}");
    }
    // A policy cut at a field boundary can still be a valid message, but
    // never one with its protector slot.
    let bytes = read(PASS_POLICY);
    for n in 0..bytes.len() {
        if let Ok(p) = proto::decode_policy(&bytes[..n]) {
            assert!(p.wrapped_policy_keys.is_empty(), "prefix {n}");
        }
    }
}
