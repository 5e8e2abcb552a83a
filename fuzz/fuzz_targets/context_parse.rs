//! Fuzz `Context::parse`: never panics; an accepted context serializes back
//! to the same bytes and its policy validates or reports a typed error.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(ctx) = fscrypt::Context::parse(data) {
        assert_eq!(&*ctx.to_bytes(), data);
        let _ = ctx.validate();
        let _ = ctx.policy().validate_for_block_size(4096);
    }
});
