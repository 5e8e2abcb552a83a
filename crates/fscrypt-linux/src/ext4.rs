//! A small read-only ext4 reader: just enough to see what the kernel stored
//! for encrypted files (spec §11.1).
//!
//! It reads the superblock (block size, `s_uuid`, features), group
//! descriptors (32- and 64-bit), inodes, extent trees and legacy block maps,
//! linear and htree directory blocks (htree interior blocks are skipped as
//! the fake, inode-0 directory entries they are), in-inode and block extended
//! attributes (to get the encryption context, name index 9, name `"c"`) and
//! fast/slow symlinks.
//!
//! Every on-disk value is bounds-checked; bad data gives an [`Ext4Error`],
//! never a panic. Nothing is ever written. Layouts follow the ext4 disk
//! format documentation (Documentation/filesystems/ext4/).

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// ext4 superblock magic (`s_magic`).
pub const EXT4_SUPER_MAGIC: u16 = 0xEF53;
/// `INCOMPAT_FILETYPE`: directory entries carry a file type byte.
pub const INCOMPAT_FILETYPE: u32 = 0x0002;
/// `INCOMPAT_META_BG`: group descriptors are scattered (not supported here).
pub const INCOMPAT_META_BG: u32 = 0x0010;
/// `INCOMPAT_EXTENTS`.
pub const INCOMPAT_EXTENTS: u32 = 0x0040;
/// `INCOMPAT_64BIT`: 64-bit block numbers and group descriptors ≥ 64 bytes.
pub const INCOMPAT_64BIT: u32 = 0x0080;
/// `INCOMPAT_ENCRYPT` ("encrypt").
pub const INCOMPAT_ENCRYPT: u32 = 0x10000;
/// `INCOMPAT_CASEFOLD`.
pub const INCOMPAT_CASEFOLD: u32 = 0x20000;
/// `COMPAT_STABLE_INODES` ("stable_inodes").
pub const COMPAT_STABLE_INODES: u32 = 0x0800;
/// `EXT4_ENCRYPT_FL`.
pub const EXT4_ENCRYPT_FL: u32 = 0x0000_0800;
/// `EXT4_INDEX_FL` (htree directory).
pub const EXT4_INDEX_FL: u32 = 0x0000_1000;
/// `EXT4_EXTENTS_FL`.
pub const EXT4_EXTENTS_FL: u32 = 0x0008_0000;
/// `EXT4_INLINE_DATA_FL`.
pub const EXT4_INLINE_DATA_FL: u32 = 0x1000_0000;
/// `EXT4_CASEFOLD_FL`.
pub const EXT4_CASEFOLD_FL: u32 = 0x4000_0000;
/// xattr name index `system.` (`EXT4_XATTR_INDEX_SYSTEM`): `system.data`
/// holds the part of an inline-data inode that does not fit `i_block`.
pub const EXT4_XATTR_INDEX_SYSTEM: u8 = 7;
/// Most bytes of inline data an inode can hold (the whole inode record at
/// the largest inode size, 64 KiB blocks).
const MAX_INLINE_DATA: usize = 65536;
/// xattr name index of the fscrypt context (`EXT4_XATTR_INDEX_ENCRYPTION`).
pub const EXT4_XATTR_INDEX_ENCRYPTION: u8 = 9;
/// xattr name of the fscrypt context.
pub const EXT4_XATTR_NAME_ENCRYPTION_CONTEXT: &[u8] = b"c";
/// `EXT4_EA_INODE_FL`: the inode holds one large xattr value.
pub const EXT4_EA_INODE_FL: u32 = 0x0020_0000;
/// Largest xattr value the kernel accepts (`XATTR_SIZE_MAX`).
pub const XATTR_SIZE_MAX: usize = 65536;
/// Most xattr entries read for one inode (in-inode area and block
/// together): more than a 64 KiB block of minimal entries could hold.
pub const MAX_XATTR_ENTRIES: usize = 8192;
/// Size of `i_block` (60 bytes): the inline area of fast symlinks.
pub const EXT4_N_BLOCKS_BYTES: usize = 60;

const XATTR_MAGIC: u32 = 0xEA02_0000;
const EXTENT_MAGIC: u16 = 0xF30A;
const GOOD_OLD_INODE_SIZE: usize = 128;
/// Most extent tree nodes read for one inode (≈ 1 GiB of 4 KiB index blocks
/// would be far more than any real file needs: 2^16 leaves map ≥ 2^24 extents).
const MAX_EXTENT_NODES: u32 = 1 << 16;
/// Most extents (runs) one inode's mapping may have: 4 Mi runs (96 MiB of
/// `Extent`s) covers a fully fragmented 16 GiB file of 4 KiB blocks; more
/// is treated as corrupt rather than buffered.
const MAX_EXTENTS: usize = 1 << 22;
/// `INCOMPAT_RECOVER`: the journal needs recovery.
pub const INCOMPAT_RECOVER: u32 = 0x0004;
/// `INCOMPAT_INLINE_DATA`.
pub const INCOMPAT_INLINE_DATA: u32 = 0x8000;
/// `COMPAT_DIR_INDEX`: htree directories.
pub const COMPAT_DIR_INDEX: u32 = 0x0020;

/// Errors of the ext4 reader.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Ext4Error {
    /// Reading the device failed.
    #[error("{path}: read error at byte {offset}: {source}")]
    Io {
        /// The device.
        path: PathBuf,
        /// Byte offset of the failed read.
        offset: u64,
        /// OS error.
        source: std::io::Error,
    },
    /// Not an ext2/3/4 filesystem.
    #[error("{0}: not an ext4 filesystem (bad superblock magic)")]
    NotExt4(PathBuf),
    /// A feature this reader does not handle.
    #[error("{path}: unsupported ext4 layout: {what}")]
    Unsupported {
        /// The device.
        path: PathBuf,
        /// What.
        what: String,
    },
    /// Inconsistent on-disk data.
    #[error("{path}: corrupt ext4 metadata{}: {what}", ino.map(|i| format!(" (inode {i})")).unwrap_or_default())]
    Corrupt {
        /// The device.
        path: PathBuf,
        /// The inode concerned, if any.
        ino: Option<u32>,
        /// What is wrong.
        what: String,
    },
}

