//! What the module does, without FFI: find the user's login protector on
//! the root filesystem, the policies it protects on every mounted
//! filesystem set up for fscrypt (directly or through a link file), add or
//! remove their keys in the filesystem keyring, re-wrap the protector, and
//! count the user's open sessions. Errors are one-line strings without
//! secrets (they go to syslog).

use std::io::{Read, Seek, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use fscrypt_linux::keyring::{self, KeyPresence, KeySpec};
use fscrypt_metadata::links::MainMount;
use fscrypt_metadata::proto::{PolicyData, ProtectorData};
use fscrypt_metadata::store::Store;
use fscrypt_metadata::{actions, login};

/// Module options from the PAM configuration line.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// `lock_policies`: lock the directories at the user's last session close.
    pub lock_policies: bool,
    /// `root_mnt=PATH`: where login protectors live (default `/`).
    pub root_mnt: Option<PathBuf>,
    /// `debug`: log each step.
    pub debug: bool,
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
                _ => match a.strip_prefix("root_mnt=") {
                    Some(p) if !p.is_empty() => o.root_mnt = Some(PathBuf::from(p)),
                    _ => unknown.push(a.to_string()),
                },
            }
        }
        (o, unknown)
    }

    fn root(&self) -> PathBuf {
        self.root_mnt.clone().unwrap_or_else(|| PathBuf::from("/"))
    }
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

/// The login protector of `uid`, or `None`.
///
/// # Errors
/// The root filesystem's metadata cannot be read.
pub fn login_protector(o: &Options, uid: u32) -> Result<Option<(Store, ProtectorData)>, String> {
    let root = Store::new(o.root());
    if root.check_setup().is_err() {
        return Ok(None);
    }
    let p = login::login_protector(&root, i64::from(uid)).map_err(|e| e.to_string())?;
    Ok(p.map(|p| (root, p)))
}

fn main_mounts() -> Vec<MainMount> {
    let mut out: Vec<MainMount> = Vec::new();
    for m in fscrypt_linux::mountinfo::read_mountinfo().unwrap_or_default() {
        if m.root != Path::new("/") || out.iter().any(|x| (x.major, x.minor) == (m.major, m.minor))
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

/// Every policy protected by `d` on a mounted, set-up filesystem, with its
/// mount point.
pub fn policies_of(d: &str) -> Vec<(PathBuf, PolicyData)> {
    let mut out = Vec::new();
    for m in main_mounts() {
        let store = Store::new(&m.path);
        if store.check_setup().is_err() {
            continue;
        }
        if let Ok(ps) = login::policies_using(&store, d) {
            out.extend(ps.into_iter().map(|p| (m.path.clone(), p)));
        }
    }
    out
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

/// Unlocks every policy the user's login protector protects with the login
/// password: `(unlocked, failures)`.
///
/// # Errors
/// The protector does not open (wrong password) or cannot be read.
pub fn unlock(o: &Options, uid: u32, password: &[u8]) -> Result<(usize, Vec<String>), String> {
    let Some((_, prot)) = login_protector(o, uid)? else {
        return Ok((0, Vec::new()));
    };
    let pkey = actions::open_protector(&prot, password).map_err(|e| e.to_string())?;
    let mut n = 0;
    let mut errs = Vec::new();
    for (mount, policy) in policies_of(&prot.protector_descriptor) {
        let Some((_, spec)) = kernel_spec(&policy) else {
            errs.push(format!("policy {}: bad descriptor", policy.key_descriptor));
            continue;
        };
        if keyring::key_status(&mount, spec)
            .map(|s| s.presence == KeyPresence::Present)
            .unwrap_or(false)
        {
            continue;
        }
        let r = actions::open_policy(&policy, &prot.protector_descriptor, &pkey)
            .map_err(|e| e.to_string())
            .and_then(|key| as_user(uid, || add_key(&mount, &policy, &key[..])));
        match r {
            Ok(()) => n += 1,
            Err(e) => errs.push(format!("policy {}: {e}", policy.key_descriptor)),
        }
    }
    Ok((n, errs))
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

/// Locks every policy of the user's login protector: `(locked, failures)`.
///
/// # Errors
/// The protector cannot be read.
pub fn lock(o: &Options, uid: u32) -> Result<(usize, Vec<String>), String> {
    let Some((_, prot)) = login_protector(o, uid)? else {
        return Ok((0, Vec::new()));
    };
    let mut n = 0;
    let mut errs = Vec::new();
    for (mount, policy) in policies_of(&prot.protector_descriptor) {
        let Some((_, spec)) = kernel_spec(&policy) else {
            continue;
        };
        match keyring::key_status(&mount, spec) {
            Ok(s) if s.presence == KeyPresence::Absent => continue,
            _ => {}
        }
        match as_user(uid, || keyring::remove_key(&mount, spec, false)) {
            Ok(_) => n += 1,
            Err(e) => errs.push(format!("policy {}: {e}", policy.key_descriptor)),
        }
    }
    Ok((n, errs))
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
