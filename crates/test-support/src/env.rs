//! The environment knobs of the test suite.

use std::time::Duration;

/// Whether the long versions of the tests were asked for
/// (`FSCRYPT_RS_LONG_TESTS=1`).
pub fn long_tests() -> bool {
    std::env::var_os("FSCRYPT_RS_LONG_TESTS").is_some_and(|v| v == "1")
}

/// `long` with `FSCRYPT_RS_LONG_TESTS=1`, else `short`.
pub fn short_or_long<T>(short: T, long: T) -> T {
    if long_tests() { long } else { short }
}

/// A test duration: `short_secs` by default, `long_secs` with
/// `FSCRYPT_RS_LONG_TESTS=1`.
pub fn duration(short_secs: u64, long_secs: u64) -> Duration {
    Duration::from_secs(short_or_long(short_secs, long_secs))
}
