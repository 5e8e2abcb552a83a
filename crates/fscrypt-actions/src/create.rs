//! Encrypting a directory google/fscrypt-style, as one transaction: a
//! protector (opened, or new), a new policy with a random key wrapped by
//! it (and a recovery protector when the protector lives on another
//! filesystem, google/fscrypt's rule), the metadata written first, then
//! the key provisioned ([`crate::keyring`]), then the policy set on the
//! directory; any failure undoes what was done (a crash leaves unused
//! metadata, never an encrypted directory without its policy file).

use std::path::Path;

use fscrypt::Policy;
use fscrypt_linux::keyring::KeyPresence;
use fscrypt_metadata::actions::{self, PolicyKey};
use fscrypt_metadata::config::Config;
use fscrypt_metadata::keys::Key32;
use fscrypt_metadata::proto::{
    EncryptionOptions, HashingCosts, PolicyData, ProtectorData, SourceType,
};
use fscrypt_metadata::recovery;
use fscrypt_metadata::store::Store;
use zeroize::Zeroizing;

use crate::context::{Context, User};
use crate::error::{Error, Result};
use crate::keyring::Removal;
use crate::pam_auth::{self, PamAuthError};
use crate::policy::{Target, dir_policy, kernel_policy, open_key};
use crate::protector::{self, Located};

/// The protector a new policy is wrapped by, opened.
pub struct Chosen {
    /// The protector.
    pub protector: ProtectorData,
    /// Its protector key.
    pub key: Key32,
    /// Where the protector is (or goes, when created).
    pub store: Store,
    /// Whether it is new (written by [`create`]).
    pub created: bool,
}

impl Chosen {
    /// An existing protector, opened with `secret`.
    ///
    /// # Errors
    /// Wrong secret.
    pub fn open(store: Store, protector: ProtectorData, secret: &[u8]) -> Result<Chosen> {
        let key = protector::open(&protector, secret)?;
        Ok(Chosen {
            protector,
            key,
            store,
            created: false,
        })
    }

    /// A new protector of `source` named `name` (empty for login
    /// protectors, which record `uid`) for `secret`, to be kept on `store`.
    ///
    /// # Errors
    /// Invalid costs or raw key; randomness.
    pub fn new(
        store: Store,
        source: SourceType,
        name: &str,
        costs: &HashingCosts,
        secret: &[u8],
        uid: u32,
    ) -> Result<Chosen> {
        let (protector, key) = actions::new_protector(source, name, costs, secret, i64::from(uid))?;
        Ok(Chosen {
            protector,
            key,
            store,
            created: true,
        })
    }
}

/// Checks that `dir` can be encrypted in place: a directory, not
/// encrypted; returns whether it is empty.
///
/// # Errors
/// [`Error::Io`] (not a directory, unreadable), [`Error::AlreadyEncrypted`],
/// unsupported.
pub fn check_target(dir: &Path) -> Result<bool> {
    let md = std::fs::symlink_metadata(dir).map_err(|e| Error::io(dir, e))?;
    if !md.is_dir() {
        return Err(Error::Usage(format!(
            "{} is not a directory",
            dir.display()
        )));
    }
    if dir_policy(dir)?.is_some() {
        return Err(Error::AlreadyEncrypted {
            path: dir.to_path_buf(),
        });
    }
    Ok(std::fs::read_dir(dir)
        .map_err(|e| Error::io(dir, e))?
        .next()
        .is_none())
}

/// The login protector of `user` on the login filesystem, if any, and that
/// filesystem's metadata.
///
/// # Errors
/// [`Error::RootNotSetup`]; insecure; unreadable.
pub fn login_protector(ctx: &Context, user: &User) -> Result<(Store, Option<ProtectorData>)> {
    let root = ctx.root_store()?;
    let p = fscrypt_metadata::login::login_protector(&root, i64::from(user.uid))?;
    Ok((root, p))
}

