//! `fscrypt-rs mount CIPHERDIR MOUNTPOINT`: unlock a vault and mount it
//! through FUSE. The filesystem is `fscrypt_fuse::mount`; the key handling
//! is `fscrypt_fuse::vault`.
//!
//! By default the command returns once the mount is established: the
//! parent unlocks the vault (so a wrong passphrase or key file is reported
//! by the parent's exit code, [`secret::EXIT_WRONG_SECRET`]), then re-runs
//! itself as a daemon (`--foreground`, new session, master key handed over
//! on a pipe to its stdin, its error messages on a pipe from its stdout),
//! and waits until the mount point shows up in `/proc/self/mountinfo` or
//! the daemon exits.
//!
//! Before any secret is asked for, the mount point and the vault are
//! checked (`mounts.rs`): a non-empty directory (unless `--nonempty`), a
//! mount or a dead mount already there, a mount point inside the vault or
//! the vault inside it, and a vault mounted elsewhere are refused, each
//! with a one-line reason. The mount point is opened once there
//! (`fscrypt_fuse::MountPoint`) and the daemon inherits that descriptor
//! (`--mountpoint-fd`): it mounts on the directory that was checked, never
//! on what the path names later. Without root, the daemon mounts through
//! the setuid `fusermount3` and runs as the caller, on `/dev/fuse` unless
//! `-o io_uring`.
//!
//! The same binary is the mount(8) helper when called as
//! `mount.fscrypt-rs` (a symlink to `fscrypt-rs`), so an fstab line works:
//!
//! ```text
//! /srv/vault  /mnt/vault  fscrypt-rs  keyfile=/etc/fscrypt-rs/vault.key,allow_other,nofail  0  0
//! ```
//!
//! mount(8) runs `mount.fscrypt-rs SOURCE MOUNTPOINT [-sfnv] [-N NS] [-o OPTIONS] [-t TYPE]`;
//! on an existing mount (`mount -o remount,ro MOUNTPOINT`) it looks for
//! `mount.fuse.fscrypt-rs` (the type in mountinfo is `fuse.fscrypt-rs`),
//! the helper's second name, and passes `remount` among the options
//! ([`remount`]).

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use fscrypt_crypto::SecretBuf;
use fscrypt_fuse::vault::Vault;

use crate::support::secret;
use crate::support::unlock::{ConfigArg, UnlockArgs};

/// How long the parent waits for the daemon's mount to appear.
const MOUNT_TIMEOUT: Duration = Duration::from_secs(60);

/// Arguments of `fscrypt-rs mount`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The vault (directory made by `fscrypt-rs init`).
    pub cipherdir: PathBuf,
    /// Where the decrypted view appears (an existing directory).
    pub mountpoint: PathBuf,
    /// How to unlock the vault: a passphrase by default (the terminal, or
    /// one line from stdin when it is not a terminal).
    #[command(flatten)]
    pub unlock: UnlockArgs,
    /// Where the vault's config is (default: in CIPHERDIR); `-o
    /// config=FILE` in fstab.
    #[command(flatten)]
    pub config: ConfigArg,
    /// Mount without the key: no-key names, no contents (like the kernel
    /// without the key).
    #[arg(long, conflicts_with_all = ["key_file", "recovery_key", "passfile", "extpass"])]
    pub locked: bool,
    /// Stay in the foreground until unmounted.
    #[arg(long, short = 'f')]
    pub foreground: bool,
    /// Mount even over a non-empty directory (its entries stay hidden
    /// until the vault is unmounted); `-o nonempty` in fstab.
    #[arg(long)]
    pub nonempty: bool,
    /// Mount options, comma-separated: ro or rw (a backing directory that
    /// cannot be written is mounted ro, with a warning), allow_other, suid and dev
    /// (root only; the default is nosuid,nodev; the last of suid/nosuid
    /// and of dev/nodev wins), noexec (or exec, the default), nonempty,
    /// sharedstorage (other mounts, e.g. other machines on one NAS, may
    /// serve the vault at the same time: names and attributes are not
    /// cached, see README "Sharing a vault between machines"), acl (POSIX
    /// ACLs: setfacl, getfacl, cp -a and rsync -A keep them, the kernel
    /// enforces them; off by default because ls -l then costs one request
    /// per entry), io_uring or noio_uring (serve
    /// through FUSE over io_uring where the kernel offers it, or not; the
    /// default is io_uring for root, /dev/fuse for everyone else),
    /// fsname=NAME, idle=DURATION (as --idle),
    /// and for fstab keyfile=PATH, passfile=PATH or extpass=CMD (as
    /// --key-file, --passfile, --extpass; write a space in CMD as \040 in
    /// fstab; CMD cannot contain a comma), config=FILE (as --config), and
    /// the fstab-only options
    /// mount(8) passes on (defaults,
    /// noauto, nofail, _netdev, x-*, ...), which are ignored. With
    /// allow_other (or acl) the kernel checks permissions
    /// (default_permissions); without, only the mounting user reaches the
    /// mount and the backing directory checks with that user's rights
    /// (default_permissions asks for the kernel's checks anyway, at one
    /// round trip per change in a directory).
    #[arg(short = 'o', value_delimiter = ',')]
    pub options: Vec<String>,
    /// Unmount once nothing has used the mount for DURATION (30s, 10m,
    /// 1h, 1h30m): no request served and no file or directory open; a
    /// busy mount (a shell's working directory in it, say) waits for the
    /// next idle period. `-o idle=DURATION` in fstab (gocryptfs `-idle`).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub idle: Option<Duration>,
    /// Ignore unknown mount options instead of failing (mount(8) `-s`).
    #[arg(long, hide = true)]
    pub sloppy: bool,
    /// Append the daemon's log to this file (default: discarded when in
    /// the background).
    #[arg(long)]
    pub log_file: Option<PathBuf>,
    /// Reverse mode (gocryptfs -reverse): CIPHERDIR is a plaintext
    /// directory prepared with `fscrypt-rs init --reverse`; MOUNTPOINT
    /// shows it, read-only, as an authenticated vault (encrypted names,
    /// contents, tags and its config), byte for byte the same at every
    /// mount, for rsync, restic or borg to copy. A copy opens with
    /// `fscrypt-rs mount`. README "Encrypted backups: reverse mode".
    #[arg(long, conflicts_with = "locked")]
    pub reverse: bool,
    /// With --reverse: leave out entries matching PATTERN (repeatable).
    /// A pattern without `/` matches a name at any depth (`*.tmp`), one
    /// with `/` the path from CIPHERDIR (`/build`, `src/*/target`); `*`
    /// stops at `/`, `**` does not, `?` is one character; a trailing `/`
    /// matches directories only.
    #[arg(long, value_name = "PATTERN", requires = "reverse")]
    pub exclude: Vec<String>,
    /// With --reverse: read more --exclude patterns from FILE, one per
    /// line (empty lines and lines starting with `#` are skipped).
    #[arg(long, value_name = "FILE", requires = "reverse")]
    pub exclude_from: Vec<PathBuf>,
    /// Internal: read the 64-byte master key from stdin (used by the
    /// background parent when it starts the daemon).
    #[arg(long, hide = true)]
    pub master_key_stdin: bool,
    /// Internal: the mount point as the descriptor the parent opened and
    /// checked (inherited), so the daemon never looks the path up again.
    #[arg(long, hide = true)]
    pub mountpoint_fd: Option<i32>,
}

