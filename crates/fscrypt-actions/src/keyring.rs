//! Where policy keys go: the ONE place that chooses between the
//! filesystem keyring and, for v1 policies, the user keyring, from the
//! config's `use_fs_keyring_for_v1_policies` (google/fscrypt's
//! `actions/policy.go` provisioning and its `keyring` package: v2 keys
//! always go to the filesystem keyring; v1 keys go to the target user's
//! user keyring unless the config says otherwise). The CLI and the PAM
//! module both add, look for and remove keys through here, so they put a
//! v1 key in the same place.
//!
//! The PAM module acts for the user logging in while running as root:
//! [`Keyring::for_user`] makes every call run with that user's filesystem
//! uid (the kernel records who added a filesystem-keyring key by fsuid,
//! `fs/crypto/keyring.c`) and, for the user keyring, that user's real uid
//! (the kernel picks the user keyring by real uid), on the calling thread
//! only, restored afterwards.

use std::path::Path;

use fscrypt::Policy;
use fscrypt_linux::keyring::{self, KeyPresence, KeySpec, RemovalOutcome};
use fscrypt_metadata::config::Config;

use crate::error::{Error, Result};

/// Where v1 policy keys go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum V1Keyring {
    /// The target user's user keyring (google/fscrypt's default).
    User,
    /// The filesystem keyring (`use_fs_keyring_for_v1_policies: true`).
    Filesystem,
}

impl V1Keyring {
    /// The choice a config makes: the user keyring unless
    /// `use_fs_keyring_for_v1_policies`. No readable config: the
    /// filesystem keyring.
    pub fn from_config(config: Option<&Config>) -> V1Keyring {
        match config {
            Some(c) if !c.use_fs_keyring_for_v1_policies => V1Keyring::User,
            _ => V1Keyring::Filesystem,
        }
    }
}

/// How a lock went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Removal {
    /// The key is gone.
    Removed,
    /// The key is gone but files under the directory are still open.
    FilesBusy,
    /// This user's claim is gone; other users still hold the key.
    OtherUsers,
    /// Removed from the user keyring, but open inodes keep their keys
    /// until the caches are dropped (only root can).
    UserKeyringCachesKept,
}

/// The keyring choice of one context.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Keyring {
    v1: V1Keyring,
    /// Act as this user (uid, gid): the PAM module's login user.
    user: Option<(u32, Option<u32>)>,
}

impl Keyring {
    /// The caller's keyrings, v1 keys where `v1` says.
    pub const fn caller(v1: V1Keyring) -> Keyring {
        Keyring { v1, user: None }
    }

    /// User `uid`'s keyrings (with primary group `gid`), for a root
    /// process acting at that user's login.
    pub const fn for_user(v1: V1Keyring, uid: u32, gid: Option<u32>) -> Keyring {
        Keyring {
            v1,
            user: Some((uid, gid)),
        }
    }

    /// Where v1 keys go.
    pub const fn v1(self) -> V1Keyring {
        self.v1
    }

    fn run<T>(self, user_keyring: bool, f: impl FnOnce() -> T) -> T {
        match self.user {
            Some((uid, gid)) => as_user(uid, gid, user_keyring, f),
            None => f(),
        }
    }

    /// Adds the key of `policy` (`key`, the raw master key) on `mount`, of
    /// filesystem type `fs_type` (the user keyring's description prefix).
    ///
    /// # Errors
    /// [`Error::Kernel`]; [`Error::IdentifierMismatch`] when the kernel's
    /// v2 identifier is not the policy's (`descriptor`).
    pub fn add(
        self,
        mount: &Path,
        fs_type: &str,
        policy: &Policy,
        descriptor: &str,
        key: &[u8],
    ) -> Result<()> {
        match policy {
            Policy::V2(p2) => {
                let id = self.run(false, || keyring::add_key_v2(mount, key))?;
                if id != p2.master_key_identifier {
                    return Err(Error::IdentifierMismatch {
                        policy: descriptor.to_string(),
                    });
                }
            }
            Policy::V1(p1) if self.v1 == V1Keyring::User => self.run(true, || {
                keyring::user::add(fs_type, p1.master_key_descriptor, key)
            })?,
            Policy::V1(p1) => self.run(false, || {
                keyring::add_key_v1(mount, p1.master_key_descriptor, key)
            })?,
        }
        Ok(())
    }