/// Checks `pass` is `user`'s login password (google/fscrypt's check, PAM
/// service `fscrypt`): `Ok(false)` when libpam is not there to ask.
///
/// # Errors
/// [`Error::WrongLoginPassphrase`]; [`Error::LoginCheck`] when PAM cannot
/// start.
pub fn check_login_passphrase(user: &str, pass: &[u8]) -> Result<bool> {
    match pam_auth::check_password("fscrypt", user, pass) {
        Ok(()) => Ok(true),
        Err(PamAuthError::Unavailable) => Ok(false),
        Err(PamAuthError::Refused(_)) => Err(Error::WrongLoginPassphrase {
            user: user.to_string(),
        }),
        Err(e) => Err(Error::LoginCheck {
            user: user.to_string(),
            reason: e.to_string(),
        }),
    }
}

/// Whether `store` already has a protector named `name`: its descriptor.
///
/// # Errors
/// The protectors cannot be listed.
pub fn protector_named(store: &Store, name: &str) -> Result<Option<String>> {
    for d in store.protectors()? {
        if let Ok(p) = store.protector(&d)
            && p.name == name
        {
            return Ok(Some(d));
        }
    }
    Ok(None)
}

/// The config's policy options with `given` (`KEY=VALUE,...`: `version`,
/// `contents`, `filenames`, `padding`) applied.
///
/// # Errors
/// [`Error::Usage`] for an unknown key, mode or number (checked further by
/// the policy's creation).
pub fn policy_options(base: &EncryptionOptions, given: Option<&str>) -> Result<EncryptionOptions> {
    use fscrypt_metadata::proto::Mode;
    let usage = |m: String| Error::Usage(format!("--policy-options: {m}"));
    let mut o = base.clone();
    for kv in given.unwrap_or("").split(',').filter(|s| !s.is_empty()) {
        let (k, v) = kv.split_once('=').ok_or_else(|| {
            usage(format!(
                "{kv:?} is not KEY=VALUE (e.g. version=2,padding=32)"
            ))
        })?;
        let mode = || {
            Mode::from_name(v).map(|m| m as i32).ok_or_else(|| {
                usage(format!(
                    "unknown mode {v:?}; use AES_256_XTS, AES_256_CTS, AES_128_CBC, AES_128_CTS, \
                     Adiantum or AES_256_HCTR2"
                ))
            })
        };
        match k {
            "version" | "policy_version" => {
                o.policy_version = match v {
                    "1" => 1,
                    "2" => 2,
                    _ => return Err(usage(format!("version must be 1 or 2, not {v:?}"))),
                }
            }
            "contents" => o.contents = mode()?,
            "filenames" => o.filenames = mode()?,
            "padding" => {
                o.padding = match v {
                    "4" => 4,
                    "8" => 8,
                    "16" => 16,
                    "32" => 32,
                    _ => return Err(usage(format!("padding must be 4, 8, 16 or 32, not {v:?}"))),
                }
            }
            _ => {
                return Err(usage(format!(
                    "unknown key {k:?}; use version, contents, filenames, padding"
                )));
            }
        }
    }
    Ok(o)
}

/// What [`create`] made.
pub struct Created {
    /// The new policy (its file written).
    pub policy: PolicyData,
    /// Its kernel policy (set on the directory).
    pub kernel: Policy,
    /// The protector wrapping it.
    pub protector: ProtectorData,
    /// Whether the protector is new.
    pub protector_created: bool,
    /// The recovery passphrase and protector, when one was added.
    pub recovery: Option<(Zeroizing<Vec<u8>>, ProtectorData)>,
    /// The policy's filesystem metadata (writing as the metadata's owner).
    pub store: Store,
    /// The owner (uid, gid) new metadata and recovery files get, when not
    /// the caller.
    pub owner: Option<(u32, u32)>,
}

