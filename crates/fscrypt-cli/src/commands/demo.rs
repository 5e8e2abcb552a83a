//! `fscrypt-rs demo`: the main job end to end, printing each step.
//!
//! Makes a vault with a generated key file in a fresh temporary directory,
//! mounts it (background daemon, like `fscrypt-rs mount`), copies a real
//! directory tree into it (`/usr/share/doc` by default, bounded), verifies
//! every file through the mount by SHA-256, shows backing names and
//! ciphertext next to plaintext, remounts without the key to show no-key
//! names, then unmounts and removes everything, also on error or Ctrl-C.
//! Installs nothing.

use std::io::Read;
use std::os::unix::fs::{DirEntryExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use anyhow::{Context, bail};
use fscrypt_fuse::vault::{InitOptions, Vault};

use crate::support::secret;

/// Arguments of `fscrypt-rs demo`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Directory tree to copy into the vault (default: /usr/share/doc, or
    /// this project's sources when that is missing).
    #[arg(long)]
    pub source: Option<PathBuf>,
    /// Copy at most this many files.
    #[arg(long, default_value_t = 3000)]
    pub max_files: usize,
    /// Copy at most this many MiB in total.
    #[arg(long, default_value_t = 48)]
    pub max_mib: u64,
    /// Where to make the temporary directory (default: $TMPDIR or /tmp).
    #[arg(long)]
    pub tmp: Option<PathBuf>,
}

/// Files larger than this are skipped (bytes).
const MAX_FILE: u64 = 8 << 20;
/// First bytes of a backing regular file that hold its header (the data
/// units follow; docs/vault-format.md).
const HEADER_SIZE: u64 = 4096;

/// One copied entry.
struct Entry {
    rel: PathBuf,
    kind: EntryKind,
}

enum EntryKind {
    File { sha256: [u8; 32], len: u64 },
    Dir,
    Symlink(PathBuf),
}

/// Removes the demo's traces when dropped: unmounts, then deletes the
/// temporary directory.
struct Cleanup {
    root: PathBuf,
    mountpoint: PathBuf,
    mounted: bool,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        if self.mounted
            && let Err(e) = unmount(&self.mountpoint)
        {
            eprintln!("demo: cleanup: {e:#}");
        }
        match std::fs::remove_dir_all(&self.root) {
            Ok(()) => println!("demo: removed {}", self.root.display()),
            Err(e) => eprintln!("demo: cleanup: removing {}: {e}", self.root.display()),
        }
    }
}

fn unmount(mountpoint: &Path) -> anyhow::Result<()> {
    super::unmount::unmount_and_wait(mountpoint)?;
    if super::mount::mount_count(mountpoint)? > 0 {
        bail!("{} is still mounted", mountpoint.display());
    }
    Ok(())
}

fn step(n: u32, text: &str) {
    println!("\n[{n}] {text}");
}

fn check_interrupt(flag: &AtomicBool) -> anyhow::Result<()> {
    if flag.load(Ordering::SeqCst) {
        bail!("interrupted");
    }
    Ok(())
}

