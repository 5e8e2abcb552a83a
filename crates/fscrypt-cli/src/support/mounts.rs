//! What is mounted where: the checks `mount` makes before it unlocks
//! anything (mount point empty, not already a mount, not a dead mount, not
//! inside the vault; the vault not mounted elsewhere), the fscrypt-rs
//! daemons found through /proc, and the mounts of a vault (`status`).

use std::path::{Path, PathBuf};

use anyhow::bail;
use fscrypt_linux::mountinfo::{self, MountInfo};

/// The file system type of our mounts in /proc/self/mountinfo.
pub const FS_TYPE: &str = "fuse.fscrypt-rs";

/// The absolute form of `path` without following a final component that
/// may be a dead mount (canonical parent, then the name).
pub fn absolute(path: &Path) -> PathBuf {
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    if let Ok(c) = std::fs::canonicalize(&abs) {
        return c;
    }
    match (abs.parent(), abs.file_name()) {
        (Some(parent), Some(name)) => std::fs::canonicalize(parent)
            .map(|p| p.join(name))
            .unwrap_or(abs),
        _ => abs,
    }
}

/// True when `path` is a FUSE mount whose daemon is gone ("Transport
/// endpoint is not connected").
///
/// A daemon that died a moment ago may leave its connection in teardown
/// for a few milliseconds: with FUSE over io_uring the kernel cancels the
/// ring's commands first (requests fail with ECANCELED), then aborts the
/// connection (ECONNABORTED), and only then does every request fail with
/// ENOTCONN. Those two are waited out (up to 1 s), not taken for a live
/// daemon.
pub fn is_dead_mount(path: &Path) -> bool {
    use rustix::io::Errno;
    // statfs always asks the daemon; stat may answer from the kernel's
    // attribute cache.
    for _ in 0..100 {
        match rustix::fs::statfs(path) {
            Err(Errno::NOTCONN) => return true,
            Err(Errno::CANCELED | Errno::CONNABORTED) => {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            _ => break,
        }
    }
    matches!(rustix::fs::stat(path), Err(Errno::NOTCONN))
}

/// The mount on top at exactly `path`, if any.
pub fn mount_at(path: &Path) -> Option<MountInfo> {
    mountinfo::read_mountinfo()
        .ok()?
        .into_iter()
        .rev()
        .find(|m| m.mount_point == path)
}

/// The command that clears a dead mount.
pub fn clear_command(mountpoint: &Path) -> String {
    format!("fusermount3 -u {}", mountpoint.display())
}

/// Checks the mount point before anything is unlocked; returns it opened
/// (`O_PATH`, see [`fscrypt_fuse::MountPoint`]): the mount must go on that
/// descriptor, never on the path looked up again. Prints one warning line
/// when another user could swap the mount point ([`fscrypt_fuse::parent_risk`]).
///
/// # Errors
/// A dead FUSE mount there (with the command that clears it), a missing or
/// non-directory path, a mount already there (naming it), a mount point
/// inside the vault or a vault inside the mount point, a non-empty
/// directory without `allow_nonempty` (with the number of entries it would
/// hide).
pub fn check_mountpoint(
    backing: &Path,
    mountpoint: &Path,
    allow_nonempty: bool,
) -> anyhow::Result<fscrypt_fuse::MountPoint> {
    let abs = absolute(mountpoint);
    let stat = if is_dead_mount(&abs) {
        Err(rustix::io::Errno::NOTCONN)
    } else {
        rustix::fs::stat(&abs)
    };
    match stat {
        Err(rustix::io::Errno::NOTCONN) => bail!(
            "{} is a dead FUSE mount (Transport endpoint is not connected: the daemon that served \
             it is gone); clear it with `{}` (or `fscrypt-rs unmount {0}`), then mount again",
            abs.display(),
            clear_command(&abs)
        ),
        Err(rustix::io::Errno::NOENT) => bail!(
            "mount point {} does not exist (create it: mkdir {0})",
            abs.display()
        ),
        Err(e) => bail!("mount point {}: {e}", abs.display()),
        Ok(st)
            if rustix::fs::FileType::from_raw_mode(st.st_mode)
                != rustix::fs::FileType::Directory =>
        {
            bail!("mount point {} is not a directory", abs.display())
        }
        Ok(_) => {}
    }
    // Looked up once; every check below is on this directory.
    let dir = fscrypt_fuse::MountPoint::open(&abs)?;
    let mp = dir.path().to_path_buf();
    if let Some(m) = mount_at(&mp) {
        bail!(
            "{} is already a mount point ({} {}): unmount it first (`fscrypt-rs unmount {0}` or \
             `umount {0}`), or choose another directory",
            mp.display(),
            m.fs_type,
            m.source
        );
    }
    if mp == backing {
        bail!(
            "mount point {} is the vault itself: mount it on another directory (outside the vault)",
            mp.display()
        );
    }
    if mp.starts_with(backing) {
        bail!(
            "mount point {} is inside the vault {}: choose a directory outside it",
            mp.display(),
            backing.display()
        );
    }
    if backing.starts_with(&mp) {
        bail!(
            "the vault {} is inside the mount point {}: the mount would hide it; choose a \
             directory outside the vault's path",
            backing.display(),
            mp.display()
        );
    }
    if !allow_nonempty {
        let entries = dir.entries()?;
        if entries > 0 {
            bail!(
                "mount point {} is not empty: its {entries} {} would be hidden under the mount \
                 while it is mounted; empty it, choose another directory, or pass --nonempty",
                mp.display(),
                if entries == 1 { "entry" } else { "entries" }
            );
        }
    }
    if let Some(why) = dir.parent_stat().ok().and_then(|parent| {
        let me = rustix::process::geteuid().as_raw();
        fscrypt_fuse::parent_risk(&parent, &dir.stat().ok()?, me)
    }) {
        eprintln!(
            "fscrypt-rs: warning: another user could replace the mount point {} ({why}); it is \
             mounted on the directory checked now, but prefer a directory only you and root can \
             change",
            mp.display()
        );
    }
    Ok(dir)
}

/// Refuses a vault that a live daemon serves already (its lock is held),
/// naming where; notes a dead mount of it that a crashed daemon left.
///
/// # Errors
/// The vault is mounted, or its lock cannot be examined.
pub fn check_vault_free(backing: &Path) -> anyhow::Result<()> {
    let mounts = vault_mounts(backing);
    let live: Vec<String> = mounts
        .iter()
        .filter(|m| m.state != MountState::Dead)
        .map(|m| match m.pid {
            Some(pid) => format!("{} (daemon pid {pid})", m.mount_point.display()),
            None => m.mount_point.display().to_string(),
        })
        .collect();
    // With no live mount of it in sight, a holder of the lock is most likely
    // a daemon that was just unmounted and is still exiting: it gets the
    // grace period before the vault is called mounted.
    let held = if live.is_empty() {
        fscrypt_fuse::VaultLock::held_after_grace(backing)?
    } else {
        fscrypt_fuse::VaultLock::is_held(backing)?
    };
    if held {
        if live.is_empty() {
            bail!(
                "the vault {} is already mounted (a fscrypt-rs daemon holds its lock, at a mount \
                 point not visible here): unmount it first, or mount every one with -o sharedstorage",
                backing.display()
            );
        }
        bail!(
            "the vault {} is already mounted at {}: unmount it there first (`fscrypt-rs unmount \
             {}`), or mount every one with -o sharedstorage (two plain mounts of one vault \
             would show each other stale data)",
            backing.display(),
            live.join(", "),
            mounts
                .iter()
                .find(|m| m.state != MountState::Dead)
                .map_or_else(String::new, |m| m.mount_point.display().to_string())
        );
    }
    for m in mounts.iter().filter(|m| m.state == MountState::Dead) {
        eprintln!(
            "fscrypt-rs: note: {} was mounted at {} by a daemon that is gone; that mount is dead \
             (clear it with `{}`)",
            backing.display(),
            m.mount_point.display(),
            clear_command(&m.mount_point)
        );
    }
    Ok(())
}

/// A `fscrypt-rs mount … --foreground` process (a daemon or a foreground
/// mount), from its command line.
#[derive(Debug, Clone)]
pub struct Daemon {
    /// Its pid.
    pub pid: u32,
    /// The vault, absolute.
    pub cipherdir: PathBuf,
    /// The mount point, absolute.
    pub mountpoint: PathBuf,
    /// Mounted `--locked`.
    pub locked: bool,
    /// Started with `-o ro` (it refuses writes itself).
    pub read_only: bool,
}

/// Options of `fscrypt-rs mount` that take a value (skipped when looking
/// for the two positional arguments).
const VALUE_OPTIONS: &[&[u8]] = &[
    b"--key-file",
    b"-o",
    b"--log-file",
    b"--passfile",
    b"--extpass",
    b"--config",
    b"--unlock-key-file",
    b"--mountpoint-fd",
];

/// The two positional arguments (cipherdir, mount point) of a `mount`
/// command line after `mount`, if there are exactly two.
fn mount_positionals<'a>(args: &[&'a [u8]]) -> Option<(&'a [u8], &'a [u8])> {
    let mut positional = Vec::new();
    let mut rest = args.iter();
    while let Some(a) = rest.next() {
        if VALUE_OPTIONS.contains(a) {
            rest.next();
        } else if a.first() != Some(&b'-') {
            positional.push(*a);
        }
    }
    match positional[..] {
        [cipherdir, mountpoint] => Some((cipherdir, mountpoint)),
        _ => None,
    }
}

