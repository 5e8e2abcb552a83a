//! Login (`pam_passphrase`) protectors: one per user, identified by the
//! uid it records (not by a name), wrapped by a key from the user's login
//! password, and stored on the root filesystem's `.fscrypt` (the root
//! mount is `$FSCRYPT_ROOT_MNT`, else `/`: [`crate::config::root_mount`]).
//! A policy on another filesystem that a login protector protects has a
//! link file there ([`crate::links`]) naming the root filesystem.

use crate::Error;
use crate::links::{Link, MainMount};
use crate::proto::{PolicyData, ProtectorData, SourceType};
use crate::store::Store;

/// The login protector of `uid` in `root`, if it has one. The search
/// trusts root and `uid` only ([`crate::trust::Trust::login_of`], unless
/// `allow_cross_user_metadata`), whoever runs it, so the CLI and the PAM
/// module find the same protector and one planted by another user is never
/// considered. Unreadable, corrupt or out-of-bounds protector files are
/// skipped (never hashed).
///
/// # Errors
/// [`Error::NotSetup`], [`Error::Insecure`], [`Error::UnsafeDirectory`],
/// [`Error::Io`] from listing.
pub fn login_protector(root: &Store, uid: i64) -> Result<Option<ProtectorData>, Error> {
    let Ok(uid32) = u32::try_from(uid) else {
        return Ok(None);
    };
    let root = root.clone().with_trust(root.trust().login_of(uid32));
    for d in root.protectors()? {
        if let Ok(p) = root.protector(&d)
            && p.source_type() == SourceType::PamPassphrase
            && p.uid == uid
        {
            return Ok(Some(p));
        }
    }
    Ok(None)
}

/// Where protector `d` of a policy on `store` lives: `store` itself for a
/// regular protector file, else the filesystem its link file names (among
/// `mounts`, the main mounts of the mounted filesystems), read with
/// `store`'s trust.
///
/// # Errors
/// [`Error::NotFound`] when neither a protector nor a link exists;
/// [`Error::Untrusted`] when the protector file is another user's; errors
/// reading the link or the protector; [`Error::Invalid`] for a link that
/// resolves to no mounted filesystem.
pub fn locate_protector(
    store: &Store,
    d: &str,
    mounts: &[MainMount],
) -> Result<(Store, ProtectorData), Error> {
    if store.has_protector(d) {
        return Ok((store.clone(), store.protector(d)?));
    }
    match store.link(d)? {
        Some(text) => {
            let target = Link::parse(&text)?.resolve(mounts)?;
            let other = Store::new(target.path, store.trust());
            let p = other.protector(d)?;
            Ok((other, p))
        }
        // No usable file and no link: reading it names the cause (not
        // found, written by another user, not a regular file).
        None => store.protector(d).map(|p| (store.clone(), p)),
    }
}

/// Makes protector `d` (kept on `protector_mount`) reachable from `store`:
/// nothing when they are the same filesystem, else a link file (kept if
/// one already exists).
///
/// # Errors
/// Errors writing the link.
pub fn link_protector(store: &Store, d: &str, protector_mount: &MainMount) -> Result<bool, Error> {
    if store.mount() == protector_mount.path || store.has_protector(d) || store.link(d)?.is_some() {
        return Ok(false);
    }
    store.put_link(d, &Link::to_mount(protector_mount).to_text())?;
    Ok(true)
}

/// The policies on `store` with a slot for protector `d`. Unreadable
/// policy files are skipped.
///
/// # Errors
/// Errors listing the policies.
pub fn policies_using(store: &Store, d: &str) -> Result<Vec<PolicyData>, Error> {
    let mut out = Vec::new();
    for pd in store.policies()? {
        if let Ok(p) = store.policy(&pd)
            && p.wrapped_policy_keys
                .iter()
                .any(|s| s.protector_descriptor == d)
        {
            out.push(p);
        }
    }
    Ok(out)
}
