//! `fscrypt-rs fsck CIPHERDIR`: check a vault's backing store
//! (`fscrypt_vault::fsck`), print one line per problem and a summary (or
//! JSON), and with `--repair` remove what interrupted operations left
//! behind.
//!
//! Exit status: [`EXIT_CLEAN`] (0) nothing wrong (or everything repaired),
//! [`EXIT_PROBLEMS`] (1) problems found (remaining after `--repair`),
//! [`EXIT_CANNOT_RUN`] (2) the check could not run (bad arguments, not a
//! vault, a repair on a mounted vault, ...; clap's usage errors are 2 too),
//! [`crate::support::secret::EXIT_WRONG_SECRET`] (12, as `mount`) a wrong passphrase or key
//! file.
//!
//! A mounted vault is recognised by the lock its daemon holds (an advisory
//! `flock` on the backing root, [`fscrypt_vault::fsck::is_locked`]) and, for
//! daemons without that lock, by a `fuse.fscrypt-rs` mount in
//! `/proc/self/mountinfo` whose source is the vault's path. `--repair`
//! refuses a mounted vault and holds the lock while it runs, so no mount
//! can start meanwhile; a check without `--repair` runs, with a warning
//! (operations in progress may show as leftovers) and without the
//! clean-marker check (a read-write mount removes the marker).
//!
//! `--accept-rollback PATH` (with the key, not while mounted) checks
//! nothing: it forgets the record generations this machine remembers for
//! the files at or under PATH (format 3 rollback detection,
//! [`fscrypt_vault::fsck::accept_rollback`]), printing one line per file.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use fscrypt_vault::fsck::{self, Options, Report};

use crate::support::unlock::{ConfigArg, UnlockArgs};

/// Exit status: the vault is clean (or every problem was repaired).
pub const EXIT_CLEAN: u8 = 0;
/// Exit status: problems found (or remaining after `--repair`).
pub const EXIT_PROBLEMS: u8 = 1;
/// Exit status: the check could not run.
pub const EXIT_CANNOT_RUN: u8 = 2;

/// Arguments of `fscrypt-rs fsck`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The vault (directory made by `fscrypt-rs init`).
    pub cipherdir: PathBuf,
    /// How to unlock the vault (names are then decrypted and shown in
    /// plaintext): a passphrase by default.
    #[command(flatten)]
    pub unlock: UnlockArgs,
    /// Where the vault's config is (default: in CIPHERDIR).
    #[command(flatten)]
    pub config: ConfigArg,
    /// Check without the key: structure only, paths shown with no-key names
    /// (no passphrase asked).
    #[arg(long, conflicts_with_all = ["key_file", "recovery_key", "passfile", "extpass"])]
    pub no_key: bool,
    /// Remove what interrupted operations left behind (temporary entries,
    /// orphan long-name side files, 0-byte files, unreferenced symlink
    /// store objects, stale data units past a file's size), give empty
    /// directories without metadata a fresh one, write a missing clean
    /// marker. Format 3 (with the key): cut a file a crash left longer
    /// than its authenticated size back, make data units that fail their
    /// tag (torn by a power loss, or tampered) holes that read as zeros,
    /// drop stale bindings from file records. Never touches anything else.
    /// Refused while the vault is mounted.
    #[arg(long)]
    pub repair: bool,
    /// Print the report as one JSON object.
    #[arg(long)]
    pub json: bool,
    /// Check nothing: accept a restore made on purpose of the files at or
    /// under PATH (a path inside the vault, as the mount shows it, `/`
    /// for all): forget the generations this machine remembers for them,
    /// so a format 3 mount opens them again instead of reporting a
    /// rollback. One line per file. Needs the key; refused while mounted.
    #[arg(long, value_name = "PATH", conflicts_with_all = ["repair", "json", "no_key"])]
    pub accept_rollback: Option<String>,
}

