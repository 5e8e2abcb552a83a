//! Unlocking a filesystem that is not mounted (an ext4 image read by
//! `fscrypt-rs image`) with its google/fscrypt metadata: the protector and
//! policy files are handed in as bytes (read off the image's `/.fscrypt`,
//! or from a `.fscrypt` directory given by the user, e.g. the root
//! filesystem's, where login protectors live), one protector is chosen and
//! opened with its secret, and every policy it protects gives its raw
//! policy key, for the image reader to match against the directories'
//! policies. Nothing touches the kernel or a mount. Every file is
//! untrusted input: a bad one is skipped and reported, never fatal, and
//! protector costs are bounded before any hashing
//! ([`fscrypt_metadata::proto::decode_protector`]).

use std::collections::BTreeMap;
use std::path::Path;

use fscrypt_metadata::actions::{self, PolicyKey};
use fscrypt_metadata::proto::{self, PolicyData, ProtectorData, SourceType};

use crate::error::{Error, Result};
use crate::protector;

/// Largest metadata file read (google/fscrypt's are a few hundred bytes).
pub const MAX_FILE: u64 = 64 * 1024;

/// Which protector to open.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Choice {
    /// The protector with this descriptor (`--unlock-with ID`).
    Named(String),
    /// The login protector of this uid (`--user NAME`).
    LoginOf(u32),
    /// The only protector the policies use, or the only one that is not a
    /// raw key (`raw_key`: the only raw-key one), as google/fscrypt
    /// chooses ([`protector::choose`]).
    Any {
        /// A raw key was given for it.
        raw_key: bool,
    },
}

/// Protectors and policies of one offline filesystem, gathered from any
/// number of places (a file already added is not replaced).
#[derive(Debug, Default)]
pub struct OfflineMetadata {
    protectors: BTreeMap<String, ProtectorData>,
    policies: BTreeMap<String, PolicyData>,
    /// One line per file that was skipped (not a protector or policy, a
    /// name that is not its descriptor), naming where it was found.
    pub skipped: Vec<String>,
}

impl OfflineMetadata {
    /// Nothing yet.
    pub fn new() -> OfflineMetadata {
        OfflineMetadata::default()
    }

    /// Adds protector file `name` (its descriptor, as google/fscrypt names
    /// the file) found at `origin`; a link file (`ID.link`) is not a
    /// protector and is ignored, anything undecodable is skipped.
    pub fn add_protector(&mut self, name: &str, bytes: &[u8], origin: &str) {
        if name.ends_with(".link") {
            return;
        }
        match proto::decode_protector(bytes) {
            Ok(p) if p.protector_descriptor == name => {
                self.protectors.entry(name.to_string()).or_insert(p);
            }
            Ok(_) => self.skip(origin, "its descriptor differs from its name"),
            Err(e) => self.skip(origin, &e.to_string()),
        }
    }

    /// Adds policy file `name` found at `origin` (as [`Self::add_protector`]).
    pub fn add_policy(&mut self, name: &str, bytes: &[u8], origin: &str) {
        match proto::decode_policy(bytes) {
            Ok(p) if p.key_descriptor == name => {
                self.policies.entry(name.to_string()).or_insert(p);
            }
            Ok(_) => self.skip(origin, "its descriptor differs from its name"),
            Err(e) => self.skip(origin, &e.to_string()),
        }
    }

    fn skip(&mut self, origin: &str, why: &str) {
        self.skipped.push(format!("{origin}: skipped: {why}"));
    }