/// Mount options after parsing `-o`.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct MountOptions {
    /// `ro`.
    pub read_only: bool,
    /// `allow_other`.
    pub allow_other: bool,
    /// `suid` (root only; default `nosuid`).
    pub suid: bool,
    /// `dev` (root only; default `nodev`).
    pub dev: bool,
    /// `noexec` (default `exec`).
    pub noexec: bool,
    /// `fsname=`.
    pub fs_name: Option<String>,
    /// `keyfile=`.
    pub key_file: Option<PathBuf>,
    /// `passfile=`.
    pub passfile: Option<PathBuf>,
    /// `extpass=`.
    pub extpass: Option<String>,
    /// `config=`: the vault's config file, kept outside the cipher
    /// directory (as `--config`).
    pub config: Option<PathBuf>,
    /// `nonempty`: mount over a non-empty directory.
    pub nonempty: bool,
    /// `sharedstorage`: other mounts may serve the vault at the same time
    /// (two machines on one NAS or synced folder).
    pub shared_storage: bool,
    /// `acl`: POSIX ACLs (gocryptfs `-acl`).
    pub acl: bool,
    /// `default_permissions`: the kernel checks permissions even without
    /// `allow_other` (where the backing directory would).
    pub default_permissions: bool,
    /// `io_uring` (`Some(true)`) or `noio_uring` (`Some(false)`); neither:
    /// FUSE over io_uring for root's mounts only ([`MountOptions::use_io_uring`]).
    pub io_uring: Option<bool>,
    /// `remount` (the mount(8) helper only: change ro/rw of a mount).
    pub remount: bool,
    /// `idle=DURATION`: unmount once unused that long.
    pub idle: Option<Duration>,
    /// `rw` was given (only to refuse `ro,rw`).
    rw: bool,
}

/// Options mount(8) may pass from fstab that mean nothing to a FUSE
/// daemon; accepted and ignored.
const IGNORED: &[&str] = &[
    "defaults",
    "auto",
    "noauto",
    "nofail",
    "_netdev",
    "user",
    "users",
    "nouser",
    "owner",
    "group",
    "atime",
    "noatime",
    "relatime",
    "strictatime",
    "diratime",
    "nodiratime",
    "async",
    "loud",
    "silent",
];

impl MountOptions {
    /// Parses `-o` option words. `suid`/`nosuid` and `dev`/`nodev`: the
    /// last one given wins, as with mount(8). `ro` with `rw`, and
    /// `io_uring` with `noio_uring`, contradict each other and are refused.
    ///
    /// # Errors
    /// An unknown option (unless `sloppy`), an empty `keyfile=`/`fsname=`,
    /// a contradictory pair.
    pub fn parse(words: &[String], sloppy: bool) -> anyhow::Result<MountOptions> {
        let mut o = MountOptions::default();
        let mut uring_words = (false, false);
        for word in words.iter().map(|w| w.trim()).filter(|w| !w.is_empty()) {
            match word.split_once('=') {
                None if word == "ro" => o.read_only = true,
                None if word == "rw" => o.rw = true,
                None if word == "remount" => o.remount = true,
                None if word == "allow_other" => o.allow_other = true,
                None if word == "suid" => o.suid = true,
                None if word == "nosuid" => o.suid = false,
                None if word == "dev" => o.dev = true,
                None if word == "nodev" => o.dev = false,
                None if word == "exec" => o.noexec = false,
                None if word == "noexec" => o.noexec = true,
                None if word == "nonempty" => o.nonempty = true,
                None if word == "sharedstorage" => o.shared_storage = true,
                None if word == "acl" => o.acl = true,
                None if word == "default_permissions" => o.default_permissions = true,
                None if word == "io_uring" => {
                    uring_words.0 = true;
                    o.io_uring = Some(true);
                }
                None if word == "noio_uring" => {
                    uring_words.1 = true;
                    o.io_uring = Some(false);
                }
                None if IGNORED.contains(&word) => {}
                Some(("keyfile", v)) if !v.is_empty() => o.key_file = Some(PathBuf::from(v)),
                Some(("passfile", v)) if !v.is_empty() => o.passfile = Some(PathBuf::from(v)),
                Some(("extpass", v)) if !v.is_empty() => o.extpass = Some(v.to_owned()),
                Some(("config", v)) if !v.is_empty() => o.config = Some(PathBuf::from(v)),
                Some(("fsname", v)) if !v.is_empty() => o.fs_name = Some(v.to_owned()),
                Some(("idle", v)) => {
                    o.idle =
                        Some(parse_duration(v).with_context(|| format!("mount option {word:?}"))?);
                }
                Some(("comment", _)) => {}
                // What mount(8) passes back from mountinfo on a remount.
                Some(("user_id" | "group_id", _)) if o.remount => {}
                _ if word.starts_with("x-") => {}
                _ if sloppy => {}
                _ => bail!(
                    "unknown mount option {word:?} (known: ro, rw, allow_other, default_permissions, suid, dev, noexec, nonempty, sharedstorage, acl, io_uring, noio_uring, fsname=NAME, idle=DURATION, keyfile=PATH, passfile=PATH, extpass=CMD, config=FILE)"
                ),
            }
        }
        if [
            o.key_file.is_some(),
            o.passfile.is_some(),
            o.extpass.is_some(),
        ]
        .iter()
        .filter(|&&b| b)
        .count()
            > 1
        {
            bail!("give only one of the mount options keyfile=, passfile= and extpass=");
        }
        if o.read_only && o.rw {
            bail!("the mount options ro and rw contradict each other: give one of them");
        }
        if uring_words.0 && uring_words.1 {
            bail!(
                "the mount options io_uring and noio_uring contradict each other: give one of them"
            );
        }
        Ok(o)
    }

