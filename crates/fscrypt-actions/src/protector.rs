//! Protectors: locating one (the file on the policy's filesystem, or the
//! one its link file points to; links are followed everywhere: unlock,
//! status, encrypt, metadata), choosing one for a policy, opening it with
//! its secret, re-wrapping it under a new one. The secret is given as a
//! value (zeroized by the caller); asking for it is the front end's.

use fscrypt_metadata::actions;
use fscrypt_metadata::keys::Key32;
use fscrypt_metadata::proto::{HashingCosts, ProtectorData, SourceType};
use fscrypt_metadata::store::Store;

use crate::context::Context;
use crate::error::Result;

/// A protector and the filesystem whose metadata holds it.
#[derive(Clone, Debug)]
pub struct Located {
    /// Where the protector file is.
    pub store: Store,
    /// The protector.
    pub data: ProtectorData,
    /// Whether it was reached through a link file (another filesystem).
    pub linked: bool,
}

/// Protector `d` of a policy on `store`: the file there, or the one its
/// link file points to, among this context's mounted filesystems
/// ([`fscrypt_metadata::login::locate_protector`]; every read checks the
/// filesystem's metadata setup and the file's owner under the store's
/// trust, the linked filesystem's too).
///
/// # Errors
/// Not found, untrusted (the file or the filesystem's directories),
/// unreadable; a link to no mounted filesystem.
pub fn locate(ctx: &Context, store: &Store, d: &str) -> Result<Located> {
    let (other, data) = fscrypt_metadata::login::locate_protector(store, d, &ctx.main_mounts())?;
    Ok(Located {
        linked: other.mount() != store.mount(),
        store: other,
        data,
    })
}

/// The protector to use for a policy with protectors `slots` when none is
/// named, as google/fscrypt chooses: the only one; with a raw key given,
/// the only raw-key protector; without, the calling user's (`me`) login
/// protector, else the only one that is not a raw key. `None`: the user
/// must choose among `candidates` (the slots that could be located).
pub fn choose(
    slots: &[&str],
    candidates: &[ProtectorData],
    raw_key: bool,
    me: u32,
) -> Option<String> {
    if slots.len() == 1 {
        return Some(slots[0].to_string());
    }
    let only = |f: &dyn Fn(&ProtectorData) -> bool| -> Option<String> {
        let mut it = candidates.iter().filter(|p| f(p));
        match (it.next(), it.next()) {
            (Some(p), None) => Some(p.protector_descriptor.clone()),
            _ => None,
        }
    };
    if raw_key {
        return only(&|p| p.source_type() == SourceType::RawKey);
    }
    let me = i64::from(me);
    only(&|p| p.source_type() == SourceType::PamPassphrase && p.uid == me)
        .or_else(|| only(&|p| p.source_type() != SourceType::RawKey))
}

/// Opens a protector with its secret (a passphrase, or the 32-byte raw
/// key): its protector key.
///
/// # Errors
/// [`fscrypt_metadata::Error::WrongSecret`] (as [`crate::Error::Metadata`]).
pub fn open(p: &ProtectorData, secret: &[u8]) -> Result<Key32> {
    Ok(actions::open_protector(p, secret)?)
}

/// Re-wraps protector `p` (kept in `store`) from secret `old` to `new`
/// with `costs` (fresh salt; same descriptor and key, so every policy it
/// protects stays reachable), and stores it atomically.
///
/// # Errors
/// Wrong old secret; invalid costs; the write.
pub fn rewrap(
    store: &Store,
    p: &ProtectorData,
    old: &[u8],
    new: &[u8],
    costs: &HashingCosts,
) -> Result<ProtectorData> {
    let q = actions::rewrap_protector(p, old, new, costs)?;
    store.put_protector(&q)?;
    Ok(q)
}

/// A protector's description as `fscrypt status` words it: a login
/// protector by its user's name ("login protector for alice"), or by uid
/// when no user has it ("login protector for uid 1234").
pub fn describe(p: &ProtectorData) -> String {
    match p.source_type() {
        SourceType::PamPassphrase => format!("login protector for {}", login_user_name(p.uid)),
        SourceType::CustomPassphrase => format!("custom protector {:?}", p.name),
        SourceType::RawKey => format!("raw key protector {:?}", p.name),
        SourceType::Default => "unknown protector".to_string(),
    }
}

/// The user name of a login protector's uid, or `uid N` when the user
/// database has none (a deleted user, an out-of-range uid).
pub fn login_user_name(uid: i64) -> String {
    u32::try_from(uid)
        .ok()
        .and_then(|u| crate::context::User::of_uid(u).ok())
        .map(|u| u.name)
        .unwrap_or_else(|| format!("uid {uid}"))
}
