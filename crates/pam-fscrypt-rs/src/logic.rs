//! What the module does, without FFI: find the user's login protector on
//! the root filesystem, the policies it protects on every mounted
//! filesystem set up for fscrypt (directly or through a link file), add or
//! remove their keys in the filesystem keyring, re-wrap the protector, and
//! count the user's open sessions. Errors are one-line strings without
//! secrets (they go to syslog).
//!
//! Only metadata owned by root or the user is read
//! ([`Trust::for_login`], google/fscrypt's rule; every owner with the
//! config's `allow_cross_user_metadata`). Only mounts whose filesystem type
//! can hold fscrypt metadata are looked at ([`FSCRYPT_FS_TYPES`]): FUSE,
//! network and pseudo filesystems are never touched, so a stopped FUSE
//! daemon or a dead server cannot hang a login; and every look at a
//! filesystem runs in a thread given [`FS_TIMEOUT`], abandoned after it.

use std::io::{Read, Seek, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use fscrypt_linux::keyring::{self, KeyPresence, KeySpec};
use fscrypt_metadata::config::Config;
use fscrypt_metadata::links::MainMount;
use fscrypt_metadata::proto::{PolicyData, ProtectorData};
use fscrypt_metadata::store::Store;
use fscrypt_metadata::trust::Trust;
use fscrypt_metadata::{actions, login};

/// The filesystem types whose mounts the module looks at for policies.
/// Those with kernel fscrypt support that are local: ext4 and f2fs (since
/// Linux 4.1/4.2), ubifs (4.10). Left out on purpose: FUSE (`fuse`,
/// `fuse.*`: a stopped daemon hangs every access, and the kernel keyring
/// does not apply to it), network filesystems (nfs, cifs/smb3, and ceph,
/// whose fscrypt support needs a server that answers), and everything with
/// no fscrypt support (btrfs, xfs, tmpfs, overlay, proc...). The login
/// filesystem (`root_mnt=`, `/` by default) is looked at whatever its type,
/// as google/fscrypt does, since login protectors live there.
pub const FSCRYPT_FS_TYPES: &[&str] = &["ext4", "f2fs", "ubifs"];

/// How long one filesystem may take to answer (reading its metadata,
/// asking the keyring): past it, the filesystem is skipped and the login
/// goes on (the thread looking at it is abandoned).
pub const FS_TIMEOUT: Duration = Duration::from_secs(3);

/// The config the module reads: never `$FSCRYPT_CONF` (the environment of
/// `su` is the caller's), only this path or the `config=` option.
pub const CONFIG_PATH: &str = "/etc/fscrypt.conf";

/// Module options from the PAM configuration line.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// `lock_policies`: lock the directories at the user's last session close.
    pub lock_policies: bool,
    /// `root_mnt=PATH`: where login protectors live (default `/`).
    pub root_mnt: Option<PathBuf>,
    /// `debug`: log each step.
    pub debug: bool,
    /// `config=PATH`: the google/fscrypt config (default
    /// [`CONFIG_PATH`]); only its `allow_cross_user_metadata` is used.
    pub config: Option<PathBuf>,
}

impl Options {
    /// Parses the module arguments; unknown ones are returned for a warning.
    pub fn parse<'a>(args: impl Iterator<Item = &'a str>) -> (Options, Vec<String>) {
        let mut o = Options::default();
        let mut unknown = Vec::new();
        for a in args {
            match a {
                "lock_policies" => o.lock_policies = true,
                "debug" => o.debug = true,
                _ => match (a.strip_prefix("root_mnt="), a.strip_prefix("config=")) {
                    (Some(p), _) if !p.is_empty() => o.root_mnt = Some(PathBuf::from(p)),
                    (_, Some(p)) if !p.is_empty() => o.config = Some(PathBuf::from(p)),
                    _ => unknown.push(a.to_string()),
                },
            }
        }
        (o, unknown)
    }

    fn root(&self) -> PathBuf {
        self.root_mnt.clone().unwrap_or_else(|| PathBuf::from("/"))
    }

    /// The trust of `uid`'s login: root and `uid`, or every owner when the
    /// config sets `allow_cross_user_metadata` (an unreadable config: not).
    pub fn trust(&self, uid: u32) -> Trust {
        let path = self
            .config
            .clone()
            .unwrap_or_else(|| PathBuf::from(CONFIG_PATH));
        let allow = Config::load_from(&path).is_ok_and(|c| c.allow_cross_user_metadata);
        Trust::for_login(uid, allow)
    }
}