fn default_source() -> PathBuf {
    let doc = PathBuf::from("/usr/share/doc");
    if std::fs::read_dir(&doc).is_ok_and(|mut d| d.next().is_some()) {
        return doc;
    }
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

fn mount_with(exe: &Path, cipher: &Path, plain: &Path, extra: &[&str]) -> anyhow::Result<()> {
    // The vault's generation store (format 3) lives in the demo's
    // directory too, and goes with it.
    let state = cipher.with_file_name("state");
    let status = Command::new(exe)
        .arg("mount")
        .arg(cipher)
        .arg(plain)
        .args(extra)
        .env(fscrypt_vault::integrity::generations::STATE_DIR_ENV, state)
        .stdin(Stdio::null())
        .status()
        .context("running fscrypt-rs mount")?;
    if !status.success() {
        bail!("fscrypt-rs mount failed ({status})");
    }
    Ok(())
}

/// Exit status after Ctrl-C/SIGTERM (128 + SIGINT, as shells report it).
const EXIT_INTERRUPTED: u8 = 130;

/// Runs `fscrypt-rs demo`.
pub fn exec(args: Args) -> anyhow::Result<ExitCode> {
    let interrupted = Arc::new(AtomicBool::new(false));
    {
        let flag = interrupted.clone();
        // A second handler cannot be installed; then Ctrl-C just kills us,
        // which the mount daemon survives (it is in its own session), so
        // say so instead of failing.
        if ctrlc::set_handler(move || flag.store(true, Ordering::SeqCst)).is_err() {
            eprintln!("demo: warning: no Ctrl-C handler; interrupting will leave the temp dir");
        }
    }
    let result = run(args, &interrupted);
    if interrupted.load(Ordering::SeqCst) {
        // `run` has unmounted and removed its files on the way out.
        eprintln!("demo: interrupted");
        return Ok(ExitCode::from(EXIT_INTERRUPTED));
    }
    result
}

/// The demo's steps; the [`Cleanup`] guard undoes them on every exit path.
fn run(args: Args, interrupted: &AtomicBool) -> anyhow::Result<ExitCode> {
    let exe = std::env::current_exe().context("locating the fscrypt-rs executable")?;
    let source = args.source.clone().unwrap_or_else(default_source);
    let source = std::fs::canonicalize(&source)
        .with_context(|| format!("source tree {}", source.display()))?;

    let base = args.tmp.clone().unwrap_or_else(std::env::temp_dir);
    let mut rnd = [0u8; 6];
    fscrypt_fuse::vault::protector::random_bytes(&mut rnd)?;
    let root = base.join(format!("fscrypt-rs-demo-{}", hex::encode(rnd)));
    std::fs::create_dir(&root).with_context(|| format!("creating {}", root.display()))?;
    std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o700))?;
    let cipher = root.join("cipher");
    let plain = root.join("plain");
    let key_path = root.join("demo.key");
    let mut cleanup = Cleanup {
        root: root.clone(),
        mountpoint: plain.clone(),
        mounted: false,
    };
    std::fs::create_dir(&cipher)?;
    std::fs::create_dir(&plain)?;
    println!("fscrypt-rs demo in {}", root.display());

    step(
        1,
        "init: a vault with a random 64-byte master key, protected by a generated key file",
    );
    let key = secret::generate_key_file(&key_path)?;
    let report = Vault::init(
        &cipher,
        &InitOptions {
            key_file: Some(key),
            ..InitOptions::default()
        },
    )?;
    let p = &report.policy;
    println!("    vault      {}", cipher.display());
    println!(
        "    key file   {} (64 bytes, mode 0600)",
        key_path.display()
    );
    println!("    key id     {}", report.key_identifier);
    println!(
        "    policy     v2, contents {}, filenames {}, names padded to {} bytes",
        p.contents_mode,
        p.filenames_mode,
        p.flags.padding()
    );

    step(
        2,
        "mount: unlock with the key file, FUSE daemon in the background",
    );
    let key_arg = key_path.to_string_lossy().into_owned();
    mount_with(&exe, &cipher, &plain, &["--key-file", &key_arg])?;
    cleanup.mounted = true;
    println!("    {} -> {}", cipher.display(), plain.display());

    step(3, &format!("copy {} into the mount", source.display()));
    let start = Instant::now();
    let (entries, bytes, skipped) = copy_tree(
        &source,
        &plain,
        args.max_files,
        args.max_mib << 20,
        interrupted,
    )?;
    let files = entries
        .iter()
        .filter(|e| matches!(e.kind, EntryKind::File { .. }))
        .count();
    let dirs = entries
        .iter()
        .filter(|e| matches!(e.kind, EntryKind::Dir))
        .count();
    let links = entries.len() - files - dirs;
    let secs = start.elapsed().as_secs_f64();
    println!(
        "    {files} files, {dirs} directories, {links} symlinks, {:.1} MiB in {secs:.2} s ({:.1} MiB/s){}",
        bytes as f64 / 1048576.0,
        bytes as f64 / 1048576.0 / secs.max(1e-3),
        if skipped.total() > 0 {
            format!("; {} entries left out:", skipped.total())
        } else {
            String::new()
        }
    );
    print!("{}", skipped.report(&args));

    step(
        4,
        "verify: read every file back through the mount and compare SHA-256",
    );
    let start = Instant::now();
    let mut checked = 0usize;
    for e in &entries {
        check_interrupt(interrupted)?;
        let path = plain.join(&e.rel);
        match &e.kind {
            EntryKind::File { sha256, len } => {
                let data =
                    std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
                if data.len() as u64 != *len || fscrypt_crypto::sha256(&data) != *sha256 {
                    bail!("{}: content differs after the round trip", e.rel.display());
                }
                checked += 1;
            }
            EntryKind::Symlink(target) => {
                let got = std::fs::read_link(&path)?;
                if &got != target {
                    bail!("{}: symlink target differs", e.rel.display());
                }
            }
            EntryKind::Dir => {
                if !path.is_dir() {
                    bail!("{}: directory missing", e.rel.display());
                }
            }
        }
    }
    println!(
        "    {checked} files identical (SHA-256), symlinks and directories present, in {:.2} s",
        start.elapsed().as_secs_f64()
    );

    step(5, "the backing store: encrypted names and contents");
    show_backing(&plain, &cipher, &entries)?;

    step(
        6,
        "remount without the key (--locked): the kernel's no-key names",
    );
    // A top-level file to try reading without the key, recognised after the
    // remount by its inode number (the filesystem reports backing inode
    // numbers, which do not change).
    let sample = entries
        .iter()
        .filter(|e| matches!(e.kind, EntryKind::File { .. }))
        .find_map(|e| {
            Some((
                e.rel.clone(),
                std::fs::symlink_metadata(plain.join(&e.rel)).ok()?.ino(),
            ))
        });
    unmount(&plain)?;
    cleanup.mounted = false;
    mount_with(&exe, &cipher, &plain, &["--locked"])?;
    cleanup.mounted = true;
    let mut listing: Vec<(String, u64)> = std::fs::read_dir(&plain)?
        .filter_map(|e| e.ok())
        .map(|e| (e.file_name().to_string_lossy().into_owned(), e.ino()))
        .collect();
    listing.sort();
    println!(
        "    ls {} (first entries of {}):",
        plain.display(),
        listing.len()
    );
    for (n, _) in listing.iter().take(5) {
        println!("      {n}");
    }
    if let Some((rel, ino)) = sample
        && let Some(locked_path) = find_by_ino(&plain, ino)
    {
        let shown = locked_path
            .strip_prefix(&plain)
            .unwrap_or(&locked_path)
            .display()
            .to_string();
        println!("    {} is now {shown}", rel.display());
        match std::fs::read(&locked_path) {
            Ok(_) => bail!("reading {} without the key succeeded", rel.display()),
            Err(e) => println!("    reading it without the key: {e}"),
        }
    }
    unmount(&plain)?;
    cleanup.mounted = false;

    step(7, "unmounted; cleaning up");
    drop(cleanup);
    println!("\ndemo: all steps passed");
    Ok(ExitCode::SUCCESS)
}

