//! Extent trees (`struct ext4_extent_header`, `ext4_extent_idx`,
//! `ext4_extent`, kernel `fs/ext4/ext4_extents.h` and `extents.c`) and the
//! block mapping of an inode as sorted, disjoint [`Extent`] runs, whether
//! from an extent tree or a legacy block map ([`crate::block_map`]).

use crate::error::Ext4Error;
use crate::fs::Ext4;
use crate::inode::{EXT4_EXTENTS_FL, Inode};
use crate::reader::Reader;
use crate::{le16, le32};

const EXTENT_MAGIC: u16 = 0xF30A;
/// Most extent tree nodes read for one inode (≈ 1 GiB of 4 KiB index blocks
/// would be far more than any real file needs: 2^16 leaves map ≥ 2^24 extents).
const MAX_EXTENT_NODES: u32 = 1 << 16;
/// Most extents (runs) one inode's mapping may have: 4 Mi runs (96 MiB of
/// `Extent`s) covers a fully fragmented 16 GiB file of 4 KiB blocks; more
/// is treated as corrupt rather than buffered.
pub(crate) const MAX_EXTENTS: usize = 1 << 22;

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

impl Extent {
    /// The logical block after the run.
    pub fn end(&self) -> u64 {
        self.logical + u64::from(self.len)
    }
}

impl<R: Reader> Ext4<R> {
    /// The block mapping of an inode: extents (extent tree) or runs built
    /// from a legacy block map, sorted by logical block. Holes are absent.
    ///
    /// # Errors
    /// [`Ext4Error::Unsupported`] for inline data, [`Ext4Error::Corrupt`] for
    /// a malformed tree, [`Ext4Error::Io`].
    pub fn extents(&self, inode: &Inode) -> Result<Vec<Extent>, Ext4Error> {
        if inode.has_inline_data() {
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
}
