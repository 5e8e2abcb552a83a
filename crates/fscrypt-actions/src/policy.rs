//! Policies on a mounted filesystem: the kernel policy of a google/fscrypt
//! policy file, unlocking a directory (its protector chosen, located and
//! opened, the key provisioned where [`crate::keyring`] says), locking it
//! with the report of files still open, and the metadata part of
//! `status`. Nothing here prints: each returns what happened for the front
//! end to render.

use std::path::{Path, PathBuf};

use fscrypt::{
    EncryptionMode, KeyDescriptor, KeyIdentifier, Policy, PolicyFlags, PolicyV1, PolicyV2,
};
use fscrypt_linux::keyring::KeyPresence;
use fscrypt_metadata::actions::{self, PolicyKey};
use fscrypt_metadata::keys::Key32;
use fscrypt_metadata::proto::{PolicyData, ProtectorData};
use fscrypt_metadata::store::Store;

use crate::context::Context;
use crate::error::{Error, Result};
use crate::keyring::{self, Removal};
use crate::protector::{self, Located};
use crate::source::Source;

/// The kernel policy for a google/fscrypt policy file.
///
/// # Errors
/// [`Error::BadPolicy`] for bad padding or a descriptor of the wrong size.
pub fn kernel_policy(p: &PolicyData) -> Result<Policy> {
    let bad = |reason: String| Error::BadPolicy {
        policy: p.key_descriptor.clone(),
        reason,
    };
    let o = p.opts();
    let flags = PolicyFlags(0)
        .with_padding(o.padding as usize)
        .ok_or_else(|| bad(format!("padding {} is invalid", o.padding)))?;
    let contents = EncryptionMode(o.contents as u8);
    let filenames = EncryptionMode(o.filenames as u8);
    let raw = hex::decode(&p.key_descriptor).map_err(|e| bad(e.to_string()))?;
    Ok(if o.version() == 1 {
        Policy::V1(PolicyV1 {
            contents_mode: contents,
            filenames_mode: filenames,
            flags,
            master_key_descriptor: KeyDescriptor(
                raw.try_into().map_err(|_| bad("bad descriptor".into()))?,
            ),
        })
    } else {
        Policy::V2(PolicyV2 {
            contents_mode: contents,
            filenames_mode: filenames,
            flags,
            log2_data_unit_size: 0,
            master_key_identifier: KeyIdentifier(
                raw.try_into().map_err(|_| bad("bad identifier".into()))?,
            ),
        })
    })
}

/// The kernel policy of `dir`, or `None` when it is not encrypted.
///
/// # Errors
/// [`Error::EncryptionNotSupported`]; other kernel errors.
pub fn dir_policy(dir: &Path) -> Result<Option<Policy>> {
    match fscrypt_linux::policy::get_policy(dir) {
        Ok(p) => Ok(Some(p)),
        Err(fscrypt_linux::Error::NotEncrypted { .. }) => Ok(None),
        Err(e @ fscrypt_linux::Error::EncryptionNotSupported { .. }) => {
            Err(Error::EncryptionNotSupported(e))
        }
        Err(e) => Err(e.into()),
    }
}

/// The policy key, unwrapped by protector `protector` (already opened:
/// `protector_key`). The protector's secret was right, so a slot that does
/// not unwrap means a damaged or edited policy file.
///
/// # Errors
/// [`Error::PolicyKeyUnwrap`]; the policy's other errors.
pub fn open_key(
    store: &Store,
    policy: &PolicyData,
    protector: &str,
    protector_key: &Key32,
) -> Result<PolicyKey> {
    actions::open_policy(policy, protector, protector_key).map_err(|e| match e {
        fscrypt_metadata::Error::WrongSecret { .. } => Error::PolicyKeyUnwrap {
            policy: policy.key_descriptor.clone(),
            protector: protector.to_string(),
            path: store.policy_dir().join(&policy.key_descriptor),
        },
        e => Error::Metadata(e),
    })
}

/// An encrypted directory and its google/fscrypt policy.
#[derive(Clone, Debug)]
pub struct Target {
    /// The directory.
    pub dir: PathBuf,
    /// Its kernel policy.
    pub kernel: Policy,
    /// The policy's descriptor (hex).
    pub descriptor: String,
    /// The metadata of its filesystem.
    pub store: Store,
    /// The policy file.
    pub policy: PolicyData,
    /// Its filesystem type.
    pub fs_type: String,
}