/// The running `fscrypt-rs mount --foreground` processes this user can
/// see (others are skipped).
pub fn daemons() -> Vec<Daemon> {
    let mut out = Vec::new();
    for proc in fscrypt_linux::holders::processes() {
        let pid = proc.pid();
        let Ok(cmdline) = proc.cmdline() else {
            continue;
        };
        let argv: Vec<&[u8]> = cmdline
            .split(|&b| b == 0)
            .filter(|a| !a.is_empty())
            .collect();
        let is_ours = argv.first().is_some_and(|a0| {
            let name = a0.rsplit(|&b| b == b'/').next().unwrap_or(a0);
            name.windows(10).any(|w| w == b"fscrypt-rs")
        });
        if !is_ours || argv.get(1) != Some(&&b"mount"[..]) {
            continue;
        }
        if !argv.iter().any(|a| *a == b"--foreground" || *a == b"-f") {
            continue;
        }
        let Some((cipherdir, mountpoint)) = mount_positionals(&argv[2..]) else {
            continue;
        };
        let resolve = |p: &[u8]| -> Option<PathBuf> {
            let p = Path::new(std::str::from_utf8(p).ok()?);
            if p.is_absolute() {
                Some(p.to_path_buf())
            } else {
                Some(proc.cwd().ok()?.join(p))
            }
        };
        let (Some(c), Some(m)) = (resolve(cipherdir), resolve(mountpoint)) else {
            continue;
        };
        out.push(Daemon {
            pid,
            cipherdir: std::fs::canonicalize(&c).unwrap_or(c),
            mountpoint: absolute(&m),
            locked: argv.iter().any(|a| *a == b"--locked"),
            read_only: argv
                .windows(2)
                .any(|w| w[0] == b"-o" && w[1].split(|&b| b == b',').any(|o| o == b"ro")),
        });
    }
    out.sort_by_key(|d| d.pid);
    out
}

