//! One module per subcommand: each has an `Args` struct (clap) and an
//! `exec(Args) -> anyhow::Result<ExitCode>` that calls the library crates.

pub mod crypt;
pub mod demo;
pub mod init;
pub mod kernel_crypto;
pub mod mount;
pub mod providers;
pub mod secret;
pub mod unmount;