/// The superblock fields this reader uses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Superblock {
    /// Total inodes.
    pub inodes_count: u32,
    /// Total blocks.
    pub blocks_count: u64,
    /// First data block (1 for 1 KiB blocks, else 0).
    pub first_data_block: u32,
    /// Block size in bytes (1024 << s_log_block_size).
    pub block_size: u32,
    /// Blocks per group.
    pub blocks_per_group: u32,
    /// Inodes per group.
    pub inodes_per_group: u32,
    /// On-disk inode record size, bytes.
    pub inode_size: u16,
    /// `s_feature_compat`.
    pub feature_compat: u32,
    /// `s_feature_incompat`.
    pub feature_incompat: u32,
    /// `s_feature_ro_compat`.
    pub feature_ro_compat: u32,
    /// `s_uuid`: the UUID used by IV_INO_LBLK_* key derivation (spec §4.5).
    pub uuid: [u8; 16],
    /// Group descriptor size, bytes (32, or `s_desc_size` with 64BIT).
    pub desc_size: u16,
    /// `s_hash_seed`: the seed of the htree directory hash.
    pub hash_seed: [u32; 4],
    /// `s_def_hash_version`: the default htree hash (0 legacy, 1 half-MD4, 2 TEA).
    pub def_hash_version: u8,
    /// `s_flags` (`EXT2_FLAGS_SIGNED_HASH` 1, `EXT2_FLAGS_UNSIGNED_HASH` 2).
    pub flags: u32,
    /// `s_volume_name`, up to its first NUL.
    pub volume_name: Vec<u8>,
}

/// File type from `i_mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InodeKind {
    /// `S_IFREG`.
    Regular,
    /// `S_IFDIR`.
    Directory,
    /// `S_IFLNK`.
    Symlink,
    /// Anything else (devices, FIFOs, sockets).
    Other,
}

/// An inode record.
#[derive(Clone, Debug)]
pub struct Inode {
    /// Inode number.
    pub ino: u32,
    /// `i_mode`.
    pub mode: u16,
    /// `i_size` (lo | high << 32), bytes.
    pub size: u64,
    /// `i_flags`.
    pub flags: u32,
    /// `i_blocks` (lo | high << 32), in 512-byte units (no HUGE_FILE handling).
    pub blocks: u64,
    /// `i_block`: extent header / block map / fast symlink data.
    pub block: [u8; EXT4_N_BLOCKS_BYTES],
    /// `i_file_acl`: the xattr block, 0 if none.
    pub file_acl: u64,
    /// The whole on-disk record (`inode_size` bytes).
    pub raw: Vec<u8>,
}

impl Inode {
    /// The file type.
    pub fn kind(&self) -> InodeKind {
        match self.mode & 0xF000 {
            0x8000 => InodeKind::Regular,
            0x4000 => InodeKind::Directory,
            0xA000 => InodeKind::Symlink,
            _ => InodeKind::Other,
        }
    }

    /// `EXT4_ENCRYPT_FL` set.
    pub fn is_encrypted(&self) -> bool {
        self.flags & EXT4_ENCRYPT_FL != 0
    }

    /// Owner: `i_uid` | `l_i_uid_high` << 16.
    pub fn uid(&self) -> u32 {
        u32::from(le16(&self.raw, 0x2)) | (u32::from(le16(&self.raw, 0x78)) << 16)
    }

    /// Group: `i_gid` | `l_i_gid_high` << 16.
    pub fn gid(&self) -> u32 {
        u32::from(le16(&self.raw, 0x18)) | (u32::from(le16(&self.raw, 0x7A)) << 16)
    }

    /// `i_links_count`.
    pub fn links_count(&self) -> u16 {
        le16(&self.raw, 0x1A)
    }

    /// `i_extra_isize` (0 for 128-byte inodes).
    fn extra_isize(&self) -> usize {
        if self.raw.len() > GOOD_OLD_INODE_SIZE + 2 {
            le16(&self.raw, 0x80) as usize
        } else {
            0
        }
    }

    /// A timestamp `(seconds, nanoseconds)` from its 32-bit field at `off`
    /// and, when the inode's extra area holds it, its `_extra` word at
    /// `extra_off` (2 epoch bits, 30 nanosecond bits).
    fn time(&self, off: usize, extra_off: usize) -> (i64, u32) {
        let lo = i64::from(le32(&self.raw, off) as i32);
        if extra_off + 4 <= GOOD_OLD_INODE_SIZE + self.extra_isize()
            && extra_off + 4 <= self.raw.len()
        {
            let extra = le32(&self.raw, extra_off);
            let epoch = i64::from(extra & 3);
            let nsec = (extra >> 2).min(999_999_999);
            (lo + (epoch << 32), nsec)
        } else {
            (lo, 0)
        }
    }

    /// Last modification time (`i_mtime`, `i_mtime_extra`).
    pub fn mtime(&self) -> (i64, u32) {
        self.time(0x10, 0x88)
    }

    /// Last access time (`i_atime`, `i_atime_extra`).
    pub fn atime(&self) -> (i64, u32) {
        self.time(0x08, 0x8C)
    }

    /// Last inode change time (`i_ctime`, `i_ctime_extra`).
    pub fn ctime(&self) -> (i64, u32) {
        self.time(0x0C, 0x84)
    }

    /// The device number of a character or block special file, as stored in
    /// `i_block` (old 16-bit or new 32-bit encoding): `(major, minor)`.
    pub fn device_number(&self) -> (u32, u32) {
        let old = le32(&self.block, 0);
        if old != 0 {
            ((old >> 8) & 0xFF, old & 0xFF)
        } else {
            let new = le32(&self.block, 4);
            ((new & 0xFFF00) >> 8, (new & 0xFF) | ((new >> 12) & 0xFFF00))
        }
    }
}

/// One stored extended attribute (see [`Ext4::xattrs`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Xattr {
    /// The name index (`e_name_index`): 1 `user.`, 2 POSIX access ACL,
    /// 3 POSIX default ACL, 4 `trusted.`, 6 `security.`, 7 `system.`,
    /// 8 `system.richacl`, 9 the fscrypt context, …
    pub index: u8,
    /// The name without its prefix.
    pub name: Vec<u8>,
    /// The value as stored (ext4's compact format for POSIX ACLs).
    pub value: Vec<u8>,
}

impl Xattr {
    /// The full name the kernel shows (`listxattr`), or `None` for what it
    /// never shows as an xattr: the fscrypt context (index 9),
    /// `system.data` (inline data) and unknown indexes.
    pub fn vfs_name(&self) -> Option<Vec<u8>> {
        let prefix: &[u8] = match self.index {
            1 => b"user.",
            2 if self.name.is_empty() => return Some(b"system.posix_acl_access".to_vec()),
            3 if self.name.is_empty() => return Some(b"system.posix_acl_default".to_vec()),
            4 => b"trusted.",
            6 => b"security.",
            7 if self.name == b"data" => return None,
            7 => b"system.",
            8 if self.name.is_empty() => return Some(b"system.richacl".to_vec()),
            _ => return None,
        };
        let mut n = prefix.to_vec();
        n.extend_from_slice(&self.name);
        Some(n)
    }
}