/// Runs `f` in a thread and waits for it at most `timeout`: `None` when it
/// did not finish (the thread is left to finish or hang on its own).
pub fn bounded<T: Send + 'static>(
    timeout: Duration,
    f: impl FnOnce() -> T + Send + 'static,
) -> Option<T> {
    let (tx, rx) = mpsc::channel();
    std::thread::Builder::new()
        .name("pam-fscrypt-fs".into())
        .spawn(move || {
            let _ = tx.send(f());
        })
        .ok()?;
    rx.recv_timeout(timeout).ok()
}

/// Directory of the per-user session counts.
pub const COUNT_DIR: &str = "/run/fscrypt-rs";

/// The uid of `user`.
///
/// # Errors
/// Unknown user.
pub fn uid_of(user: &str) -> Result<u32, String> {
    match nix::unistd::User::from_name(user) {
        Ok(Some(u)) => Ok(u.uid.as_raw()),
        Ok(None) => Err("unknown user".into()),
        Err(e) => Err(format!("user lookup failed: {e}")),
    }
}

/// The login protector of `uid`, or `None`: only one owned by root or
/// the user is considered ([`Options::trust`]).
///
/// # Errors
/// The root filesystem's metadata cannot be read, or does not answer
/// within [`FS_TIMEOUT`].
pub fn login_protector(o: &Options, uid: u32) -> Result<Option<(Store, ProtectorData)>, String> {
    let root = Store::new(o.root(), o.trust(uid));
    bounded(FS_TIMEOUT, move || {
        if root.check_setup().is_err() {
            return Ok(None);
        }
        let p = login::login_protector(&root, i64::from(uid)).map_err(|e| e.to_string())?;
        Ok(p.map(|p| (root, p)))
    })
    .unwrap_or_else(|| {
        Err(format!(
            "the login filesystem {} did not answer within {} s",
            o.root().display(),
            FS_TIMEOUT.as_secs()
        ))
    })
}

/// Whether the module looks at a mount of type `fs_type` at `mount_point`
/// ([`FSCRYPT_FS_TYPES`], or the login filesystem `root`).
pub fn can_hold_metadata(fs_type: &str, mount_point: &Path, root: &Path) -> bool {
    FSCRYPT_FS_TYPES.contains(&fs_type) || mount_point == root
}

/// The main mounts the module looks at: the first mount of each device
/// whose root is the filesystem's root, of a type that can hold fscrypt
/// metadata (from /proc/self/mountinfo alone: nothing else is touched).
fn main_mounts(root: &Path) -> Vec<MainMount> {
    let mut out: Vec<MainMount> = Vec::new();
    for m in fscrypt_linux::mountinfo::read_mountinfo().unwrap_or_default() {
        if m.root != Path::new("/")
            || !can_hold_metadata(&m.fs_type, &m.mount_point, root)
            || out.iter().any(|x| (x.major, x.minor) == (m.major, m.minor))
        {
            continue;
        }
        out.push(MainMount {
            path: m.mount_point,
            major: m.major,
            minor: m.minor,
        });
    }
    out
}

/// What [`policies_of`] found.
#[derive(Debug, Default)]
pub struct Found {
    /// Every policy protected by the protector, with its mount point.
    pub policies: Vec<(PathBuf, PolicyData)>,
    /// The mounts that did not answer within [`FS_TIMEOUT`].
    pub stuck: Vec<PathBuf>,
}

/// Every policy protected by `d` (read with `trust`) on a mounted, set-up
/// filesystem that can hold fscrypt metadata, with its mount point. The
/// filesystems are looked at in parallel threads, all given the same
/// [`FS_TIMEOUT`]; one that has not answered by then is listed in
/// [`Found::stuck`] and skipped.
pub fn policies_of(o: &Options, d: &str, trust: Trust) -> Found {
    let (tx, rx) = mpsc::channel();
    let mounts = main_mounts(&o.root());
    let mut pending: Vec<PathBuf> = Vec::new();
    for m in mounts {
        let (tx, d, path) = (tx.clone(), d.to_string(), m.path.clone());
        let spawned = std::thread::Builder::new()
            .name("pam-fscrypt-fs".into())
            .spawn(move || {
                let store = Store::new(&path, trust);
                let ps = if store.check_setup().is_ok() {
                    login::policies_using(&store, &d).unwrap_or_default()
                } else {
                    Vec::new()
                };
                let _ = tx.send((path, ps));
            });
        if spawned.is_ok() {
            pending.push(m.path);
        }
    }
    drop(tx);
    let deadline = Instant::now() + FS_TIMEOUT;
    let mut found = Found::default();
    while !pending.is_empty() {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok((path, ps)) => {
                pending.retain(|p| p != &path);
                found
                    .policies
                    .extend(ps.into_iter().map(|p| (path.clone(), p)));
            }
            Err(_) => break,
        }
    }
    found.stuck = pending;
    found.policies.sort_by(|a, b| a.0.cmp(&b.0));
    found
}

