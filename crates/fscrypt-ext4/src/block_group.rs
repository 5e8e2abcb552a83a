//! Block group descriptors (`struct ext4_group_desc`, kernel
//! `fs/ext4/ext4.h`): where each group's inode table is. 32-byte and
//! 64-bit (`desc_size` ≥ 64) descriptors, packed right after the
//! superblock's block (no `meta_bg`).

use crate::error::Ext4Error;
use crate::fs::Ext4;
use crate::le32;
use crate::reader::Reader;

impl<R: Reader> Ext4<R> {
    /// The first block of group `group`'s inode table, checked to lie
    /// (whole) inside the filesystem.
    pub(crate) fn inode_table_block(&self, group: u32) -> Result<u64, Ext4Error> {
        if group >= self.groups {
            return Err(self.corrupt(None, format!("group {group} out of range")));
        }
        let bs = u64::from(self.sb.block_size);
        let gdt = (u64::from(self.sb.first_data_block) + 1) * bs;
        let off = gdt + u64::from(group) * u64::from(self.sb.desc_size);
        let mut d = vec![0u8; self.sb.desc_size as usize];
        self.read_bytes(off, &mut d)?;
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
}