/// A run of mapped blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Extent {
    /// First logical block.
    pub logical: u64,
    /// First physical block.
    pub physical: u64,
    /// Number of blocks.
    pub len: u32,
    /// Allocated but unwritten (reads as zeros, no ciphertext on disk).
    pub unwritten: bool,
}

/// A directory entry as stored on disk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirEntry {
    /// Inode number.
    pub ino: u32,
    /// `file_type` byte (1 regular, 2 directory, 7 symlink, …).
    pub file_type: u8,
    /// The stored name bytes (ciphertext in encrypted directories).
    pub name: Vec<u8>,
    /// `(hash, minor_hash)` stored after the name in encrypted casefolded
    /// directories (SipHash of the plaintext casefolded name, spec §9).
    pub hash: Option<(u32, u32)>,
}

/// An open ext4 filesystem image or block device (read only).
#[derive(Debug)]
pub struct Ext4 {
    file: File,
    path: PathBuf,
    sb: Superblock,
    groups: u32,
}

fn le16(b: &[u8], off: usize) -> u16 {
    u16::from_le_bytes([b[off], b[off + 1]])
}
fn le32(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes([b[off], b[off + 1], b[off + 2], b[off + 3]])
}

impl Ext4 {
    /// Open a device or image and read its superblock. The page cache of a
    /// block device is dropped first (`POSIX_FADV_DONTNEED`) so that data
    /// written through the filesystem and synced is read from disk, not
    /// stale cache (an image file's cache is kept: it is coherent).
    ///
    /// # Errors
    /// [`Ext4Error::Io`], [`Ext4Error::NotExt4`], [`Ext4Error::Unsupported`]
    /// (META_BG, block sizes above 64 KiB), [`Ext4Error::Corrupt`].
    pub fn open(path: &Path) -> Result<Ext4, Ext4Error> {
        let file = File::open(path).map_err(|source| Ext4Error::Io {
            path: path.to_path_buf(),
            offset: 0,
            source,
        })?;
        // Only a block device's cache can be stale; an image file's page
        // cache is coherent, and keeping it makes repeated reads fast.
        if file
            .metadata()
            .is_ok_and(|m| std::os::unix::fs::FileTypeExt::is_block_device(&m.file_type()))
        {
            let _ = rustix::fs::fadvise(&file, 0, None, rustix::fs::Advice::DontNeed);
        }
        let mut buf = [0u8; 1024];
        file.read_exact_at(&mut buf, 1024)
            .map_err(|source| Ext4Error::Io {
                path: path.to_path_buf(),
                offset: 1024,
                source,
            })?;
        let sb = Self::parse_superblock(path, &buf)?;
        let groups = sb
            .blocks_count
            .saturating_sub(u64::from(sb.first_data_block))
            .div_ceil(u64::from(sb.blocks_per_group));
        let groups = u32::try_from(groups).map_err(|_| Ext4Error::Corrupt {
            path: path.to_path_buf(),
            ino: None,
            what: "too many block groups".into(),
        })?;
        Ok(Ext4 {
            file,
            path: path.to_path_buf(),
            sb,
            groups,
        })
    }

    fn parse_superblock(path: &Path, b: &[u8; 1024]) -> Result<Superblock, Ext4Error> {
        if le16(b, 0x38) != EXT4_SUPER_MAGIC {
            return Err(Ext4Error::NotExt4(path.to_path_buf()));
        }
        let corrupt = |what: &str| Ext4Error::Corrupt {
            path: path.to_path_buf(),
            ino: None,
            what: what.into(),
        };
        let log_bs = le32(b, 0x18);
        if log_bs > 6 {
            return Err(Ext4Error::Unsupported {
                path: path.to_path_buf(),
                what: format!("block size 1024 << {log_bs}"),
            });
        }
        let block_size = 1024u32 << log_bs;
        let rev_level = le32(b, 0x4C);
        let inode_size = if rev_level == 0 { 128 } else { le16(b, 0x58) };
        if (inode_size as usize) < GOOD_OLD_INODE_SIZE
            || !inode_size.is_power_of_two()
            || u32::from(inode_size) > block_size
        {
            return Err(corrupt("bad inode size"));
        }
        let incompat = le32(b, 0x60);
        let desc_size = if incompat & INCOMPAT_64BIT != 0 {
            le16(b, 0xFE)
        } else {
            32
        };
        if desc_size < 32 || u32::from(desc_size) > block_size || !desc_size.is_power_of_two() {
            return Err(corrupt("bad group descriptor size"));
        }
        if incompat & INCOMPAT_META_BG != 0 {
            return Err(Ext4Error::Unsupported {
                path: path.to_path_buf(),
                what: "meta_bg group descriptor layout".into(),
            });
        }
        let blocks_hi = if incompat & INCOMPAT_64BIT != 0 {
            le32(b, 0x150)
        } else {
            0
        };
        let blocks_per_group = le32(b, 0x20);
        let inodes_per_group = le32(b, 0x28);
        if blocks_per_group == 0 || inodes_per_group == 0 {
            return Err(corrupt("zero blocks or inodes per group"));
        }
        let mut uuid = [0u8; 16];
        uuid.copy_from_slice(&b[0x68..0x78]);
        let hash_seed = [le32(b, 0xEC), le32(b, 0xF0), le32(b, 0xF4), le32(b, 0xF8)];
        let name = &b[0x78..0x88];
        let volume_name = name[..name.iter().position(|&c| c == 0).unwrap_or(16)].to_vec();
        Ok(Superblock {
            hash_seed,
            def_hash_version: b[0xFC],
            flags: le32(b, 0x160),
            volume_name,
            inodes_count: le32(b, 0x0),
            blocks_count: u64::from(le32(b, 0x4)) | (u64::from(blocks_hi) << 32),
            first_data_block: le32(b, 0x14),
            block_size,
            blocks_per_group,
            inodes_per_group,
            inode_size,
            feature_compat: le32(b, 0x5C),
            feature_incompat: incompat,
            feature_ro_compat: le32(b, 0x64),
            uuid,
            desc_size,
        })
    }

    /// The superblock.
    pub fn superblock(&self) -> &Superblock {
        &self.sb
    }

