//! When each protector last unlocked a vault on this machine (issue 25
//! item 7: `info` and `protector list` show it).
//!
//! Kept per machine, beside the generation store
//! ([`GenerationStore::default_dir`]), in `protector-use.json`: a JSON
//! object of protector name → Unix seconds, mode 0600, replaced
//! atomically under the same lock as the config
//! ([`crate::config::ConfigLock`]). Never in the vault's config: a synced
//! config rewritten at every mount would conflict between replicas, and a
//! read-only vault could not record it. The file is informational: a
//! missing or malformed one reads as "never".

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use fscrypt::KeyIdentifier;

use crate::config::{self, ConfigError, ConfigLock};
use crate::integrity::generations::GenerationStore;

/// File name of the record in the vault's state directory.
pub const LAST_USE_NAME: &str = "protector-use.json";

/// Most protectors remembered (a vault holds at most
/// [`config::MAX_PROTECTORS`]; names of removed ones are dropped first).
const MAX_ENTRIES: usize = 4 * config::MAX_PROTECTORS;

/// The state directory of the vault with key identifier `id` on this
/// machine ([`GenerationStore::default_dir`]), if there is one.
pub fn state_dir(id: &KeyIdentifier) -> Option<PathBuf> {
    GenerationStore::default_dir(id)
}

fn parse(bytes: &[u8]) -> BTreeMap<String, u64> {
    serde_json::from_slice(bytes).unwrap_or_default()
}

/// The last use of each protector of the vault `id` on this machine,
/// protector name → seconds since the Unix epoch; empty when nothing was
/// recorded (or the record is unreadable).
pub fn last_use(id: &KeyIdentifier) -> BTreeMap<String, u64> {
    state_dir(id)
        .and_then(|dir| config::read_limited(&dir.join(LAST_USE_NAME)).ok())
        .map(|bytes| parse(&bytes))
        .unwrap_or_default()
}

/// Records that the protector `name` of vault `id` unlocked it at `when`
/// (Unix seconds), creating the state directory (0700) if needed.
///
/// # Errors
/// No state directory (no `HOME`), I/O errors; the caller may ignore them
/// (the record is informational).
pub fn record_use(id: &KeyIdentifier, name: &str, when: u64) -> Result<(), ConfigError> {
    let dir = state_dir(id).ok_or_else(|| {
        ConfigError::Io(std::io::Error::other(
            "no state directory: set XDG_STATE_HOME or HOME",
        ))
    })?;
    record_in(&dir, name, when)
}

/// [`record_use`] in the directory `dir`.
fn record_in(dir: &Path, name: &str, when: u64) -> Result<(), ConfigError> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let file = OsStr::new(LAST_USE_NAME);
    loop {
        match ConfigLock::acquire(dir, file) {
            Ok((lock, bytes)) => {
                let mut map = parse(&bytes);
                map.insert(name.to_owned(), when);
                while map.len() > MAX_ENTRIES {
                    // Drop the oldest.
                    let oldest = map.iter().min_by_key(|(_, t)| **t).map(|(n, _)| n.clone());
                    oldest.map(|n| map.remove(&n));
                }
                return config::replace_atomic(dir, file, &to_json(&map), &lock);
            }
            Err(ConfigError::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => {
                let map = BTreeMap::from([(name.to_owned(), when)]);
                match config::write_new_atomic(dir, file, &to_json(&map)) {
                    // Made by another process meanwhile: lock and update it.
                    Err(ConfigError::AlreadyExists) => continue,
                    other => return other,
                }
            }
            Err(e) => return Err(e),
        }
    }
}

fn to_json(map: &BTreeMap<String, u64>) -> Vec<u8> {
    let mut out = serde_json::to_vec_pretty(map).unwrap_or_default();
    out.push(b'\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_update_and_survive_garbage() {
        let mut rnd = [0u8; 6];
        fscrypt_crypto::random_bytes(&mut rnd).unwrap();
        let dir = std::env::temp_dir().join(format!("fscrypt-usage-{}", hex::encode(rnd)));
        record_in(&dir, "tpm2", 100).unwrap();
        record_in(&dir, "recovery-key", 200).unwrap();
        record_in(&dir, "tpm2", 300).unwrap();
        let map = parse(&std::fs::read(dir.join(LAST_USE_NAME)).unwrap());
        assert_eq!(
            map,
            BTreeMap::from([("tpm2".to_owned(), 300), ("recovery-key".to_owned(), 200)])
        );
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.join(LAST_USE_NAME))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        // A malformed record reads as empty and is replaced by a good one.
        std::fs::write(dir.join(LAST_USE_NAME), b"{not json").unwrap();
        assert!(parse(&std::fs::read(dir.join(LAST_USE_NAME)).unwrap()).is_empty());
        record_in(&dir, "age", 5).unwrap();
        let map = parse(&std::fs::read(dir.join(LAST_USE_NAME)).unwrap());
        assert_eq!(map, BTreeMap::from([("age".to_owned(), 5)]));
        // A symlink in its place is never followed.
        std::fs::remove_file(dir.join(LAST_USE_NAME)).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", dir.join(LAST_USE_NAME)).unwrap();
        assert!(record_in(&dir, "x", 1).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