fn show_backing(plain: &Path, cipher: &Path, entries: &[Entry]) -> anyhow::Result<()> {
    // Pair top-level plaintext names with backing names by inode number
    // (fscrypt-fuse reports the backing inode numbers).
    let mut backing = std::collections::HashMap::new();
    for e in std::fs::read_dir(cipher)?.filter_map(|e| e.ok()) {
        backing.insert(e.ino(), e.file_name());
    }
    println!("    plaintext name               -> backing name (base64url of the encrypted name)");
    let mut shown = 0;
    for e in entries.iter().filter(|e| e.rel.components().count() == 1) {
        let Ok(meta) = std::fs::symlink_metadata(plain.join(&e.rel)) else {
            continue;
        };
        if let Some(name) = backing.get(&meta.ino()) {
            println!("    {:<28} -> {}", e.rel.display(), name.to_string_lossy());
            shown += 1;
            if shown == 4 {
                break;
            }
        }
    }
    if shown == 0 {
        let mut names: Vec<_> = backing
            .values()
            .map(|n| n.to_string_lossy().into_owned())
            .collect();
        names.sort();
        for n in names.iter().take(4) {
            println!("    backing name: {n}");
        }
    }
    println!(
        "    also in the backing root: {} (policy, wrapped master key) and fscrypt.dir (root context)",
        fscrypt_fuse::vault::CONFIG_NAME
    );
    // Contents: the first bytes of one file and of its backing data unit 0.
    let found = entries.iter().find_map(|e| match e.kind {
        EntryKind::File { len, .. } if len >= 32 => {
            let meta = std::fs::symlink_metadata(plain.join(&e.rel)).ok()?;
            Some((e, meta.ino()))
        }
        _ => None,
    });
    if let Some((e, ino)) = found
        && let Some(bpath) = find_by_ino(cipher, ino)
    {
        let mut pt = [0u8; 32];
        std::fs::File::open(plain.join(&e.rel))?.read_exact(&mut pt)?;
        let mut f = std::fs::File::open(&bpath)?;
        let mut ct = [0u8; 32];
        std::io::Seek::seek(&mut f, std::io::SeekFrom::Start(HEADER_SIZE))?;
        f.read_exact(&mut ct)?;
        println!("    file {}", e.rel.display());
        println!("      plaintext  {}  {}", hex::encode(pt), printable(&pt));
        println!(
            "      ciphertext {}  (backing {}, data unit 0 at offset {HEADER_SIZE})",
            hex::encode(ct),
            bpath.strip_prefix(cipher).unwrap_or(&bpath).display()
        );
    }
    Ok(())
}

