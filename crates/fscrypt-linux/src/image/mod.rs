//! Offline access to kernel-encrypted ext4 images and block devices: open
//! one read-only with a set of master keys, resolve paths through encrypted
//! directories, list directories, read files as a stream and extract trees
//! (issue 14). The kernel is not involved: the ext4 reader
//! ([`crate::ext4`]) supplies the stored bytes and `fscrypt` decrypts them.
//!
//! * [`keys`] — key files and their matching to policies;
//! * [`dirhash`] — ext4's htree hash, for the kernel's no-key names;
//! * this module — [`Image`], [`Node`], lookups and listings;
//! * [`read`] — file contents as a stream of plaintext pieces and holes;
//! * [`extract`] — writing a tree out with links, modes, owners and times.
//!
//! Names are shown as the kernel shows them: decrypted where the
//! directory's key is given, the kernel's no-key names otherwise
//! (`fscrypt::hooks`), unencrypted directories as stored. Not yet
//! supported: journal replay (an image needing recovery is refused).
//! Casefolded encrypted directories are listed (no-key names from the
//! SipHash stored in each entry); lookups there match the stored name
//! exactly, not case-insensitively. Inline data is read for unencrypted
//! objects; ext4 never stores encrypted ones inline.

pub mod dirhash;
pub mod extract;
pub mod keys;
pub mod read;
pub mod xattrs;

use std::path::{Path, PathBuf};

use fscrypt::hooks::{self, FscryptName};
use fscrypt::{Context, FileType, InodeCrypt, InodeParams, Policy};

use crate::ext4::{
    COMPAT_DIR_INDEX, EXT4_CASEFOLD_FL, EXT4_INDEX_FL, EXT4_INLINE_DATA_FL, Ext4, Ext4Error,
    INCOMPAT_RECOVER, Inode, InodeKind,
};
pub use keys::{KeySet, SuppliedKey};

/// The root directory's inode number.
pub const ROOT_INO: u32 = 2;