fn kernel_spec(p: &PolicyData) -> Option<((), KeySpec)> {
    let raw = hex::decode(&p.key_descriptor).ok()?;
    let spec = if p.opts().version() == 1 {
        KeySpec::Descriptor(fscrypt::KeyDescriptor(raw.try_into().ok()?))
    } else {
        KeySpec::Identifier(fscrypt::KeyIdentifier(raw.try_into().ok()?))
    };
    Some(((), spec))
}

/// What [`unlock`] or [`lock`] did: how many policies, and what failed
/// (one entry per policy; the caller logs a summary line, see
/// [`Outcome::summary`]).
#[derive(Debug, Default)]
pub struct Outcome {
    /// Policies unlocked (or locked).
    pub done: usize,
    /// One-line failures, one per policy.
    pub errors: Vec<String>,
    /// Mounts skipped because they did not answer in time.
    pub stuck: Vec<PathBuf>,
}

impl Outcome {
    /// Counts one policy's time-bounded keyring call on `mount`: `Some(Ok(true))`
    /// done, `Some(Ok(false))` nothing to do, `Some(Err)` a failure named by
    /// `descriptor`, `None` the mount did not answer.
    fn count(&mut self, mount: PathBuf, descriptor: &str, r: Option<Result<bool, String>>) {
        match r {
            Some(Ok(done)) => self.done += usize::from(done),
            Some(Err(e)) => self.errors.push(format!("policy {descriptor}: {e}")),
            None => self.stuck.push(mount),
        }
    }

    /// This outcome with `stuck` (mounts found not answering before)
    /// added, each mount named once.
    fn finish(mut self, stuck: Vec<PathBuf>) -> Outcome {
        self.stuck.extend(stuck);
        self.stuck.sort();
        self.stuck.dedup();
        self
    }

    /// At most two log lines, whatever the number of policies and mounts:
    /// the failures (the first one, and how many more) and the mounts that
    /// did not answer.
    pub fn summary(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(first) = self.errors.first() {
            let more = self.errors.len() - 1;
            out.push(if more == 0 {
                first.clone()
            } else {
                format!("{first} (and {more} more policies failed)")
            });
        }
        if !self.stuck.is_empty() {
            let names: Vec<String> = self
                .stuck
                .iter()
                .take(4)
                .map(|p| p.display().to_string())
                .collect();
            out.push(format!(
                "{} filesystems did not answer within {} s and were skipped: {}{}",
                self.stuck.len(),
                FS_TIMEOUT.as_secs(),
                names.join(", "),
                if self.stuck.len() > 4 { ", ..." } else { "" }
            ));
        }
        out
    }
}

/// Unlocks every policy the user's login protector protects with the login
/// password.
///
/// # Errors
/// The protector does not open (wrong password) or cannot be read.
pub fn unlock(o: &Options, uid: u32, password: &[u8]) -> Result<Outcome, String> {
    let Some((store, prot)) = login_protector(o, uid)? else {
        return Ok(Outcome::default());
    };
    let pkey = actions::open_protector(&prot, password).map_err(|e| e.to_string())?;
    let mut found = policies_of(o, &prot.protector_descriptor, store.trust());
    let mut out = Outcome::default();
    for (mount, policy) in std::mem::take(&mut found.policies) {
        let Some((_, spec)) = kernel_spec(&policy) else {
            out.errors
                .push(format!("policy {}: bad descriptor", policy.key_descriptor));
            continue;
        };
        let key = match actions::open_policy(&policy, &prot.protector_descriptor, &pkey) {
            Ok(key) => key,
            Err(e) => {
                out.errors
                    .push(format!("policy {}: {e}", policy.key_descriptor));
                continue;
            }
        };
        let descriptor = policy.key_descriptor.clone();
        let at = mount.clone();
        // The keyring calls open the mount: time-bounded as well.
        let r = bounded(FS_TIMEOUT, move || {
            if keyring::key_status(&at, spec).is_ok_and(|s| s.presence == KeyPresence::Present) {
                return Ok(false);
            }
            as_user(uid, || add_key(&at, &policy, &key[..])).map(|()| true)
        });
        out.count(mount, &descriptor, r);
    }
    Ok(out.finish(found.stuck))
}

