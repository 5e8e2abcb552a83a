//! One module per subcommand: each has an `Args` struct (clap) and an
//! `exec(Args) -> anyhow::Result<ExitCode>` that calls the library crates.

pub mod add_key;
/// In the library target, shared with `fscrypt-rs-bench`.
pub use fscrypt_cli::commands::bench;
pub mod crypt;
pub mod demo;
pub mod encrypt;
pub mod fsck;
pub mod generate_key;
pub mod get_policy;
pub mod image;
pub mod import_key;
pub mod info;
pub mod init;
pub mod install_docs;
pub mod kernel_crypto;
pub mod key_status;
pub mod lock;
pub mod metadata;
pub mod mount;
pub mod nonce;
pub mod passwd;
pub mod prepare_key;
pub mod protector;
pub mod providers;
pub mod purge;
pub mod remove_key;
pub mod set_policy;
pub mod setup;
pub mod status;
pub mod unlock;
pub mod unmount;
pub mod verify;