/// Errors of offline access. Each names the object concerned.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ImageError {
    /// The ext4 reader failed (unreadable image, corrupt metadata).
    #[error(transparent)]
    Ext4(#[from] Ext4Error),
    /// A key file could not be used.
    #[error("key file {path}: {what}")]
    Key {
        /// The key file or directory.
        path: PathBuf,
        /// What is wrong.
        what: String,
    },
    /// The journal must be replayed first.
    #[error(
        "{0}: the filesystem journal needs recovery (it was not cleanly unmounted); replay it \
         on a copy first (`e2fsck -fy COPY`), offline reading does not replay journals yet"
    )]
    NeedsRecovery(PathBuf),
    /// No such entry.
    #[error("{0}: no such file or directory in the image")]
    NotFound(String),
    /// A path component is not a directory.
    #[error("{0}: not a directory")]
    NotADirectory(String),
    /// The object's key was not supplied.
    #[error("{path}: encrypted with key {key}, which was not given; pass it with --key-file")]
    NoKey {
        /// The object (as shown).
        path: String,
        /// The policy's key identifier or descriptor.
        key: String,
    },
    /// A feature not handled yet.
    #[error("{path}: {what} is not supported by offline reading yet")]
    Unsupported {
        /// The object.
        path: String,
        /// What.
        what: String,
    },
    /// The object's stored data is inconsistent.
    #[error("{path}: corrupt: {what}")]
    Corrupt {
        /// The object.
        path: String,
        /// What is wrong.
        what: String,
    },
    /// Writing the extracted copy failed.
    #[error("{path}: {source}")]
    Io {
        /// The destination path.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}

/// The encryption state of an inode as this image's keys see it.
#[derive(Debug)]
pub enum Crypt {
    /// Not encrypted.
    Plain,
    /// Encrypted and its key was given.
    Unlocked {
        /// The policy (from the context).
        policy: Policy,
        /// The inode's keys.
        crypt: Box<InodeCrypt>,
    },
    /// Encrypted and its key was not given.
    Locked {
        /// The policy (from the context).
        policy: Policy,
    },
}

impl Crypt {
    /// The policy of an encrypted inode.
    pub fn policy(&self) -> Option<&Policy> {
        match self {
            Crypt::Plain => None,
            Crypt::Unlocked { policy, .. } | Crypt::Locked { policy } => Some(policy),
        }
    }

    /// The inode's keys, if given.
    pub fn inode_crypt(&self) -> Option<&InodeCrypt> {
        match self {
            Crypt::Unlocked { crypt, .. } => Some(crypt),
            _ => None,
        }
    }

    /// Encrypted and without its key.
    pub fn is_locked(&self) -> bool {
        matches!(self, Crypt::Locked { .. })
    }
}

/// An inode with its encryption state.
#[derive(Debug)]
pub struct Node {
    /// The on-disk inode.
    pub inode: Inode,
    /// Its encryption.
    pub crypt: Crypt,
}

impl Node {
    /// The inode number.
    pub fn ino(&self) -> u32 {
        self.inode.ino
    }
    /// The file type.
    pub fn kind(&self) -> InodeKind {
        self.inode.kind()
    }
}

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

/// An ext4 image or block device opened read-only, with keys.
#[derive(Debug)]
pub struct Image {
    fs: Ext4,
    keys: KeySet,
}

/// A directory entry name from the image that is safe as one path
/// component here (and that the kernel accepts in a FUSE reply): not
/// empty, not `.` or `..`, no `/` or NUL, at most 255 bytes. The image is
/// untrusted: a crafted directory block can hold any bytes.
pub fn safe_name(name: &[u8]) -> bool {
    !name.is_empty()
        && name.len() <= 255
        && name != b"."
        && name != b".."
        && !name.iter().any(|&c| c == b'/' || c == 0)
}

/// Join a shown path and a name for messages.
pub fn join(parent: &str, name: &[u8]) -> String {
    let name = String::from_utf8_lossy(name);
    if parent.is_empty() || parent == "/" {
        format!("/{name}")
    } else {
        format!("{parent}/{name}")
    }
}

fn kind_of_file_type(ft: u8) -> Option<InodeKind> {
    match ft {
        1 => Some(InodeKind::Regular),
        2 => Some(InodeKind::Directory),
        7 => Some(InodeKind::Symlink),
        3..=6 => Some(InodeKind::Other),
        _ => None,
    }
}

impl Image {
    /// Open `path` (an image file or block device) read-only (`O_RDONLY`;
    /// nothing is ever written) with `keys`.
    ///
    /// # Errors
    /// [`ImageError::Ext4`] for an unreadable or unusable superblock,
    /// [`ImageError::NeedsRecovery`] for a journal that needs replaying.
    pub fn open(path: &Path, keys: KeySet) -> Result<Image, ImageError> {
        let fs = Ext4::open(path)?;
        if fs.superblock().feature_incompat & INCOMPAT_RECOVER != 0 {
            return Err(ImageError::NeedsRecovery(path.to_path_buf()));
        }
        Ok(Image { fs, keys })
    }

    /// The ext4 reader.
    pub fn ext4(&self) -> &Ext4 {
        &self.fs
    }

    /// The keys.
    pub fn keys(&self) -> &KeySet {
        &self.keys
    }

    /// Read inode `ino` and set up its encryption; `shown` names it in errors.
    ///
    /// # Errors
    /// [`ImageError::Ext4`], [`ImageError::Corrupt`] for an encrypted inode
    /// without a valid context or whose key setup fails.
    pub fn node(&self, ino: u32, shown: &str) -> Result<Node, ImageError> {
        let inode = self.fs.read_inode(ino)?;
        let kind = inode.kind();
        let file_type = match kind {
            InodeKind::Regular => FileType::Regular,
            InodeKind::Directory => FileType::Directory,
            InodeKind::Symlink => FileType::Symlink,
            InodeKind::Other => {
                return Ok(Node {
                    inode,
                    crypt: Crypt::Plain,
                });
            }
        };
        if !inode.is_encrypted() {
            return Ok(Node {
                inode,
                crypt: Crypt::Plain,
            });
        }
        let corrupt = |what: String| ImageError::Corrupt {
            path: shown.to_string(),
            what,
        };
        let ctx_bytes = self.fs.encryption_context(&inode)?.ok_or_else(|| {
            corrupt("encrypted (EXT4_ENCRYPT_FL) but has no encryption context".into())
        })?;
        let ctx = Context::parse(&ctx_bytes)
            .map_err(|e| corrupt(format!("bad encryption context: {e}")))?;
        let policy = ctx.policy();
        let Some(master) = self.keys.find(&policy) else {
            return Ok(Node {
                inode,
                crypt: Crypt::Locked { policy },
            });
        };
        let sb = self.fs.superblock();
        let params = InodeParams {
            file_type,
            ino: u64::from(ino),
            fs_uuid: sb.uuid,
            fs_block_size: sb.block_size,
        };
        let crypt = InodeCrypt::new(master, &ctx, &params)
            .map_err(|e| corrupt(format!("key setup: {e}")))?;
        Ok(Node {
            inode,
            crypt: Crypt::Unlocked {
                policy,
                crypt: Box::new(crypt),
            },
        })
    }

    /// The root directory.
    ///
    /// # Errors
    /// As [`Image::node`].
    pub fn root(&self) -> Result<Node, ImageError> {
        let n = self.node(ROOT_INO, "/")?;
        if n.kind() != InodeKind::Directory {
            return Err(ImageError::Corrupt {
                path: "/".into(),
                what: "the root inode is not a directory".into(),
            });
        }
        Ok(n)
    }

    /// The child `entry` of `dir`, checked against its directory entry: the
    /// entry's type must match the inode's, the inode must be in use, and
    /// in an encrypted directory the child must be encrypted too (else the
    /// kernel refuses it; an unencrypted object there is tampering).
    ///
    /// # Errors
    /// [`ImageError::Corrupt`], and as [`Image::node`].
    pub fn child(&self, dir: &Node, entry: &Entry, shown: &str) -> Result<Node, ImageError> {
        let n = self.node(entry.ino, shown)?;
        let corrupt = |what: String| ImageError::Corrupt {
            path: shown.to_string(),
            what,
        };
        if n.inode.mode == 0 || n.inode.links_count() == 0 {
            return Err(corrupt(format!(
                "the directory entry points at unused inode {}",
                entry.ino
            )));
        }
        if let Some(k) = kind_of_file_type(entry.file_type)
            && k != n.kind()
        {
            return Err(corrupt(format!(
                "the directory entry says {k:?} but inode {} is a {:?}",
                entry.ino,
                n.kind()
            )));
        }
        if dir.inode.is_encrypted() && n.kind() != InodeKind::Other && !n.inode.is_encrypted() {
            return Err(corrupt(
                "an unencrypted object inside an encrypted directory".into(),
            ));
        }
        Ok(n)
    }

    /// `(hash version, seed)` the kernel uses for readdir's hashes of `dir`,
    /// or `None` when it presents entries with hash 0 (linear directories).
    fn readdir_hash(&self, dir: &Node) -> Result<Option<u8>, ImageError> {
        let sb = self.fs.superblock();
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
            let extents = self.fs.extents(&dir.inode)?;
            if let Some(b) = self.fs.read_logical_block(&extents, 0)? {
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
        if dir.inode.flags & EXT4_INLINE_DATA_FL != 0 && dir.inode.is_encrypted() {
            // ext4 converts inline data before it sets a context and never
            // stores encrypted objects inline (`ext4_set_context`).
            return Err(ImageError::Corrupt {
                path: shown.to_string(),
                what: "an encrypted directory with inline data (ext4 never stores one)".into(),
            });
        }
        let raw = self.fs.dir_entries(&dir.inode)?;
        let hash = match &dir.crypt {
            Crypt::Locked { .. } if dir.inode.flags & EXT4_CASEFOLD_FL == 0 => {
                self.readdir_hash(dir)?
            }
            _ => None,
        };
        let seed = self.fs.superblock().hash_seed;
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
        if node.inode.flags & EXT4_INLINE_DATA_FL != 0 && node.inode.is_encrypted() {
            return Err(corrupt(
                "an encrypted symlink with inline data (ext4 never stores one)".into(),
            ));
        }
        let area = self.fs.symlink_area(&node.inode)?;
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
