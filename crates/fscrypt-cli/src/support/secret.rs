//! Reading the secrets of vault commands: passphrases (terminal without
//! echo, stdin read once, the first line of a `--passfile` or of an
//! `--extpass` command's output) and key files; the message before a slow
//! key derivation; the exit code for a wrong secret.
//!
//! Shared by `init`, `mount`, `demo`, `fsck`, `passwd` and `protector`
//! (the options that name a secret are in `unlock.rs`); the
//! cryptography is in `fscrypt_vault`. A passphrase only ever travels
//! through a file, a pipe or the terminal, never through our command line or
//! environment, and is read byte by byte into a [`SecretBuf`].

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use std::time::Duration;

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
    read_line(std::io::stdin(), "stdin")
}

/// Reads one line from `fd` into a [`SecretBuf`], without its line end
/// (`\n`, or `\r\n`), byte by byte (nothing after the line is consumed,
/// no buffer keeps a copy); at most [`MAX_PASSPHRASE`] bytes. `from` names
/// the source in messages.
fn read_line(fd: impl AsFd, from: &str) -> anyhow::Result<SecretBuf> {
    let mut line = SecretBuf::new(MAX_PASSPHRASE);
    let mut n = 0;
    let mut byte = SecretBuf::new(1);
    loop {
        match rustix::io::read(&fd, &mut byte[..]) {
            Ok(0) => break,
            Ok(_) if byte[0] == b'\n' => break,
            Ok(_) => {
                if n == MAX_PASSPHRASE {
                    bail!("the passphrase from {from} is longer than {MAX_PASSPHRASE} bytes");
                }
                line[n] = byte[0];
                n += 1;
            }
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => {
                return Err(std::io::Error::from(e))
                    .with_context(|| format!("reading the passphrase from {from}"));
            }
        }
    }
    if n > 0 && line[n - 1] == b'\r' {
        n -= 1;
    }
    Ok(SecretBuf::from_slice(&line[..n]))
}

/// Where a passphrase comes from, besides the terminal or stdin: the
/// `--passfile`/`--extpass` options of `init` and `mount` (and the
/// `passfile=`/`extpass=` mount options). As in gocryptfs, the passphrase
/// is the first line, without its line end (`\n` or `\r\n`); the rest is
/// ignored; an empty first line is refused.
#[derive(clap::Args, Debug, Clone, Default, PartialEq, Eq)]
pub struct PassSource {
    /// Read the passphrase from the first line of FILE (without the line
    /// end; the rest of the file is ignored). FILE may be a pipe, e.g.
    /// `--passfile <(pass show vault)`.
    #[arg(long, value_name = "FILE", conflicts_with = "extpass")]
    pub passfile: Option<PathBuf>,
    /// Run CMD with `/bin/sh -c CMD` and use the first line of its standard
    /// output as the passphrase (e.g. `--extpass 'pass show vault'`, or
    /// `systemd-ask-password`); CMD's stdin and stderr are ours, and it must
    /// exit with status 0.
    #[arg(long, value_name = "CMD")]
    pub extpass: Option<String>,
}

impl PassSource {
    /// True if `--passfile` or `--extpass` was given.
    pub fn is_given(&self) -> bool {
        self.passfile.is_some() || self.extpass.is_some()
    }

    /// Reads the passphrase from the file or command given, or, when none
    /// is, as [`read_passphrase`] does (terminal or stdin).
    ///
    /// # Errors
    /// Unreadable file, failing command, empty or over-long first line,
    /// and the errors of [`read_passphrase`].
    pub fn read(&self, prompt: &str, confirm: bool) -> anyhow::Result<SecretBuf> {
        let pass = if let Some(path) = &self.passfile {
            read_passfile(path)?
        } else if let Some(cmd) = &self.extpass {
            run_extpass(cmd)?
        } else {
            return read_passphrase_or(
                prompt,
                confirm,
                "as the first line of stdin, or give --passfile FILE or --extpass CMD",
            );
        };
        if pass.is_empty() {
            bail!(
                "the passphrase from {} is empty: its first line must hold the passphrase",
                self.describe()
            );
        }
        Ok(pass)
    }

    fn describe(&self) -> String {
        match (&self.passfile, &self.extpass) {
            (Some(path), _) => format!("--passfile {}", path.display()),
            (None, Some(_)) => "the --extpass command".to_owned(),
            (None, None) => "stdin".to_owned(),
        }
    }
}

