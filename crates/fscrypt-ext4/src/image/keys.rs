//! Master keys given for offline access: raw key files (`--key-file`,
//! `--key-dir`), matched to policies by v2 identifier or v1 descriptor.

use std::cell::Cell;
use std::path::{Path, PathBuf};

use fscrypt::{KeyDescriptor, KeyIdentifier, MasterKey, Policy};
use zeroize::Zeroizing;

use super::ImageError;

/// Largest key file read (a raw fscrypt master key is at most 64 bytes).
const MAX_KEY_FILE: u64 = 64;

/// One supplied key.
#[derive(Debug)]
pub struct SuppliedKey {
    /// The key (zeroized on drop).
    pub master: MasterKey,
    /// Where it came from.
    pub source: PathBuf,
    /// Its v2 identifier.
    pub identifier: KeyIdentifier,
    /// Its e4crypt-style v1 descriptor (`fscrypt-rs set-policy --v1` and
    /// e4crypt use it).
    pub descriptor: KeyDescriptor,
    /// A v1 descriptor given by the file's name (`<16 hex digits>` or
    /// `<16 hex digits>.key`), for keys added under another descriptor.
    pub named_descriptor: Option<KeyDescriptor>,
    matched: Cell<bool>,
}

impl SuppliedKey {
    /// Whether some policy on the image used this key.
    pub fn matched(&self) -> bool {
        self.matched.get()
    }
}

/// The keys given for one image.
#[derive(Debug, Default)]
pub struct KeySet {
    keys: Vec<SuppliedKey>,
}

fn descriptor_from_name(path: &Path) -> Option<KeyDescriptor> {
    let name = path.file_name()?.to_str()?;
    let stem = name.strip_suffix(".key").unwrap_or(name);
    if stem.len() != 16 {
        return None;
    }
    let mut d = [0u8; 8];
    for (i, b) in d.iter_mut().enumerate() {
        *b = u8::from_str_radix(stem.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(KeyDescriptor(d))
}

impl KeySet {
    /// An empty set.
    pub fn new() -> KeySet {
        KeySet::default()
    }

    /// Read a raw key file (16 to 64 bytes; a 64-byte key for AES-256-XTS).
    ///
    /// # Errors
    /// [`ImageError::Key`] naming the file for an unreadable file or a
    /// length no fscrypt master key has.
    pub fn add_file(&mut self, path: &Path) -> Result<(), ImageError> {
        use std::io::Read;
        let bad = |what: String| ImageError::Key {
            path: path.to_path_buf(),
            what,
        };
        let f = std::fs::File::open(path).map_err(|e| bad(format!("cannot open: {e}")))?;
        let mut raw = Zeroizing::new(Vec::with_capacity(MAX_KEY_FILE as usize + 1));
        f.take(MAX_KEY_FILE + 1)
            .read_to_end(&mut raw)
            .map_err(|e| bad(format!("cannot read: {e}")))?;
        if raw.len() as u64 > MAX_KEY_FILE {
            return Err(bad(format!(
                "longer than {MAX_KEY_FILE} bytes; a key file holds the raw master key only"
            )));
        }
        self.add_raw(&raw, path)
    }

    /// Add a raw master key held in memory (16 to 64 bytes); `source`
    /// names it in reports and errors and, as for a file, a name of 16 hex
    /// digits (`.key` optional) gives its v1 descriptor.
    ///
    /// # Errors
    /// [`ImageError::Key`] for a length no fscrypt master key has.
    pub fn add_raw(&mut self, raw: &[u8], source: &Path) -> Result<(), ImageError> {
        let master = MasterKey::new(raw).map_err(|e| ImageError::Key {
            path: source.to_path_buf(),
            what: format!("not a master key: {e}"),
        })?;
        self.keys.push(SuppliedKey {
            identifier: master.identifier(),
            descriptor: master.e4crypt_descriptor(),
            named_descriptor: descriptor_from_name(source),
            master,
            source: source.to_path_buf(),
            matched: Cell::new(false),
        });
        Ok(())
    }

    /// Add every regular file of `dir` (not recursive, sorted by name).
    ///
    /// # Errors
    /// [`ImageError::Key`] for an unreadable directory or a bad key file.
    pub fn add_dir(&mut self, dir: &Path) -> Result<(), ImageError> {
        let rd = std::fs::read_dir(dir).map_err(|e| ImageError::Key {
            path: dir.to_path_buf(),
            what: format!("cannot list the key directory: {e}"),
        })?;
        let mut files: Vec<PathBuf> = rd
            .filter_map(|e| e.ok())
            .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
            .map(|e| e.path())
            .collect();
        files.sort();
        for f in files {
            self.add_file(&f)?;
        }
        Ok(())
    }

    /// All keys, in the order given.
    pub fn keys(&self) -> &[SuppliedKey] {
        &self.keys
    }

    /// The key of `policy`, if supplied (marks it matched).
    pub fn find(&self, policy: &Policy) -> Option<&MasterKey> {
        let k = self.keys.iter().find(|k| match policy {
            Policy::V2(p) => k.identifier == p.master_key_identifier,
            Policy::V1(p) => {
                k.named_descriptor == Some(p.master_key_descriptor)
                    || k.descriptor == p.master_key_descriptor
            }
        })?;
        k.matched.set(true);
        Some(&k.master)
    }
}

/// The key named by a policy, as text (v2 identifier or v1 descriptor).
pub fn policy_key(policy: &Policy) -> String {
    match policy {
        Policy::V1(p) => p.master_key_descriptor.to_string(),
        Policy::V2(p) => p.master_key_identifier.to_string(),
    }
}
