//! The metadata side of google/fscrypt's actions: making and opening
//! protectors, making policies and unwrapping their keys. No I/O: callers
//! store the results with [`crate::store::Store`] and give the policy key
//! to the kernel.

use zeroize::Zeroizing;

use crate::Error;
use crate::keys::{self, Key32};
use crate::proto::{
    EncryptionOptions, HashingCosts, INTERNAL_KEY_LEN, POLICY_KEY_LEN, PolicyData, ProtectorData,
    SALT_LEN, SourceType, WrappedPolicyKey,
};

/// A 64-byte policy (master) key, wiped on drop.
pub type PolicyKey = Zeroizing<[u8; POLICY_KEY_LEN]>;

/// The wrapping key for `p` from the user's secret: Argon2id of a
/// passphrase (pam/custom), or the 32-byte raw key itself.
///
/// # Errors
/// [`Error::WrongSecret`] for a raw key that is not 32 bytes;
/// [`Error::Invalid`] for bad costs.
pub fn wrapping_key(p: &ProtectorData, secret: &[u8]) -> Result<Key32, Error> {
    match p.source_type() {
        SourceType::RawKey => keys::key32(secret).ok_or_else(|| Error::WrongSecret {
            descriptor: p.protector_descriptor.clone(),
        }),
        _ => {
            let costs = p
                .costs
                .as_ref()
                .ok_or_else(|| Error::Invalid("passphrase hashing costs are missing".into()))?;
            keys::passphrase_hash(secret, &p.salt, costs)
        }
    }
}

/// Opens a protector: its 32-byte protector key.
///
/// # Errors
/// [`Error::WrongSecret`] when the secret does not unwrap it.
pub fn open_protector(p: &ProtectorData, secret: &[u8]) -> Result<Key32, Error> {
    let wrapping = wrapping_key(p, secret)?;
    let wrong = || Error::WrongSecret {
        descriptor: p.protector_descriptor.clone(),
    };
    let key = keys::unwrap(&wrapping, p.wrapped()).ok_or_else(wrong)?;
    let key = keys::key32(&key).ok_or_else(wrong)?;
    if keys::descriptor_v1(&key[..]) != p.protector_descriptor {
        return Err(wrong());
    }
    Ok(key)
}

/// A new protector of `source` for `secret` (a passphrase, or a 32-byte
/// raw key): a random protector key, wrapped. Passphrase protectors get a
/// random salt and `costs`; `uid` is stored for login protectors.
///
/// # Errors
/// [`Error::Invalid`] for a raw key not 32 bytes long or bad costs;
/// [`Error::Crypto`].
pub fn new_protector(
    source: SourceType,
    name: &str,
    costs: &HashingCosts,
    secret: &[u8],
    uid: i64,
) -> Result<(ProtectorData, Key32), Error> {
    let key: Key32 = keys::random_key::<INTERNAL_KEY_LEN>()?;
    let mut p = ProtectorData {
        protector_descriptor: keys::descriptor_v1(&key[..]),
        source: source as i32,
        name: name.to_string(),
        ..Default::default()
    };
    match source {
        SourceType::RawKey => {
            if secret.len() != INTERNAL_KEY_LEN {
                return Err(Error::Invalid(format!(
                    "a raw key must be exactly {INTERNAL_KEY_LEN} bytes, not {}",
                    secret.len()
                )));
            }
        }
        SourceType::PamPassphrase | SourceType::CustomPassphrase => {
            let salt = keys::random_key::<SALT_LEN>()?;
            p.salt = salt.to_vec();
            p.costs = Some(costs.clone());
            if source == SourceType::PamPassphrase {
                p.uid = uid;
                p.name = String::new();
            }
        }
        SourceType::Default => return Err(Error::Invalid("a protector needs a source".into())),
    }
    let wrapping = wrapping_key(&p, secret)?;
    p.wrapped_key = Some(keys::wrap(&wrapping, &key[..])?);
    p.check()?;
    Ok((p, key))
}

/// A new policy with `options`: a random 64-byte key wrapped by one
/// protector.
///
/// # Errors
/// [`Error::Invalid`]; [`Error::Crypto`].
pub fn new_policy(
    options: &EncryptionOptions,
    protector_descriptor: &str,
    protector_key: &Key32,
) -> Result<(PolicyData, PolicyKey), Error> {
    options.check()?;
    let key: PolicyKey = keys::random_key::<POLICY_KEY_LEN>()?;
    let mut options = options.clone();
    options.policy_version = options.version();
    let p = PolicyData {
        key_descriptor: keys::policy_descriptor(&key[..], options.policy_version)?,
        options: Some(options),
        wrapped_policy_keys: vec![WrappedPolicyKey {
            protector_descriptor: protector_descriptor.to_string(),
            wrapped_key: Some(keys::wrap(protector_key, &key[..])?),
        }],
    };
    p.check()?;
    Ok((p, key))
}

