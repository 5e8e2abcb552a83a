//! google/fscrypt metadata management (`fscrypt-rs metadata`): create and
//! destroy protectors and policies, add a protector to a policy or take it
//! out, change a protector's secret, dump a filesystem's metadata. Every
//! read goes through a [`Context`] (its mount table and trust); links to
//! protectors on other filesystems are followed ([`protector::locate`])
//! and made ([`fscrypt_metadata::login::link_protector`]) as
//! google/fscrypt does. Secrets are asked for through a [`GetSecret`]
//! callback (google/fscrypt's actions take a key-getting function the
//! same way), at the point of the flow where they are needed; nothing here
//! prompts or prints.

use std::path::{Path, PathBuf};

use fscrypt_metadata::actions;
use fscrypt_metadata::config::{self, Config};
use fscrypt_metadata::keys::Key32;
use fscrypt_metadata::proto::{PolicyData, ProtectorData, SourceType};
use fscrypt_metadata::store::{SetupMode, Store};
use zeroize::Zeroizing;

use crate::context::{Context, User};
use crate::error::{Error, Result};
use crate::{policy, protector};

/// A protector or policy named by the mount point of (or a path on) its
/// filesystem and its descriptor (google/fscrypt's `MOUNTPOINT:ID`).
#[derive(Clone, Copy, Debug)]
pub struct At<'a> {
    /// A path on the filesystem (normally its mount point), as given.
    pub mount: &'a Path,
    /// The descriptor (hex).
    pub id: &'a str,
}

/// Which existing protector a secret is asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// The protector the action names (`--protector`): the one a policy is
    /// created with or added to, or whose secret changes.
    Named,
    /// The protector of a policy that opens it (`--unlock-with`).
    UnlockWith,
}

/// What a [`GetSecret`] callback is asked for.
#[derive(Clone, Copy, Debug)]
pub enum SecretFor<'a> {
    /// The secret of a new protector of `source`, described as `what`
    /// (`the login protector`, or `protector "NAME"`); for a login
    /// protector, `login_user` is the user whose login passphrase it must
    /// be (the front end checks it).
    New {
        /// The new protector's source.
        source: SourceType,
        /// Its description in a prompt.
        what: &'a str,
        /// A login protector's user.
        login_user: Option<&'a str>,
    },
    /// The current secret of an existing protector.
    Open {
        /// The protector.
        protector: &'a ProtectorData,
        /// Which one it is.
        role: Role,
    },
    /// The new secret of a protector being re-wrapped (a raw key for a
    /// raw-key protector, else a passphrase).
    Replacement {
        /// The protector.
        protector: &'a ProtectorData,
    },
}

/// The callback giving secrets (a passphrase, or the 32-byte raw key).
/// A front end that cannot give one returns an error, typically
/// [`Error::Secret`] carrying its own.
pub type GetSecret<'a> = dyn FnMut(SecretFor<'_>) -> Result<Zeroizing<Vec<u8>>> + 'a;

/// The checked metadata of the filesystem holding `mount` (a path as a
/// user gave it).
///
/// # Errors
/// [`Error::Io`] when `mount` cannot be resolved; no mount; not set up,
/// insecure.
pub fn store_at(ctx: &Context, mount: &Path) -> Result<Store> {
    let m = std::fs::canonicalize(mount).map_err(|e| Error::io(mount, e))?;
    ctx.store_of(&m)
}

/// A policy and the metadata holding it.
fn policy_at(ctx: &Context, r: At<'_>) -> Result<(Store, PolicyData)> {
    let store = store_at(ctx, r.mount)?;
    let p = store.policy(r.id)?;
    Ok((store, p))
}

/// A protector (the file at `r`, or the one its link points to) and the
/// metadata holding it.
fn protector_at(ctx: &Context, r: At<'_>) -> Result<(Store, ProtectorData)> {
    let l = protector::locate(ctx, &store_at(ctx, r.mount)?, r.id)?;
    Ok((l.store, l.data))
}

