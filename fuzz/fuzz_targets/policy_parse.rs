//! Fuzz `Policy::parse`: never panics; an accepted policy is valid and
//! serializes back to the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(p) = fscrypt::Policy::parse_unvalidated(data) {
        assert_eq!(p.to_bytes(), data);
    }
    if let Ok(p) = fscrypt::Policy::parse(data) {
        assert!(p.validate().is_ok());
        assert_eq!(p.to_bytes(), data);
    }
});
