//! Legacy block maps (`i_block[0..12]` direct, then single, double and
//! triple indirect blocks; kernel `fs/ext4/indirect.c`) turned into the
//! same [`Extent`] runs as extent trees.

use crate::error::Ext4Error;
use crate::extent::{Extent, MAX_EXTENTS};
use crate::fs::Ext4;
use crate::inode::Inode;
use crate::le32;
use crate::reader::Reader;

impl<R: Reader> Ext4<R> {
    /// Append the runs of `inode`'s block map to `out` (in logical order;
    /// holes are absent).
    pub(crate) fn walk_block_map(
        &self,
        inode: &Inode,
        out: &mut Vec<Extent>,
    ) -> Result<(), Ext4Error> {
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
}