impl Target {
    /// Reads `dir`'s kernel policy and its policy file.
    ///
    /// # Errors
    /// [`Error::NotEncrypted`]; unsupported; not set up, insecure; no
    /// policy file.
    pub fn open(ctx: &Context, dir: &Path) -> Result<Target> {
        let Some(kernel) = dir_policy(dir)? else {
            return Err(Error::NotEncrypted {
                path: dir.to_path_buf(),
            });
        };
        let store = ctx.store_of(dir)?;
        let descriptor = keyring::key_hex(&kernel);
        let policy = store.policy(&descriptor)?;
        Ok(Target {
            dir: dir.to_path_buf(),
            fs_type: ctx.fs_type(store.mount()),
            kernel,
            descriptor,
            store,
            policy,
        })
    }

    /// Whether its key is present.
    pub fn presence(&self, ctx: &Context) -> Option<KeyPresence> {
        ctx.keyring()
            .presence(self.store.mount(), &self.fs_type, &self.kernel)
    }

    /// The policy's protector descriptors.
    pub fn slots(&self) -> Vec<&str> {
        self.policy
            .wrapped_policy_keys
            .iter()
            .map(|s| s.protector_descriptor.as_str())
            .collect()
    }

    /// The policy's protectors that can be located (links followed).
    pub fn candidates(&self, ctx: &Context) -> Vec<ProtectorData> {
        self.slots()
            .iter()
            .filter_map(|d| protector::locate(ctx, &self.store, d).ok())
            .map(|l| l.data)
            .collect()
    }

    /// Protector `id`, named by the user as `mount:id`, or (`None`) found
    /// on this policy's filesystem.
    ///
    /// # Errors
    /// [`Error::NotProtectedBy`] when `id` is not one of the policy's;
    /// the mount's metadata not set up or insecure; not found.
    pub fn protector(&self, ctx: &Context, mount: Option<&Path>, id: &str) -> Result<Located> {
        let slots = self.slots();
        if !slots.contains(&id) {
            return Err(Error::NotProtectedBy {
                protector: id.to_string(),
                dir: self.dir.clone(),
                slots: slots.iter().map(|s| s.to_string()).collect(),
            });
        }
        let store = match mount {
            Some(m) => ctx.store_at_checked(m)?,
            None => self.store.clone(),
        };
        protector::locate(ctx, &store, id)
    }

    /// Unlocks with protector `p` and its `secret`: the policy key is
    /// unwrapped and provisioned ([`crate::keyring`]).
    ///
    /// # Errors
    /// Wrong secret; [`Error::PolicyKeyUnwrap`]; keyring errors.
    pub fn unlock(&self, ctx: &Context, p: &Located, secret: &[u8]) -> Result<()> {
        let pkey = protector::open(&p.data, secret)?;
        let key = open_key(
            &self.store,
            &self.policy,
            &p.data.protector_descriptor,
            &pkey,
        )?;
        ctx.keyring().add(
            self.store.mount(),
            &self.fs_type,
            &self.kernel,
            &self.descriptor,
            &key[..],
        )
    }
}

/// What [`lock`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LockOutcome {
    /// The key was not there.
    AlreadyLocked,
    /// The key was removed (see [`Removal`]).
    Removed(Removal),
}

/// The report of [`lock`].
#[derive(Clone, Debug)]
pub struct LockReport {
    /// The policy descriptor (hex).
    pub descriptor: String,
    /// What happened.
    pub outcome: LockOutcome,
    /// Files still open under the directory when the key could not be
    /// removed completely (at most 20).
    pub open_files: Vec<String>,
}

/// Locks `dir`: syncs, then removes its key (`all_users`: every user's
/// claim, root only); when files are still open, lists them.
///
/// # Errors
/// [`Error::NotEncrypted`]; unsupported; keyring errors.
pub fn lock(ctx: &Context, dir: &Path, all_users: bool) -> Result<LockReport> {
    let Some(kernel) = dir_policy(dir)? else {
        return Err(Error::NotEncrypted {
            path: dir.to_path_buf(),
        });
    };
    let mount = ctx.mount_of(dir)?.mount_point;
    let fs_type = ctx.fs_type(&mount);
    let descriptor = keyring::key_hex(&kernel);
    let kr = ctx.keyring();
    if kr.presence(&mount, &fs_type, &kernel) == Some(KeyPresence::Absent) {
        return Ok(LockReport {
            descriptor,
            outcome: LockOutcome::AlreadyLocked,
            open_files: Vec::new(),
        });
    }
    // Write back dirty data while the key is still there.
    rustix::fs::sync();
    let removal = kr.remove(&mount, &fs_type, &kernel, all_users)?;
    let open_files = match removal {
        Removal::FilesBusy | Removal::UserKeyringCachesKept => open_files(dir),
        _ => Vec::new(),
    };
    Ok(LockReport {
        descriptor,
        outcome: LockOutcome::Removed(removal),
        open_files,
    })
}

