//! Zero heap allocation on the format's hot paths: with an [`InodeCrypt`]
//! prepared, one filename encrypt + decrypt and one data unit encrypt +
//! decrypt allocate nothing, for every policy type (per-file keys, DIRECT_KEY,
//! IV_INO_LBLK_64/32, v1) and every mode pair. No-key name encode/decode/match
//! is checked too.
//!
//! One test per binary, and the counter is per thread, so no other test
//! interferes. (aws-lc implementations allocate through C `malloc`, which this
//! counter cannot see; fscrypt-crypto's own alloc test covers that path.)

use fscrypt::{
    Context, EncryptionMode, FileType, InodeCrypt, InodeParams, MasterKey, NoKeyName, Policy,
    PolicyFlags, PolicyV1, PolicyV2, nokey,
};
use test_support::alloc::{Counting, allocations_during};

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn hot_paths_do_not_allocate() {
    let raw: Vec<u8> = (0..64u8).map(|i| i.wrapping_mul(29) ^ 0x5c).collect();
    let mk = MasterKey::new(&raw).unwrap();
    let pairs = [(1u8, 4u8), (5, 6), (9, 9), (1, 10), (7, 8)];
    let mut checked = 0;
    for (v2, contents, filenames, flags) in pairs.iter().flat_map(|&(c, f)| {
        [
            (true, c, f, 0x03u8),
            (false, c, f, 0x03),
            (true, c, f, 0x07),
            (false, c, f, 0x07),
            (true, c, f, 0x0b),
            (true, c, f, 0x13),
        ]
    }) {
        let policy = if v2 {
            Policy::V2(PolicyV2 {
                contents_mode: EncryptionMode(contents),
                filenames_mode: EncryptionMode(filenames),
                flags: PolicyFlags(flags),
                log2_data_unit_size: 0,
                master_key_identifier: mk.identifier(),
            })
        } else {
            Policy::V1(PolicyV1 {
                contents_mode: EncryptionMode(contents),
                filenames_mode: EncryptionMode(filenames),
                flags: PolicyFlags(flags),
                master_key_descriptor: mk.e4crypt_descriptor(),
            })
        };
        if policy.validate().is_err() {
            continue;
        }
        let ctx = Context::new(&policy, [0x21; 16]);
        let params = |file_type| InodeParams {
            file_type,
            ino: 4242,
            fs_uuid: [0x33; 16],
            fs_block_size: 4096,
        };
        let file = InodeCrypt::new(&mk, &ctx, &params(FileType::Regular)).unwrap();
        let dir = InodeCrypt::new(&mk, &ctx, &params(FileType::Directory)).unwrap();
        let mut unit = vec![0x11u8; file.data_unit_size()];
        let n = allocations_during(|| {
            file.encrypt_data_units(9, &mut unit).unwrap();
            file.decrypt_data_units(9, &mut unit).unwrap();
            let ct = dir.encrypt_filename(b"some-file-name.txt").unwrap();
            let pt = dir.decrypt_filename(&ct).unwrap();
            assert_eq!(&*pt, b"some-file-name.txt");
        });
        assert_eq!(n, 0, "{policy:?}: hot path allocated {n} times");
        assert!(unit.iter().all(|&b| b == 0x11));
        checked += 1;
    }
    assert_eq!(checked, 14, "every valid policy shape was checked");

    let long = [0xabu8; 255];
    let n = allocations_during(|| {
        let name = nokey::encode(&long, 1, 2);
        let decoded = NoKeyName::decode(name.as_bytes()).unwrap();
        assert!(decoded.matches(&long));
    });
    assert_eq!(n, 0, "no-key names allocated {n} times");
}