    /// Whether to serve through FUSE over io_uring (where the kernel offers
    /// it): as asked with `io_uring`/`noio_uring`, else only for a root
    /// daemon. Without root it is opt-in: the kernel waits for a ring
    /// request without letting its caller be killed, so the callers of a
    /// stopped (SIGSTOP, debugger) ring daemon hang unkillable until it
    /// runs again or its connection is aborted (README).
    pub fn use_io_uring(&self, root: bool) -> bool {
        self.io_uring.unwrap_or(root)
    }

    /// Refuses `suid`/`dev` for a caller who is not root: honouring setuid
    /// files or device nodes from a vault is a way to root for whoever can
    /// write into it.
    ///
    /// # Errors
    /// `suid` or `dev` asked for without root.
    pub fn check_privilege(&self) -> anyhow::Result<()> {
        if (self.suid || self.dev) && !rustix::process::geteuid().is_root() {
            bail!(
                "the mount options suid and dev are for root only: mount without them (the default is nosuid,nodev)"
            );
        }
        Ok(())
    }

    /// The words to pass on to the daemon (everything but the key file,
    /// passphrase file and command, and the config, which the daemon gets
    /// as `--config`).
    fn to_words(&self) -> Vec<String> {
        let mut w = Vec::new();
        if self.read_only {
            w.push("ro".to_owned());
        }
        if self.allow_other {
            w.push("allow_other".to_owned());
        }
        if self.suid {
            w.push("suid".to_owned());
        }
        if self.dev {
            w.push("dev".to_owned());
        }
        if self.noexec {
            w.push("noexec".to_owned());
        }
        if self.shared_storage {
            w.push("sharedstorage".to_owned());
        }
        if self.acl {
            w.push("acl".to_owned());
        }
        if self.default_permissions {
            w.push("default_permissions".to_owned());
        }
        match self.io_uring {
            Some(true) => w.push("io_uring".to_owned()),
            Some(false) => w.push("noio_uring".to_owned()),
            None => {}
        }
        if let Some(name) = &self.fs_name {
            w.push(format!("fsname={name}"));
        }
        if let Some(idle) = self.idle {
            w.push(format!("idle={}s", idle.as_secs()));
        }
        w
    }

    /// The options of `fscrypt-rs mount` (`-o`, and `--idle`, which wins
    /// over `-o idle=`).
    ///
    /// # Errors
    /// As [`MountOptions::parse`].
    fn of(args: &Args) -> anyhow::Result<MountOptions> {
        let mut o = MountOptions::parse(&args.options, args.sloppy)?;
        if args.idle.is_some() {
            o.idle = args.idle;
        }
        Ok(o)
    }
}

/// Parses an idle time: whole numbers each followed by `h`, `m` or `s`
/// (`30s`, `10m`, `1h`, `1h30m`), at least one second, at most a year.
///
/// # Errors
/// Anything else, with the form expected.
pub fn parse_duration(text: &str) -> anyhow::Result<Duration> {
    let bad = || {
        anyhow::anyhow!(
            "bad duration {text:?}: give whole numbers with units h, m or s, such as 30s, 10m, 1h or 1h30m"
        )
    };
    let mut secs: u64 = 0;
    let mut digits = String::new();
    for c in text.trim().chars() {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        let unit = match c {
            'h' => 3600,
            'm' => 60,
            's' => 1,
            _ => return Err(bad()),
        };
        let n: u64 = digits.parse().map_err(|_| bad())?;
        secs = n
            .checked_mul(unit)
            .and_then(|v| secs.checked_add(v))
            .ok_or_else(bad)?;
        digits.clear();
    }
    if !digits.is_empty() || text.trim().is_empty() {
        return Err(bad());
    }
    if secs == 0 {
        bail!("the idle time {text:?} is zero: give at least 1s (or leave idle out)");
    }
    if secs > 366 * 24 * 3600 {
        bail!("the idle time {text:?} is longer than a year: give less (or leave idle out)");
    }
    Ok(Duration::from_secs(secs))
}

/// Counts the mounts stacked at `path` (fscrypt-linux's mountinfo parser).
///
/// # Errors
/// Reading `/proc/self/mountinfo` failed.
pub fn mount_count(path: &Path) -> anyhow::Result<usize> {
    Ok(fscrypt_linux::mountinfo::mounts_at(path)?)
}

/// The unlocked state a mount starts from.
enum Key {
    /// `--locked`.
    Locked,
    /// The raw master key (identifier checked).
    Raw(SecretBuf),
}

/// Name under which the binary acts as the mount(8) helper.
pub const HELPER_NAME: &str = "mount.fscrypt-rs";

/// The helper's second name: mount(8) looks for `mount.fuse.fscrypt-rs`
/// when it works on an existing mount (type `fuse.fscrypt-rs` in
/// mountinfo, as for `mount -o remount,ro MOUNTPOINT`), before fuse3's
/// generic `mount.fuse`, which would run `fscrypt-rs SOURCE MOUNTPOINT`.
pub const HELPER_NAME_FUSE: &str = "mount.fuse.fscrypt-rs";

/// True when argv[0]'s file name is [`HELPER_NAME`] or [`HELPER_NAME_FUSE`].
pub fn invoked_as_helper() -> bool {
    std::env::args_os()
        .next()
        .and_then(|a| {
            Path::new(&a)
                .file_name()
                .map(|n| n == HELPER_NAME || n == HELPER_NAME_FUSE)
        })
        .unwrap_or(false)
}