/// Open files under `dir`: `/proc/PID/fd/*` links pointing below it (at
/// most 20; those of processes we may not inspect are missed).
fn open_files(dir: &Path) -> Vec<String> {
    fscrypt_linux::holders::open_files_below(dir, 20)
        .into_iter()
        .map(|(pid, target)| format!("{} (pid {pid})", target.display()))
        .collect()
}

/// A protector as `status` lists it: its data, or why it cannot be read.
#[derive(Clone, Debug)]
pub struct ProtectorEntry {
    /// The descriptor.
    pub descriptor: String,
    /// The protector (located: links followed), or the error's text.
    pub data: std::result::Result<ProtectorData, String>,
    /// The mount point of the filesystem holding it, when it was reached
    /// through a link file (a login protector on the login filesystem).
    pub linked_from: Option<PathBuf>,
    /// The sealed record of its sidecar, when it is a sealed protector
    /// ([`crate::sealed`]), or why the sidecar cannot be read.
    pub sealed: Option<std::result::Result<fscrypt_seal::Sealed, String>>,
}

/// A policy as `status` lists it on a mount point.
#[derive(Clone, Debug)]
pub struct PolicyEntry {
    /// The descriptor.
    pub descriptor: String,
    /// Its key's presence and its protectors, or the error's text.
    pub data: std::result::Result<(Option<KeyPresence>, Vec<String>), String>,
}

/// The google/fscrypt metadata part of `status`.
#[derive(Clone, Debug)]
pub enum MetadataStatus {
    /// The metadata is not set up right (the error's text).
    Unusable(String),
    /// An encrypted directory's policy.
    Policy {
        /// Its descriptor.
        descriptor: String,
        /// Its key's presence.
        presence: Option<KeyPresence>,
        /// The policy file and its protectors, or why it cannot be read.
        data: std::result::Result<(PolicyData, Vec<ProtectorEntry>), String>,
    },
    /// A mount point: every protector and policy.
    Mount {
        /// The `.fscrypt` directory.
        base_dir: PathBuf,
        /// The protectors (files on this filesystem).
        protectors: Vec<ProtectorEntry>,
        /// The policies.
        policies: Vec<PolicyEntry>,
    },
}