/// Opens `p` with the secret `get` gives for it.
fn open(p: &ProtectorData, role: Role, get: &mut GetSecret<'_>) -> Result<Key32> {
    let s = get(SecretFor::Open { protector: p, role })?;
    protector::open(p, &s)
}

/// A link on `store` to protector `d` kept on `pstore` (another
/// filesystem); whether one was made.
fn link_if_needed(ctx: &Context, store: &Store, pstore: &Store, d: &str) -> Result<bool> {
    if store.mount() == pstore.mount() {
        return Ok(false);
    }
    let target = ctx.main_mount_of(pstore.mount())?;
    Ok(fscrypt_metadata::login::link_protector(store, d, &target)?)
}

/// Writes `policy` to `store`; on failure the link made for `protector`
/// (when `linked`) is taken away again.
fn put_policy(store: &Store, policy: &PolicyData, protector: &str, linked: bool) -> Result<()> {
    if let Err(e) = store.put_policy(policy) {
        if linked {
            let _ = store.remove_protector(protector);
        }
        return Err(e.into());
    }
    Ok(())
}

/// A new protector, as `metadata create protector` asks for it.
#[derive(Clone, Copy, Debug)]
pub struct NewProtector<'a> {
    /// The filesystem (a path on it, as given).
    pub mount: &'a Path,
    /// The source (default: the config's).
    pub source: Option<SourceType>,
    /// Its name (custom passphrase and raw key protectors).
    pub name: Option<&'a str>,
    /// A login protector's user (default: the caller).
    pub user: Option<&'a str>,
}

/// A protector made or changed, and where it is kept.
#[derive(Clone, Debug)]
pub struct ProtectorOn {
    /// The mount point of its filesystem.
    pub mount: PathBuf,
    /// The protector.
    pub protector: ProtectorData,
}

/// Creates a protector (google/fscrypt's `CreateProtector`): a login
/// protector on the login filesystem (one per user, its secret the login
/// passphrase), or a named one on `req.mount` (names unique there), its
/// costs the config's.
///
/// # Errors
/// [`Error::Usage`] for a request that does not fit the source (a named
/// login protector, a login protector elsewhere than the login
/// filesystem, a `--user` for another source, no name, a name used);
/// [`Error::LoginProtectorExists`]; no config; the metadata's; the
/// callback's.
pub fn create_protector(
    ctx: &Context,
    req: &NewProtector<'_>,
    get: &mut GetSecret<'_>,
) -> Result<ProtectorOn> {
    let config = ctx.require_config()?;
    let source = req.source.unwrap_or(config.source);
    let (store, name, uid) = if source == SourceType::PamPassphrase {
        if req.name.is_some() {
            return Err(Error::Usage(
                "login protectors are identified by their user: drop --name".into(),
            ));
        }
        let user = User::named_or_caller(req.user)?;
        let root = ctx.root_store()?;
        if store_at(ctx, req.mount)?.mount() != root.mount() {
            return Err(Error::Usage(format!(
                "login protectors live on the root filesystem {}; give that mount point",
                root.mount().display()
            )));
        }
        if let Some(p) = fscrypt_metadata::login::login_protector(&root, i64::from(user.uid))? {
            return Err(Error::LoginProtectorExists {
                user: user.name,
                mount: root.mount().to_path_buf(),
                protector: p.protector_descriptor,
            });
        }
        (root, user.name, i64::from(user.uid))
    } else {
        if req.user.is_some() {
            return Err(Error::Usage(
                "--user is for login protectors: add --source pam_passphrase".into(),
            ));
        }
        let Some(name) = req.name.map(str::to_string) else {
            return Err(Error::Usage(format!(
                "{} protectors must be named: add --name NAME",
                source.name()
            )));
        };
        let store = store_at(ctx, req.mount)?;
        for d in store.protectors()? {
            if store.protector(&d).is_ok_and(|p| p.name == name) {
                return Err(Error::Usage(format!(
                    "there is already a protector named {name:?} ({d}); choose another --name"
                )));
            }
        }
        (store, name, 0)
    };
    let login = source == SourceType::PamPassphrase;
    let what = if login {
        "the login protector".to_string()
    } else {
        format!("protector {name:?}")
    };
    let secret = get(SecretFor::New {
        source,
        what: &what,
        login_user: login.then_some(name.as_str()),
    })?;
    // A login protector has no name of its own (`name` was its user's).
    let name = if login { String::new() } else { name };
    let (p, _) = actions::new_protector(source, &name, &config.hash_costs, &secret, uid)?;
    store.put_protector(&p)?;
    Ok(ProtectorOn {
        mount: store.mount().to_path_buf(),
        protector: p,
    })
}

