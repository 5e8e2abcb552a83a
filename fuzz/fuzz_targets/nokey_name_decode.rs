//! Fuzz the no-key name decoders (current and legacy) and the symlink blob
//! parser: never panic; an accepted current name re-encodes canonically to a
//! name that decodes to the same value and matches its own ciphertext.
#![no_main]

use fscrypt::nokey::{self, NoKeyName, legacy};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(n) = NoKeyName::decode(data) {
        let again = n.encode();
        assert_eq!(NoKeyName::decode(again.as_bytes()).unwrap(), n);
        if let Some(ct) = n.ciphertext() {
            assert!(n.matches(ct));
            assert_eq!(&*nokey::encode(ct, n.hash, n.minor_hash), &*again);
        }
    }
    let _ = legacy::decode_v5_6(data);
    if let Ok(d) = legacy::decode_pre_5_6(data) {
        let _ = d.matches(data);
    }
    let _ = fscrypt::symlink::parse_blob(data);
});
