//! Login protectors at login (the PAM module's flow, google/fscrypt's
//! `pam_fscrypt`): find the user's login protector on the login
//! filesystem, the policies it protects on every mounted filesystem that
//! can hold fscrypt metadata, and add or remove their keys where
//! [`crate::keyring`] says (the same choice as the CLI, from the same
//! config setting), as the user; re-wrap the protector at a password
//! change.
//!
//! Only metadata the [`Context::for_login`] trust accepts is read (root
//! and the user; every owner with `allow_cross_user_metadata`). Only
//! mounts whose filesystem type can hold fscrypt metadata are looked at
//! ([`FSCRYPT_FS_TYPES`]): FUSE, network and pseudo filesystems are never
//! touched, so a stopped FUSE daemon or a dead server cannot hang a
//! login; and every look at a filesystem runs in a thread given
//! [`FS_TIMEOUT`], abandoned after it. Errors are one line, never a
//! secret.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use fscrypt_linux::keyring::KeyPresence;
use fscrypt_metadata::login as meta_login;
use fscrypt_metadata::proto::{PolicyData, ProtectorData};
use fscrypt_metadata::store::Store;

use crate::context::Context;
use crate::error::{Error, Result};
use crate::policy::{self, kernel_policy};
use crate::protector;

/// The filesystem types whose mounts are looked at for policies: those
/// with kernel fscrypt support that are local: ext4 and f2fs (since Linux
/// 4.1/4.2), ubifs (4.10). Left out on purpose: FUSE (`fuse`, `fuse.*`: a
/// stopped daemon hangs every access, and the kernel keyring does not
/// apply to it), network filesystems (nfs, cifs/smb3, and ceph, whose
/// fscrypt support needs a server that answers), and everything with no
/// fscrypt support (btrfs, xfs, tmpfs, overlay, proc...). The login
/// filesystem is looked at whatever its type, as google/fscrypt does,
/// since login protectors live there.
pub const FSCRYPT_FS_TYPES: &[&str] = &["ext4", "f2fs", "ubifs"];

/// How long one filesystem may take to answer (reading its metadata,
/// asking the keyring): past it, the filesystem is skipped and the login
/// goes on (the thread looking at it is abandoned).
pub const FS_TIMEOUT: Duration = Duration::from_secs(3);

/// Runs `f` in a thread and waits for it at most `timeout`: `None` when it
/// did not finish (the thread is left to finish or hang on its own).
pub fn bounded<T: Send + 'static>(
    timeout: Duration,
    f: impl FnOnce() -> T + Send + 'static,
) -> Option<T> {
    let (tx, rx) = mpsc::channel();
    std::thread::Builder::new()
        .name("fscrypt-fs".into())
        .spawn(move || {
            let _ = tx.send(f());
        })
        .ok()?;
    rx.recv_timeout(timeout).ok()
}

/// Whether a mount of type `fs_type` at `mount_point` is looked at
/// ([`FSCRYPT_FS_TYPES`], or the login filesystem `root`).
pub fn can_hold_metadata(fs_type: &str, mount_point: &Path, root: &Path) -> bool {
    FSCRYPT_FS_TYPES.contains(&fs_type) || mount_point == root
}

/// The login protector of `uid` and the metadata holding it, or `None`
/// (no protector, or the login filesystem is not set up or not safe).
///
/// # Errors
/// The login filesystem's metadata cannot be listed, or does not answer
/// within [`FS_TIMEOUT`].
pub fn login_protector(ctx: &Context, uid: u32) -> Result<Option<(Store, ProtectorData)>> {
    let root = ctx.store_at(ctx.login_root());
    bounded(FS_TIMEOUT, move || {
        if root.check_setup().is_err() {
            return Ok(None);
        }
        let p = meta_login::login_protector(&root, i64::from(uid))?;
        Ok(p.map(|p| (root, p)))
    })
    .unwrap_or_else(|| {
        Err(Error::Timeout {
            mount: ctx.login_root().to_path_buf(),
            secs: FS_TIMEOUT.as_secs(),
        })
    })
}

/// What [`policies_of`] found.
#[derive(Debug, Default)]
pub struct Found {
    /// Every policy protected by the protector, with its mount point.
    pub policies: Vec<(PathBuf, PolicyData)>,
    /// The mounts that did not answer within [`FS_TIMEOUT`].
    pub stuck: Vec<PathBuf>,
}

