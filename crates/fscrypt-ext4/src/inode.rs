//! Inodes (`struct ext4_inode`, kernel `fs/ext4/ext4.h`): the record, its
//! flags, owners, times and device numbers, and finding it on disk.

use crate::error::Ext4Error;
use crate::fs::Ext4;
use crate::reader::Reader;
use crate::superblock::GOOD_OLD_INODE_SIZE;
use crate::{le16, le32};

/// `EXT4_ENCRYPT_FL`.
pub const EXT4_ENCRYPT_FL: u32 = 0x0000_0800;
/// `EXT4_INDEX_FL` (htree directory).
pub const EXT4_INDEX_FL: u32 = 0x0000_1000;
/// `EXT4_EXTENTS_FL`.
pub const EXT4_EXTENTS_FL: u32 = 0x0008_0000;
/// `EXT4_EA_INODE_FL`: the inode holds one large xattr value.
pub const EXT4_EA_INODE_FL: u32 = 0x0020_0000;
/// `EXT4_INLINE_DATA_FL`.
pub const EXT4_INLINE_DATA_FL: u32 = 0x1000_0000;
/// `EXT4_CASEFOLD_FL`.
pub const EXT4_CASEFOLD_FL: u32 = 0x4000_0000;
/// Size of `i_block` (60 bytes): the inline area of fast symlinks.
pub const EXT4_N_BLOCKS_BYTES: usize = 60;

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

    /// `EXT4_INLINE_DATA_FL` set: the contents live in `i_block` and the
    /// `system.data` xattr (see [`Ext4::inline_data`]).
    pub fn has_inline_data(&self) -> bool {
        self.flags & EXT4_INLINE_DATA_FL != 0
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

impl<R: Reader> Ext4<R> {
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
        let off = self.inode_offset(ino)?;
        let mut raw = vec![0u8; usize::from(self.sb.inode_size)];
        self.read_bytes(off, &mut raw)?;
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
}