/// A policy made.
#[derive(Clone, Debug)]
pub struct CreatedPolicy {
    /// The mount point of its filesystem.
    pub mount: PathBuf,
    /// The policy.
    pub policy: PolicyData,
    /// The descriptor of the protector wrapping its key.
    pub protector: String,
}

/// Creates a policy on the filesystem of `mount` (google/fscrypt's
/// `CreatePolicy`): a random key with the config's options, wrapped by
/// `protector` (opened with the secret `get` gives); a protector on
/// another filesystem gets a link file, taken away again if the policy
/// cannot be written.
///
/// # Errors
/// No config; the metadata's (not set up, not found, wrong secret...);
/// the callback's.
pub fn create_policy(
    ctx: &Context,
    mount: &Path,
    protector: At<'_>,
    get: &mut GetSecret<'_>,
) -> Result<CreatedPolicy> {
    let config = ctx.require_config()?;
    let store = store_at(ctx, mount)?;
    let (pstore, prot) = protector_at(ctx, protector)?;
    let key = open(&prot, Role::Named, get)?;
    let (policy, _) = actions::new_policy(&config.options, &prot.protector_descriptor, &key)?;
    let linked = link_if_needed(ctx, &store, &pstore, &prot.protector_descriptor)?;
    put_policy(&store, &policy, &prot.protector_descriptor, linked)?;
    Ok(CreatedPolicy {
        mount: store.mount().to_path_buf(),
        policy,
        protector: prot.protector_descriptor,
    })
}

/// Removes policy file `r`: its descriptor.
///
/// # Errors
/// The metadata's (not found, untrusted, the removal).
pub fn destroy_policy(ctx: &Context, r: At<'_>) -> Result<String> {
    let (store, p) = policy_at(ctx, r)?;
    store.remove_policy(&p.key_descriptor)?;
    Ok(p.key_descriptor)
}

/// A protector removed.
#[derive(Clone, Debug)]
pub struct DestroyedProtector {
    /// The mount point of the filesystem it was removed from.
    pub mount: PathBuf,
    /// The policies there that it protected (with `force`).
    pub policies_affected: Vec<String>,
}

/// Removes protector `r` (its file or its link file); one that policies
/// there still use only with `force`.
///
/// # Errors
/// [`fscrypt_metadata::Error::NotFound`]; [`Error::Usage`] when policies
/// use it and `force` is not given; the metadata's.
pub fn destroy_protector(ctx: &Context, r: At<'_>, force: bool) -> Result<DestroyedProtector> {
    let store = store_at(ctx, r.mount)?;
    if !store.has_protector(r.id) && store.link(r.id)?.is_none() {
        return Err(fscrypt_metadata::Error::NotFound {
            kind: "protector",
            descriptor: r.id.to_string(),
            mount: store.mount().to_path_buf(),
        }
        .into());
    }
    let users: Vec<String> = fscrypt_metadata::login::policies_using(&store, r.id)?
        .into_iter()
        .map(|p| p.key_descriptor)
        .collect();
    if !users.is_empty() && !force {
        return Err(Error::Usage(format!(
            "protector {} still protects policies {} on {}; remove it from them first              (metadata remove-protector-from-policy), or add --force",
            r.id,
            users.join(", "),
            store.mount().display()
        )));
    }
    // The sidecar of a sealed protector goes with its file (a link's
    // protector, and so its sidecar, is on the other filesystem).
    let own_file = store.link(r.id)?.is_none();
    store.remove_protector(r.id)?;
    if own_file {
        // Best effort: a sidecar left behind is never consulted again (it
        // is read only for a protector of the policy being unlocked).
        let _ = crate::sealed::remove(&store, r.id);
    }
    Ok(DestroyedProtector {
        mount: store.mount().to_path_buf(),
        policies_affected: users,
    })
}