/// The state of one mount of a vault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MountState {
    /// Served, with the key.
    Unlocked,
    /// Served without the key (`--locked`).
    Locked,
    /// Served; whether with the key is unknown (its daemon is not visible).
    Mounted,
    /// The daemon is gone ("Transport endpoint is not connected").
    Dead,
}

impl MountState {
    /// The word `status` prints.
    pub fn word(self) -> &'static str {
        match self {
            MountState::Unlocked => "unlocked",
            MountState::Locked => "locked",
            MountState::Mounted => "mounted",
            MountState::Dead => "dead",
        }
    }
}

/// One mount of a vault.
#[derive(Debug, Clone)]
pub struct VaultMount {
    /// Where.
    pub mount_point: PathBuf,
    /// Locked, unlocked, dead.
    pub state: MountState,
    /// The daemon serving it, when visible.
    pub pid: Option<u32>,
}

/// The mounts of the vault `backing` (canonical): fscrypt-rs mounts whose
/// source is the vault, and those the daemons name.
pub fn vault_mounts(backing: &Path) -> Vec<VaultMount> {
    let daemons = daemons();
    let table = mountinfo::read_mountinfo().unwrap_or_default();
    let mut out: Vec<VaultMount> = Vec::new();
    for m in table.iter().filter(|m| m.fs_type == FS_TYPE) {
        let daemon = daemons.iter().find(|d| d.mountpoint == m.mount_point);
        let ours = daemon.map_or(Path::new(&m.source) == backing, |d| d.cipherdir == backing);
        if !ours || out.iter().any(|o| o.mount_point == m.mount_point) {
            continue;
        }
        let state = if is_dead_mount(&m.mount_point) {
            MountState::Dead
        } else {
            match daemon {
                Some(d) if d.locked => MountState::Locked,
                Some(_) => MountState::Unlocked,
                None => MountState::Mounted,
            }
        };
        out.push(VaultMount {
            mount_point: m.mount_point.clone(),
            state,
            pid: daemon.map(|d| d.pid),
        });
    }
    out
}

/// The vault directory holding `path` (the directory itself or an
/// ancestor with a vault config), if any.
pub fn enclosing_vault(path: &Path) -> Option<PathBuf> {
    let canon = std::fs::canonicalize(path).ok()?;
    canon
        .ancestors()
        .find(|dir| fscrypt_fuse::vault::Vault::config_path(dir).is_file())
        .map(Path::to_path_buf)
}

#[cfg(test)]
mod tests {
    use super::mount_positionals;

    fn split(line: &str) -> Vec<&[u8]> {
        line.split(' ').map(str::as_bytes).collect()
    }

    #[test]
    fn the_two_paths_of_a_mount_command_line() {
        for line in [
            "cipher plain --foreground --key-file k",
            "--passfile pw cipher plain -f",
            "cipher --extpass pass-cmd plain -f -o allow_other",
            "-f --log-file log cipher plain --passfile=pw",
        ] {
            assert_eq!(
                mount_positionals(&split(line)),
                Some((&b"cipher"[..], &b"plain"[..])),
                "{line}"
            );
        }
        assert_eq!(mount_positionals(&split("cipher -f")), None);
        assert_eq!(mount_positionals(&split("a b c")), None);
    }
}