/// The first line of the file at `path` (symlinks followed; a FIFO is read
/// like a file). Warns when others may read a regular file.
fn read_passfile(path: &Path) -> anyhow::Result<SecretBuf> {
    let file =
        File::open(path).with_context(|| format!("opening passphrase file {}", path.display()))?;
    if let Ok(meta) = file.metadata()
        && meta.is_file()
        && meta.permissions().mode() & 0o077 != 0
    {
        eprintln!(
            "fscrypt-rs: warning: passphrase file {} is readable by other users (chmod 600 it)",
            path.display()
        );
    }
    read_line(&file, &format!("passphrase file {}", path.display()))
}

/// Most bytes read (and thrown away) after the first line of an `--extpass`
/// command's output, so a command that prints a little more still exits
/// normally instead of on SIGPIPE.
const MAX_EXTPASS_TAIL: usize = 1 << 20;

/// Runs `/bin/sh -c cmd` (stdin and stderr inherited, stdout a pipe) and
/// returns the first line of its output; the command must exit with 0.
fn run_extpass(cmd: &str) -> anyhow::Result<SecretBuf> {
    let mut child = std::process::Command::new("/bin/sh")
        .arg("-c")
        .arg(cmd)
        .stdin(Stdio::inherit())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .context("starting the --extpass command with /bin/sh -c")?;
    let pipe = child
        .stdout
        .take()
        .context("the --extpass command's stdout")?;
    let line = read_line(&pipe, "the --extpass command");
    if line.is_ok() {
        // Drain (and forget) what follows the first line, up to a bound.
        let mut scratch = SecretBuf::new(4096);
        let mut drained = 0;
        while drained < MAX_EXTPASS_TAIL {
            match rustix::io::read(&pipe, &mut scratch[..]) {
                Ok(0) => break,
                Ok(n) => drained += n,
                Err(rustix::io::Errno::INTR) => {}
                Err(_) => break,
            }
        }
    }
    drop(pipe);
    let status = child.wait().context("waiting for the --extpass command")?;
    let line = line?;
    if !status.success() {
        bail!(
            "the --extpass command failed ({status}): fix the command or give the passphrase another way"
        );
    }
    Ok(line)
}

/// Prints "deriving the key (about N s)..." on stderr when Argon2id
/// derivations of `work_kib` KiB-passes in total are expected to take more
/// than a second here (a short probe measures this machine; costs too small
/// to ever take a second are not probed).
pub fn announce_derivation(work_kib: u64) {
    // 256 MiB-passes take well under a second on any machine we run on.
    if work_kib <= 256 * 1024 {
        return;
    }
    let estimate = fscrypt_vault::cost::estimate_work(work_kib);
    if estimate > Duration::from_secs(1) {
        eprintln!(
            "fscrypt-rs: deriving the key (about {})...",
            format_seconds(estimate)
        );
    }
}

/// A duration for messages: "0.28 s" under 1 s, "1.4 s" under 10 s, else
/// "12 s".
pub fn format_seconds(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s < 1.0 {
        format!("{s:.2} s")
    } else if s < 10.0 {
        format!("{s:.1} s")
    } else {
        format!("{s:.0} s")
    }
}

/// Announces a passphrase unlock of `vault` when it is expected to take
/// more than a second: the total cost of the passphrase protectors it may
/// try (all of them, or only the one named `only`).
pub fn announce_passphrase_unlock(vault: &fscrypt_vault::Vault, only: Option<&str>) {
    let work = vault
        .protectors()
        .iter()
        .filter(|p| only.is_none_or(|n| p.name == n))
        .map(|p| match &p.record {
            fscrypt_vault::config::ProtectorRecord::Passphrase { params, .. } => params.work_kib(),
            _ => 0,
        })
        .sum();
    announce_derivation(work);
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
    read_passphrase_or(prompt, confirm, "as the first line of stdin")
}

/// [`read_passphrase`], where `stdin_hint` completes the message for
/// an empty stdin ("pipe the passphrase {stdin_hint}"): the ways this
/// command takes a passphrase without a terminal.
fn read_passphrase_or(prompt: &str, confirm: bool, stdin_hint: &str) -> anyhow::Result<SecretBuf> {
    if rustix::termios::isatty(std::io::stdin()) {
        let first = prompt_no_echo(prompt)?;
        if first.is_empty() {
            bail!(
                "the passphrase is empty: nothing was created or changed; run the command again and type a passphrase"
            );
        }
        if confirm {
            let again = prompt_no_echo("Repeat the passphrase: ")?;
            if again.as_bytes() != first.as_bytes() {
                bail!(
                    "the two passphrases differ: nothing was created or changed; run the command again and type the same passphrase twice"
                );
            }
        }
        return Ok(first);
    }
    let pass = read_line_stdin()?;
    if pass.is_empty() {
        bail!(
            "no passphrase: stdin is not a terminal and its first line is empty; pipe the passphrase {stdin_hint}"
        );
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
