//! `fscrypt-rs image mount IMAGE MOUNTPOINT`: a read-only FUSE mount of a
//! whole kernel-encrypted ext4 image or block device
//! (`fscrypt_fuse::image`).
//!
//! As `fscrypt-rs mount`: the parent opens the image with the keys (so a
//! bad image or key file is reported by its exit code), then re-runs itself
//! as the daemon (`--foreground`, new session, its error messages on a pipe
//! from its stdout; the daemon reads the same key files itself, and the
//! policy keys the parent unwrapped from google/fscrypt metadata on a pipe
//! from its stdin, never on its command line) and waits
//! until the mount shows up or the daemon exits. `-f` serves in the
//! foreground. Unmount with `fscrypt-rs unmount MOUNTPOINT` or
//! `fusermount3 -u MOUNTPOINT`.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};

use anyhow::{Context, bail};
use fscrypt_ext4::image::Image;
use fscrypt_metadata::actions::PolicyKey;
use fscrypt_metadata::proto::POLICY_KEY_LEN;
use zeroize::Zeroizing;

use crate::commands::mount::{mount_count, open_log_file, wait_for_mount};
use crate::support::secret;

/// Arguments of `fscrypt-rs image mount`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub image: super::ImageArgs,
    /// Where to mount (an empty directory).
    pub mountpoint: PathBuf,
    /// Serve in the foreground (until unmounted or Ctrl-C).
    #[arg(long, short = 'f')]
    pub foreground: bool,
    /// Mount options, comma-separated: allow_other (let other users in; the
    /// kernel still checks the image's modes and owners), fsname=NAME. The
    /// mount is always ro,nosuid,nodev,default_permissions (ro, nosuid,
    /// nodev and default_permissions are accepted and ignored).
    #[arg(short = 'o', value_delimiter = ',')]
    pub options: Vec<String>,
    /// Mount over a non-empty directory.
    #[arg(long)]
    pub nonempty: bool,
    /// The daemon's log (created 0600), for its warnings (corrupt objects,
    /// named by inode number only).
    #[arg(long)]
    pub log_file: Option<PathBuf>,
    /// Internal: this is the daemon half (errors on stdout).
    #[arg(long, hide = true)]
    pub daemon_child: bool,
    /// Internal: the mount point as the descriptor the parent opened and
    /// checked (inherited), so the daemon never looks the path up again.
    #[arg(long, hide = true)]
    pub mountpoint_fd: Option<i32>,
    /// Internal: the daemon reads policy keys (64 bytes each, until end of
    /// file) from stdin, unwrapped by the parent from the metadata.
    #[arg(long, hide = true)]
    pub policy_keys_stdin: bool,
}

#[derive(Debug, Default)]
struct Options {
    allow_other: bool,
    fs_name: Option<String>,
    /// `io_uring` / `noio_uring`; neither: FUSE over io_uring for root's
    /// mounts only, as for a vault.
    io_uring: Option<bool>,
}

fn parse_options(words: &[String]) -> anyhow::Result<Options> {
    let mut o = Options::default();
    for w in words.iter().map(|w| w.trim()).filter(|w| !w.is_empty()) {
        match w.split_once('=') {
            None if w == "allow_other" => o.allow_other = true,
            None if w == "io_uring" => o.io_uring = Some(true),
            None if w == "noio_uring" => o.io_uring = Some(false),
            None if ["ro", "nosuid", "nodev", "default_permissions"].contains(&w) => {}
            Some(("fsname", v)) if !v.is_empty() => o.fs_name = Some(v.to_owned()),
            _ => bail!(
                "unknown mount option {w:?} for an image mount (known: allow_other, \
                 fsname=NAME, io_uring, noio_uring; it is always ro,nosuid,nodev)"
            ),
        }
    }
    Ok(o)
}

/// Runs `fscrypt-rs image mount`.
pub fn exec(args: Args) -> anyhow::Result<ExitCode> {
    // Before any key file is read.
    secret::protect_process();
    if args.daemon_child {
        let _ = rustix::process::setsid();
        let mp = match args.mountpoint_fd {
            Some(fd) => fscrypt_fuse::MountPoint::inherited(fd),
            None => fscrypt_fuse::MountPoint::open(&args.mountpoint),
        };
        return Ok(
            match mp
                .map_err(anyhow::Error::from)
                .and_then(|mp| serve(&args, &mp, daemon_image(&args)?))
            {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    let _ = writeln!(std::io::stdout(), "{}", crate::error_text(&e));
                    ExitCode::FAILURE
                }
            },
        );
    }
    parse_options(&args.options)?;
    let image = std::fs::canonicalize(&args.image.image)
        .with_context(|| format!("image {}", args.image.image.display()))?;
    let mountpoint =
        crate::support::mounts::check_mountpoint(&image, &args.mountpoint, args.nonempty)?;
    // Refuse a bad image, key file or secret here, before any daemon.
    let (keys, unlocked) = args.image.key_set()?;
    let img = Image::open(&args.image.image, keys)?;
    crate::commands::mount::pause_for_tests();
    if args.foreground {
        serve(&args, &mountpoint, img)?;
        return Ok(ExitCode::SUCCESS);
    }
    drop(img);
    spawn_daemon(&args, &image, &mountpoint, &unlocked)
}