/// The metadata status of `path` on the filesystem mounted at `mount`
/// (whose kernel policy, if encrypted, is `kpolicy`): `None` when the
/// filesystem has no `.fscrypt`, or `path` is neither encrypted nor the
/// mount point. A policy's protectors are located as `unlock` locates
/// them (links followed).
pub fn status(
    ctx: &Context,
    path: &Path,
    mount: &Path,
    kpolicy: Option<&Policy>,
) -> Option<MetadataStatus> {
    let store = ctx.store_at(mount);
    // The metadata reads of status go through the source trait (a mount's
    // `.fscrypt` here); protectors are located as unlock locates them.
    let src: &dyn Source = &store;
    if !src.exists() {
        return None;
    }
    if let Err(e) = src.check_setup() {
        return Some(MetadataStatus::Unusable(e.to_string()));
    }
    let fs_type = ctx.fs_type(mount);
    let kr = ctx.keyring();
    let entry = |d: &str| {
        let located = protector::locate(ctx, &store, d);
        ProtectorEntry {
            descriptor: d.to_string(),
            linked_from: match &located {
                Ok(l) if l.linked => Some(l.store.mount().to_path_buf()),
                // A link that could not be followed is still a link.
                Err(_) if !src.has_protector(d) => src
                    .link(d)
                    .ok()
                    .flatten()
                    .and_then(|t| fscrypt_metadata::links::Link::parse(&t).ok())
                    .and_then(|l| l.path),
                _ => None,
            },
            sealed: located
                .as_ref()
                .ok()
                .and_then(|l| crate::sealed::of(l).transpose())
                .map(|r| r.map_err(|e| e.to_string())),
            data: located.map(|l| l.data).map_err(|e| e.to_string()),
        }
    };
    if let Some(kp) = kpolicy {
        let descriptor = keyring::key_hex(kp);
        let presence = kr.presence(mount, &fs_type, kp);
        let data = src
            .policy(&descriptor)
            .map(|p| {
                let prots = p
                    .wrapped_policy_keys
                    .iter()
                    .map(|s| entry(&s.protector_descriptor))
                    .collect();
                (p, prots)
            })
            .map_err(|e| e.to_string());
        return Some(MetadataStatus::Policy {
            descriptor,
            presence,
            data,
        });
    }
    if std::fs::canonicalize(path).ok().as_deref() != Some(mount) {
        return None;
    }
    // The protectors kept here and those linked from here (google/fscrypt
    // lists both, the linked ones with the filesystem they live on).
    let mut descriptors = src.protectors().unwrap_or_default();
    descriptors.extend(src.linked_protectors().unwrap_or_default());
    descriptors.sort();
    descriptors.dedup();
    let protectors = descriptors.iter().map(|d| entry(d)).collect();
    let policies = src
        .policies()
        .unwrap_or_default()
        .into_iter()
        .map(|d| {
            let data = src
                .policy(&d)
                .map(|p| {
                    let presence = kernel_policy(&p)
                        .ok()
                        .and_then(|kp| kr.presence(mount, &fs_type, &kp));
                    let slots = p
                        .wrapped_policy_keys
                        .iter()
                        .map(|s| s.protector_descriptor.clone())
                        .collect();
                    (presence, slots)
                })
                .map_err(|e| e.to_string());
            PolicyEntry {
                descriptor: d,
                data,
            }
        })
        .collect();
    Some(MetadataStatus::Mount {
        base_dir: store.base_dir(),
        protectors,
        policies,
    })
}

/// What [`purge`] did with one policy of the filesystem.
#[derive(Clone, Debug)]
pub struct Purged {
    /// The policy descriptor (hex).
    pub descriptor: String,
    /// What happened to its key, or why it could not be handled (one
    /// line).
    pub outcome: std::result::Result<LockOutcome, String>,
}

/// Removes from the kernel the key of every policy in the google/fscrypt
/// metadata of the filesystem mounted at `mount` (google/fscrypt's
/// `fscrypt purge`): data is synced first; each key is removed as
/// [`lock`] removes one (`all_users`: every user's claim, root only; v1
/// keys in the user keyring with the kernel's caches dropped as root).
/// Keys the metadata does not name (added with `add-key`, or by other
/// tools) stay; a key whose files are still open is only partly removed
/// ([`Removal::FilesBusy`]) until they are closed.
///
/// # Errors
/// [`Error::Usage`] when `mount` is not the mount point of its
/// filesystem; not set up, insecure; the policy directory unreadable.
/// A key that cannot be removed is reported in its [`Purged`], never
/// stopping the others.
pub fn purge(ctx: &Context, mount: &Path, all_users: bool) -> Result<Vec<Purged>> {
    let abs = std::fs::canonicalize(mount).map_err(|e| Error::io(mount, e))?;
    let m = ctx.mount_of(&abs)?;
    if m.mount_point != abs {
        return Err(Error::Usage(format!(
            "{} is not a mount point: purge takes the mount point of a filesystem (this one is on {}); to lock one directory use `fscrypt-rs lock DIR`",
            mount.display(),
            m.mount_point.display()
        )));
    }
    let store = ctx.store_at(&abs);
    store.check_setup()?;
    let fs_type = m.fs_type.clone();
    let kr = ctx.keyring();
    let policies = store.policies()?;
    // Write back dirty data while the keys are still there.
    rustix::fs::sync();
    Ok(policies
        .into_iter()
        .map(|d| {
            let outcome = store
                .policy(&d)
                .map_err(Error::from)
                .and_then(|p| kernel_policy(&p))
                .and_then(|kp| {
                    if kr.presence(&abs, &fs_type, &kp) == Some(KeyPresence::Absent) {
                        return Ok(LockOutcome::AlreadyLocked);
                    }
                    Ok(LockOutcome::Removed(
                        kr.remove(&abs, &fs_type, &kp, all_users)?,
                    ))
                })
                .map_err(|e| e.to_string());
            Purged {
                descriptor: d,
                outcome,
            }
        })
        .collect())
}
