//! Directories and symlinks as the kernel shows them: listings with
//! decrypted names where the directory's key was given and the kernel's
//! no-key names otherwise (`fscrypt::hooks`; the htree hash of
//! [`crate::dirhash`] for their hash words), lookups by either, path
//! resolution, and symlink targets.

use fscrypt::hooks::{self, FscryptName};

use super::{Crypt, Image, ImageError, Node, join, keys};
use crate::dirhash;
use crate::{COMPAT_DIR_INDEX, EXT4_CASEFOLD_FL, EXT4_INDEX_FL, InodeKind, Reader};

/// A directory entry as presented.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The name: plaintext, the kernel's no-key name, or as stored.
    pub name: Vec<u8>,
    /// The stored name (ciphertext in encrypted directories).
    pub disk_name: Vec<u8>,
    /// Inode number.
    pub ino: u32,
    /// The directory entry's file type byte.
    pub file_type: u8,
    /// The name is a no-key name (the directory's key was not given).
    pub no_key: bool,
}

/// A directory's entries, and the entries that could not be presented.
#[derive(Debug, Default)]
pub struct Listing {
    /// Presented entries, in on-disk order.
    pub entries: Vec<Entry>,
    /// One line per entry that could not be presented (e.g. a name that
    /// does not decrypt to a valid name).
    pub errors: Vec<String>,
}

/// The kind a directory entry's file type byte names, if it names one.
pub(crate) fn kind_of_file_type(ft: u8) -> Option<InodeKind> {
    match ft {
        1 => Some(InodeKind::Regular),
        2 => Some(InodeKind::Directory),
        7 => Some(InodeKind::Symlink),
        3..=6 => Some(InodeKind::Other),
        _ => None,
    }
}

impl<R: Reader> Image<R> {
    /// `(hash version, seed)` the kernel uses for readdir's hashes of `dir`,
    /// or `None` when it presents entries with hash 0 (linear directories).
    fn readdir_hash(&self, dir: &Node) -> Result<Option<u8>, ImageError> {
        let sb = self.ext4().superblock();
        if sb.feature_compat & COMPAT_DIR_INDEX == 0 {
            return Ok(None);
        }
        let bs = u64::from(sb.block_size);
        let indexed = dir.inode.flags & EXT4_INDEX_FL != 0;
        if !indexed && dir.inode.size / bs != 1 {
            return Ok(None);
        }
        let mut version = sb.def_hash_version;
        if indexed {
            let extents = self.ext4().extents(&dir.inode)?;
            if let Some(b) = self.ext4().read_logical_block(&extents, 0)? {
                version = b[0x1C];
            }
        }
        if version <= dirhash::DX_HASH_TEA && sb.flags & dirhash::EXT2_FLAGS_UNSIGNED_HASH != 0 {
            version += 3;
        }
        Ok(Some(version))
    }

    /// List `dir` (shown as `shown` in messages).
    ///
    /// # Errors
    /// [`ImageError::NotADirectory`], [`ImageError::Unsupported`] for
    /// casefolded or inline-data encrypted directories, [`ImageError::Ext4`]
    /// for unreadable or corrupt directory blocks.
    pub fn list(&self, dir: &Node, shown: &str) -> Result<Listing, ImageError> {
        if dir.kind() != InodeKind::Directory {
            return Err(ImageError::NotADirectory(shown.to_string()));
        }
        if dir.inode.has_inline_data() && dir.inode.is_encrypted() {
            // ext4 converts inline data before it sets a context and never
            // stores encrypted objects inline (`ext4_set_context`).
            return Err(ImageError::Corrupt {
                path: shown.to_string(),
                what: "an encrypted directory with inline data (ext4 never stores one)".into(),
            });
        }
        let raw = self.ext4().dir_entries(&dir.inode)?;
        let hash = match &dir.crypt {
            Crypt::Locked { .. } if dir.inode.flags & EXT4_CASEFOLD_FL == 0 => {
                self.readdir_hash(dir)?
            }
            _ => None,
        };
        let seed = self.ext4().superblock().hash_seed;
        let mut out = Listing::default();
        for d in raw {
            let presented = match &dir.crypt {
                Crypt::Plain => Ok((d.name.clone(), false)),
                Crypt::Unlocked { crypt, .. } => {
                    hooks::present_entry(Some(crypt), &d.name, 0, 0).map(|n| (n.to_vec(), false))
                }
                Crypt::Locked { .. } => {
                    // Casefolded: the stored SipHash (the kernel's no-key
                    // name carries it); else the htree hash of the
                    // ciphertext, or 0 for linear directories.
                    let (h, m) = d
                        .hash
                        .or_else(|| hash.and_then(|v| dirhash::ext4_dirhash(&d.name, v, &seed)))
                        .unwrap_or((0, 0));
                    hooks::present_entry(None, &d.name, h, m).map(|n| (n.to_vec(), true))
                }
            };
            match presented {
                Ok((name, no_key)) => out.entries.push(Entry {
                    name,
                    disk_name: d.name,
                    ino: d.ino,
                    file_type: d.file_type,
                    no_key,
                }),
                Err(e) => out.errors.push(format!(
                    "{shown}: entry for inode {}: cannot present its name: {e}",
                    d.ino
                )),
            }
        }
        Ok(out)
    }