/// The daemon's image: the key files again, and the policy keys the
/// parent sends on stdin.
fn daemon_image(args: &Args) -> anyhow::Result<Image> {
    let mut keys = args.image.raw_keys()?;
    if args.policy_keys_stdin {
        let mut key = Zeroizing::new([0u8; POLICY_KEY_LEN]);
        let mut stdin = std::io::stdin().lock();
        for i in 0.. {
            match stdin.read_exact(&mut key[..]) {
                Ok(()) => keys.add_raw(&key[..], Path::new(&format!("policy key {i}")))?,
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => break,
                Err(e) => return Err(e).context("reading the policy keys from the parent"),
            }
        }
    }
    Ok(Image::open(&args.image.image, keys)?)
}

fn serve(args: &Args, mountpoint: &fscrypt_fuse::MountPoint, img: Image) -> anyhow::Result<()> {
    let opts = parse_options(&args.options)?;
    let fs_name = opts
        .fs_name
        .clone()
        .unwrap_or_else(|| img.ext4().path().display().to_string());
    let config = fscrypt_fuse::image::ImageMountConfig {
        allow_other: opts.allow_other,
        fs_name,
        io_uring: opts
            .io_uring
            .unwrap_or_else(|| rustix::process::geteuid().is_root()),
    };
    fscrypt_fuse::image::mount_on(img, config, mountpoint)
        .with_context(|| format!("mounting {}", mountpoint.path().display()))?;
    Ok(())
}

fn absolute(p: &Path) -> anyhow::Result<PathBuf> {
    std::fs::canonicalize(p).with_context(|| format!("{}", p.display()))
}

fn spawn_daemon(
    args: &Args,
    image: &Path,
    mp: &fscrypt_fuse::MountPoint,
    unlocked: &[(String, PolicyKey)],
) -> anyhow::Result<ExitCode> {
    let mountpoint = mp.path();
    let before = mount_count(mountpoint)?;
    // The daemon mounts on this very directory (inherited).
    let inherited = mp.inheritable()?;
    let exe = std::env::current_exe().context("locating the fscrypt-rs executable")?;
    let mut cmd = Command::new(exe);
    cmd.arg("image")
        .arg("mount")
        .arg(image)
        .arg(mountpoint)
        .arg("--foreground")
        .arg("--daemon-child")
        .arg("--mountpoint-fd")
        .arg(std::os::fd::AsRawFd::as_raw_fd(&inherited).to_string());
    for f in &args.image.key_files {
        cmd.arg("--key-file").arg(absolute(f)?);
    }
    for d in &args.image.key_dirs {
        cmd.arg("--key-dir").arg(absolute(d)?);
    }
    if args.nonempty {
        cmd.arg("--nonempty");
    }
    if !args.options.is_empty() {
        cmd.arg("-o").arg(args.options.join(","));
    }
    let log = match &args.log_file {
        Some(path) => Stdio::from(open_log_file(path)?),
        None => Stdio::null(),
    };
    if !unlocked.is_empty() {
        cmd.arg("--policy-keys-stdin");
    }
    cmd.stdin(if unlocked.is_empty() {
        Stdio::null()
    } else {
        Stdio::piped()
    })
    .stdout(Stdio::piped())
    .stderr(log);
    let mut child = cmd.spawn().context("starting the mount daemon")?;
    drop(inherited);
    if let Some(mut pipe) = child.stdin.take() {
        for (_, key) in unlocked {
            pipe.write_all(&key[..])
                .context("sending the policy keys to the mount daemon")?;
        }
    }
    wait_for_mount(child, mp, before)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options() {
        let w = |s: &str| s.split(',').map(str::to_owned).collect::<Vec<_>>();
        let o = parse_options(&w("ro,allow_other,nosuid,fsname=x")).expect("ok");
        assert!(o.allow_other);
        assert_eq!(o.fs_name.as_deref(), Some("x"));
        assert!(parse_options(&w("rw")).is_err());
        assert!(parse_options(&w("suid")).is_err());
    }
}
