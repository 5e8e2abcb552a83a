//! `fscrypt-rs verify`: check that the kernel's on-disk ciphertext under a
//! directory is exactly what fscrypt specifies (spec §11.2).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use fscrypt::MasterKey;
use fscrypt_linux::verify::{self, Outcome};

use crate::support::kernel;

/// Exit code when at least one object mismatched (or could not be verified).
pub const EXIT_MISMATCH: u8 = 3;

/// Arguments of `fscrypt-rs verify`.
#[derive(clap::Args, Debug)]
#[command(
    about = "Verify the kernel's on-disk ciphertext under a directory (ext4, root)",
    long_about = "For every regular file, directory and symlink under DIR (an unlocked \
                  directory on a mounted ext4 filesystem), read what the kernel stored on disk \
                  (data blocks, directory entries, symlink blobs, encryption contexts) from the \
                  block device after sync, recompute it from the policy, the nonces and the \
                  master key, and compare byte for byte. Prints `ok` or `MISMATCH` (with the \
                  first differing offset) per object and a summary line.\n\nThe master key \
                  (the same raw bytes given to add-key) is read from --key-file. Needs root \
                  to read the block device.\n\nExit status: 0 all ok; 3 a mismatch or an \
                  object that could not be verified; 1 error."
)]
pub struct Args {
    /// Directory to verify (recursively).
    pub dir: PathBuf,
    /// File holding the raw master key.
    #[arg(long, value_name = "FILE")]
    pub key_file: PathBuf,
    /// Also record per-data-unit plaintext digests of every file into FILE
    /// (0600), to detect later offline changes with --manifest.
    #[arg(long, value_name = "FILE")]
    pub save_manifest: Option<PathBuf>,
    /// Also check every file against a manifest saved earlier with
    /// --save-manifest: catches ciphertext changed while unmounted (which the
    /// kernel then decrypts to different plaintext).
    #[arg(long, value_name = "FILE")]
    pub manifest: Option<PathBuf>,
    /// Print only mismatches, errors and the summary.
    #[arg(long, short)]
    pub quiet: bool,
    /// Print JSON (one document with every object and the summary).
    #[arg(long)]
    pub json: bool,
}

/// Runs `fscrypt-rs verify`.
pub fn exec(args: Args) -> anyhow::Result<ExitCode> {
    let json = args.json;
    kernel::json_errors(json, || exec_inner(args))
}

fn exec_inner(args: Args) -> anyhow::Result<ExitCode> {
    let raw = kernel::read_key(Some(&args.key_file), "the master key")?;
    let master = MasterKey::new(&raw).context("the key file does not hold a valid master key")?;
    let mut objects = Vec::new();
    let mut write_error: Option<std::io::Error> = None;
    let json = args.json;
    let quiet = args.quiet;
    let check = match &args.manifest {
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .with_context(|| format!("{}: cannot read", p.display()))?;
            Some(verify::Manifest::parse(&text).with_context(|| p.display().to_string())?)
        }
        None => None,
    };
    let mut record = args
        .save_manifest
        .as_ref()
        .map(|_| verify::Manifest::default());
    let opts = verify::Options {
        record: record.as_mut(),
        check: check.as_ref(),
    };
    let summary = verify::verify_tree_with(&args.dir, &master, opts, |r| {
        if json {
            let mut o = serde_json::json!({
                "path": r.path.display().to_string(),
                "ino": r.ino,
                "kind": r.kind.as_str(),
                "policy": r.policy,
                "bytes": r.bytes,
            });
            match &r.outcome {
                Outcome::Ok => o["result"] = "ok".into(),
                Outcome::Mismatch { offset, detail } => {
                    o["result"] = "mismatch".into();
                    o["offset"] = (*offset).into();
                    o["detail"] = detail.clone().into();
                }
                Outcome::Error(e) => {
                    o["result"] = "error".into();
                    o["detail"] = e.clone().into();
                }
            }
            objects.push(o);
            return;
        }
        let line = match &r.outcome {
            Outcome::Ok if !quiet => Some(format!(
                "ok        {:<7} {} (inode {}, {} bytes)\n",
                r.kind.as_str(),
                r.path.display(),
                r.ino,
                r.bytes
            )),
            Outcome::Ok => None,
            Outcome::Mismatch { offset, detail } => Some(format!(
                "MISMATCH  {:<7} {} (inode {}): first difference at byte {offset}: {detail}\n",
                r.kind.as_str(),
                r.path.display(),
                r.ino
            )),
            Outcome::Error(e) => Some(format!(
                "ERROR     {:<7} {} (inode {}): {e}\n",
                r.kind.as_str(),
                r.path.display(),
                r.ino
            )),
        };
        if let Some(l) = line
            && write_error.is_none()
            && let Err(e) = kernel::out(format_args!("{l}"))
        {
            write_error = Some(e);
        }
    })?;
    if let Some(e) = write_error {
        // A closed pipe (`verify | head`) still gets the verdict's exit code.
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            return Ok(if summary.all_ok() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(EXIT_MISMATCH)
            });
        }
        return Err(e.into());
    }
    if let (Some(p), Some(m)) = (&args.save_manifest, &record) {
        kernel::write_private_file(p, m.to_text().as_bytes())?;
    }
    if json {
        kernel::print_json(&serde_json::json!({
            "ok": summary.all_ok(),
            "objects": objects,
            "summary": {
                "ok": summary.ok,
                "mismatch": summary.mismatched,
                "errors": summary.errors,
                "unencrypted": summary.unencrypted,
                "file_bytes": summary.file_bytes,
                "seconds": summary.elapsed.as_secs_f64(),
                "mb_per_s": summary.mb_per_s(),
                "policies": summary.policies,
            }
        }))?;
    } else {
        let mut o = String::new();
        o.push_str(&format!(
            "verify: {} objects: {} ok, {} MISMATCH, {} errors ({} unencrypted skipped); \
             {:.1} MB of file data in {:.2} s ({:.1} MB/s)\n",
            summary.ok + summary.mismatched + summary.errors,
            summary.ok,
            summary.mismatched,
            summary.errors,
            summary.unencrypted,
            summary.file_bytes as f64 / 1e6,
            summary.elapsed.as_secs_f64(),
            summary.mb_per_s()
        ));
        for p in &summary.policies {
            o.push_str(&format!("policy: {p}\n"));
        }
        kernel::out(format_args!("{o}"))?;
    }
    Ok(if summary.all_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_MISMATCH)
    })
}