    /// The device path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn corrupt(&self, ino: Option<u32>, what: impl Into<String>) -> Ext4Error {
        Ext4Error::Corrupt {
            path: self.path.clone(),
            ino,
            what: what.into(),
        }
    }

    /// Read `buf.len()` bytes at byte `offset` of the device.
    ///
    /// # Errors
    /// [`Ext4Error::Io`].
    pub fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), Ext4Error> {
        self.file
            .read_exact_at(buf, offset)
            .map_err(|source| Ext4Error::Io {
                path: self.path.clone(),
                offset,
                source,
            })
    }

    /// Read `count` whole blocks starting at physical block `block` into
    /// `buf` (which must be `count * block_size` bytes).
    ///
    /// # Errors
    /// [`Ext4Error::Corrupt`] for a block beyond the filesystem, else
    /// [`Ext4Error::Io`].
    pub fn read_blocks(&self, block: u64, buf: &mut [u8]) -> Result<(), Ext4Error> {
        let bs = u64::from(self.sb.block_size);
        let count = buf.len() as u64 / bs;
        if block
            .checked_add(count)
            .is_none_or(|end| end > self.sb.blocks_count)
        {
            return Err(self.corrupt(None, format!("block {block}+{count} beyond the filesystem")));
        }
        self.read_at(block * bs, buf)
    }

    fn read_block_vec(&self, block: u64) -> Result<Vec<u8>, Ext4Error> {
        let mut v = vec![0u8; self.sb.block_size as usize];
        self.read_blocks(block, &mut v)?;
        Ok(v)
    }

    fn inode_table_block(&self, group: u32) -> Result<u64, Ext4Error> {
        if group >= self.groups {
            return Err(self.corrupt(None, format!("group {group} out of range")));
        }
        let bs = u64::from(self.sb.block_size);
        let gdt = (u64::from(self.sb.first_data_block) + 1) * bs;
        let off = gdt + u64::from(group) * u64::from(self.sb.desc_size);
        let mut d = vec![0u8; self.sb.desc_size as usize];
        self.read_at(off, &mut d)?;
        let lo = u64::from(le32(&d, 0x8));
        let hi = if self.sb.desc_size >= 64 {
            u64::from(le32(&d, 0x28))
        } else {
            0
        };
        let table = lo | (hi << 32);
        let blocks = u64::from(self.sb.inodes_per_group) * u64::from(self.sb.inode_size)
            / u64::from(self.sb.block_size).max(1);
        if table == 0 || table.saturating_add(blocks) > self.sb.blocks_count {
            return Err(self.corrupt(
                None,
                format!("group {group}: inode table at block {table} beyond the filesystem"),
            ));
        }
        Ok(table)
    }

    /// Byte offset of inode `ino`'s on-disk record in the device.
    ///
    /// # Errors
    /// [`Ext4Error::Corrupt`] for an out-of-range number, [`Ext4Error::Io`].
    pub fn inode_offset(&self, ino: u32) -> Result<u64, Ext4Error> {
        if ino == 0 || ino > self.sb.inodes_count {
            return Err(self.corrupt(Some(ino), "inode number out of range"));
        }
        let idx = ino - 1;
        let table = self.inode_table_block(idx / self.sb.inodes_per_group)?;
        let isz = u64::from(self.sb.inode_size);
        table
            .checked_mul(u64::from(self.sb.block_size))
            .and_then(|t| t.checked_add(u64::from(idx % self.sb.inodes_per_group) * isz))
            .ok_or_else(|| self.corrupt(Some(ino), "inode table offset overflows"))
    }

    /// Read inode `ino` (1-based).
    ///
    /// # Errors
    /// [`Ext4Error::Corrupt`] for an out-of-range number, [`Ext4Error::Io`].
    pub fn read_inode(&self, ino: u32) -> Result<Inode, Ext4Error> {
        if ino == 0 || ino > self.sb.inodes_count {
            return Err(self.corrupt(Some(ino), "inode number out of range"));
        }
        let idx = ino - 1;
        let group = idx / self.sb.inodes_per_group;
        let index = idx % self.sb.inodes_per_group;
        let table = self.inode_table_block(group)?;
        let isz = u64::from(self.sb.inode_size);
        let off = table
            .checked_mul(u64::from(self.sb.block_size))
            .and_then(|t| t.checked_add(u64::from(index) * isz))
            .ok_or_else(|| self.corrupt(Some(ino), "inode table offset overflows"))?;
        let mut raw = vec![0u8; isz as usize];
        self.read_at(off, &mut raw)?;
        let mut block = [0u8; EXT4_N_BLOCKS_BYTES];
        block.copy_from_slice(&raw[0x28..0x28 + EXT4_N_BLOCKS_BYTES]);
        Ok(Inode {
            ino,
            mode: le16(&raw, 0x0),
            size: u64::from(le32(&raw, 0x4)) | (u64::from(le32(&raw, 0x6C)) << 32),
            flags: le32(&raw, 0x20),
            blocks: u64::from(le32(&raw, 0x1C)) | (u64::from(le16(&raw, 0x74)) << 32),
            block,
            file_acl: u64::from(le32(&raw, 0x68)) | (u64::from(le16(&raw, 0x76)) << 32),
            raw,
        })
    }

    /// The block mapping of an inode: extents (extent tree) or runs built
    /// from a legacy block map, sorted by logical block. Holes are absent.
    ///
    /// # Errors
    /// [`Ext4Error::Unsupported`] for inline data, [`Ext4Error::Corrupt`] for
    /// a malformed tree, [`Ext4Error::Io`].
    pub fn extents(&self, inode: &Inode) -> Result<Vec<Extent>, Ext4Error> {
        if inode.flags & EXT4_INLINE_DATA_FL != 0 {
            return Err(Ext4Error::Unsupported {
                path: self.path.clone(),
                what: format!("inode {} uses inline data", inode.ino),
            });
        }
        let mut out = Vec::new();
        if inode.flags & EXT4_EXTENTS_FL != 0 {
            let mut budget = MAX_EXTENT_NODES;
            self.walk_extent_node(inode.ino, &inode.block, 0, &mut out, &mut budget)?;
        } else {
            self.walk_block_map(inode, &mut out)?;
        }
        out.sort_by_key(|e| e.logical);
        // Overlapping extents would map one file block twice (possibly to
        // blocks of another file): refuse the whole mapping.
        for w in out.windows(2) {
            if w[0].logical + u64::from(w[0].len) > w[1].logical {
                return Err(self.corrupt(
                    Some(inode.ino),
                    format!("overlapping extents at logical block {}", w[1].logical),
                ));
            }
        }
        Ok(out)
    }

    fn walk_extent_node(
        &self,
        ino: u32,
        node: &[u8],
        level: u32,
        out: &mut Vec<Extent>,
        budget: &mut u32,
    ) -> Result<(), Ext4Error> {
        if level > 5 || node.len() < 12 {
            return Err(self.corrupt(Some(ino), "extent tree too deep"));
        }
        if le16(node, 0) != EXTENT_MAGIC {
            return Err(self.corrupt(Some(ino), "bad extent header magic"));
        }
        let entries = le16(node, 2) as usize;
        let max = le16(node, 4) as usize;
        let depth = le16(node, 6);
        if entries > max || 12 + entries * 12 > node.len() {
            return Err(self.corrupt(Some(ino), "extent entries overflow the node"));
        }
        if depth > 5 {
            return Err(self.corrupt(Some(ino), format!("extent tree depth {depth} above 5")));
        }
        // Bound the reads a corrupt tree can cause (index entries that all
        // point at the same child, repeated at every level).
        *budget = budget
            .checked_sub(1)
            .ok_or_else(|| self.corrupt(Some(ino), "extent tree has too many nodes"))?;
        for i in 0..entries {
            let e = &node[12 + i * 12..24 + i * 12];
            if depth == 0 {
                let raw_len = le16(e, 4);
                let (len, unwritten) = if raw_len > 32768 {
                    (raw_len - 32768, true)
                } else {
                    (raw_len, false)
                };
                let physical = (u64::from(le16(e, 6)) << 32) | u64::from(le32(e, 8));
                if physical
                    .checked_add(u64::from(len))
                    .is_none_or(|end| end > self.sb.blocks_count)
                {
                    return Err(self.corrupt(Some(ino), "extent beyond the filesystem"));
                }
                let logical = u64::from(le32(e, 0));
                // A tree is walked in order, so its extents come sorted and
                // disjoint; anything else (e.g. an index naming one leaf
                // many times) is refused at once instead of piling up.
                if out
                    .last()
                    .is_some_and(|l: &Extent| l.logical + u64::from(l.len) > logical)
                {
                    return Err(self.corrupt(
                        Some(ino),
                        format!("extents out of order or overlapping at logical block {logical}"),
                    ));
                }
                out.push(Extent {
                    logical,
                    physical,
                    len: u32::from(len),
                    unwritten,
                });
                if out.len() > MAX_EXTENTS {
                    return Err(self.corrupt(Some(ino), "too many extents"));
                }
            } else {
                let leaf = u64::from(le32(e, 4)) | (u64::from(le16(e, 8)) << 32);
                let child = self.read_block_vec(leaf)?;
                if u32::from(le16(&child, 6)) + 1 != u32::from(depth) {
                    return Err(self.corrupt(Some(ino), "extent tree depth mismatch"));
                }
                self.walk_extent_node(ino, &child, level + 1, out, budget)?;
            }
        }
        Ok(())
    }

    fn walk_block_map(&self, inode: &Inode, out: &mut Vec<Extent>) -> Result<(), Ext4Error> {
        let bs = u64::from(self.sb.block_size);
        let nblocks = inode.size.div_ceil(bs);
        let per = bs / 4;
        let mut push = |logical: u64, physical: u64, out: &mut Vec<Extent>| {
            if let Some(last) = out.last_mut()
                && last.logical + u64::from(last.len) == logical
                && last.physical + u64::from(last.len) == physical
                && last.len < u32::MAX
            {
                last.len += 1;
                return true;
            }
            if out.len() >= MAX_EXTENTS {
                return false;
            }
            out.push(Extent {
                logical,
                physical,
                len: 1,
                unwritten: false,
            });
            true
        };
        // (pointer block, logical base, level) walk; level 0 = data block.
        let ptr = |i: usize| u64::from(le32(&inode.block, i * 4));
        for i in 0..12u64 {
            if i >= nblocks {
                return Ok(());
            }
            let p = ptr(i as usize);
            if p != 0 {
                self.check_block(inode.ino, p)?;
                if !push(i, p, out) {
                    return Err(self.corrupt(Some(inode.ino), "too many extents"));
                }
            }
        }
        let mut base = 12u64;
        let mut budget = 65_536u32;
        for (slot, level) in [(12usize, 1u32), (13, 2), (14, 3)] {
            if base >= nblocks {
                break;
            }
            let span = per.pow(level);
            let p = ptr(slot);
            if p != 0 {
                self.walk_indirect(
                    inode.ino,
                    p,
                    level,
                    base,
                    nblocks,
                    &mut push,
                    out,
                    &mut budget,
                )?;
            }
            base += span;
        }
        Ok(())
    }

    fn check_block(&self, ino: u32, b: u64) -> Result<(), Ext4Error> {
        if b >= self.sb.blocks_count {
            return Err(self.corrupt(Some(ino), format!("block {b} beyond the filesystem")));
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn walk_indirect(
        &self,
        ino: u32,
        block: u64,
        level: u32,
        base: u64,
        nblocks: u64,
        push: &mut impl FnMut(u64, u64, &mut Vec<Extent>) -> bool,
        out: &mut Vec<Extent>,
        budget: &mut u32,
    ) -> Result<(), Ext4Error> {
        // Bound the work a corrupt map can cause (≈ 256 MiB of pointer blocks).
        *budget = budget
            .checked_sub(1)
            .ok_or_else(|| self.corrupt(Some(ino), "block map too large"))?;
        self.check_block(ino, block)?;
        let data = self.read_block_vec(block)?;
        let per = data.len() as u64 / 4;
        let span = per.pow(level - 1);
        for i in 0..per {
            let logical = base + i * span;
            if logical >= nblocks {
                break;
            }
            let p = u64::from(le32(&data, (i * 4) as usize));
            if p == 0 {
                continue;
            }
            if level == 1 {
                self.check_block(ino, p)?;
                if !push(logical, p, out) {
                    return Err(self.corrupt(Some(ino), "too many extents"));
                }
            } else {
                self.walk_indirect(ino, p, level - 1, logical, nblocks, push, out, budget)?;
            }
        }
        Ok(())
    }

    /// Read logical block `lblk` of `inode` given its extents; `None` for a
    /// hole or an unwritten extent.
    ///
    /// # Errors
    /// [`Ext4Error::Io`], [`Ext4Error::Corrupt`].
    pub fn read_logical_block(
        &self,
        extents: &[Extent],
        lblk: u64,
    ) -> Result<Option<Vec<u8>>, Ext4Error> {
        for e in extents {
            if lblk >= e.logical && lblk < e.logical + u64::from(e.len) {
                if e.unwritten {
                    return Ok(None);
                }
                return self
                    .read_block_vec(e.physical + (lblk - e.logical))
                    .map(Some);
            }
        }
        Ok(None)
    }

    /// The value of extended attribute (`index`, `name`), looked up in the
    /// in-inode area first, then in the xattr block.
    ///
    /// # Errors
    /// [`Ext4Error::Corrupt`] for malformed xattr areas,
    /// [`Ext4Error::Unsupported`] for values stored in EA inodes.
    pub fn xattr(
        &self,
        inode: &Inode,
        index: u8,
        name: &[u8],
    ) -> Result<Option<Vec<u8>>, Ext4Error> {
        let isz = inode.raw.len();
        if isz > GOOD_OLD_INODE_SIZE {
            let extra = le16(&inode.raw, 0x80) as usize;
            let start = GOOD_OLD_INODE_SIZE + extra;
            if start + 4 <= isz && le32(&inode.raw, start) == XATTR_MAGIC {
                let area = &inode.raw[start + 4..];
                if let Some(v) = self.find_xattr(inode.ino, area, 0, area, index, name)? {
                    return Ok(Some(v));
                }
            }
        }
        if inode.file_acl != 0 {
            let blk = self.read_block_vec(inode.file_acl)?;
            if le32(&blk, 0) != XATTR_MAGIC {
                return Err(self.corrupt(Some(inode.ino), "bad xattr block magic"));
            }
            return self.find_xattr(inode.ino, &blk, 32, &blk, index, name);
        }
        Ok(None)
    }

    /// Walk xattr entries in `region[start..]`; values are at offsets
    /// relative to `value_base`.
    fn find_xattr(
        &self,
        ino: u32,
        region: &[u8],
        start: usize,
        value_base: &[u8],
        index: u8,
        name: &[u8],
    ) -> Result<Option<Vec<u8>>, Ext4Error> {
        let mut off = start;
        while off + 4 <= region.len() && le32(region, off) != 0 {
            if off + 16 > region.len() {
                return Err(self.corrupt(Some(ino), "xattr entry overflows its area"));
            }
            let name_len = region[off] as usize;
            let name_index = region[off + 1];
            let value_offs = le16(region, off + 2) as usize;
            let value_inum = le32(region, off + 4);
            let value_size = le32(region, off + 8) as usize;
            let name_end = off + 16 + name_len;
            if name_end > region.len() {
                return Err(self.corrupt(Some(ino), "xattr name overflows its area"));
            }
            if name_index == index && &region[off + 16..name_end] == name {
                if value_inum != 0 {
                    return Err(Ext4Error::Unsupported {
                        path: self.path.clone(),
                        what: format!("inode {ino}: xattr value stored in an EA inode"),
                    });
                }
                let v = value_base
                    .get(value_offs..value_offs + value_size)
                    .ok_or_else(|| self.corrupt(Some(ino), "xattr value out of bounds"))?;
                return Ok(Some(v.to_vec()));
            }
            off = (name_end + 3) & !3;
        }
        Ok(None)
    }

    /// Every extended attribute of `inode`: the in-inode area first, then
    /// the xattr block, in stored order. Values kept in an EA inode
    /// (`ea_inode` feature) are read from it, at most
    /// [`XATTR_SIZE_MAX`] bytes. Name indexes are kept as stored (see
    /// [`Xattr::vfs_name`] for the names the kernel shows).
    ///
    /// # Errors
    /// [`Ext4Error::Corrupt`] for malformed xattr areas (an entry or value
    /// out of bounds, more than [`MAX_XATTR_ENTRIES`] entries, a bad EA
    /// inode), [`Ext4Error::Io`].
    pub fn xattrs(&self, inode: &Inode) -> Result<Vec<Xattr>, Ext4Error> {
        let mut out = Vec::new();
        let isz = inode.raw.len();
        if isz > GOOD_OLD_INODE_SIZE + 2 {
            let extra = le16(&inode.raw, 0x80) as usize;
            let start = GOOD_OLD_INODE_SIZE + extra;
            if start + 4 <= isz && le32(&inode.raw, start) == XATTR_MAGIC {
                let area = &inode.raw[start + 4..];
                self.list_xattrs(inode.ino, area, 0, area, &mut out)?;
            }
        }
        if inode.file_acl != 0 {
            self.check_block(inode.ino, inode.file_acl)?;
            let blk = self.read_block_vec(inode.file_acl)?;
            if le32(&blk, 0) != XATTR_MAGIC {
                return Err(self.corrupt(Some(inode.ino), "bad xattr block magic"));
            }
            self.list_xattrs(inode.ino, &blk, 32, &blk, &mut out)?;
        }
        Ok(out)
    }

    /// Append the entries of `region[start..]` to `out` (values at offsets
    /// relative to `value_base`).
    fn list_xattrs(
        &self,
        ino: u32,
        region: &[u8],
        start: usize,
        value_base: &[u8],
        out: &mut Vec<Xattr>,
    ) -> Result<(), Ext4Error> {
        let mut off = start;
        while off + 4 <= region.len() && le32(region, off) != 0 {
            if out.len() >= MAX_XATTR_ENTRIES {
                return Err(self.corrupt(Some(ino), "too many xattr entries"));
            }
            if off + 16 > region.len() {
                return Err(self.corrupt(Some(ino), "xattr entry overflows its area"));
            }
            let name_len = region[off] as usize;
            let index = region[off + 1];
            let value_offs = le16(region, off + 2) as usize;
            let value_inum = le32(region, off + 4);
            let value_size = le32(region, off + 8) as usize;
            let name_end = off + 16 + name_len;
            if name_end > region.len() {
                return Err(self.corrupt(Some(ino), "xattr name overflows its area"));
            }
            let name = region[off + 16..name_end].to_vec();
            let value = if value_inum != 0 {
                self.ea_inode_value(ino, value_inum, value_size)?
            } else {
                value_base
                    .get(value_offs..value_offs.saturating_add(value_size))
                    .ok_or_else(|| self.corrupt(Some(ino), "xattr value out of bounds"))?
                    .to_vec()
            };
            out.push(Xattr { index, name, value });
            off = (name_end + 3) & !3;
        }
        Ok(())
    }

    /// The value of an xattr of inode `ino` stored in EA inode `inum`.
    fn ea_inode_value(&self, ino: u32, inum: u32, size: usize) -> Result<Vec<u8>, Ext4Error> {
        if size > XATTR_SIZE_MAX {
            return Err(self.corrupt(Some(ino), format!("xattr value of {size} bytes")));
        }
        let ea = self.read_inode(inum)?;
        if ea.flags & EXT4_EA_INODE_FL == 0
            || ea.kind() != InodeKind::Regular
            || ea.size != size as u64
            || ea.flags & EXT4_INLINE_DATA_FL != 0
        {
            return Err(self.corrupt(
                Some(ino),
                format!("xattr value inode {inum} is not an EA inode of {size} bytes"),
            ));
        }
        let extents = self.extents(&ea)?;
        let bs = self.sb.block_size as usize;
        let mut v = Vec::with_capacity(size);
        let mut lblk = 0u64;
        while v.len() < size {
            match self.read_logical_block(&extents, lblk)? {
                Some(b) => v.extend_from_slice(&b),
                None => v.resize(v.len() + bs, 0),
            }
            lblk += 1;
        }
        v.truncate(size);
        Ok(v)
    }

    /// The fscrypt context xattr (index 9, name `"c"`), if any (spec §11.1).
    ///
    /// # Errors
    /// As [`Ext4::xattr`].
    pub fn encryption_context(&self, inode: &Inode) -> Result<Option<Vec<u8>>, Ext4Error> {
        self.xattr(
            inode,
            EXT4_XATTR_INDEX_ENCRYPTION,
            EXT4_XATTR_NAME_ENCRYPTION_CONTEXT,
        )
    }

    /// All entries of a directory except `.`, `..` and unused (inode 0)
    /// slots — which also skips htree interior blocks, whose single fake
    /// entry spans the block with inode 0.
    ///
    /// # Errors
    /// [`Ext4Error::Corrupt`] for malformed entries, [`Ext4Error::Io`].
    pub fn dir_entries(&self, inode: &Inode) -> Result<Vec<DirEntry>, Ext4Error> {
        if inode.kind() != InodeKind::Directory {
            return Err(self.corrupt(Some(inode.ino), "not a directory"));
        }
        // Encrypted casefolded directories store each name's hash after it.
        let hashed = inode.is_encrypted() && inode.flags & EXT4_CASEFOLD_FL != 0;
        if inode.flags & EXT4_INLINE_DATA_FL != 0 {
            // `i_block`: the parent's inode number (4 bytes), then entries
            // filling the other 56 bytes; `system.data`: more entries
            // filling its whole value.
            let mut out = Vec::new();
            self.parse_dir_block(inode.ino, hashed, &inode.block[4..], &mut out)?;
            if let Some(more) = self.xattr(inode, EXT4_XATTR_INDEX_SYSTEM, b"data")? {
                self.parse_dir_block(inode.ino, hashed, &more, &mut out)?;
            }
            return Ok(out);
        }
        let bs = self.sb.block_size as usize;
        let extents = self.extents(inode)?;
        let mut out = Vec::new();
        let mut buf = vec![0u8; bs];
        for e in &extents {
            if e.unwritten {
                continue;
            }
            for i in 0..u64::from(e.len) {
                self.read_blocks(e.physical + i, &mut buf)?;
                self.parse_dir_block(inode.ino, hashed, &buf, &mut out)?;
            }
        }
        Ok(out)
    }

    fn parse_dir_block(
        &self,
        ino: u32,
        hashed: bool,
        b: &[u8],
        out: &mut Vec<DirEntry>,
    ) -> Result<(), Ext4Error> {
        let mut off = 0usize;
        while off + 8 <= b.len() {
            let d_ino = le32(b, off);
            let rec_len = le16(b, off + 4) as usize;
            let rec_len = if rec_len == 0 && b.len() == 65536 {
                65536
            } else {
                rec_len
            };
            let name_len = b[off + 6] as usize;
            let file_type = b[off + 7];
            if rec_len < 8 || rec_len % 4 != 0 || off + rec_len > b.len() || 8 + name_len > rec_len
            {
                return Err(self.corrupt(Some(ino), format!("bad directory entry at offset {off}")));
            }
            let name = &b[off + 8..off + 8 + name_len];
            if d_ino != 0 && name_len > 0 && name != b"." && name != b".." {
                let hash = if hashed {
                    // `ext4_dir_entry_hash`: right after the name, 4-aligned.
                    let h = (off + 8 + name_len + 3) & !3;
                    if h + 8 > off + rec_len {
                        return Err(self.corrupt(
                            Some(ino),
                            format!("directory entry at offset {off} lacks its stored hash"),
                        ));
                    }
                    Some((le32(b, h), le32(b, h + 4)))
                } else {
                    None
                };
                out.push(DirEntry {
                    ino: d_ino,
                    file_type,
                    name: name.to_vec(),
                    hash,
                });
            }
            off += rec_len;
        }
        Ok(())
    }

    /// The contents of an inline-data inode (`EXT4_INLINE_DATA_FL`): the 60
    /// bytes of `i_block` followed by the `system.data` xattr, cut to
    /// `i_size`.
    ///
    /// # Errors
    /// [`Ext4Error::Corrupt`] for a size beyond what the inode holds (or
    /// an inode without inline data), and as [`Ext4::xattr`].
    pub fn inline_data(&self, inode: &Inode) -> Result<Vec<u8>, Ext4Error> {
        if inode.flags & EXT4_INLINE_DATA_FL == 0 {
            return Err(self.corrupt(Some(inode.ino), "no inline data"));
        }
        let mut data = inode.block.to_vec();
        if let Some(more) = self.xattr(inode, EXT4_XATTR_INDEX_SYSTEM, b"data")? {
            data.extend_from_slice(&more);
        }
        let size = usize::try_from(inode.size)
            .ok()
            .filter(|&s| s <= data.len() && s <= MAX_INLINE_DATA)
            .ok_or_else(|| {
                self.corrupt(
                    Some(inode.ino),
                    format!(
                        "inline data size {} above the {} bytes stored",
                        inode.size,
                        data.len()
                    ),
                )
            })?;
        data.truncate(size);
        Ok(data)
    }

    /// The stored target bytes of a symlink: the 60-byte `i_block` area of a
    /// fast symlink, or the whole first data block of a slow one. For an
    /// encrypted symlink this starts with the `fscrypt_symlink_data` blob
    /// (spec §7.4); `inode.size` is the blob length without its final NUL.
    ///
    /// # Errors
    /// [`Ext4Error::Corrupt`] for a slow symlink without a first block.
    pub fn symlink_area(&self, inode: &Inode) -> Result<Vec<u8>, Ext4Error> {
        if inode.kind() != InodeKind::Symlink {
            return Err(self.corrupt(Some(inode.ino), "not a symlink"));
        }
        // A fast symlink has no data blocks (i_blocks counts only an xattr
        // block, if any) and no extent tree.
        let xattr_sectors = if inode.file_acl != 0 {
            u64::from(self.sb.block_size / 512)
        } else {
            0
        };
        if inode.flags & EXT4_INLINE_DATA_FL != 0 {
            return self.inline_data(inode);
        }
        let fast = inode.flags & EXT4_EXTENTS_FL == 0 && inode.blocks <= xattr_sectors;
        if fast {
            return Ok(inode.block.to_vec());
        }
        let extents = self.extents(inode)?;
        self.read_logical_block(&extents, 0)?
            .ok_or_else(|| self.corrupt(Some(inode.ino), "slow symlink without data block"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sb_bytes() -> [u8; 1024] {
        let mut b = [0u8; 1024];
        b[0x0..0x4].copy_from_slice(&64u32.to_le_bytes());
        b[0x4..0x8].copy_from_slice(&1024u32.to_le_bytes());
        b[0x18..0x1C].copy_from_slice(&2u32.to_le_bytes());
        b[0x20..0x24].copy_from_slice(&32768u32.to_le_bytes());
        b[0x28..0x2C].copy_from_slice(&64u32.to_le_bytes());
        b[0x38..0x3A].copy_from_slice(&EXT4_SUPER_MAGIC.to_le_bytes());
        b[0x4C..0x50].copy_from_slice(&1u32.to_le_bytes());
        b[0x58..0x5A].copy_from_slice(&256u16.to_le_bytes());
        b[0x68..0x78].copy_from_slice(&[7u8; 16]);
        b
    }

    #[test]
    fn superblock_parses_and_rejects() {
        let p = Path::new("x");
        let sb = Ext4::parse_superblock(p, &sb_bytes()).expect("valid");
        assert_eq!(sb.block_size, 4096);
        assert_eq!(sb.inode_size, 256);
        assert_eq!(sb.uuid, [7u8; 16]);
        assert_eq!(sb.desc_size, 32);
        let mut b = sb_bytes();
        b[0x38] = 0;
        assert!(matches!(
            Ext4::parse_superblock(p, &b),
            Err(Ext4Error::NotExt4(_))
        ));
        let mut b = sb_bytes();
        b[0x58] = 100;
        assert!(matches!(
            Ext4::parse_superblock(p, &b),
            Err(Ext4Error::Corrupt { .. })
        ));
        let mut b = sb_bytes();
        b[0x60] = INCOMPAT_META_BG as u8;
        assert!(matches!(
            Ext4::parse_superblock(p, &b),
            Err(Ext4Error::Unsupported { .. })
        ));
        let mut b = sb_bytes();
        b[0x18] = 40;
        assert!(matches!(
            Ext4::parse_superblock(p, &b),
            Err(Ext4Error::Unsupported { .. })
        ));
    }

    /// An `Ext4` over /dev/null (reads fail) for parsing tests.
    fn null_fs() -> Ext4 {
        let p = Path::new("/dev/null");
        Ext4 {
            file: File::open(p).expect("/dev/null"),
            path: p.to_path_buf(),
            sb: Ext4::parse_superblock(p, &sb_bytes()).expect("valid"),
            groups: 1,
        }
    }

    /// A 256-byte inode whose in-inode xattr area holds `entries` (raw
    /// bytes after the magic) and `value` at area offset 64.
    fn xattr_inode(entries: &[u8], value: &[u8]) -> Inode {
        let mut raw = vec![0u8; 256];
        raw[0x80..0x82].copy_from_slice(&32u16.to_le_bytes());
        raw[160..164].copy_from_slice(&XATTR_MAGIC.to_le_bytes());
        raw[164..164 + entries.len()].copy_from_slice(entries);
        raw[164 + 64..164 + 64 + value.len()].copy_from_slice(value);
        Inode {
            ino: 12,
            mode: 0o100644,
            size: 0,
            flags: 0,
            blocks: 0,
            block: [0; EXT4_N_BLOCKS_BYTES],
            file_acl: 0,
            raw,
        }
    }

    fn entry(index: u8, name: &[u8], offs: u16, inum: u32, size: u32) -> Vec<u8> {
        let mut e = vec![name.len() as u8, index];
        e.extend_from_slice(&offs.to_le_bytes());
        e.extend_from_slice(&inum.to_le_bytes());
        e.extend_from_slice(&size.to_le_bytes());
        e.extend_from_slice(&[0; 4]);
        e.extend_from_slice(name);
        while e.len() % 4 != 0 {
            e.push(0);
        }
        e
    }

    #[test]
    fn xattrs_listed_and_bounded() {
        let fs = null_fs();
        let mut es = entry(1, b"a", 64, 0, 3);
        es.extend(entry(9, b"c", 64, 0, 1));
        es.extend(entry(2, b"", 64, 0, 0));
        let x = fs.xattrs(&xattr_inode(&es, b"xyz")).expect("valid");
        assert_eq!(x.len(), 3);
        assert_eq!(x[0].vfs_name().as_deref(), Some(&b"user.a"[..]));
        assert_eq!(x[0].value, b"xyz");
        assert_eq!(x[1].vfs_name(), None, "the fscrypt context is never shown");
        assert_eq!(
            x[2].vfs_name().as_deref(),
            Some(&b"system.posix_acl_access"[..])
        );
        assert!(x[2].value.is_empty());
        // A value beyond the area, a huge size, a name beyond the area.
        for es in [
            entry(1, b"a", 80, 0, 20),
            entry(1, b"a", 64, 0, u32::MAX),
            entry(1, b"a", 0xFFFF, 0, 1),
        ] {
            assert!(matches!(
                fs.xattrs(&xattr_inode(&es, b"")),
                Err(Ext4Error::Corrupt { .. })
            ));
        }
        let mut long = entry(1, b"a", 64, 0, 1);
        long[0] = 200;
        assert!(fs.xattrs(&xattr_inode(&long, b"")).is_err());
        // An EA inode value: too large, or its inode unreadable: an error.
        assert!(
            fs.xattrs(&xattr_inode(&entry(1, b"a", 0, 13, 1 << 20), b""))
                .is_err()
        );
        assert!(
            fs.xattrs(&xattr_inode(&entry(1, b"a", 0, 13, 100), b""))
                .is_err()
        );
        assert_eq!(
            Xattr {
                index: 7,
                name: b"data".to_vec(),
                value: vec![]
            }
            .vfs_name(),
            None,
            "inline data is not an xattr to restore"
        );
    }

    #[test]
    fn garbage_never_panics() {
        // Any superblock bytes: typed result, no panic.
        let mut seed = 0x1234_5678u32;
        for _ in 0..2000 {
            let mut b = sb_bytes();
            for _ in 0..8 {
                seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12345);
                let i = (seed >> 8) as usize % 1024;
                b[i] = (seed >> 3) as u8;
            }
            let _ = Ext4::parse_superblock(Path::new("x"), &b);
        }
    }
}