/// Runs `f` with the filesystem uid and gid of user `uid` (this thread
/// only: `setfsuid(2)`), restored afterwards. The kernel records who added
/// a key by fsuid (`fs/crypto/keyring.c`: one claim per user), so keys
/// added at login are the user's and the user can lock them without root,
/// as with google/fscrypt's module; removal at logout takes the same claim.
fn as_user<T>(uid: u32, f: impl FnOnce() -> T) -> T {
    let gid = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
        .ok()
        .flatten()
        .map(|u| u.gid.as_raw());
    // SAFETY (all three blocks): setfsgid/setfsuid take plain ids, only
    // change this thread's filesystem ids and return the previous one,
    // which is restored after `f`.
    let old_gid = gid.map(|g| {
        // SAFETY: as above.
        unsafe { libc::setfsgid(g) }
    });
    // SAFETY: as above.
    let old_uid = unsafe { libc::setfsuid(uid) };
    let r = f();
    // SAFETY: as above.
    unsafe {
        libc::setfsuid(old_uid as libc::uid_t);
        if let Some(g) = old_gid {
            libc::setfsgid(g as libc::gid_t);
        }
    }
    r
}

fn add_key(mount: &Path, p: &PolicyData, key: &[u8]) -> Result<(), String> {
    let raw = hex::decode(&p.key_descriptor).map_err(|e| e.to_string())?;
    if p.opts().version() == 1 {
        let d = fscrypt::KeyDescriptor(raw.try_into().map_err(|_| "bad descriptor")?);
        keyring::add_key_v1(mount, d, key).map_err(|e| e.to_string())
    } else {
        let id = keyring::add_key_v2(mount, key).map_err(|e| e.to_string())?;
        if hex::encode(id.0) != p.key_descriptor {
            return Err("the kernel computed another key identifier".into());
        }
        Ok(())
    }
}

/// Locks every policy of the user's login protector.
///
/// # Errors
/// The protector cannot be read.
pub fn lock(o: &Options, uid: u32) -> Result<Outcome, String> {
    let Some((store, prot)) = login_protector(o, uid)? else {
        return Ok(Outcome::default());
    };
    let mut found = policies_of(o, &prot.protector_descriptor, store.trust());
    let mut out = Outcome::default();
    for (mount, policy) in std::mem::take(&mut found.policies) {
        let Some((_, spec)) = kernel_spec(&policy) else {
            continue;
        };
        let at = mount.clone();
        // The keyring calls open the mount: time-bounded as well.
        let r = bounded(FS_TIMEOUT, move || {
            match keyring::key_status(&at, spec) {
                Ok(s) if s.presence == KeyPresence::Absent => return Ok(false),
                _ => {}
            }
            as_user(uid, || keyring::remove_key(&at, spec, false))
                .map(|_| true)
                .map_err(|e| e.to_string())
        });
        out.count(mount, &policy.key_descriptor, r);
    }
    Ok(out.finish(found.stuck))
}

/// Re-wraps the user's login protector from `old` to `new` password:
/// whether there was one.
///
/// # Errors
/// Wrong old password, unwritable metadata.
pub fn rewrap(o: &Options, uid: u32, old: &[u8], new: &[u8]) -> Result<bool, String> {
    let Some((store, prot)) = login_protector(o, uid)? else {
        return Ok(false);
    };
    let costs = prot.costs.clone().unwrap_or_default();
    let q = actions::rewrap_protector(&prot, old, new, &costs).map_err(|e| e.to_string())?;
    store.put_protector(&q).map_err(|e| e.to_string())?;
    Ok(true)
}

/// Adds `delta` to the user's session count (a file under [`COUNT_DIR`],
/// locked while updated) and returns the new count (never below 0).
///
/// # Errors
/// The file cannot be created or locked.
pub fn adjust_count(uid: u32, delta: i64) -> Result<i64, String> {
    std::fs::create_dir_all(COUNT_DIR).map_err(|e| format!("{COUNT_DIR}: {e}"))?;
    let path = Path::new(COUNT_DIR).join(format!("{uid}.count"));
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    nix::fcntl::Flock::lock(
        f.try_clone().map_err(|e| e.to_string())?,
        nix::fcntl::FlockArg::LockExclusive,
    )
    .map(|lock| {
        let mut s = String::new();
        let _ = f.read_to_string(&mut s);
        let n = (s.trim().parse::<i64>().unwrap_or(0) + delta).max(0);
        let _ = f.set_len(0);
        let _ = f.rewind();
        let _ = write!(f, "{n}");
        drop(lock);
        n
    })
    .map_err(|(_, e)| format!("lock {}: {e}", path.display()))
}