/// Parses the mount(8) helper command line (without argv[0]):
/// `SOURCE MOUNTPOINT [-sfnv] [-N NS] [-o OPTIONS] [-t TYPE]`. Returns the
/// mount arguments and whether `-f` (fake: do nothing) was given.
///
/// # Errors
/// A malformed command line.
pub fn parse_helper_args(
    argv: impl IntoIterator<Item = std::ffi::OsString>,
) -> anyhow::Result<(Args, bool)> {
    let mut positional: Vec<PathBuf> = Vec::new();
    let mut options: Vec<String> = Vec::new();
    let mut sloppy = false;
    let mut fake = false;
    let mut argv = argv.into_iter();
    while let Some(arg) = argv.next() {
        let text = arg.to_string_lossy().into_owned();
        if text == "-o" {
            let v = argv.next().context("-o needs a value")?;
            options.extend(v.to_string_lossy().split(',').map(str::to_owned));
        } else if let Some(v) = text.strip_prefix("-o") {
            options.extend(v.split(',').map(str::to_owned));
        } else if text == "-t" || text == "-N" {
            // File system type and mount namespace: nothing to do with them.
            argv.next()
                .with_context(|| format!("{text} needs a value"))?;
        } else if text.len() > 1 && text.starts_with('-') {
            for flag in text[1..].chars() {
                match flag {
                    's' => sloppy = true,
                    'f' => fake = true,
                    'n' | 'v' => {}
                    _ => bail!("unknown flag -{flag}"),
                }
            }
        } else {
            positional.push(PathBuf::from(arg));
        }
    }
    let [cipherdir, mountpoint]: [PathBuf; 2] = positional
        .try_into()
        .map_err(|_| anyhow::anyhow!("expected CIPHERDIR MOUNTPOINT"))?;
    let args = Args {
        cipherdir,
        mountpoint,
        unlock: UnlockArgs::default(),
        config: ConfigArg::default(),
        locked: false,
        foreground: false,
        nonempty: false,
        options,
        idle: None,
        sloppy,
        log_file: None,
        reverse: false,
        exclude: Vec::new(),
        exclude_from: Vec::new(),
        master_key_stdin: false,
        mountpoint_fd: None,
    };
    Ok((args, fake))
}

/// Entry point of `mount.fscrypt-rs`: the mount(8) helper. Prints its own
/// errors; exit codes as `fscrypt-rs mount` (12 for a wrong secret).
pub fn helper_main() -> ExitCode {
    let result = parse_helper_args(std::env::args_os().skip(1)).and_then(|(args, fake)| {
        if fake {
            Ok(ExitCode::SUCCESS)
        } else if args.options.iter().any(|w| w.trim() == "remount") {
            remount(&args)
        } else {
            exec(args)
        }
    });
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("{HELPER_NAME}: {}", crate::error_text(&e));
            eprintln!("usage: {HELPER_NAME} CIPHERDIR MOUNTPOINT [-sfnv] [-o OPTIONS]");
            ExitCode::FAILURE
        }
    }
}

/// `mount -o remount,ro MOUNTPOINT` (and `remount,rw`) through the
/// helper: flips the read-only flag of the fscrypt-rs mount at
/// `args.mountpoint` with `mount(2)` `MS_REMOUNT` (the kernel's FUSE
/// superblock accepts a change of `MS_RDONLY`; writes then fail with EROFS
/// before they reach the daemon). The mount's other flags (nosuid, nodev,
/// noexec, atime) are kept as /proc/self/mountinfo shows them; nothing
/// else can change without a new mount. The mount point is opened once
/// (without following a final symlink) and remounted through that
/// descriptor.
///
/// # Errors
/// Not root, neither `ro` nor `rw`, not a fscrypt-rs mount, `rw` for a
/// daemon started with `ro` (it refuses writes itself), the kernel's
/// refusal.
pub fn remount(args: &Args) -> anyhow::Result<ExitCode> {
    use rustix::fs::{Mode, OFlags};
    use rustix::mount::MountFlags;
    let opts = MountOptions::parse(&args.options, args.sloppy)?;
    if !opts.read_only && !opts.rw {
        bail!("remount changes only ro/rw: give -o remount,ro or -o remount,rw");
    }
    if !rustix::process::geteuid().is_root() {
        bail!(
            "remounting needs root (the kernel lets only root remount); unmount and mount again \
             with or without -o ro instead"
        );
    }
    let path = crate::support::mounts::absolute(&args.mountpoint);
    let fd = rustix::fs::open(
        &path,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .with_context(|| format!("mount point {}", path.display()))?;
    let st = rustix::fs::fstat(&fd).with_context(|| format!("{}", path.display()))?;
    let (major, minor) = (rustix::fs::major(st.st_dev), rustix::fs::minor(st.st_dev));
    let table = fscrypt_linux::mountinfo::read_mountinfo()?;
    let Some(m) = table.iter().rev().find(|m| {
        m.mount_point == path
            && m.fs_type == crate::support::mounts::FS_TYPE
            && (m.major, m.minor) == (major, minor)
    }) else {
        bail!(
            "{} is not a fscrypt-rs mount: nothing to remount",
            path.display()
        );
    };
    if !opts.read_only
        && crate::support::mounts::daemons()
            .iter()
            .any(|d| d.mountpoint == path && d.read_only)
    {
        bail!(
            "the daemon of {} was started read-only (-o ro) and refuses writes itself: unmount \
             it and mount it again without ro",
            path.display()
        );
    }
    let mut flags = MountFlags::empty();
    if opts.read_only {
        flags |= MountFlags::RDONLY;
    }
    let words: Vec<&str> = m.mount_options.split(',').collect();
    for (word, flag) in [
        ("nosuid", MountFlags::NOSUID),
        ("nodev", MountFlags::NODEV),
        ("noexec", MountFlags::NOEXEC),
        ("noatime", MountFlags::NOATIME),
        ("nodiratime", MountFlags::NODIRATIME),
        ("relatime", MountFlags::RELATIME),
    ] {
        if words.contains(&word) {
            flags |= flag;
        }
    }
    if !words.contains(&"noatime") && !words.contains(&"relatime") {
        flags |= MountFlags::STRICTATIME;
    }
    // Through the descriptor: exactly the mount checked above.
    let target = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&fd));
    rustix::mount::mount_remount(target.as_str(), flags, c"")
        .with_context(|| format!("remounting {}", path.display()))?;
    Ok(ExitCode::SUCCESS)
}

