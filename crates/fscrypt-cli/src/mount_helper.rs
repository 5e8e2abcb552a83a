//! `mount.fscrypt-rs`: the mount(8) helper, so an fstab line works:
//!
//! ```text
//! /srv/vault  /mnt/vault  fscrypt-rs  keyfile=/etc/fscrypt-rs/vault.key,allow_other,nofail  0  0
//! ```
//!
//! mount(8) runs `mount.fscrypt-rs SOURCE MOUNTPOINT [-sfnv] [-N NS] [-o OPTIONS] [-t TYPE]`;
//! this translates that into `fscrypt-rs mount SOURCE MOUNTPOINT -o OPTIONS`
//! and runs the `fscrypt-rs` binary that sits next to this one (or the one
//! on `PATH`). Without `keyfile=`, the passphrase is asked on the terminal.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, ExitCode};

fn usage() -> ExitCode {
    eprintln!("usage: mount.fscrypt-rs CIPHERDIR MOUNTPOINT [-sfnv] [-o OPTIONS]");
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let mut positional: Vec<OsString> = Vec::new();
    let mut options: Vec<String> = Vec::new();
    let mut sloppy = false;
    let mut fake = false;
    let mut args = std::env::args_os().skip(1);
    while let Some(arg) = args.next() {
        let text = arg.to_string_lossy().into_owned();
        if text == "-o" {
            match args.next() {
                Some(v) => options.push(v.to_string_lossy().into_owned()),
                None => return usage(),
            }
        } else if let Some(v) = text.strip_prefix("-o") {
            options.push(v.to_owned());
        } else if text == "-t" || text == "-N" {
            // Type and namespace: nothing to do with them.
            if args.next().is_none() {
                return usage();
            }
        } else if text.starts_with('-') && text.len() > 1 {
            for flag in text[1..].chars() {
                match flag {
                    's' => sloppy = true,
                    'f' => fake = true,
                    'n' | 'v' => {}
                    _ => return usage(),
                }
            }
        } else {
            positional.push(arg);
        }
    }
    if positional.len() != 2 {
        return usage();
    }
    if fake {
        return ExitCode::SUCCESS;
    }
    let exe = std::env::current_exe()
        .ok()
        .and_then(|p| std::fs::canonicalize(p).ok())
        .map(|p| p.with_file_name("fscrypt-rs"))
        .filter(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from("fscrypt-rs"));
    let mut cmd = Command::new(&exe);
    cmd.arg("mount").args(&positional);
    let joined = options.join(",");
    if !joined.is_empty() {
        cmd.arg("-o").arg(joined);
    }
    if sloppy {
        cmd.arg("--sloppy");
    }
    let err = cmd.exec();
    eprintln!("mount.fscrypt-rs: running {}: {err}", exe.display());
    ExitCode::from(1)
}