/// Runs `fscrypt-rs fsck`.
pub fn exec(args: Args) -> anyhow::Result<ExitCode> {
    match run(&args) {
        Ok(code) => Ok(code),
        Err(e) => {
            if let Some(io) = e.downcast_ref::<std::io::Error>()
                && io.kind() == std::io::ErrorKind::BrokenPipe
            {
                return Ok(ExitCode::from(EXIT_PROBLEMS));
            }
            // One line, each cause once (an I/O error's text is often in
            // its context's too: "Permission denied" twice otherwise).
            eprintln!("fscrypt-rs: fsck: {}", crate::error_text(&e));
            Ok(ExitCode::from(EXIT_CANNOT_RUN))
        }
    }
}

/// Whether a `fuse.fscrypt-rs` mount serves `cipherdir` (its source is the
/// vault's canonical path, the daemon's default `fsname`).
fn mounted_per_mountinfo(cipherdir: &Path) -> bool {
    let Ok(canon) = std::fs::canonicalize(cipherdir) else {
        return false;
    };
    let canon = canon.to_string_lossy().into_owned();
    fscrypt_linux::mountinfo::read_mountinfo()
        .map(|mounts| {
            mounts
                .iter()
                .any(|m| m.fs_type == "fuse.fscrypt-rs" && m.source == canon)
        })
        .unwrap_or(false)
}

fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let vault = args.config.open(&args.cipherdir)?;
    // What refuses the command is checked before a secret is asked for
    // (issue 26 item 5): a mounted vault for --repair and --accept-rollback.
    let by_mountinfo = mounted_per_mountinfo(&args.cipherdir);
    if args.accept_rollback.is_some() && (by_mountinfo || fsck::is_locked(&args.cipherdir)?) {
        bail!(
            "{} is mounted: unmount it before fsck --accept-rollback (a mount keeps its own copy of the remembered generations)",
            args.cipherdir.display()
        );
    }
    if args.repair && by_mountinfo {
        bail!(
            "{} is mounted (a fuse.fscrypt-rs mount in /proc/self/mountinfo): unmount it before fsck --repair",
            args.cipherdir.display()
        );
    }
    let master = if args.no_key {
        None
    } else {
        let prompt = format!("Passphrase for {}: ", args.cipherdir.display());
        match args.unlock.unwrap(
            &vault,
            None,
            &prompt,
            Some("or check without the key: --no-key"),
        )? {
            Ok((raw, _)) => Some(vault.master_key_from_bytes(&raw)?),
            Err(code) => return Ok(code),
        }
    };
    if let Some(under) = &args.accept_rollback {
        return accept_rollback(args, &vault, master.as_ref(), under);
    }
    let mounted = by_mountinfo || (!args.repair && fsck::is_locked(&args.cipherdir)?);
    if mounted {
        eprintln!(
            "fscrypt-rs: fsck: warning: {} is mounted: operations in progress may show as problems, and the clean marker is not checked; unmount it for an exact check",
            args.cipherdir.display()
        );
    }
    let report = fsck::check(
        &args.cipherdir,
        vault.policy(),
        &Options {
            master: master.as_ref(),
            repair: args.repair,
            check_clean_marker: !mounted,
        },
    )?;
    drop(master);
    let mut out = std::io::stdout().lock();
    if args.json {
        writeln!(out, "{}", json(&args.cipherdir, &report, mounted))?;
    } else {
        print_text(&mut out, &args.cipherdir, &report)?;
    }
    out.flush()?;
    Ok(ExitCode::from(if report.remaining() == 0 {
        EXIT_CLEAN
    } else {
        EXIT_PROBLEMS
    }))
}

/// `--accept-rollback PATH`: forgets the remembered generations of the
/// files at or under `under`, in the store of this machine
/// ([`fscrypt_vault::integrity::generations::GenerationStore::default_dir`]).
fn accept_rollback(
    args: &Args,
    vault: &fscrypt_vault::Vault,
    master: Option<&fscrypt::MasterKey>,
    under: &str,
) -> anyhow::Result<ExitCode> {
    use fscrypt_vault::integrity::generations::GenerationStore;
    let Some(dir) = GenerationStore::default_dir(&vault.key_identifier()) else {
        bail!("no state directory: set XDG_STATE_HOME or HOME (or FSCRYPT_RS_STATE_DIR)");
    };
    let mut out = std::io::stdout().lock();
    if !dir.is_dir() {
        writeln!(
            out,
            "nothing to accept under {under}: this machine remembers no generation of this vault"
        )?;
        return Ok(ExitCode::from(EXIT_CLEAN));
    }
    let store = GenerationStore::open(&dir)
        .with_context(|| format!("opening the generation store {}", dir.display()))?;
    let accepted =
        fsck::accept_rollback(&args.cipherdir, vault.policy(), master, under, &store, &dir)?;
    for (path, seen) in &accepted {
        writeln!(
            out,
            "accepted: {path} (generation {seen} remembered, now forgotten: the file opens as it is)"
        )?;
    }
    if accepted.is_empty() {
        writeln!(
            out,
            "nothing to accept under {under}: no file there has a remembered generation"
        )?;
    } else {
        writeln!(out, "{} file(s) accepted under {under}", accepted.len())?;
    }
    out.flush()?;
    Ok(ExitCode::from(EXIT_CLEAN))
}