fn printable(b: &[u8]) -> String {
    b.iter()
        .map(|&c| {
            if (0x20..0x7f).contains(&c) {
                c as char
            } else {
                '.'
            }
        })
        .collect()
}

/// Finds the backing path with inode number `ino` under `dir`.
fn find_by_ino(dir: &Path, ino: u64) -> Option<PathBuf> {
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).ok()?.filter_map(|e| e.ok()) {
            if e.ino() == ino {
                return Some(e.path());
            }
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(e.path());
            }
        }
    }
    None
}

/// Why an entry of the source tree was not copied.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum SkipReason {
    /// A regular file over [`MAX_FILE`].
    TooLarge,
    /// `--max-files` reached.
    MaxFiles,
    /// `--max-mib` reached.
    MaxBytes,
    /// A device, FIFO or socket.
    Special,
    /// Could not be read (permissions, vanished).
    Unreadable,
}

/// How many example paths each reason lists.
const SKIP_EXAMPLES: usize = 3;

/// What `copy_tree` left out, by reason, with the first few paths.
#[derive(Default, Debug)]
struct Skipped {
    by_reason: std::collections::BTreeMap<SkipReason, (usize, Vec<PathBuf>)>,
    /// The copy stopped at a limit: the rest of the tree was not visited.
    stopped: bool,
}

impl Skipped {
    fn add(&mut self, reason: SkipReason, rel: &Path) {
        let (count, examples) = self.by_reason.entry(reason).or_default();
        *count += 1;
        if examples.len() < SKIP_EXAMPLES {
            examples.push(rel.to_path_buf());
        }
    }

    fn total(&self) -> usize {
        self.by_reason.values().map(|(n, _)| n).sum()
    }

