//! `fscrypt-rs image extract IMAGE [PATH] DEST`.

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::process::ExitCode;

use fscrypt_ext4::InodeKind;
use fscrypt_ext4::image::extract::{self, Options, Progress};

/// Arguments of `fscrypt-rs image extract`.
#[derive(clap::Args, Debug)]
#[command(
    long_about = "Copy PATH (default: the whole filesystem) out of the image to DEST: a \
                  directory becomes DEST (created, or an existing directory), anything else is \
                  written at DEST (or DEST/NAME when DEST is a directory). Contents, symlinks, \
                  hard links (as links), FIFOs and sockets, modes, timestamps, user xattrs, POSIX \
                  ACLs and, as root, trusted/security xattrs are restored (a failure \
                  to set one is reported for that object); holes stay holes. The image is \
                  untrusted: owners are restored only with --same-owner, and setuid/setgid \
                  bits, device nodes and security.capability only with --preserve-special \
                  (each one left out is named on stderr). Each file is written under a temporary name \
                  and renamed into place. Objects whose key was not given are reported and \
                  skipped, never written as ciphertext. Exit status 1 if anything was skipped \
                  or failed."
)]
pub struct Args {
    #[command(flatten)]
    pub image: super::ImageArgs,
    /// What to extract (a path in the image), then the destination. With one
    /// argument it is DEST and the whole filesystem is extracted.
    #[arg(required = true, num_args = 1..=2, value_name = "[PATH] DEST")]
    pub paths: Vec<OsString>,
    /// Restore the owners recorded in the image (needs root); otherwise
    /// everything extracted belongs to the caller.
    #[arg(long)]
    pub same_owner: bool,
    /// Restore setuid/setgid bits, device nodes, file capabilities
    /// (`security.capability`) and, as root, the other `trusted.*` and
    /// `security.*` xattrs from the image; otherwise they are left out,
    /// each named on stderr.
    #[arg(long)]
    pub preserve_special: bool,
    /// Do not print progress on stderr.
    #[arg(long, short)]
    pub quiet: bool,
}

/// Runs `fscrypt-rs image extract`.
pub fn exec(args: Args) -> anyhow::Result<ExitCode> {
    let (path, dest) = match args.paths.as_slice() {
        [d] => (OsString::from("/"), PathBuf::from(d)),
        [p, d] => (p.clone(), PathBuf::from(d)),
        _ => anyhow::bail!("give [PATH] DEST"),
    };
    let img = args.image.open()?;
    let (node, shown) = img.resolve(path.as_bytes())?;
    let mut dest = dest;
    if node.kind() != InodeKind::Directory && dest.is_dir() {
        let name = path.as_bytes().rsplit(|&c| c == b'/').next().unwrap_or(b"");
        if !name.is_empty() {
            dest = dest.join(std::ffi::OsStr::from_bytes(name));
        }
    }
    let bar = if args.quiet {
        indicatif::ProgressBar::hidden()
    } else {
        let b =
            indicatif::ProgressBar::with_draw_target(None, indicatif::ProgressDrawTarget::stderr());
        b.set_style(
            indicatif::ProgressStyle::with_template(
                "{spinner} {pos} objects, {msg} [{elapsed_precise}]",
            )
            .expect("valid template"),
        );
        b
    };
    let start = std::time::Instant::now();
    let mut progress = |p: Progress| {
        bar.set_position(p.objects);
        let secs = start.elapsed().as_secs_f64().max(1e-3);
        bar.set_message(format!(
            "{:.1} MiB ({:.1} MiB/s)",
            p.bytes as f64 / 1048576.0,
            p.bytes as f64 / 1048576.0 / secs
        ));
    };
    let root = rustix::process::geteuid().is_root();
    let opts = Options {
        owners: args.same_owner,
        special: args.preserve_special,
        privileged_xattrs: root && args.preserve_special,
    };
    let report = extract::extract(&img, &node, &shown, &dest, opts, &mut progress)?;
    bar.finish_and_clear();
    args.image.warn_unmatched(&img);
    for (p, why) in &report.skipped {
        eprintln!("fscrypt-rs: skipped {p}: {why}");
    }
    for (p, e) in &report.errors {
        eprintln!("fscrypt-rs: {p}: {e}");
    }
    for (p, what) in &report.dropped {
        eprintln!("fscrypt-rs: {p}: {what} left out (--preserve-special restores it)");
    }
    if !args.quiet {
        eprintln!(
            "extracted {} files, {} directories, {} symlinks, {} hard links, {} special files, \
             {} bytes, {} xattrs; {} skipped, {} errors",
            report.files,
            report.dirs,
            report.symlinks,
            report.hard_links,
            report.special,
            report.bytes,
            report.xattrs,
            report.skipped.len(),
            report.errors.len()
        );
    }
    Ok(if report.skipped.is_empty() && report.errors.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