/// Encrypts `dir` (empty; for a conversion, its new encrypted copy) on the
/// filesystem of `store` with `chosen` and `options`: metadata (recovery
/// protector when the protector is elsewhere and `recovery_for` names the
/// directory it is for, the protector when new, its link, the policy),
/// then the key, then the policy; each failure undoes the steps before.
///
/// # Errors
/// Metadata writes, keyring, setting the policy.
pub fn create(
    ctx: &Context,
    store: &Store,
    dir: &Path,
    chosen: Chosen,
    options: &EncryptionOptions,
    recovery_for: Option<&Path>,
    costs: &HashingCosts,
) -> Result<Created> {
    let Chosen {
        protector,
        key: protector_key,
        store: pstore,
        created: new_protector,
    } = chosen;
    // Root encrypting with a user's login protector: the new metadata is
    // the user's (google/fscrypt's rule), so the user can read it.
    let owner = metadata_owner(&protector);
    let store = store.clone().owned_by(owner);
    let pstore = pstore.owned_by(owner);
    let (mut policy, policy_key) =
        actions::new_policy(options, &protector.protector_descriptor, &protector_key)?;
    let kernel = kernel_policy(&policy)?;
    // google/fscrypt's rule: a policy whose protector is on another
    // filesystem also gets a recovery passphrase, kept beside the policy.
    let elsewhere = pstore.mount() != store.mount();
    let recovery = match recovery_for {
        Some(named) if elsewhere => Some(new_recovery(
            &store,
            &mut policy,
            &policy_key,
            named,
            costs,
        )?),
        _ => None,
    };
    let drop_recovery = || {
        if let Some((_, rp)) = &recovery {
            let _ = store.remove_protector(&rp.protector_descriptor);
        }
    };
    if let Some((_, rp)) = &recovery {
        store.put_protector(rp)?;
    }
    if new_protector && let Err(e) = pstore.put_protector(&protector) {
        drop_recovery();
        return Err(e.into());
    }
    let linked = if elsewhere {
        let made = ctx.main_mount_of(pstore.mount()).and_then(|target| {
            Ok(fscrypt_metadata::login::link_protector(
                &store,
                &protector.protector_descriptor,
                &target,
            )?)
        });
        match made {
            Ok(made) => made,
            Err(e) => {
                if new_protector {
                    let _ = pstore.remove_protector(&protector.protector_descriptor);
                }
                drop_recovery();
                return Err(e);
            }
        }
    } else {
        false
    };
    let fs_type = ctx.fs_type(store.mount());
    let undo = |key_added: bool| {
        if key_added {
            let _ = ctx
                .keyring()
                .remove(store.mount(), &fs_type, &kernel, false);
        }
        let _ = std::fs::remove_file(store.policy_dir().join(&policy.key_descriptor));
        if new_protector {
            let _ = pstore.remove_protector(&protector.protector_descriptor);
        }
        if linked {
            let _ = store.remove_protector(&protector.protector_descriptor);
        }
        drop_recovery();
    };
    if let Err(e) = store.put_policy(&policy) {
        undo(false);
        return Err(e.into());
    }
    if let Err(e) = ctx.keyring().add(
        store.mount(),
        &fs_type,
        &kernel,
        &policy.key_descriptor,
        &policy_key[..],
    ) {
        undo(false);
        return Err(e);
    }
    if let Err(e) = fscrypt_linux::policy::set_policy(dir, &kernel) {
        undo(true);
        return Err(e.into());
    }
    Ok(Created {
        policy,
        kernel,
        protector,
        protector_created: new_protector,
        recovery,
        store,
        owner,
    })
}

/// The config a creation needs.
///
/// # Errors
/// Why it cannot be read.
pub fn config(ctx: &Context) -> Result<&Config> {
    ctx.require_config()
}

/// Owner (uid, gid) for new metadata: the login protector's user when
/// root writes it, else `None` (the caller's).
fn metadata_owner(p: &ProtectorData) -> Option<(u32, u32)> {
    if p.source_type() != SourceType::PamPassphrase || !rustix::process::geteuid().is_root() {
        return None;
    }
    let user = User::of_uid(u32::try_from(p.uid).ok()?).ok()?;
    Some((user.uid, user.gid))
}

