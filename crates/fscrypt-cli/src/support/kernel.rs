//! Helpers shared by the kernel-fscrypt subcommands (add-key, set-policy,
//! verify, …): reading keys without prompting, printing results as text or
//! JSON, and turning library errors into one-line reasons.

use std::io::{IsTerminal, Read};
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, bail};
use fscrypt::{EncryptionMode, Policy};
use zeroize::Zeroizing;

/// Largest key input accepted from stdin or a file (hardware-wrapped keys
/// are at most 128 bytes; one more byte lets us report "too long").
const MAX_KEY_INPUT: u64 = 4096;

/// Read a binary key from `key_file`, or from stdin when it is not a
/// terminal. Never prompts: a terminal on stdin without `--key-file` is an
/// error. Keys never come from argv.
pub fn read_key(key_file: Option<&Path>, what: &str) -> anyhow::Result<Zeroizing<Vec<u8>>> {
    let mut buf = Zeroizing::new(Vec::new());
    match key_file {
        Some(p) => {
            let f =
                std::fs::File::open(p).with_context(|| format!("{}: cannot open", p.display()))?;
            f.take(MAX_KEY_INPUT)
                .read_to_end(&mut buf)
                .with_context(|| format!("{}: cannot read", p.display()))?;
        }
        None => {
            let stdin = std::io::stdin();
            if stdin.is_terminal() {
                bail!(
                    "refusing to read {what} from a terminal: pipe it to stdin \
                     (e.g. `head -c 64 /dev/urandom > key; ... < key`) or use --key-file"
                );
            }
            stdin
                .lock()
                .take(MAX_KEY_INPUT)
                .read_to_end(&mut buf)
                .context("cannot read the key from stdin")?;
        }
    }
    Ok(buf)
}

/// Write a file readable only by its owner (0600), for key material.
pub fn write_private_file(path: &Path, data: &[u8]) -> anyhow::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("{}: cannot create", path.display()))?;
    f.write_all(data)
        .with_context(|| format!("{}: cannot write", path.display()))?;
    Ok(())
}

/// Write formatted text to stdout, returning the I/O error (a closed pipe
/// ends the command quietly in `main`) instead of panicking like `print!`.
pub fn out(args: std::fmt::Arguments<'_>) -> std::io::Result<()> {
    use std::io::Write;
    std::io::stdout().lock().write_fmt(args)
}

/// Print a JSON value on one line.
pub fn print_json(v: &serde_json::Value) -> anyhow::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    serde_json::to_writer(&mut out, v)?;
    writeln!(out)?;
    Ok(())
}

/// Report a library error: with `--json`, also an `{"ok":false,…}` object on
/// stdout; the one-line reason always goes to stderr. Returns exit code 1.
pub fn fail(json: bool, err: &fscrypt_linux::Error) -> anyhow::Result<ExitCode> {
    if json {
        print_json(&serde_json::json!({
            "ok": false,
            "error": err.kind(),
            "message": err.to_string(),
        }))?;
    }
    eprintln!("fscrypt-rs: {err}");
    Ok(ExitCode::FAILURE)
}

/// Run a command; with `--json`, an error that is not already reported
/// (bad arguments, unreadable key file, …) is also printed as
/// `{"ok":false,"error":"failed","message":…}` on stdout. The error is
/// returned so that `main` prints the one-line reason and exits 1.
pub fn json_errors(
    json: bool,
    f: impl FnOnce() -> anyhow::Result<ExitCode>,
) -> anyhow::Result<ExitCode> {
    let r = f();
    if json && let Err(e) = &r {
        print_json(&serde_json::json!({
            "ok": false,
            "error": "failed",
            "message": format!("{e:#}"),
        }))?;
    }
    r
}