/// The policy key, unwrapped by the protector `protector_descriptor`.
///
/// # Errors
/// [`Error::NotFound`]-like [`Error::Invalid`] when the policy has no slot
/// for the protector; [`Error::WrongSecret`] when the slot does not unwrap
/// or the key does not match the policy's descriptor.
pub fn open_policy(
    policy: &PolicyData,
    protector_descriptor: &str,
    protector_key: &Key32,
) -> Result<PolicyKey, Error> {
    let slot = policy
        .wrapped_policy_keys
        .iter()
        .find(|s| s.protector_descriptor == protector_descriptor)
        .ok_or_else(|| {
            Error::Invalid(format!(
                "policy {} is not protected by protector {protector_descriptor}",
                policy.key_descriptor
            ))
        })?;
    let wrong = || Error::WrongSecret {
        descriptor: protector_descriptor.to_string(),
    };
    let w = slot.wrapped_key.as_ref().ok_or_else(wrong)?;
    let raw = keys::unwrap(protector_key, w).ok_or_else(wrong)?;
    if raw.len() != POLICY_KEY_LEN {
        return Err(wrong());
    }
    let mut key: PolicyKey = Zeroizing::new([0u8; POLICY_KEY_LEN]);
    key.copy_from_slice(&raw);
    if keys::policy_descriptor(&key[..], policy.opts().version())? != policy.key_descriptor {
        return Err(wrong());
    }
    Ok(key)
}

/// Adds a protector's slot to a policy (replacing an existing slot of the
/// same protector).
///
/// # Errors
/// [`Error::Crypto`].
pub fn add_protector_to_policy(
    policy: &mut PolicyData,
    policy_key: &PolicyKey,
    protector_descriptor: &str,
    protector_key: &Key32,
) -> Result<(), Error> {
    policy
        .wrapped_policy_keys
        .retain(|s| s.protector_descriptor != protector_descriptor);
    policy.wrapped_policy_keys.push(WrappedPolicyKey {
        protector_descriptor: protector_descriptor.to_string(),
        wrapped_key: Some(keys::wrap(protector_key, &policy_key[..])?),
    });
    Ok(())
}

/// Re-wraps a protector's key under a new secret (a new passphrase: fresh
/// salt, the given costs; or a new 32-byte raw key), after opening it with
/// the old one. The descriptor and the protector key stay the same, so
/// every policy it protects stays reachable.
///
/// # Errors
/// [`Error::WrongSecret`] when `old` does not open it; [`Error::Invalid`];
/// [`Error::Crypto`].
pub fn rewrap_protector(
    p: &ProtectorData,
    old: &[u8],
    new: &[u8],
    costs: &HashingCosts,
) -> Result<ProtectorData, Error> {
    let key = open_protector(p, old)?;
    rewrap_open_protector(p, &key, new, costs)
}

/// [`rewrap_protector`] with the protector key already unwrapped.
///
/// # Errors
/// As [`rewrap_protector`].
pub fn rewrap_open_protector(
    p: &ProtectorData,
    key: &Key32,
    new: &[u8],
    costs: &HashingCosts,
) -> Result<ProtectorData, Error> {
    let mut q = p.clone();
    match q.source_type() {
        SourceType::RawKey => {
            if new.len() != INTERNAL_KEY_LEN {
                return Err(Error::Invalid(format!(
                    "a raw key must be exactly {INTERNAL_KEY_LEN} bytes, not {}",
                    new.len()
                )));
            }
        }
        _ => {
            q.salt = keys::random_key::<SALT_LEN>()?.to_vec();
            q.costs = Some(costs.clone());
        }
    }
    let wrapping = wrapping_key(&q, new)?;
    q.wrapped_key = Some(keys::wrap(&wrapping, &key[..])?);
    q.check()?;
    Ok(q)
}

/// Removes protector `d`'s slot from a policy.
///
/// # Errors
/// [`Error::Invalid`] when it has no such slot, or when it is the policy's
/// last one (the key would be lost: destroy the policy instead).
pub fn remove_protector_from_policy(policy: &mut PolicyData, d: &str) -> Result<(), Error> {
    let before = policy.wrapped_policy_keys.len();
    if !policy
        .wrapped_policy_keys
        .iter()
        .any(|s| s.protector_descriptor == d)
    {
        return Err(Error::Invalid(format!(
            "policy {} is not protected by protector {d}",
            policy.key_descriptor
        )));
    }
    if before == 1 {
        return Err(Error::Invalid(format!(
            "protector {d} is the only protector of policy {}; its key would be lost \
             (add another protector first, or destroy the policy)",
            policy.key_descriptor
        )));
    }
    policy
        .wrapped_policy_keys
        .retain(|s| s.protector_descriptor != d);
    Ok(())
}