/// A recovery protector for `dir` (named so no protector on `store` has
/// the name), added to `policy`; not stored yet.
fn new_recovery(
    store: &Store,
    policy: &mut PolicyData,
    policy_key: &PolicyKey,
    dir: &Path,
    costs: &HashingCosts,
) -> Result<(Zeroizing<Vec<u8>>, ProtectorData)> {
    let names: Vec<String> = store
        .protectors()?
        .iter()
        .filter_map(|d| store.protector(d).ok().map(|p| p.name))
        .collect();
    let dirname = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| dir.display().to_string());
    let name = recovery::protector_name(&dirname, |n| names.iter().any(|x| x == n));
    Ok(recovery::add_recovery(policy, policy_key, &name, costs)?)
}

/// Policy `id` of the filesystem mounted at `mount` (google/fscrypt's
/// `encrypt --policy MOUNTPOINT:ID`), as the policy of the empty directory
/// `dir` on that same filesystem ([`apply_existing`] sets it).
///
/// # Errors
/// [`Error::Usage`] when the policy's filesystem is not `dir`'s (a policy
/// only serves directories of its own filesystem); not set up, insecure;
/// no such policy; a policy file that makes no kernel policy.
pub fn existing_policy(ctx: &Context, mount: &Path, id: &str, dir: &Path) -> Result<Target> {
    let pstore = ctx.store_at_checked(mount)?;
    let dstore = ctx.store_of(dir)?;
    if pstore.mount() != dstore.mount() {
        return Err(Error::Usage(format!(
            "policy {id} is on {} but {} is on {}: a policy only serves its own filesystem; give a policy of {} (`fscrypt-rs status {}` lists them)",
            pstore.mount().display(),
            dir.display(),
            dstore.mount().display(),
            dstore.mount().display(),
            dstore.mount().display()
        )));
    }
    let policy = pstore.policy(id)?;
    let kernel = kernel_policy(&policy)?;
    Ok(Target {
        dir: dir.to_path_buf(),
        kernel,
        descriptor: policy.key_descriptor.clone(),
        fs_type: ctx.fs_type(pstore.mount()),
        store: pstore,
        policy,
    })
}

/// Encrypts the empty directory `target.dir` with the existing policy of
/// `target` ([`existing_policy`]): the policy key is unwrapped with
/// protector `p` and its `secret` (needed even when the key is already
/// in the keyring, as google/fscrypt asks: reusing a policy takes one of
/// its protectors), put in the keyring, and the policy set. Returns
/// whether the key was already there (it then stays, whatever happens).
///
/// # Errors
/// Wrong secret; [`Error::PolicyKeyUnwrap`]; keyring errors; setting the
/// policy (the key added here is removed again).
pub fn apply_existing(ctx: &Context, target: &Target, p: &Located, secret: &[u8]) -> Result<bool> {
    let present = target.presence(ctx) == Some(KeyPresence::Present);
    let pkey = protector::open(&p.data, secret)?;
    let key = open_key(
        &target.store,
        &target.policy,
        &p.data.protector_descriptor,
        &pkey,
    )?;
    // Setting a v2 policy needs the caller's own claim to the key (the
    // kernel's rule, fs/crypto/policy.c): a second add only records it.
    let add = !present || matches!(target.kernel, Policy::V2(_));
    let kr = ctx.keyring();
    let mount = target.store.mount();
    if add {
        kr.add(
            mount,
            &target.fs_type,
            &target.kernel,
            &target.descriptor,
            &key[..],
        )?;
    }
    if let Err(e) = fscrypt_linux::policy::set_policy(&target.dir, &target.kernel) {
        if add && !present {
            let _ = kr.remove(mount, &target.fs_type, &target.kernel, false);
        }
        return Err(e.into());
    }
    Ok(present)
}

/// Takes the key of `kernel` (a policy of the filesystem of `store`) out
/// of the keyring again after encrypting (`encrypt --skip-unlock`): the
/// caller's claim only, as `lock` without `--all-users`.
///
/// # Errors
/// Keyring errors.
pub fn leave_locked(ctx: &Context, store: &Store, kernel: &Policy) -> Result<Removal> {
    let fs_type = ctx.fs_type(store.mount());
    ctx.keyring().remove(store.mount(), &fs_type, kernel, false)
}
