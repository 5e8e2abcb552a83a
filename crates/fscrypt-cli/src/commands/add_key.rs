//! `fscrypt-rs add-key`: add a master key to a filesystem's keyring
//! (FS_IOC_ADD_ENCRYPTION_KEY, spec §10.6).

use std::path::PathBuf;
use std::process::ExitCode;

use fscrypt::KeyDescriptor;
use fscrypt_linux::keyring;

use crate::support::kernel;

/// Arguments of `fscrypt-rs add-key`.
#[derive(clap::Args, Debug)]
#[command(
    about = "Add a master key to a filesystem's keyring and print its identifier",
    long_about = "Add a master key to the keyring of the filesystem mounted at MOUNTPOINT \
                  (FS_IOC_ADD_ENCRYPTION_KEY) and print the key identifier the kernel \
                  computed (v2 policies).\n\nThe raw key is read from stdin (binary, 16 to 64 \
                  bytes; never from the command line) or from --key-file. With --descriptor the \
                  key is added for v1 policies under that 8-byte descriptor (root only). With \
                  --hw-wrapped the input is an ephemerally-wrapped key from `prepare-key` (up to \
                  128 bytes), which needs inline-encryption hardware and `-o inlinecrypt`.\n\n\
                  Example: head -c 64 /dev/urandom > key && fscrypt-rs add-key /mnt < key"
)]
pub struct Args {
    /// Mount point (or any directory) of the filesystem.
    pub mountpoint: PathBuf,
    /// Read the key from this file instead of stdin.
    #[arg(long, value_name = "FILE")]
    pub key_file: Option<PathBuf>,
    /// Add a v1 key under this descriptor (16 hex digits; needs root).
    #[arg(long, value_name = "HEX", conflicts_with = "hw_wrapped")]
    pub descriptor: Option<KeyDescriptor>,
    /// The key is a hardware-wrapped (ephemerally-wrapped) key.
    #[arg(long)]
    pub hw_wrapped: bool,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs `fscrypt-rs add-key`.
pub fn exec(args: Args) -> anyhow::Result<ExitCode> {
    let json = args.json;
    kernel::json_errors(json, || exec_inner(args))
}

fn exec_inner(args: Args) -> anyhow::Result<ExitCode> {
    let key = kernel::read_key(args.key_file.as_deref(), "a key")?;
    let result = match (&args.descriptor, args.hw_wrapped) {
        (Some(d), _) => keyring::add_key_v1(&args.mountpoint, *d, &key).map(|()| d.to_string()),
        (None, true) => keyring::add_hw_wrapped_key(&args.mountpoint, &key).map(|i| i.to_string()),
        (None, false) => keyring::add_key_v2(&args.mountpoint, &key).map(|i| i.to_string()),
    };
    match result {
        Ok(spec) => {
            if args.json {
                let field = if args.descriptor.is_some() {
                    "descriptor"
                } else {
                    "identifier"
                };
                kernel::print_json(&serde_json::json!({ "ok": true, field: spec }))?;
            } else {
                kernel::out(format_args!("{spec}\n"))?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => kernel::fail(args.json, &e),
    }
}
