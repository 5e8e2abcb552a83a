//! Reading the secrets of vault commands: passphrases (terminal without
//! echo, or stdin read once) and key files; the exit code for a wrong one.
//!
//! Shared by `init`, `mount` and `demo`; the cryptography is in
//! `fscrypt_fuse::vault`.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, bail};
use zeroize::Zeroizing;

/// Exit status of `init`/`mount` when the passphrase or key file is wrong
/// (the same number gocryptfs uses for a wrong password).
pub const EXIT_WRONG_SECRET: u8 = 12;

/// Longest passphrase accepted, in bytes.
const MAX_PASSPHRASE: usize = 4096;

/// Prints the one-line message for a wrong secret and returns its exit code.
pub fn wrong_secret(err: &fscrypt_fuse::vault::Error) -> ExitCode {
    eprintln!("fscrypt-rs: {err}");
    ExitCode::from(EXIT_WRONG_SECRET)
}

/// Restores the terminal's echo flag when dropped.
struct EchoGuard {
    saved: rustix::termios::Termios,
}

impl Drop for EchoGuard {
    fn drop(&mut self) {
        let _ = rustix::termios::tcsetattr(
            std::io::stdin(),
            rustix::termios::OptionalActions::Now,
            &self.saved,
        );
    }
}

/// Reads one line from stdin into a zeroizing buffer, without the line end.
/// Reads byte by byte so nothing after the line is consumed, and stops at
/// [`MAX_PASSPHRASE`] bytes.
fn read_line_stdin() -> anyhow::Result<Zeroizing<Vec<u8>>> {
    let mut out = Zeroizing::new(Vec::with_capacity(MAX_PASSPHRASE + 1));
    let stdin = std::io::stdin();
    let mut lock = stdin.lock();
    let mut byte = [0u8; 1];
    loop {
        match lock.read(&mut byte) {
            Ok(0) => break,
            Ok(_) if byte[0] == b'\n' => break,
            Ok(_) => {
                if out.len() == MAX_PASSPHRASE {
                    bail!("the passphrase is longer than {MAX_PASSPHRASE} bytes");
                }
                out.push(byte[0]);
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e).context("reading the passphrase from stdin"),
        }
    }
    if out.last() == Some(&b'\r') {
        out.pop();
    }
    Ok(out)
}

/// Prompts on the terminal with echo off and reads one line.
fn prompt_no_echo(prompt: &str) -> anyhow::Result<Zeroizing<Vec<u8>>> {
    let stdin = std::io::stdin();
    let saved = rustix::termios::tcgetattr(&stdin).context("reading the terminal settings")?;
    let mut quiet = saved.clone();
    quiet.local_modes.remove(rustix::termios::LocalModes::ECHO);
    eprint!("{prompt}");
    std::io::stderr().flush().ok();
    rustix::termios::tcsetattr(&stdin, rustix::termios::OptionalActions::Now, &quiet)
        .context("turning off the terminal echo")?;
    let guard = EchoGuard { saved };
    let line = read_line_stdin();
    drop(guard);
    eprintln!();
    line
}

/// Reads a passphrase: from the terminal with echo off when stdin is a
/// terminal (asking twice when `confirm`), otherwise one line from stdin,
/// read once. Never retries after a wrong passphrase: the caller exits.
///
/// # Errors
/// Empty passphrase, mismatching confirmation, read errors.
pub fn read_passphrase(prompt: &str, confirm: bool) -> anyhow::Result<Zeroizing<Vec<u8>>> {
    let pass = if rustix::termios::isatty(std::io::stdin()) {
        let first = prompt_no_echo(prompt)?;
        if confirm {
            let again = prompt_no_echo("Repeat the passphrase: ")?;
            if *again != *first {
                bail!("the two passphrases differ");
            }
        }
        first
    } else {
        read_line_stdin()?
    };
    if pass.is_empty() {
        bail!("the passphrase is empty");
    }
    Ok(pass)
}

/// Reads a key file (at most 64 bytes are accepted; the size check itself
/// is the vault's). Warns when others may read it.
///
/// # Errors
/// Read errors; files longer than 64 bytes.
pub fn read_key_file(path: &Path) -> anyhow::Result<Zeroizing<Vec<u8>>> {
    let file = File::open(path).with_context(|| format!("opening key file {}", path.display()))?;
    if let Ok(meta) = file.metadata()
        && meta.permissions().mode() & 0o077 != 0
    {
        eprintln!(
            "fscrypt-rs: warning: key file {} is readable by other users (chmod 600 it)",
            path.display()
        );
    }
    let mut buf = Zeroizing::new(Vec::with_capacity(65));
    file.take(65)
        .read_to_end(&mut buf)
        .with_context(|| format!("reading key file {}", path.display()))?;
    if buf.len() > 64 {
        bail!(
            "key file {} is longer than 64 bytes: a key file holds 32 or 64 raw bytes",
            path.display()
        );
    }
    Ok(buf)
}

/// Creates a new key file of 64 random bytes, mode 0600, refusing to
/// overwrite an existing file, and returns its contents.
///
/// # Errors
/// The file exists, I/O errors, RNG failure.
pub fn generate_key_file(path: &Path) -> anyhow::Result<Zeroizing<Vec<u8>>> {
    let mut key = Zeroizing::new(vec![0u8; 64]);
    fscrypt_fuse::vault::protector::random_bytes(&mut key)?;
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("creating key file {}", path.display()))?;
    file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    file.write_all(&key)?;
    file.sync_all()?;
    Ok(key)
}