/// Runs `fscrypt-rs mount`.
pub fn exec(mut args: Args) -> anyhow::Result<ExitCode> {
    // Before any secret is read (also as the mount(8) helper and the daemon).
    secret::protect_process();
    if args.master_key_stdin {
        // The daemon half: report any failure on stdout, where the parent
        // reads it, since stderr is the log.
        return Ok(match daemon(&args) {
            Ok(code) => code,
            Err(e) => {
                let _ = writeln!(std::io::stdout(), "{}", crate::error_text(&e));
                ExitCode::FAILURE
            }
        });
    }
    let mut opts = MountOptions::of(&args)?;
    if opts.remount {
        bail!(
            "remount is for the mount(8) helper (mount -o remount,ro MOUNTPOINT); `fscrypt-rs \
             mount` makes new mounts only"
        );
    }
    opts.check_privilege()?;
    // `-o config=FILE` (fstab) as `--config FILE`; the daemon gets it too.
    if args.config.config.is_none() {
        args.config.config = opts.config.clone();
    }
    if args.reverse {
        return exec_reverse(args, opts);
    }
    let vault = args.config.open(&args.cipherdir)?;
    // Before any secret is asked for: where the vault would go, and
    // whether it is mounted already.
    let backing = std::fs::canonicalize(&args.cipherdir)
        .with_context(|| format!("{}", args.cipherdir.display()))?;
    let mountpoint = crate::support::mounts::check_mountpoint(
        &backing,
        &args.mountpoint,
        args.nonempty || opts.nonempty,
    )?;
    // With -o sharedstorage other mounts may serve it; the daemon's lock
    // still refuses a vault mounted without the option.
    if !opts.shared_storage {
        crate::support::mounts::check_vault_free(&backing)?;
    }
    // A writable mount over what cannot be written would show `rw` and
    // fail every write in the daemon: the kernel refuses them instead.
    if !opts.read_only && fscrypt_fuse::backing_read_only(&backing) {
        eprintln!(
            "fscrypt-rs: backing directory is read-only: mounting read-only ({})",
            backing.display()
        );
        opts.read_only = true;
    }
    let unlock = unlock_args(&args, &opts)?;
    let key = if args.locked {
        Key::Locked
    } else {
        let prompt = format!("Passphrase for {}: ", args.cipherdir.display());
        match unlock.unwrap(&vault, None, &prompt, Some("or mount it --locked"))? {
            Ok((raw, _)) => Key::Raw(raw),
            Err(code) => return Ok(code),
        }
    };
    pause_for_tests();
    if args.foreground {
        let master = match &key {
            Key::Locked => None,
            Key::Raw(raw) => Some(vault.master_key_from_bytes(raw.as_ref())?),
        };
        run_mount(&vault, master, &opts, &mountpoint, &args.cipherdir)?;
        return Ok(ExitCode::SUCCESS);
    }
    spawn_daemon(&args, &opts, &mountpoint, &key)
}

/// The exclusion patterns of `--exclude` and `--exclude-from` files.
///
/// # Errors
/// An `--exclude-from` file cannot be read.
/// The secret options of the command line, else those of `-o`
/// (`key_file=`, `passfile=`, `extpass=`).
///
/// # Errors
/// A key file and a passphrase source both given.
fn unlock_args(args: &Args, opts: &MountOptions) -> anyhow::Result<UnlockArgs> {
    let mut unlock = args.unlock.clone();
    if unlock.sealed_kind().is_some() {
        if opts.key_file.is_some() || opts.passfile.is_some() {
            bail!(
                "-o keyfile= and -o passfile= do not go with --tpm2, --pkcs11, --fido2 or --age-identity"
            );
        }
        return Ok(unlock);
    }
    if unlock.key_file.is_none() && !unlock.recovery_key {
        unlock.key_file = opts.key_file.clone();
    }
    if !unlock.pass.is_given() && !unlock.recovery_key {
        unlock.pass = secret::PassSource {
            passfile: opts.passfile.clone(),
            extpass: opts.extpass.clone(),
        };
    }
    if unlock.key_file.is_some() && unlock.pass.is_given() {
        bail!("give a key file or a passphrase source (passfile/extpass), not both");
    }
    Ok(unlock)
}

fn exclude_patterns(args: &Args) -> anyhow::Result<Vec<String>> {
    let mut out = args.exclude.clone();
    for path in &args.exclude_from {
        let text =
            std::fs::read(path).with_context(|| format!("--exclude-from {}", path.display()))?;
        for line in fscrypt_vault::reverse::Excludes::lines(&text) {
            out.push(String::from_utf8_lossy(&line).into_owned());
        }
    }
    Ok(out)
}