/// Every policy protected by `d` on a mounted, set-up filesystem that can
/// hold fscrypt metadata, with its mount point. The filesystems are looked
/// at in parallel threads, all given the same [`FS_TIMEOUT`]; one that has
/// not answered by then is listed in [`Found::stuck`] and skipped.
pub fn policies_of(ctx: &Context, d: &str) -> Found {
    let (tx, rx) = mpsc::channel();
    let root = ctx.login_root().to_path_buf();
    let mounts = ctx.main_mounts_where(|m| can_hold_metadata(&m.fs_type, &m.mount_point, &root));
    let mut pending: Vec<PathBuf> = Vec::new();
    for m in mounts {
        let (tx, d, store) = (tx.clone(), d.to_string(), ctx.store_at(&m.path));
        let spawned = std::thread::Builder::new()
            .name("fscrypt-fs".into())
            .spawn(move || {
                let ps = if store.check_setup().is_ok() {
                    meta_login::policies_using(&store, &d).unwrap_or_default()
                } else {
                    Vec::new()
                };
                let _ = tx.send((store.mount().to_path_buf(), ps));
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

/// What [`unlock`] or [`lock`] did: how many policies, and what failed
/// (one entry per policy; see [`Outcome::summary`]).
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
    /// Counts one policy's time-bounded keyring call on `mount`:
    /// `Some(Ok(true))` done, `Some(Ok(false))` nothing to do, `Some(Err)`
    /// a failure named by `descriptor`, `None` the mount did not answer.
    fn count(&mut self, mount: PathBuf, descriptor: &str, r: Option<Result<bool>>) {
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

/// Unlocks every policy the login protector of `uid` protects, with the
/// login password.
///
/// # Errors
/// The protector does not open (wrong password) or cannot be read.
pub fn unlock(ctx: &Context, uid: u32, password: &[u8]) -> Result<Outcome> {
    let Some((_, prot)) = login_protector(ctx, uid)? else {
        return Ok(Outcome::default());
    };
    let pkey = protector::open(&prot, password)?;
    let mut found = policies_of(ctx, &prot.protector_descriptor);
    let mut out = Outcome::default();
    for (mount, pol) in std::mem::take(&mut found.policies) {
        let descriptor = pol.key_descriptor.clone();
        let kernel = match kernel_policy(&pol) {
            Ok(k) => k,
            Err(e) => {
                out.errors.push(format!("policy {descriptor}: {e}"));
                continue;
            }
        };
        let store = ctx.store_at(&mount);
        let key = match policy::open_key(&store, &pol, &prot.protector_descriptor, &pkey) {
            Ok(key) => key,
            Err(e) => {
                out.errors.push(format!("policy {descriptor}: {e}"));
                continue;
            }
        };
        let (kr, at, fs_type, d) = (
            ctx.keyring(),
            mount.clone(),
            ctx.fs_type(&mount),
            descriptor.clone(),
        );
        // The keyring calls open the mount: time-bounded as well.
        let r = bounded(FS_TIMEOUT, move || {
            if kr.presence(&at, &fs_type, &kernel) == Some(KeyPresence::Present) {
                return Ok(false);
            }
            kr.add(&at, &fs_type, &kernel, &d, &key[..]).map(|()| true)
        });
        out.count(mount, &descriptor, r);
    }
    Ok(out.finish(found.stuck))
}

/// Locks every policy of the login protector of `uid`.
///
/// # Errors
/// The protector cannot be read.
pub fn lock(ctx: &Context, uid: u32) -> Result<Outcome> {
    let Some((_, prot)) = login_protector(ctx, uid)? else {
        return Ok(Outcome::default());
    };
    let mut found = policies_of(ctx, &prot.protector_descriptor);
    let mut out = Outcome::default();
    for (mount, pol) in std::mem::take(&mut found.policies) {
        let Ok(kernel) = kernel_policy(&pol) else {
            continue;
        };
        let (kr, at, fs_type) = (ctx.keyring(), mount.clone(), ctx.fs_type(&mount));
        // The keyring calls open the mount: time-bounded as well.
        let r = bounded(FS_TIMEOUT, move || {
            if kr.presence(&at, &fs_type, &kernel) == Some(KeyPresence::Absent) {
                return Ok(false);
            }
            kr.remove(&at, &fs_type, &kernel, false).map(|_| true)
        });
        out.count(mount, &pol.key_descriptor, r);
    }
    Ok(out.finish(found.stuck))
}

/// Re-wraps the login protector of `uid` from the `old` to the `new`
/// password (its own costs kept): whether there was one.
///
/// # Errors
/// Wrong old password, unwritable metadata.
pub fn rewrap(ctx: &Context, uid: u32, old: &[u8], new: &[u8]) -> Result<bool> {
    let Some((store, prot)) = login_protector(ctx, uid)? else {
        return Ok(false);
    };
    let costs = prot.costs.clone().unwrap_or_default();
    protector::rewrap(&store, &prot, old, new, &costs)?;
    Ok(true)
}