fn backing_path(cipherdir: &Path, rel: &str) -> String {
    let base = fsck::show_bytes(cipherdir.as_os_str().as_encoded_bytes());
    if rel.is_empty() {
        base
    } else if base.ends_with('/') {
        format!("{base}{rel}")
    } else {
        format!("{base}/{rel}")
    }
}

fn print_text(out: &mut impl Write, cipherdir: &Path, r: &Report) -> anyhow::Result<()> {
    for p in &r.problems {
        let path = match &p.path {
            Some(path) => format!(" ({path})"),
            None => String::new(),
        };
        writeln!(
            out,
            "{}: {}{path}: {}; {}",
            p.kind,
            backing_path(cipherdir, &p.backing),
            p.detail,
            p.action
        )?;
    }
    for c in &r.conflicts {
        let path = match &c.path {
            Some(path) => format!(" ({path})"),
            None => String::new(),
        };
        writeln!(
            out,
            "conflict-copy: {}{path}: a sync tool's conflict copy (not damage); compare it with the original through a mount and keep one",
            backing_path(cipherdir, &c.backing),
        )?;
    }
    let s = &r.stats;
    let outcome = if r.problems.is_empty() {
        "clean".to_owned()
    } else if r.repair {
        format!(
            "{} problem(s): {} repaired, {} remaining",
            r.problems.len(),
            r.repaired(),
            r.remaining()
        )
    } else {
        format!(
            "{} problem(s): {} repairable with --repair, {} not",
            r.problems.len(),
            r.repairable(),
            r.problems.len() - r.repairable()
        )
    };
    writeln!(
        out,
        "fsck {} ({}): {} directories, {} files, {} symlinks, {} special files, {} symlink store objects; {outcome}",
        fsck::show_bytes(cipherdir.as_os_str().as_encoded_bytes()),
        if r.with_key {
            "with the key"
        } else {
            "without the key: no-key names"
        },
        s.directories,
        s.files,
        s.symlinks,
        s.special,
        s.store_objects,
    )
    .context("writing the report")?;
    Ok(())
}

fn json(cipherdir: &Path, r: &Report, mounted: bool) -> serde_json::Value {
    let problems: Vec<_> = r
        .problems
        .iter()
        .map(|p| {
            serde_json::json!({
                "kind": p.kind.as_str(),
                "backing_path": backing_path(cipherdir, &p.backing),
                "path": p.path,
                "detail": p.detail,
                "unit": p.unit,
                "status": p.action.status(),
                "action": p.action.to_string(),
            })
        })
        .collect();
    serde_json::json!({
        "cipherdir": fsck::show_bytes(cipherdir.as_os_str().as_encoded_bytes()),
        "with_key": r.with_key,
        "repair": r.repair,
        "mounted": mounted,
        "stats": {
            "directories": r.stats.directories,
            "files": r.stats.files,
            "symlinks": r.stats.symlinks,
            "special": r.stats.special,
            "store_objects": r.stats.store_objects,
        },
        "problems": problems,
        "conflict_copies": r
            .conflicts
            .iter()
            .map(|c| serde_json::json!({
                "backing_path": backing_path(cipherdir, &c.backing),
                "path": c.path,
            }))
            .collect::<Vec<_>>(),
        "repaired": r.repaired(),
        "remaining": r.remaining(),
        "clean": r.remaining() == 0,
    })
}