/// A protector added to a policy.
#[derive(Clone, Debug)]
pub struct AddedProtector {
    /// The policy's descriptor.
    pub policy: String,
    /// The protector's descriptor.
    pub protector: String,
    /// Whether a link file to it was made on the policy's filesystem.
    pub linked: bool,
}

/// Lets `protector` open `policy` too (google/fscrypt's
/// `AddProtector`): the policy key, unwrapped with `unlock_with` (a
/// protector of the policy; default: its only one), is wrapped again by
/// the added protector. Secrets are asked for the added protector first
/// ([`Role::Named`]), then the unlocking one ([`Role::UnlockWith`]).
///
/// # Errors
/// [`Error::AlreadyProtects`]; [`Error::Usage`] when the policy has
/// several protectors and none is chosen; [`Error::PolicyKeyUnwrap`];
/// the metadata's; the callback's.
pub fn add_protector_to_policy(
    ctx: &Context,
    protector: At<'_>,
    policy: At<'_>,
    unlock_with: Option<&str>,
    get: &mut GetSecret<'_>,
) -> Result<AddedProtector> {
    let (store, mut pol) = policy_at(ctx, policy)?;
    let (pstore, prot) = protector_at(ctx, protector)?;
    if pol
        .wrapped_policy_keys
        .iter()
        .any(|s| s.protector_descriptor == prot.protector_descriptor)
    {
        return Err(Error::AlreadyProtects {
            protector: prot.protector_descriptor,
            policy: pol.key_descriptor,
        });
    }
    let new_key = open(&prot, Role::Named, get)?;
    let slots: Vec<String> = pol
        .wrapped_policy_keys
        .iter()
        .map(|s| s.protector_descriptor.clone())
        .collect();
    let via = match unlock_with {
        Some(id) => id.to_string(),
        None if slots.len() == 1 => slots[0].clone(),
        None => {
            return Err(Error::Usage(format!(
                "policy {} has several protectors ({}); choose one with --unlock-with MOUNTPOINT:ID",
                pol.key_descriptor,
                slots.join(", ")
            )));
        }
    };
    let via_prot = protector::locate(ctx, &store, &via)?.data;
    let via_key = open(&via_prot, Role::UnlockWith, get)?;
    let pkey = policy::open_key(&store, &pol, &via, &via_key)?;
    actions::add_protector_to_policy(&mut pol, &pkey, &prot.protector_descriptor, &new_key)?;
    let linked = link_if_needed(ctx, &store, &pstore, &prot.protector_descriptor)?;
    put_policy(&store, &pol, &prot.protector_descriptor, linked)?;
    Ok(AddedProtector {
        policy: pol.key_descriptor,
        protector: prot.protector_descriptor,
        linked,
    })
}

/// Takes protector `protector`'s slot out of `policy` (never its last
/// one): the policy as written.
///
/// # Errors
/// Not one of its protectors; its last one; the metadata's.
pub fn remove_protector_from_policy(
    ctx: &Context,
    protector: &str,
    policy: At<'_>,
) -> Result<PolicyData> {
    let (store, mut pol) = policy_at(ctx, policy)?;
    actions::remove_protector_from_policy(&mut pol, protector)?;
    store.put_policy(&pol)?;
    Ok(pol)
}

