//! The seam between the filesystem and the `fscrypt` format crate: creating
//! contexts and building per-inode crypto state (`fscrypt::InodeCrypt`) from
//! a stored context. Every cryptographic decision lives in `fscrypt`; names,
//! no-key names and symlink blobs are handled through `fscrypt::hooks` only
//! (in `fs/names.rs`, `fs/dir.rs`, `fs/backing.rs` and `fs/create.rs`).

use std::sync::{Arc, OnceLock};

use fscrypt::{Context, ContextV2, FileType, InodeCrypt, InodeParams, MasterKey, Policy, PolicyV2};

use fscrypt_vault::integrity::IntegrityKeys;

use crate::error::{Corruption, Error, Result};

/// Filesystem block size we present to the format layer. A v2 policy with
/// `log2_data_unit_size == 0` uses this as its data unit size (spec §3.3).
pub const FS_BLOCK_SIZE: u32 = 4096;

/// The vault's keys: its root policy and (unless the mount is locked) the
/// master key. Shared read-only by all threads.
pub struct Keys {
    policy: PolicyV2,
    /// `policy` as the enum the hooks take (every inode of the vault has it).
    any_policy: Policy,
    master: Option<MasterKey>,
    /// The keys fscrypt-rs derives beside the kernel's (directory nonces
    /// now, the MAC of the authenticated format next), derived at first use.
    integrity: OnceLock<IntegrityKeys>,
}

impl std::fmt::Debug for Keys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keys")
            .field("policy", &self.policy)
            .field("master", &self.master.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

/// Which kind of inode a crypto state is for (spec §4.5: contents mode for
/// regular files, filenames mode for directories and symlinks).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeKind {
    /// Regular file.
    File,
    /// Directory.
    Dir,
    /// Symbolic link.
    Symlink,
}

/// Per-inode crypto state; cached in the inode table.
pub type NodeCrypt = Arc<InodeCrypt>;

impl Keys {
    /// Keys for a mount of a vault with root `policy`.
    pub fn new(policy: PolicyV2, master: Option<MasterKey>) -> Keys {
        Keys {
            policy,
            any_policy: Policy::V2(policy),
            master,
            integrity: OnceLock::new(),
        }
    }

    /// The vault's policy: that of every directory, file and symlink in it
    /// (stored contexts of another policy are corrupt, see
    /// [`Keys::check_context`]).
    pub fn policy(&self) -> &Policy {
        &self.any_policy
    }

    /// Whether the master key is present.
    pub fn unlocked(&self) -> bool {
        self.master.is_some()
    }

    /// A fresh context for a new inode: the vault policy plus 16 random bytes
    /// of nonce (spec §3.2).
    ///
    /// # Errors
    /// [`Error::Io`] if the system random generator fails.
    pub fn new_context(&self) -> Result<ContextV2> {
        let mut nonce = [0u8; 16];
        random(&mut nonce)?;
        Ok(ContextV2 {
            policy: self.policy,
            nonce,
        })
    }

    /// The context of a new directory whose name ciphertext is `name_ct`
    /// in the directory of context `parent`: the vault policy and the
    /// nonce [`IntegrityKeys::dir_nonce`] derives from the master key, the
    /// parent's nonce and the name (`docs/vault-format.md` §5a). The same
    /// path made on two replicas of a synced vault gets the same key and a
    /// byte-identical `fscrypt.dir`, so merging the replicas loses no name
    /// (issue 23).
    ///
    /// # Errors
    /// [`Error::NoKey`] on a locked mount; [`Error::Io`] when no MAC
    /// implementation passed its self-test (the keys are derived together).
    pub fn new_dir_context(&self, parent: &ContextV2, name_ct: &[u8]) -> Result<ContextV2> {
        let keys = self.integrity()?;
        Ok(ContextV2 {
            policy: self.policy,
            nonce: keys.dir_nonce(&parent.nonce, name_ct),
        })
    }

    /// The vault's integrity keys (format 3's MAC keys and the
    /// directory-nonce derivation, `docs/vault-format.md` §4b), derived
    /// from the master key at first use and kept for the mount.
    ///
    /// # Errors
    /// [`Error::NoKey`] on a locked mount; [`Error::Io`] when no MAC
    /// implementation passed its self-test.
    pub fn integrity(&self) -> Result<&IntegrityKeys> {
        if let Some(k) = self.integrity.get() {
            return Ok(k);
        }
        let master = self.master.as_ref().ok_or(Error::NoKey)?;
        let k = IntegrityKeys::derive(master).map_err(|e| Error::Io(std::io::Error::other(e)))?;
        Ok(self.integrity.get_or_init(|| k))
    }

    /// Checks that a stored context (parsed where it was read, see
    /// [`crate::layout::parse_context`]) carries the vault's policy (the
    /// kernel refuses children whose policy differs, spec §3.2).
    ///
    /// # Errors
    /// [`Corruption::BadContext`].
    pub fn check_context(&self, ctx: &ContextV2) -> Result<Context> {
        if ctx.policy == self.policy {
            Ok(Context::V2(*ctx))
        } else {
            Err(Error::Corrupt(Corruption::BadContext))
        }
    }

    /// Builds the crypto state of an inode from its stored context.
    ///
    /// # Errors
    /// [`Error::NoKey`] on a locked mount; [`Corruption::BadContext`] if the
    /// context is not the vault's; [`Error::Format`] if key derivation fails.
    pub fn node_crypt(&self, ctx: &ContextV2, kind: NodeKind, ino: u64) -> Result<NodeCrypt> {
        let master = self.master.as_ref().ok_or(Error::NoKey)?;
        let c = self.check_context(ctx)?;
        let params = InodeParams {
            file_type: match kind {
                NodeKind::File => FileType::Regular,
                NodeKind::Dir => FileType::Directory,
                NodeKind::Symlink => FileType::Symlink,
            },
            ino,
            fs_uuid: [0u8; 16],
            fs_block_size: FS_BLOCK_SIZE,
        };
        Ok(Arc::new(InodeCrypt::new(master, &c, &params)?))
    }

    /// The data unit size of the vault's files in bytes.
    pub fn data_unit_size(&self) -> u64 {
        match self.policy.log2_data_unit_size {
            0 => FS_BLOCK_SIZE as u64,
            u => 1u64 << u,
        }
    }
}

/// Fills `buf` from the system random generator.
///
/// # Errors
/// [`Error::Io`] if the generator fails.
pub fn random(buf: &mut [u8]) -> Result<()> {
    fscrypt_crypto::random_bytes(buf).map_err(|e| Error::Io(std::io::Error::other(e)))
}