/// Mode names accepted on the command line (case-insensitive), by number.
const MODE_NAMES: &[(&str, u8)] = &[
    ("AES-256-XTS", 1),
    ("AES-256-CTS", 4),
    ("AES-256-CTS-CBC", 4),
    ("AES-128-CBC", 5),
    ("AES-128-CBC-ESSIV", 5),
    ("AES-128-CTS", 6),
    ("AES-128-CTS-CBC", 6),
    ("SM4-XTS", 7),
    ("SM4-CTS", 8),
    ("SM4-CTS-CBC", 8),
    ("Adiantum", 9),
    ("AES-256-HCTR2", 10),
];

/// Parse a mode name (or its number).
pub fn parse_mode(s: &str) -> Result<EncryptionMode, String> {
    if let Ok(n) = s.parse::<u8>() {
        return Ok(EncryptionMode(n));
    }
    MODE_NAMES
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(s))
        .map(|(_, m)| EncryptionMode(*m))
        .ok_or_else(|| {
            format!(
                "unknown mode {s:?}; use one of AES-256-XTS, AES-256-CTS, AES-128-CBC-ESSIV, \
                 AES-128-CTS, Adiantum, AES-256-HCTR2, SM4-XTS, SM4-CTS (or a mode number)"
            )
        })
}

/// A policy as JSON.
pub fn policy_json(p: &Policy) -> serde_json::Value {
    let flags = p.flags();
    let mut v = serde_json::json!({
        "version": match p { Policy::V1(_) => 1, Policy::V2(_) => 2 },
        "contents_mode": p.contents_mode().to_string(),
        "contents_mode_number": p.contents_mode().0,
        "filenames_mode": p.filenames_mode().to_string(),
        "filenames_mode_number": p.filenames_mode().0,
        "flags": flags.bits(),
        "padding": flags.padding(),
        "direct_key": flags.direct_key(),
        "iv_ino_lblk_64": flags.iv_ino_lblk_64(),
        "iv_ino_lblk_32": flags.iv_ino_lblk_32(),
    });
    match p {
        Policy::V1(p1) => {
            v["master_key_descriptor"] = p1.master_key_descriptor.to_string().into();
        }
        Policy::V2(p2) => {
            v["master_key_identifier"] = p2.master_key_identifier.to_string().into();
            v["log2_data_unit_size"] = p2.log2_data_unit_size.into();
        }
    }
    v
}

/// A policy as indented text lines.
pub fn policy_text(p: &Policy) -> String {
    let flags = p.flags();
    let mut s = String::new();
    match p {
        Policy::V1(p1) => {
            s.push_str("Encryption policy version: 1\n");
            s.push_str(&format!(
                "\tMaster key descriptor: {}\n",
                p1.master_key_descriptor
            ));
        }
        Policy::V2(p2) => {
            s.push_str("Encryption policy version: 2\n");
            s.push_str(&format!(
                "\tMaster key identifier: {}\n",
                p2.master_key_identifier
            ));
        }
    }
    s.push_str(&format!(
        "\tContents encryption mode: {}\n",
        p.contents_mode()
    ));
    s.push_str(&format!(
        "\tFilenames encryption mode: {}\n",
        p.filenames_mode()
    ));
    let mut f = format!("PAD_{}", flags.padding());
    for (on, name) in [
        (flags.direct_key(), "DIRECT_KEY"),
        (flags.iv_ino_lblk_64(), "IV_INO_LBLK_64"),
        (flags.iv_ino_lblk_32(), "IV_INO_LBLK_32"),
    ] {
        if on {
            f.push_str(&format!(" {name}"));
        }
    }
    s.push_str(&format!("\tFlags: {f}\n"));
    if let Policy::V2(p2) = p
        && p2.log2_data_unit_size != 0
    {
        s.push_str(&format!(
            "\tData unit size: {}\n",
            1u64 << p2.log2_data_unit_size.min(63)
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_parse() {
        assert_eq!(parse_mode("aes-256-xts").map(|m| m.0), Ok(1));
        assert_eq!(parse_mode("AES-128-CBC-ESSIV").map(|m| m.0), Ok(5));
        assert_eq!(parse_mode("6").map(|m| m.0), Ok(6));
        assert!(parse_mode("rot13").is_err());
    }
}