/// Re-wraps protector `r` under a new secret (google/fscrypt's
/// `Protector.Rewrap`) with the config's costs, asking `get` for the old
/// secret ([`Role::Named`]) and then the new one
/// ([`SecretFor::Replacement`]); same descriptor and key, so the
/// policies it protects stay reachable.
///
/// # Errors
/// No config; wrong old secret; the metadata's; the callback's.
pub fn change_passphrase(ctx: &Context, r: At<'_>, get: &mut GetSecret<'_>) -> Result<ProtectorOn> {
    let config = ctx.require_config()?;
    let (pstore, prot) = protector_at(ctx, r)?;
    let key = open(&prot, Role::Named, get)?;
    let new = get(SecretFor::Replacement { protector: &prot })?;
    let q = actions::rewrap_open_protector(&prot, &key, &new, &config.hash_costs)?;
    pstore.put_protector(&q)?;
    // A sealed protector's device releases the old passphrase, which no
    // longer opens it: its sidecar goes (best effort; a stale one is only
    // reported as a refusal at unlock).
    let _ = crate::sealed::remove(&pstore, &q.protector_descriptor);
    Ok(ProtectorOn {
        mount: pstore.mount().to_path_buf(),
        protector: q,
    })
}

/// A metadata file that could not be read (listed, never failing a dump).
#[derive(Clone, Debug)]
pub struct Unreadable {
    /// `protector` or `policy`.
    pub kind: &'static str,
    /// Its descriptor.
    pub descriptor: String,
    /// Why (one line).
    pub error: String,
}

/// Everything `metadata dump` shows (no secrets are rendered from it).
#[derive(Clone, Debug)]
pub struct Dump {
    /// The config's path.
    pub config_path: PathBuf,
    /// The config, if it could be read.
    pub config: Option<Config>,
    /// The filesystem's mount point.
    pub mount: PathBuf,
    /// Its metadata directory.
    pub base_dir: PathBuf,
    /// How its metadata directories were set up (if known).
    pub setup_mode: Option<SetupMode>,
    /// Its readable protectors.
    pub protectors: Vec<ProtectorData>,
    /// Its readable policies.
    pub policies: Vec<PolicyData>,
    /// Its files that could not be read.
    pub unreadable: Vec<Unreadable>,
}

/// Reads the config and every protector and policy of the filesystem
/// holding `mount` (default: the login filesystem as the config names
/// it, `$FSCRYPT_ROOT_MNT` or `/`). One damaged or hostile file is listed
/// as unreadable; it never fails the dump of everything else.
///
/// # Errors
/// No mount; not set up, insecure; the directories unreadable.
pub fn dump(ctx: &Context, mount: Option<&Path>) -> Result<Dump> {
    let mount = match mount {
        Some(m) => ctx.mount_of(m)?.mount_point,
        None => config::root_mount(),
    };
    let store = ctx.store_at(&mount);
    store.check_setup()?;
    let conf = Config::load().ok();
    let mut unreadable = Vec::new();
    let mut protectors = Vec::new();
    for d in store.protectors()? {
        match store.protector(&d) {
            Ok(p) => protectors.push(p),
            Err(e) => unreadable.push(Unreadable {
                kind: "protector",
                descriptor: d,
                error: e.to_string(),
            }),
        }
    }
    let mut policies = Vec::new();
    for d in store.policies()? {
        match store.policy(&d) {
            Ok(p) => policies.push(p),
            Err(e) => unreadable.push(Unreadable {
                kind: "policy",
                descriptor: d,
                error: e.to_string(),
            }),
        }
    }
    Ok(Dump {
        config_path: config::path(),
        config: conf,
        base_dir: store.base_dir(),
        setup_mode: store.setup_mode(),
        mount,
        protectors,
        policies,
        unreadable,
    })
}
