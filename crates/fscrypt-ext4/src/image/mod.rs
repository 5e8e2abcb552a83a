//! Offline access to kernel-encrypted ext4 images and block devices: open
//! one read-only with a set of master keys, resolve paths through encrypted
//! directories, list directories, read files as a stream and extract trees
//! (issue 14). The kernel is not involved: the ext4 reader (the crate's
//! other modules) supplies the stored bytes and `fscrypt` decrypts them.
//!
//! * [`keys`] — key files and their matching to policies;
//! * this module — [`Image`], [`Node`] (an inode with its keys, set up
//!   from its encryption context), [`ImageError`];
//! * [`names`] — listings, lookups and paths with decrypted or no-key
//!   names, symlink targets;
//! * [`mod@file`] — the one read path: [`file::FileData::read_at`] (extents,
//!   block maps, holes, inline data, decryption per data unit);
//! * [`read`] — file contents as a stream of plaintext pieces and holes,
//!   over the one read path ([`file::FileData::read_at`]);
//! * [`xattrs`] — xattrs as the kernel shows them (POSIX ACLs converted);
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

pub mod extract;
pub mod file;
pub mod keys;
mod mounted;
pub mod names;
pub mod read;
pub mod xattrs;

use std::fs::File;
use std::path::{Path, PathBuf};

use fscrypt::{Context, FileType, InodeCrypt, InodeParams, Policy};

use crate::{Ext4, Ext4Error, INCOMPAT_RECOVER, Inode, InodeKind, Reader};
pub use keys::{KeySet, SuppliedKey};
pub use names::{Entry, Listing};

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
    /// The image (a block device, or an image file behind a loop device)
    /// is mounted: its journal is in use and the filesystem changes under
    /// an offline reader.
    #[error(
        "{path} is mounted at {at}: read the files there, or unmount it first (`umount {at}`)",
        path = .path.display(), at = .at.display()
    )]
    Mounted {
        /// The image or device given.
        path: PathBuf,
        /// One mount point of it (from `/proc/self/mountinfo`).
        at: PathBuf,
    },
    /// No such entry.
    #[error("{0}: no such file or directory in the image")]
    NotFound(String),
    /// A path component is not a directory.
    #[error("{0}: not a directory")]
    NotADirectory(String),
    /// The object's key was not supplied.
    #[error(
        "{path}: encrypted with key {key}, which was not given; pass it with --key-file, or \
         unlock the image's google/fscrypt metadata with --passfile, --extpass, --unlock-with \
         or --user"
    )]
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

/// An ext4 image or block device opened read-only, with keys, over the
/// reader `R` (a [`File`] by default; `&[u8]` for an image in memory).
#[derive(Debug)]
pub struct Image<R = File> {
    fs: Ext4<R>,
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

impl Image<File> {
    /// Open `path` (an image file or block device) read-only (`O_RDONLY`;
    /// nothing is ever written) with `keys`.
    ///
    /// # Errors
    /// [`ImageError::Ext4`] for an unreadable or unusable superblock,
    /// [`ImageError::NeedsRecovery`] for a journal that needs replaying,
    /// [`ImageError::Mounted`] instead when that is because the image is
    /// mounted (its device, or a loop device over the image file, is in
    /// `/proc/self/mountinfo`).
    pub fn open(path: &Path, keys: KeySet) -> Result<Image, ImageError> {
        match Image::with_ext4(Ext4::open(path)?, keys) {
            Err(ImageError::NeedsRecovery(p)) => Err(match mounted::mount_point(path) {
                Some(at) => ImageError::Mounted { path: p, at },
                None => ImageError::NeedsRecovery(p),
            }),
            other => other,
        }
    }
}

impl<R: Reader> Image<R> {
    /// The image in `reader` (named `name` in messages) with `keys`.
    ///
    /// # Errors
    /// As [`Image::open`].
    pub fn from_reader(reader: R, name: &Path, keys: KeySet) -> Result<Image<R>, ImageError> {
        Image::with_ext4(Ext4::from_reader(reader, name)?, keys)
    }

    /// An image over an opened reader: refused when its journal needs
    /// replaying.
    fn with_ext4(fs: Ext4<R>, keys: KeySet) -> Result<Image<R>, ImageError> {
        if fs.superblock().feature_incompat & INCOMPAT_RECOVER != 0 {
            return Err(ImageError::NeedsRecovery(fs.path().to_path_buf()));
        }
        Ok(Image { fs, keys })
    }

    /// The ext4 reader.
    pub fn ext4(&self) -> &Ext4<R> {
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
        if let Some(k) = names::kind_of_file_type(entry.file_type)
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
}
