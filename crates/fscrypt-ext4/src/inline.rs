//! Data kept in the inode itself (kernel `fs/ext4/inline.c`): inline data
//! (`EXT4_INLINE_DATA_FL`: the 60 bytes of `i_block`, then the
//! `system.data` xattr) and fast symlinks (the target in `i_block`).

use crate::error::Ext4Error;
use crate::fs::Ext4;
use crate::inode::{EXT4_EXTENTS_FL, Inode, InodeKind};
use crate::reader::Reader;
use crate::xattr::EXT4_XATTR_INDEX_SYSTEM;

/// Most bytes of inline data an inode can hold (the whole inode record at
/// the largest inode size, 64 KiB blocks).
const MAX_INLINE_DATA: usize = 65536;

impl<R: Reader> Ext4<R> {
    /// The contents of an inline-data inode (`EXT4_INLINE_DATA_FL`): the 60
    /// bytes of `i_block` followed by the `system.data` xattr, cut to
    /// `i_size`.
    ///
    /// # Errors
    /// [`Ext4Error::Corrupt`] for a size beyond what the inode holds (or
    /// an inode without inline data), and as [`Ext4::xattr`].
    pub fn inline_data(&self, inode: &Inode) -> Result<Vec<u8>, Ext4Error> {
        if !inode.has_inline_data() {
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
        if inode.has_inline_data() {
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