    /// Whether the key of `policy` is present: in the filesystem keyring,
    /// or for v1 also in the user keyring (whatever the choice: a key put
    /// there by the other tool or an older config still unlocks). `None`
    /// when the kernel cannot say.
    pub fn presence(self, mount: &Path, fs_type: &str, policy: &Policy) -> Option<KeyPresence> {
        if let Policy::V1(p1) = policy
            && self
                .run(true, || {
                    keyring::user::has(fs_type, p1.master_key_descriptor)
                })
                .unwrap_or(false)
        {
            return Some(KeyPresence::Present);
        }
        self.run(false, || keyring::key_status(mount, key_spec(policy)))
            .ok()
            .map(|s| s.presence)
    }

    /// Removes the key of `policy`: for v1, from the user keyring when it
    /// is there (then, when `drop_caches`, the kernel's caches are dropped
    /// so open inodes lose their keys, as google/fscrypt does; root only),
    /// else from the filesystem keyring (`all_users`: every user's claim,
    /// root only).
    ///
    /// # Errors
    /// [`Error::Kernel`].
    pub fn remove(
        self,
        mount: &Path,
        fs_type: &str,
        policy: &Policy,
        all_users: bool,
    ) -> Result<Removal> {
        if let Policy::V1(p1) = policy
            && self.run(true, || {
                keyring::user::remove(fs_type, p1.master_key_descriptor)
            })?
        {
            return Ok(if drop_caches() {
                Removal::Removed
            } else {
                Removal::UserKeyringCachesKept
            });
        }
        let spec = key_spec(policy);
        Ok(
            match self.run(false, || keyring::remove_key(mount, spec, all_users))? {
                RemovalOutcome::Removed => Removal::Removed,
                RemovalOutcome::FilesBusy => Removal::FilesBusy,
                RemovalOutcome::OtherUsers => Removal::OtherUsers,
            },
        )
    }
}

/// The kernel key specifier of a policy.
pub fn key_spec(p: &Policy) -> KeySpec {
    match p {
        Policy::V1(p1) => KeySpec::Descriptor(p1.master_key_descriptor),
        Policy::V2(p2) => KeySpec::Identifier(p2.master_key_identifier),
    }
}

/// The descriptor (hex) of a kernel policy's key.
pub fn key_hex(p: &Policy) -> String {
    match p {
        Policy::V1(p1) => hex::encode(p1.master_key_descriptor.0),
        Policy::V2(p2) => hex::encode(p2.master_key_identifier.0),
    }
}

/// Evicts unused dentries and inodes (`/proc/sys/vm/drop_caches` = 2)
/// after a sync: whether it could (root).
fn drop_caches() -> bool {
    rustix::fs::sync();
    std::fs::write("/proc/sys/vm/drop_caches", "2\n").is_ok()
}

/// Runs `f` on this thread with the filesystem uid and gid of user `uid`
/// (`setfsuid(2)`) and, when `real`, its real uid too (the kernel's
/// `KEY_SPEC_USER_KEYRING` is the real uid's; `setresuid(2)` on this
/// thread only, the effective uid stays, so root's capabilities do), all
/// restored afterwards.
#[allow(unsafe_code)]
fn as_user<T>(uid: u32, gid: Option<u32>, real: bool, f: impl FnOnce() -> T) -> T {
    use rustix::process::Uid;
    let old_ruid = rustix::process::getuid();
    let switched =
        real && rustix::thread::set_thread_res_uid(Uid::from_raw(uid), None, None).is_ok();
    // SAFETY (the blocks below): setfsgid/setfsuid take plain ids, change
    // only this thread's filesystem ids and return the previous one, which
    // is restored after `f`.
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
    if switched {
        // Back to the real uid this thread had (root may always).
        let _ = rustix::thread::set_thread_res_uid(old_ruid, None, None);
    }
    r
}
