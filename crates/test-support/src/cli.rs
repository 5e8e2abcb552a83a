//! Driving the real `fscrypt-rs` binary (its path comes from the test:
//! `env!("CARGO_BIN_EXE_fscrypt-rs")`, known only to fscrypt-cli's tests).

use std::path::Path;
use std::process::Command;

/// `<bin> init <cipher> --new-key-file <key>` with cheap Argon2 parameters
/// and stdin from nothing; asserts that it succeeds.
pub fn init_with_key_file(bin: &Path, cipher: &Path, key: &Path) {
    crate::run::succeed(
        Command::new(bin)
            .arg("init")
            .arg(cipher)
            .arg("--new-key-file")
            .arg(key)
            .env("FSCRYPT_RS_INSECURE_ARGON2_PARAMS", CHEAP_ARGON2),
    );
}

/// `<bin> args...` with cheap Argon2 parameters and `stdin` piped in (never
/// a terminal), within [`crate::run::TIMEOUT`].
pub fn run(bin: &Path, args: &[&std::ffi::OsStr], stdin: &[u8]) -> std::process::Output {
    crate::run::output(
        Command::new(bin)
            .args(args)
            .env("FSCRYPT_RS_INSECURE_ARGON2_PARAMS", CHEAP_ARGON2),
        stdin,
    )
}

/// Argon2id parameters that make tests fast
/// (`FSCRYPT_RS_INSECURE_ARGON2_PARAMS`).
pub const CHEAP_ARGON2: &str = "m=64,t=1,p=1";