    /// Indented lines: a count per reason and its first paths.
    fn report(&self, args: &Args) -> String {
        let mut out = String::new();
        for (reason, (count, examples)) in &self.by_reason {
            let why = match reason {
                SkipReason::TooLarge => format!("larger than {} MiB", MAX_FILE >> 20),
                SkipReason::MaxFiles => format!("over --max-files {}", args.max_files),
                SkipReason::MaxBytes => format!("over --max-mib {}", args.max_mib),
                SkipReason::Special => "device, FIFO or socket".to_owned(),
                SkipReason::Unreadable => "not readable".to_owned(),
            };
            let list: Vec<String> = examples.iter().map(|p| p.display().to_string()).collect();
            out.push_str(&format!(
                "      {count} {why}: {}{}\n",
                list.join(", "),
                if *count > examples.len() { ", ..." } else { "" }
            ));
        }
        if self.stopped {
            out.push_str(
                "      (the copy stopped at the limit; the rest of the tree was not visited)\n",
            );
        }
        out
    }
}

/// Copies `src` into `dst` depth-first in name order, within the limits.
/// Returns the entries copied, the bytes of file contents, and what was
/// left out and why.
fn copy_tree(
    src: &Path,
    dst: &Path,
    max_files: usize,
    max_bytes: u64,
    interrupted: &AtomicBool,
) -> anyhow::Result<(Vec<Entry>, u64, Skipped)> {
    let mut entries = Vec::new();
    let mut bytes = 0u64;
    let mut files = 0usize;
    let mut skipped = Skipped::default();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel_dir) = stack.pop() {
        let mut children: Vec<_> = match std::fs::read_dir(src.join(&rel_dir)) {
            Ok(d) => d.filter_map(|e| e.ok()).collect(),
            Err(_) => {
                skipped.add(SkipReason::Unreadable, &rel_dir);
                continue;
            }
        };
        children.sort_by_key(|e| e.file_name());
        let mut subdirs = Vec::new();
        for child in children {
            check_interrupt(interrupted)?;
            let rel = rel_dir.join(child.file_name());
            let Ok(meta) = std::fs::symlink_metadata(child.path()) else {
                skipped.add(SkipReason::Unreadable, &rel);
                continue;
            };
            let ft = meta.file_type();
            if ft.is_dir() {
                std::fs::create_dir(dst.join(&rel))
                    .with_context(|| format!("mkdir {}", rel.display()))?;
                entries.push(Entry {
                    rel: rel.clone(),
                    kind: EntryKind::Dir,
                });
                subdirs.push(rel);
            } else if ft.is_symlink() {
                let target = std::fs::read_link(child.path())?;
                std::os::unix::fs::symlink(&target, dst.join(&rel))
                    .with_context(|| format!("symlink {}", rel.display()))?;
                entries.push(Entry {
                    rel,
                    kind: EntryKind::Symlink(target),
                });
            } else if ft.is_file()
                && meta.len() <= MAX_FILE
                && files < max_files
                && bytes + meta.len() <= max_bytes
            {
                let Ok(data) = std::fs::read(child.path()) else {
                    skipped.add(SkipReason::Unreadable, &rel);
                    continue;
                };
                std::fs::write(dst.join(&rel), &data)
                    .with_context(|| format!("writing {}", rel.display()))?;
                bytes += data.len() as u64;
                files += 1;
                entries.push(Entry {
                    rel,
                    kind: EntryKind::File {
                        sha256: fscrypt_crypto::sha256(&data),
                        len: data.len() as u64,
                    },
                });
            } else if !ft.is_file() {
                skipped.add(SkipReason::Special, &rel);
            } else if meta.len() > MAX_FILE {
                skipped.add(SkipReason::TooLarge, &rel);
            } else if files >= max_files {
                skipped.add(SkipReason::MaxFiles, &rel);
            } else {
                skipped.add(SkipReason::MaxBytes, &rel);
            }
        }
        // Depth-first, in name order.
        stack.extend(subdirs.into_iter().rev());
        if files >= max_files || bytes >= max_bytes {
            skipped.stopped = !stack.is_empty();
            break;
        }
    }
    Ok((entries, bytes, skipped))
}