    /// Adds the `protectors/` and `policies/` files of a `.fscrypt`
    /// directory `dir` (regular files only, symlinks not followed, each
    /// at most [`MAX_FILE`] bytes).
    ///
    /// # Errors
    /// [`Error::Io`] when `dir` has neither subdirectory or one cannot be
    /// listed.
    pub fn add_dir(&mut self, dir: &Path) -> Result<()> {
        let mut found = false;
        for (sub, policy) in [("protectors", false), ("policies", true)] {
            let d = dir.join(sub);
            let rd = match std::fs::read_dir(&d) {
                Ok(rd) => rd,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(Error::io(d, e)),
            };
            found = true;
            let mut names: Vec<String> = rd
                .flatten()
                .filter_map(|e| e.file_name().into_string().ok())
                .collect();
            names.sort();
            for name in names {
                let path = d.join(&name);
                let origin = path.display().to_string();
                match fscrypt_metadata::store::read_limited(&path, MAX_FILE) {
                    Ok(bytes) if policy => self.add_policy(&name, &bytes, &origin),
                    Ok(bytes) => self.add_protector(&name, &bytes, &origin),
                    Err(e) => self.skip(&origin, &e.to_string()),
                }
            }
        }
        if !found {
            return Err(Error::io(
                dir,
                std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    "not a google/fscrypt metadata directory (no protectors/ or policies/ in it)",
                ),
            ));
        }
        Ok(())
    }

    /// Whether there is any policy to unlock.
    pub fn has_policies(&self) -> bool {
        !self.policies.is_empty()
    }

    /// The protector `how` names among those the policies use.
    ///
    /// # Errors
    /// [`Error::Usage`], one line saying what is missing and what to give:
    /// a named protector no policy uses or that is not here, no login
    /// protector of the uid (it lives on the root filesystem: `--metadata`),
    /// several candidates (`--unlock-with`).
    pub fn choose(&self, how: &Choice) -> Result<&ProtectorData> {
        let mut slots: Vec<&str> = self
            .policies
            .values()
            .flat_map(|p| p.wrapped_policy_keys.iter())
            .map(|w| w.protector_descriptor.as_str())
            .collect();
        slots.sort_unstable();
        slots.dedup();
        let present: Vec<ProtectorData> = slots
            .iter()
            .filter_map(|d| self.protectors.get(*d).cloned())
            .collect();
        let elsewhere = "if it lives on another filesystem (a login protector lives on the \
                         root filesystem), give that filesystem's .fscrypt with --metadata DIR";
        let d = match how {
            Choice::Named(id) => {
                if !slots.contains(&id.as_str()) {
                    return Err(Error::Usage(format!(
                        "protector {id} protects no policy here; the policies' protectors \
                         are: {}",
                        slots.join(", ")
                    )));
                }
                id.clone()
            }
            Choice::LoginOf(uid) => present
                .iter()
                .find(|p| p.source_type() == SourceType::PamPassphrase && p.uid == i64::from(*uid))
                .map(|p| p.protector_descriptor.clone())
                .ok_or_else(|| {
                    Error::Usage(format!(
                        "no login protector of uid {uid} protects a policy here; {elsewhere}"
                    ))
                })?,
            Choice::Any { raw_key } => {
                if present.is_empty() {
                    return Err(Error::Usage(format!(
                        "none of the policies' protectors ({}) was found; {elsewhere}",
                        slots.join(", ")
                    )));
                }
                protector::choose(&slots, &present, *raw_key, u32::MAX).ok_or_else(|| {
                    let listed: Vec<String> = present
                        .iter()
                        .map(|p| format!("{} ({})", p.protector_descriptor, protector::describe(p)))
                        .collect();
                    Error::Usage(format!(
                        "choose a protector with --unlock-with ID (or --user NAME for a login \
                         protector): {}",
                        listed.join(", ")
                    ))
                })?
            }
        };
        self.protectors
            .get(&d)
            .ok_or_else(|| Error::Usage(format!("protector {d} was not found; {elsewhere}")))
    }

    /// Opens protector `p` with `secret` and unwraps every policy it
    /// protects: `(policy descriptor, raw policy key)` pairs, sorted by
    /// descriptor.
    ///
    /// # Errors
    /// [`fscrypt_metadata::Error::WrongSecret`] (as [`Error::Metadata`]);
    /// [`Error::PolicyKeyUnwrap`] for a policy slot that does not unwrap
    /// under the right protector key (a damaged policy file).
    pub fn unlock(&self, p: &ProtectorData, secret: &[u8]) -> Result<Vec<(String, PolicyKey)>> {
        let key = protector::open(p, secret)?;
        let d = &p.protector_descriptor;
        let mut out = Vec::new();
        for (name, policy) in &self.policies {
            if !policy
                .wrapped_policy_keys
                .iter()
                .any(|w| &w.protector_descriptor == d)
            {
                continue;
            }
            let k = actions::open_policy(policy, d, &key).map_err(|e| match e {
                fscrypt_metadata::Error::WrongSecret { .. } => Error::PolicyKeyUnwrap {
                    policy: name.clone(),
                    protector: d.clone(),
                    path: Path::new(".fscrypt/policies").join(name),
                },
                e => Error::Metadata(e),
            })?;
            out.push((name.clone(), k));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fscrypt_metadata::proto::{EncryptionOptions, HashingCosts};

    fn costs() -> HashingCosts {
        HashingCosts {
            time: 1,
            memory: 8,
            parallelism: 1,
            truncation_fixed: true,
        }
    }

    /// A custom protector "a" protecting two policies, one of them also
    /// protected by a login protector of uid 1000 that is not here.
    fn sample() -> (OfflineMetadata, String, Vec<String>) {
        let (pa, ka) =
            actions::new_protector(SourceType::CustomPassphrase, "a", &costs(), b"pw-a", 0)
                .unwrap();
        let (pl, kl) =
            actions::new_protector(SourceType::PamPassphrase, "", &costs(), b"pw-l", 1000).unwrap();
        let opts = EncryptionOptions::defaults(2);
        let mut m = OfflineMetadata::new();
        m.add_protector(
            &pa.protector_descriptor,
            &proto::encode_protector(&pa),
            "img:a",
        );
        let mut names = Vec::new();
        for with_login in [false, true] {
            let (mut pol, key) = actions::new_policy(&opts, &pa.protector_descriptor, &ka).unwrap();
            if with_login {
                actions::add_protector_to_policy(&mut pol, &key, &pl.protector_descriptor, &kl)
                    .unwrap();
            }
            m.add_policy(&pol.key_descriptor, &proto::encode_policy(&pol), "img:pol");
            names.push(pol.key_descriptor.clone());
        }
        names.sort();
        (m, pa.protector_descriptor.clone(), names)
    }

    #[test]
    fn the_only_present_protector_unlocks_every_policy_it_protects() {
        let (m, a, names) = sample();
        let p = m.choose(&Choice::Any { raw_key: false }).unwrap();
        assert_eq!(p.protector_descriptor, a);
        let keys = m.unlock(p, b"pw-a").unwrap();
        let got: Vec<String> = keys.iter().map(|(n, _)| n.clone()).collect();
        assert_eq!(got, names);
        assert!(matches!(
            m.unlock(p, b"wrong"),
            Err(Error::Metadata(fscrypt_metadata::Error::WrongSecret { .. }))
        ));
    }

    #[test]
    fn a_missing_login_protector_points_to_metadata() {
        let (m, _, _) = sample();
        let e = m.choose(&Choice::LoginOf(1000)).unwrap_err().to_string();
        assert!(e.contains("--metadata"), "{e}");
        let e = m
            .choose(&Choice::Named("0123456789abcdef".into()))
            .unwrap_err()
            .to_string();
        assert!(e.contains("protects no policy"), "{e}");
    }

    #[test]
    fn bad_files_are_skipped_and_named() {
        let mut m = OfflineMetadata::new();
        m.add_protector(
            "0123456789abcdef",
            b"\xff\xff garbage",
            "img:/.fscrypt/protectors/x",
        );
        m.add_policy("0123456789abcdef", b"", "img:/.fscrypt/policies/y");
        m.add_protector("0123456789abcdef.link", b"whatever", "img:link");
        assert!(!m.has_policies());
        assert_eq!(m.skipped.len(), 2, "{:?}", m.skipped);
        assert!(m.skipped[0].starts_with("img:/.fscrypt/protectors/x: skipped"));
    }
}