/// `fscrypt-rs mount --reverse PLAIN VIEW`: unlock the reverse config in
/// PLAIN, then mount the read-only view (in the foreground, or through a
/// daemon as a vault mount does).
fn exec_reverse(mut args: Args, mut opts: MountOptions) -> anyhow::Result<ExitCode> {
    if args.config.config.is_some() {
        bail!(
            "--reverse reads its config from {} in the plaintext directory: leave out --config",
            fscrypt_vault::reverse::REVERSE_CONFIG_NAME
        );
    }
    let config = args
        .cipherdir
        .join(fscrypt_vault::reverse::REVERSE_CONFIG_NAME);
    if config.symlink_metadata().is_err() {
        bail!(
            "{} is not prepared for reverse mode (no {}): run `fscrypt-rs init --reverse {}` first",
            args.cipherdir.display(),
            fscrypt_vault::reverse::REVERSE_CONFIG_NAME,
            args.cipherdir.display()
        );
    }
    args.config.config = Some(config);
    if opts.shared_storage || opts.acl || opts.suid || opts.dev {
        bail!("--reverse views are read-only: sharedstorage, acl, suid and dev do not apply");
    }
    opts.read_only = true;
    // The daemon gets the patterns of --exclude-from files as --exclude.
    args.exclude = exclude_patterns(&args)?;
    args.exclude_from.clear();
    let vault = args.config.open(&args.cipherdir)?;
    let plain = std::fs::canonicalize(&args.cipherdir)
        .with_context(|| format!("{}", args.cipherdir.display()))?;
    let mountpoint = crate::support::mounts::check_mountpoint(
        &plain,
        &args.mountpoint,
        args.nonempty || opts.nonempty,
    )?;
    let unlock = unlock_args(&args, &opts)?;
    let prompt = format!("Passphrase for {}: ", args.cipherdir.display());
    let raw = match unlock.unwrap(&vault, None, &prompt, None)? {
        Ok((raw, _)) => raw,
        Err(code) => return Ok(code),
    };
    if args.foreground {
        let master = vault.master_key_from_bytes(raw.as_ref())?;
        run_reverse(&vault, master, &opts, &mountpoint, &args)?;
        return Ok(ExitCode::SUCCESS);
    }
    spawn_daemon(&args, &opts, &mountpoint, &Key::Raw(raw))
}

/// Serves the reverse view in this process until it is unmounted.
fn run_reverse(
    vault: &Vault,
    master: fscrypt::MasterKey,
    opts: &MountOptions,
    mountpoint: &fscrypt_fuse::MountPoint,
    args: &Args,
) -> anyhow::Result<()> {
    let plain = std::fs::canonicalize(&args.cipherdir)
        .with_context(|| format!("{}", args.cipherdir.display()))?;
    let keys = fscrypt_vault::reverse::ReverseKeys::new(master, *vault.policy())
        .context("setting up the reverse view's keys")?;
    let config = fscrypt_fuse::reverse::ReverseMountConfig {
        fs_name: opts
            .fs_name
            .clone()
            .unwrap_or_else(|| plain.display().to_string()),
        plain_dir: plain,
        allow_other: opts.allow_other,
        io_uring: opts.use_io_uring(rustix::process::geteuid().is_root()),
        excludes: fscrypt_vault::reverse::Excludes::new(&args.exclude),
        idle: opts.idle,
    };
    fscrypt_fuse::reverse::mount_on(keys, config, mountpoint)
        .with_context(|| format!("mounting {}", mountpoint.path().display()))?;
    Ok(())
}