    /// Find `name` (as a user would type it: plaintext, or a no-key name in
    /// a directory whose key was not given) in `dir`.
    ///
    /// # Errors
    /// [`ImageError::NotFound`], and as [`Image::list`].
    pub fn lookup(&self, dir: &Node, shown: &str, name: &[u8]) -> Result<Entry, ImageError> {
        let child_shown = join(shown, name);
        let wanted = match &dir.crypt {
            Crypt::Plain => None,
            Crypt::Unlocked { crypt, .. } => Some(
                FscryptName::for_lookup(Some(crypt), name)
                    .map_err(|_| ImageError::NotFound(child_shown.clone()))?,
            ),
            Crypt::Locked { .. } => FscryptName::for_lookup(None, name).ok(),
        };
        if wanted.is_none() && !matches!(dir.crypt, Crypt::Plain) {
            // Not a well-formed no-key name: nothing can match.
            return Err(match &dir.crypt {
                Crypt::Locked { policy } => ImageError::NoKey {
                    path: format!("{child_shown}: not found (only no-key names exist in {shown})"),
                    key: keys::policy_key(policy),
                },
                _ => ImageError::NotFound(child_shown),
            });
        }
        let listing = self.list(dir, shown)?;
        let not_found = || match &dir.crypt {
            // Say why: without the key only no-key names can be found.
            Crypt::Locked { policy } => ImageError::NoKey {
                path: format!("{child_shown}: not found (only no-key names exist in {shown})"),
                key: keys::policy_key(policy),
            },
            _ => ImageError::NotFound(child_shown.clone()),
        };
        listing
            .entries
            .into_iter()
            .find(|e| match &wanted {
                None => e.disk_name == name,
                Some(w) => w.matches(&e.disk_name),
            })
            .ok_or_else(not_found)
    }

    /// Resolve an absolute or root-relative `path` (components separated by
    /// `/`; `.` and `..` handled). Returns the node and its shown path.
    ///
    /// # Errors
    /// [`ImageError::NotFound`], [`ImageError::NotADirectory`], and as
    /// [`Image::child`].
    pub fn resolve(&self, path: &[u8]) -> Result<(Node, String), ImageError> {
        let mut stack: Vec<(Node, String)> = vec![(self.root()?, "/".to_string())];
        for comp in path.split(|&c| c == b'/') {
            match comp {
                b"" | b"." => continue,
                b".." => {
                    if stack.len() > 1 {
                        stack.pop();
                    }
                    continue;
                }
                _ => {}
            }
            let (dir, shown) = stack.last().expect("never empty");
            if dir.kind() != InodeKind::Directory {
                return Err(ImageError::NotADirectory(shown.clone()));
            }
            let entry = self.lookup(dir, shown, comp)?;
            let child_shown = join(shown, comp);
            let child = self.child(dir, &entry, &child_shown)?;
            stack.push((child, child_shown));
        }
        Ok(stack.pop().expect("never empty"))
    }

    /// The target of symlink `node` as `readlink` shows it: plaintext with
    /// the key, the no-key name of its ciphertext without it.
    ///
    /// # Errors
    /// [`ImageError::Corrupt`] for a malformed symlink, [`ImageError::Ext4`].
    pub fn read_link(&self, node: &Node, shown: &str) -> Result<Vec<u8>, ImageError> {
        let corrupt = |what: String| ImageError::Corrupt {
            path: shown.to_string(),
            what,
        };
        if node.inode.has_inline_data() && node.inode.is_encrypted() {
            return Err(corrupt(
                "an encrypted symlink with inline data (ext4 never stores one)".into(),
            ));
        }
        let area = self.ext4().symlink_area(&node.inode)?;
        let len = usize::try_from(node.inode.size)
            .ok()
            .filter(|&l| l > 0 && l <= area.len())
            .ok_or_else(|| {
                corrupt(format!(
                    "symlink size {} does not fit its {}-byte area",
                    node.inode.size,
                    area.len()
                ))
            })?;
        let stored = &area[..len];
        match &node.crypt {
            Crypt::Plain => Ok(stored.to_vec()),
            c => hooks::get_symlink(c.inode_crypt(), stored)
                .map_err(|e| corrupt(format!("cannot decrypt the symlink target: {e}"))),
        }
    }
}
