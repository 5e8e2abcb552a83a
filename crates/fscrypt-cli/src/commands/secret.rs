//! Reading the secrets of vault commands: passphrases (terminal without
//! echo, or stdin read once) and key files; the exit code for a wrong one.
//!
//! Shared by `init`, `mount`, `demo`, `passwd` and `protector`; the cryptography is in
//! `fscrypt_vault`.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, bail};
use fscrypt_crypto::SecretBuf;

/// Exit status of `init`/`mount` when the passphrase or key file is wrong
/// (the same number gocryptfs uses for a wrong password).
pub const EXIT_WRONG_SECRET: u8 = 12;

/// Longest passphrase accepted, in bytes.
const MAX_PASSPHRASE: usize = 4096;

/// Prints the one-line message for a wrong secret and returns its exit code.
pub fn wrong_secret(err: &fscrypt_vault::Error) -> ExitCode {
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

/// Reads one line from stdin into a [`SecretBuf`], without the line end.
/// Reads byte by byte straight from file descriptor 0 (not through std's
/// stdin buffer, which would keep a copy), so nothing after the line is
/// consumed, and stops at [`MAX_PASSPHRASE`] bytes.
fn read_line_stdin() -> anyhow::Result<SecretBuf> {
    let mut line = SecretBuf::new(MAX_PASSPHRASE);
    let mut n = 0;
    let mut byte = SecretBuf::new(1);
    loop {
        match rustix::io::read(std::io::stdin(), &mut byte[..]) {
            Ok(0) => break,
            Ok(_) if byte[0] == b'\n' => break,
            Ok(_) => {
                if n == MAX_PASSPHRASE {
                    bail!("the passphrase is longer than {MAX_PASSPHRASE} bytes");
                }
                line[n] = byte[0];
                n += 1;
            }
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => {
                return Err(std::io::Error::from(e)).context("reading the passphrase from stdin");
            }
        }
    }
    if n > 0 && line[n - 1] == b'\r' {
        n -= 1;
    }
    Ok(SecretBuf::from_slice(&line[..n]))
}

/// Makes this process non-dumpable (`PR_SET_DUMPABLE` 0: no core file,
/// no ptrace or `/proc/PID/mem` for other processes of the same user)
/// before it reads a passphrase, a key file or a key. Call it first thing
/// in every command that handles a secret.
pub fn protect_process() {
    if let Err(e) =
        rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)
    {
        log::warn!("cannot make this process non-dumpable: {e}");
    }
}

/// Prompts on the terminal with echo off and reads one line.
fn prompt_no_echo(prompt: &str) -> anyhow::Result<SecretBuf> {
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
pub fn read_passphrase(prompt: &str, confirm: bool) -> anyhow::Result<SecretBuf> {
    let pass = if rustix::termios::isatty(std::io::stdin()) {
        let first = prompt_no_echo(prompt)?;
        if confirm {
            let again = prompt_no_echo("Repeat the passphrase: ")?;
            if again.as_bytes() != first.as_bytes() {
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

/// Reads a recovery key: from the terminal with echo off when stdin is a
/// terminal, otherwise one line from stdin; then parses it (case, spaces
/// and dashes do not matter; a typo is caught by its checksum). A key that
/// does not parse is a wrong secret: its one-line reason is printed and
/// `Ok(Err(exit code 12))` returned.
///
/// # Errors
/// Read errors.
pub fn read_recovery_key(
    prompt: &str,
) -> anyhow::Result<Result<fscrypt_vault::RecoveryKey, ExitCode>> {
    let line = if rustix::termios::isatty(std::io::stdin()) {
        prompt_no_echo(prompt)?
    } else {
        read_line_stdin()?
    };
    Ok(match fscrypt_vault::RecoveryKey::parse(&line) {
        Ok(key) => Ok(key),
        Err(e) => {
            eprintln!("fscrypt-rs: {e}");
            Err(ExitCode::from(EXIT_WRONG_SECRET))
        }
    })
}

/// Prints a new recovery key once, with what to do with it.
pub fn show_recovery_key(key: &fscrypt_vault::RecoveryKey) {
    println!("  recovery key (opens the vault like any other protector; shown only now,");
    println!("  write it down and keep it somewhere safe):");
    println!();
    println!("      {}", key.display().as_str());
    println!();
}

/// Reads a key file (at most 64 bytes are accepted; the size check itself
/// is the vault's). Warns when others may read it.
///
/// # Errors
/// Read errors; files longer than 64 bytes.
pub fn read_key_file(path: &Path) -> anyhow::Result<SecretBuf> {
    let mut file =
        File::open(path).with_context(|| format!("opening key file {}", path.display()))?;
    if let Ok(meta) = file.metadata()
        && meta.permissions().mode() & 0o077 != 0
    {
        eprintln!(
            "fscrypt-rs: warning: key file {} is readable by other users (chmod 600 it)",
            path.display()
        );
    }
    // Read into the final buffer directly (no growing Vec leaving copies).
    let mut buf = SecretBuf::new(65);
    let mut got = 0;
    while got < buf.len() {
        match file.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                return Err(e).with_context(|| format!("reading key file {}", path.display()));
            }
        }
    }
    if got > 64 {
        bail!(
            "key file {} is longer than 64 bytes: a key file holds 32 or 64 raw bytes",
            path.display()
        );
    }
    Ok(SecretBuf::from_slice(&buf[..got]))
}

/// Creates a new key file of 64 random bytes, mode 0600, refusing to
/// overwrite an existing file, and returns its contents.
///
/// # Errors
/// The file exists, I/O errors, RNG failure.
pub fn generate_key_file(path: &Path) -> anyhow::Result<SecretBuf> {
    let mut key = SecretBuf::new(64);
    fscrypt_vault::protector::random_bytes(&mut key)?;
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