/// Test seam, for the tests of the mount-point race only: when the
/// environment variable [`PAUSE_ENV`] names a directory, the checks done,
/// `PAUSED` is created in it and the mount waits (at most 60 s) until
/// `RESUME` appears there, so that a test can swap the mount point at the
/// worst moment. It only delays; without the variable it does nothing.
/// `PAUSED` is created new (`O_EXCL`: never through a symlink, never over
/// a file), so the variable cannot make a root mount write anything else.
pub(crate) fn pause_for_tests() {
    let Some(dir) = std::env::var_os(PAUSE_ENV) else {
        return;
    };
    use std::os::unix::fs::OpenOptionsExt;
    let dir = PathBuf::from(dir);
    let _ = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(dir.join("PAUSED"));
    let start = Instant::now();
    while !dir.join("RESUME").exists() && start.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The environment variable of [`pause_for_tests`].
pub const PAUSE_ENV: &str = "FSCRYPT_RS_TEST_PAUSE_BEFORE_MOUNT";

/// Mounts in this process and blocks until unmounted.
fn run_mount(
    vault: &Vault,
    master: Option<fscrypt::MasterKey>,
    opts: &MountOptions,
    mountpoint: &fscrypt_fuse::MountPoint,
    cipherdir: &Path,
) -> anyhow::Result<()> {
    let backing_dir =
        std::fs::canonicalize(cipherdir).with_context(|| format!("{}", cipherdir.display()))?;
    let config = fscrypt_fuse::MountConfig {
        fs_name: opts
            .fs_name
            .clone()
            .unwrap_or_else(|| backing_dir.display().to_string()),
        backing_dir,
        policy: *vault.policy(),
        master_key: master,
        read_only: opts.read_only,
        allow_other: opts.allow_other,
        suid: opts.suid,
        dev: opts.dev,
        noexec: opts.noexec,
        shared_storage: opts.shared_storage,
        acl: opts.acl,
        default_permissions: opts.default_permissions,
        inode_limit: Some(fscrypt_fuse::DEFAULT_INODE_LIMIT),
        io_uring: opts.use_io_uring(rustix::process::geteuid().is_root()),
        idle: opts.idle,
        state_dir: fscrypt_vault::integrity::generations::GenerationStore::default_dir(
            &vault.policy().master_key_identifier,
        ),
    };
    crate::support::heap::install();
    fscrypt_fuse::mount_on(config, mountpoint)
        .with_context(|| format!("mounting {}", mountpoint.path().display()))?;
    Ok(())
}

/// The daemon: new session, key from stdin, mount, serve until unmounted.
fn daemon(args: &Args) -> anyhow::Result<ExitCode> {
    // Leave the terminal's session so its Ctrl-C and hangup do not reach us.
    let _ = rustix::process::setsid();
    let opts = MountOptions::of(args)?;
    let vault = args.config.open(&args.cipherdir)?;
    // Straight from file descriptor 0: std's stdin buffer would keep a copy.
    let mut raw = SecretBuf::new(65);
    let mut got = 0;
    while got < raw.len() {
        match rustix::io::read(std::io::stdin(), &mut raw[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => {
                return Err(std::io::Error::from(e))
                    .context("reading the master key from the parent");
            }
        }
    }
    let master = match got {
        0 if args.locked => None,
        64 => Some(vault.master_key_from_bytes(&raw[..64])?),
        n => bail!("expected a 64-byte master key from the parent, got {n} bytes"),
    };
    let mountpoint = match args.mountpoint_fd {
        Some(fd) => fscrypt_fuse::MountPoint::inherited(fd)?,
        None => fscrypt_fuse::MountPoint::open(&args.mountpoint)?,
    };
    if args.reverse {
        let master = master.context("reverse mode needs the key")?;
        run_reverse(&vault, master, &opts, &mountpoint, args)?;
        return Ok(ExitCode::SUCCESS);
    }
    run_mount(&vault, master, &opts, &mountpoint, &args.cipherdir)?;
    Ok(ExitCode::SUCCESS)
}

/// Opens (or creates, mode 0600) the daemon's log file for appending,
/// refusing a symlink or anything but a regular file; an existing log of
/// ours that others may read is made 0600.
pub(crate) fn open_log_file(path: &Path) -> anyhow::Result<std::fs::File> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(path)
        .with_context(|| format!("log file {} (it may not be a symlink)", path.display()))?;
    let meta = file
        .metadata()
        .with_context(|| format!("log file {}", path.display()))?;
    anyhow::ensure!(
        meta.is_file(),
        "log file {} is not a regular file",
        path.display()
    );
    if meta.mode() & 0o077 != 0 && meta.uid() == rustix::process::geteuid().as_raw() {
        file.set_permissions(std::fs::Permissions::from_mode(0o600))
            .with_context(|| format!("making log file {} private", path.display()))?;
    }
    Ok(file)
}

/// Starts the daemon and waits until its mount is visible or it exits.
fn spawn_daemon(
    args: &Args,
    opts: &MountOptions,
    mp: &fscrypt_fuse::MountPoint,
    key: &Key,
) -> anyhow::Result<ExitCode> {
    let mountpoint = mp.path();
    let before = mount_count(mountpoint)?;
    // The daemon mounts on this very directory (inherited), not on
    // whatever the path names by then.
    let inherited = mp.inheritable()?;
    let exe = std::env::current_exe().context("locating the fscrypt-rs executable")?;
    let cipherdir = std::fs::canonicalize(&args.cipherdir)
        .with_context(|| format!("{}", args.cipherdir.display()))?;
    let mut cmd = Command::new(exe);
    cmd.arg("mount")
        .arg(&cipherdir)
        .arg(mountpoint)
        .arg("--foreground")
        .arg("--master-key-stdin")
        .arg("--mountpoint-fd")
        .arg(std::os::fd::AsRawFd::as_raw_fd(&inherited).to_string());
    if args.locked {
        cmd.arg("--locked");
    }
    if args.reverse {
        cmd.arg("--reverse");
        for p in &args.exclude {
            cmd.arg(format!("--exclude={p}"));
        }
    }
    if let Some(config) = args.config.absolute()? {
        cmd.arg("--config").arg(config);
    }
    let words = opts.to_words();
    if !words.is_empty() {
        cmd.arg("-o").arg(words.join(","));
    }
    let log = match &args.log_file {
        Some(path) => Stdio::from(open_log_file(path)?),
        None => Stdio::null(),
    };
    if let Some(path) = &args.log_file {
        cmd.arg("--log-file").arg(path);
    }
    cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(log);
    let mut child = cmd.spawn().context("starting the mount daemon")?;
    drop(inherited);
    {
        let mut stdin = child.stdin.take().context("daemon stdin")?;
        if let Key::Raw(raw) = key {
            stdin
                .write_all(raw.as_ref())
                .context("handing the key to the daemon")?;
        }
        // Dropping closes the pipe: the daemon sees end of file.
    }
    wait_for_mount(child, mp, before)
}

/// Waits until a mount daemon started as a child (its status pipe on
/// stdout) has added a mount on the directory `mountpoint` holds (more
/// than `before`; found where that directory is now), or has
/// exited: its one-line message becomes the error. Kills it after
/// [`MOUNT_TIMEOUT`].
///
/// # Errors
/// The daemon's message, its exit, or the timeout.
pub(crate) fn wait_for_mount(
    mut child: std::process::Child,
    mountpoint: &fscrypt_fuse::MountPoint,
    before: usize,
) -> anyhow::Result<ExitCode> {
    let mut status_pipe = child.stdout.take().context("daemon stdout")?;
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().context("waiting for the mount daemon")? {
            let mut msg = String::new();
            let _ = status_pipe.read_to_string(&mut msg);
            let msg = msg.trim();
            if status.success() {
                bail!(
                    "the mount daemon exited before the mount appeared{}",
                    if msg.is_empty() {
                        String::new()
                    } else {
                        format!(": {msg}")
                    }
                );
            }
            if msg.is_empty() {
                bail!("the mount daemon failed ({status})");
            }
            bail!("{msg}");
        }
        let here = mountpoint
            .current_path()
            .unwrap_or_else(|| mountpoint.path().to_path_buf());
        if mount_count(&here)? > before {
            return Ok(ExitCode::SUCCESS);
        }
        if start.elapsed() > MOUNT_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            bail!(
                "the mount did not appear within {} s",
                MOUNT_TIMEOUT.as_secs()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options() {
        let w = |s: &str| s.split(',').map(str::to_owned).collect::<Vec<_>>();
        let o = MountOptions::parse(&w("ro,allow_other,default_permissions,suid,nodev,dev,keyfile=/k,fsname=v,noauto,x-systemd.automount,nofail"), false).unwrap();
        assert!(o.read_only && o.allow_other && o.suid && o.dev);
        assert_eq!(o.key_file.as_deref(), Some(Path::new("/k")));
        assert_eq!(o.fs_name.as_deref(), Some("v"));
        assert!(o.default_permissions);
        assert_eq!(
            o.to_words(),
            w("ro,allow_other,suid,dev,default_permissions,fsname=v")
        );
        let o = MountOptions::parse(&w("sharedstorage,rw,acl"), false).unwrap();
        assert!(o.shared_storage && o.acl);
        assert_eq!(o.to_words(), w("sharedstorage,acl"));
        let o = MountOptions::parse(&w("passfile=/p"), false).unwrap();
        assert_eq!(o.passfile.as_deref(), Some(Path::new("/p")));
        assert_eq!(o.to_words(), Vec::<String>::new());
        let o = MountOptions::parse(&w("extpass=pass show v"), false).unwrap();
        assert_eq!(o.extpass.as_deref(), Some("pass show v"));
        assert!(MountOptions::parse(&w("passfile=/p,keyfile=/k"), false).is_err());
        assert!(MountOptions::parse(&w("passfile=/p,extpass=x"), false).is_err());
        assert!(MountOptions::parse(&w("extpass="), false).is_err());
        let o = MountOptions::parse(&w("suid,nosuid"), false).unwrap();
        assert!(!o.suid && !o.dev);
        assert!(MountOptions::parse(&w("bogus"), false).is_err());
        assert!(MountOptions::parse(&w("bogus"), true).is_ok());
        assert!(MountOptions::parse(&w("keyfile="), false).is_err());
    }

    #[test]
    fn contradictory_options_are_refused() {
        let w = |s: &str| s.split(',').map(str::to_owned).collect::<Vec<_>>();
        for bad in [
            "ro,rw",
            "rw,ro",
            "io_uring,noio_uring",
            "noio_uring,io_uring",
        ] {
            let e = MountOptions::parse(&w(bad), false).unwrap_err().to_string();
            assert!(e.contains("contradict"), "{bad}: {e}");
            // Not even sloppy (-s) lets them through.
            assert!(MountOptions::parse(&w(bad), true).is_err(), "{bad}");
        }
        assert!(MountOptions::parse(&w("rw"), false).is_ok_and(|o| !o.read_only));
        assert!(MountOptions::parse(&w("ro,ro"), false).is_ok_and(|o| o.read_only));
        // suid/dev/exec: the last one wins, as with mount(8).
        let o = MountOptions::parse(&w("nosuid,suid,dev,nodev,exec,noexec"), false).unwrap();
        assert!(o.suid && !o.dev && o.noexec);
        assert_eq!(o.to_words(), w("suid,noexec"));
        let o = MountOptions::parse(&w("noexec,exec"), false).unwrap();
        assert!(!o.noexec && o.to_words().is_empty());
    }

    #[test]
    fn io_uring_is_opt_in_without_root() {
        let w = |s: &str| s.split(',').map(str::to_owned).collect::<Vec<_>>();
        let none = MountOptions::parse(&[], false).unwrap();
        assert!(none.use_io_uring(true));
        assert!(!none.use_io_uring(false));
        assert!(none.to_words().is_empty());
        let on = MountOptions::parse(&w("io_uring"), false).unwrap();
        assert!(on.use_io_uring(false) && on.use_io_uring(true));
        assert_eq!(on.to_words(), w("io_uring"));
        let off = MountOptions::parse(&w("noio_uring"), false).unwrap();
        assert!(!off.use_io_uring(true) && !off.use_io_uring(false));
        assert_eq!(off.to_words(), w("noio_uring"));
    }

    #[test]
    fn idle_option_and_durations() {
        let w = |s: &str| s.split(',').map(str::to_owned).collect::<Vec<_>>();
        let o = MountOptions::parse(&w("idle=10m,ro"), false).unwrap();
        assert_eq!(o.idle, Some(Duration::from_secs(600)));
        assert_eq!(o.to_words(), w("ro,idle=600s"));
        // What the daemon gets back parses to the same.
        assert_eq!(MountOptions::parse(&o.to_words(), false).unwrap(), o);
        for (text, secs) in [
            ("30s", 30),
            ("10m", 600),
            ("1h", 3600),
            ("1h30m", 5400),
            ("2s", 2),
        ] {
            assert_eq!(
                parse_duration(text).unwrap(),
                Duration::from_secs(secs),
                "{text}"
            );
        }
        for bad in [
            "", "10", "1x", "m", "1.5h", "-1s", "0s", "0h0m", "99999h", "idle",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad:?} accepted");
        }
        let e = MountOptions::parse(&w("idle=5"), false).unwrap_err();
        assert!(format!("{e:#}").contains("30s, 10m, 1h"), "{e:#}");
        assert!(MountOptions::parse(&w("idle="), false).is_err());
        // Not even sloppy (-s) lets a bad duration through.
        assert!(MountOptions::parse(&w("idle=soon"), true).is_err());
        assert!(MountOptions::parse(&[], false).unwrap().idle.is_none());
    }

    #[test]
    fn idle_flag_wins_over_the_option() {
        use clap::Parser;
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            mount: Args,
        }
        let args = |a: &[&str]| {
            Cli::try_parse_from([&["fscrypt-rs", "/c", "/m"], a].concat()).map(|c| c.mount)
        };
        let a = args(&["--idle", "1h", "-o", "idle=30s,ro"]).unwrap();
        let o = MountOptions::of(&a).unwrap();
        assert_eq!(o.idle, Some(Duration::from_secs(3600)));
        assert!(o.read_only);
        let a = args(&["-o", "idle=30s"]).unwrap();
        assert_eq!(
            MountOptions::of(&a).unwrap().idle,
            Some(Duration::from_secs(30))
        );
        assert!(args(&["--idle", "soon"]).is_err());
        assert!(args(&["--idle", "0s"]).is_err());
    }

    #[test]
    fn helper_command_line() {
        let argv = |s: &str| {
            s.split(' ')
                .map(std::ffi::OsString::from)
                .collect::<Vec<_>>()
        };
        let (a, fake) = parse_helper_args(argv("/c /m -n -o ro,keyfile=/k -t fscrypt-rs")).unwrap();
        assert!(!fake);
        assert_eq!(a.cipherdir, Path::new("/c"));
        assert_eq!(a.mountpoint, Path::new("/m"));
        assert_eq!(a.options, ["ro", "keyfile=/k"]);
        let (a, fake) = parse_helper_args(argv("-sfv /c /m")).unwrap();
        assert!(fake && a.sloppy);
        assert!(parse_helper_args(argv("/c")).is_err());
        assert!(parse_helper_args(argv("/c /m -x")).is_err());
        assert!(parse_helper_args(argv("/c /m -o")).is_err());
        // fstab's idle= reaches the mount options through the helper.
        let (a, _) = parse_helper_args(argv("/c /m -o keyfile=/k,idle=10m,nofail")).unwrap();
        assert_eq!(
            MountOptions::of(&a).unwrap().idle,
            Some(Duration::from_secs(600))
        );
    }
}
