//! Directory entries (`struct ext4_dir_entry_2`, kernel `fs/ext4/ext4.h`,
//! `namei.c`): linear blocks and htree leaves alike (htree interior blocks
//! hold one fake entry with inode 0 spanning the block and are skipped),
//! inline-data directories, and the `(hash, minor_hash)` stored after each
//! name in encrypted casefolded directories. The htree hash itself is in
//! [`crate::dirhash`].

use crate::error::Ext4Error;
use crate::fs::Ext4;
use crate::inode::{EXT4_CASEFOLD_FL, Inode, InodeKind};
use crate::reader::Reader;
use crate::xattr::EXT4_XATTR_INDEX_SYSTEM;
use crate::{le16, le32};

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

impl<R: Reader> Ext4<R> {
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
        if inode.has_inline_data() {
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
}
