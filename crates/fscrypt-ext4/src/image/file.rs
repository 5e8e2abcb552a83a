//! The one read path of a regular file's contents, used by `image cat`,
//! `image extract` (through [`super::read::Contents`]) and the image FUSE
//! mount: [`FileData::read_at`] reads any byte range, whatever stores it —
//! extents or a legacy block map (holes and unwritten extents read as
//! zeros) or inline data (`i_block` and `system.data`, kernel
//! `fs/ext4/inline.c`) — and decrypts encrypted blocks one data unit at a
//! time (`fs/crypto/bio.c`: data unit numbers count from the file's
//! start, spec §6).

use fscrypt::InodeCrypt;

use super::{Crypt, ImageError, Node};
use crate::{Ext4, Extent, InodeKind, Reader};

/// Where a file's bytes are.
#[derive(Debug)]
enum Map {
    /// Block-mapped: sorted, disjoint runs; anything between is a hole.
    Blocks(Vec<Extent>),
    /// Stored in the inode: exactly the file's bytes.
    Inline(Vec<u8>),
}

/// What a file holds from a byte offset on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Span {
    /// Stored bytes up to this byte offset (exclusive).
    Data(u64),
    /// A hole or unwritten extent (zeros) up to this byte offset.
    Hole(u64),
}

/// A regular file opened for reading: its block mapping (or inline bytes)
/// resolved once, then read at any offset with [`FileData::read_at`].
#[derive(Debug)]
pub struct FileData {
    ino: u32,
    size: u64,
    block_size: u64,
    map: Map,
}

impl FileData {
    /// Open `node` (a regular file; `shown` names it in errors) of the
    /// image read by `fs`.
    ///
    /// # Errors
    /// [`ImageError::Corrupt`] for something else than a regular file or an
    /// encrypted file with inline data (ext4 converts inline data before it
    /// sets a context, `ext4_set_context`), [`ImageError::NoKey`] for an
    /// encrypted file whose key was not given, [`ImageError::Ext4`] for a
    /// corrupt block mapping or inline data.
    pub fn open<R: Reader>(fs: &Ext4<R>, node: &Node, shown: &str) -> Result<FileData, ImageError> {
        if node.kind() != InodeKind::Regular {
            return Err(ImageError::Corrupt {
                path: shown.to_string(),
                what: "not a regular file".into(),
            });
        }
        if let Crypt::Locked { policy } = &node.crypt {
            return Err(ImageError::NoKey {
                path: shown.to_string(),
                key: super::keys::policy_key(policy),
            });
        }
        let block_size = u64::from(fs.superblock().block_size);
        let (size, map) = if node.inode.has_inline_data() {
            if node.inode.is_encrypted() {
                return Err(ImageError::Corrupt {
                    path: shown.to_string(),
                    what: "an encrypted file with inline data (ext4 never stores one)".into(),
                });
            }
            let data = fs.inline_data(&node.inode)?;
            (data.len() as u64, Map::Inline(data))
        } else {
            (node.inode.size, Map::Blocks(fs.extents(&node.inode)?))
        };
        Ok(FileData {
            ino: node.ino(),
            size,
            block_size,
            map,
        })
    }

    /// The file size, bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The file's bytes are stored in its inode (inline data).
    pub fn is_inline(&self) -> bool {
        matches!(self.map, Map::Inline(_))
    }

    /// The run holding logical block `lblk`: the block after it and the
    /// physical block of `lblk` (`None` for a hole or unwritten extent).
    fn run_at(extents: &[Extent], lblk: u64) -> (u64, Option<u64>) {
        let i = extents.partition_point(|e| e.end() <= lblk);
        match extents.get(i) {
            Some(e) if e.logical <= lblk => (
                e.end(),
                (!e.unwritten).then(|| e.physical + (lblk - e.logical)),
            ),
            Some(e) => (e.logical, None),
            None => (u64::MAX, None),
        }
    }

    /// What the file holds from byte `offset` on (data or a hole, and up
    /// to where, never past the end), or `None` at or past the end. Lets
    /// a copy keep holes sparse.
    pub fn span_at(&self, offset: u64) -> Option<Span> {
        if offset >= self.size {
            return None;
        }
        match &self.map {
            Map::Inline(_) => Some(Span::Data(self.size)),
            Map::Blocks(extents) => {
                let (end, physical) = Self::run_at(extents, offset / self.block_size);
                let end = end.saturating_mul(self.block_size).min(self.size);
                Some(match physical {
                    Some(_) => Span::Data(end),
                    None => Span::Hole(end),
                })
            }
        }
    }

    /// Read the file's plaintext at byte `offset` into `buf`: fills
    /// `min(buf.len(), size - offset)` bytes (0 at or past the end) and
    /// returns that count. `node` is the node this was opened from (its
    /// keys decrypt); blocks are read from `fs`. Whole blocks are read
    /// straight into `buf`, partial ones through one block of scratch
    /// space.
    ///
    /// # Errors
    /// [`ImageError::Ext4`] for a read failure or a block beyond the
    /// filesystem, [`ImageError::Corrupt`] when decryption fails or `node`
    /// is not the inode this was opened from.
    pub fn read_at<R: Reader>(
        &self,
        fs: &Ext4<R>,
        node: &Node,
        offset: u64,
        buf: &mut [u8],
    ) -> Result<usize, ImageError> {
        if node.ino() != self.ino {
            return Err(ImageError::Corrupt {
                path: format!("inode {}", self.ino),
                what: format!("read with the keys of inode {}", node.ino()),
            });
        }
        if offset >= self.size || buf.is_empty() {
            return Ok(0);
        }
        let end = offset.saturating_add(buf.len() as u64).min(self.size);
        let len = (end - offset) as usize;
        let extents = match &self.map {
            Map::Inline(data) => {
                buf[..len].copy_from_slice(&data[offset as usize..end as usize]);
                return Ok(len);
            }
            Map::Blocks(extents) => extents,
        };
        let crypt = node.crypt.inode_crypt();
        let bs = self.block_size;
        let mut scratch = Vec::new();
        let mut pos = offset;
        while pos < end {
            let lblk = pos / bs;
            let (run_end, physical) = Self::run_at(extents, lblk);
            let seg_end = run_end.saturating_mul(bs).min(end);
            let out = &mut buf[(pos - offset) as usize..(seg_end - offset) as usize];
            let Some(phys) = physical else {
                out.fill(0);
                pos = seg_end;
                continue;
            };
            let whole = (seg_end - pos) / bs;
            if pos.is_multiple_of(bs) && whole > 0 {
                let n = (whole * bs) as usize;
                fs.read_blocks(phys, &mut out[..n])?;
                self.decrypt(crypt, lblk, &mut out[..n])?;
                pos += n as u64;
            } else {
                // A partial block: decrypt it whole, copy what was asked.
                scratch.resize(bs as usize, 0);
                fs.read_blocks(phys, &mut scratch)?;
                self.decrypt(crypt, lblk, &mut scratch)?;
                let from = (pos % bs) as usize;
                let n = ((lblk + 1) * bs).min(seg_end) - pos;
                out[..n as usize].copy_from_slice(&scratch[from..from + n as usize]);
                pos += n;
            }
        }
        Ok(len)
    }

    /// Decrypt `blocks` (whole blocks from logical block `lblk`) in place,
    /// data unit by data unit, when the file is encrypted.
    fn decrypt(
        &self,
        crypt: Option<&InodeCrypt>,
        lblk: u64,
        blocks: &mut [u8],
    ) -> Result<(), ImageError> {
        let Some(crypt) = crypt else {
            return Ok(());
        };
        let units_per_block = self.block_size / crypt.data_unit_size() as u64;
        crypt
            .decrypt_data_units(lblk * units_per_block, blocks)
            .map_err(|e| ImageError::Corrupt {
                path: format!("inode {}", self.ino),
                what: format!("decrypt: {e}"),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blocks(extents: Vec<Extent>, size: u64) -> FileData {
        FileData {
            ino: 12,
            size,
            block_size: 1024,
            map: Map::Blocks(extents),
        }
    }

    fn ext(logical: u64, physical: u64, len: u32, unwritten: bool) -> Extent {
        Extent {
            logical,
            physical,
            len,
            unwritten,
        }
    }

    #[test]
    fn spans_follow_the_mapping() {
        let f = blocks(
            vec![
                ext(1, 100, 2, false),
                ext(3, 200, 1, true),
                ext(6, 300, 4, false),
            ],
            7000,
        );
        assert_eq!(f.span_at(0), Some(Span::Hole(1024)));
        assert_eq!(f.span_at(1024), Some(Span::Data(3072)));
        assert_eq!(f.span_at(2000), Some(Span::Data(3072)));
        assert_eq!(f.span_at(3072), Some(Span::Hole(4096)), "unwritten");
        assert_eq!(f.span_at(4096), Some(Span::Hole(6144)));
        assert_eq!(f.span_at(6144), Some(Span::Data(7000)), "cut at the size");
        assert_eq!(f.span_at(7000), None);
        let empty = blocks(Vec::new(), 5000);
        assert_eq!(empty.span_at(10), Some(Span::Hole(5000)));
        let inline = FileData {
            ino: 12,
            size: 100,
            block_size: 1024,
            map: Map::Inline(vec![7; 100]),
        };
        assert_eq!(inline.span_at(99), Some(Span::Data(100)));
        assert!(inline.is_inline());
    }

    fn plain_node(ino: u32) -> Node {
        Node {
            inode: crate::Inode {
                ino,
                mode: 0o100644,
                size: 0,
                flags: 0,
                blocks: 0,
                block: [0; crate::EXT4_N_BLOCKS_BYTES],
                file_acl: 0,
                raw: vec![0; 256],
            },
            crypt: Crypt::Plain,
        }
    }

    #[test]
    fn read_at_any_range_over_holes_and_runs() {
        // A 4 KiB-block image in memory whose block k is filled with k.
        let mut fs = crate::fs::tests::null_fs();
        fs.reader = (0..20u8).flat_map(|k| vec![k; 4096]).collect();
        let size = 5 * 4096 + 100;
        let f = FileData {
            ino: 12,
            size,
            block_size: 4096,
            map: Map::Blocks(vec![ext(1, 5, 2, false), ext(4, 9, 1, true)]),
        };
        let mut want = vec![0u8; size as usize];
        want[4096..8192].fill(5);
        want[8192..12288].fill(6);
        let node = plain_node(12);
        for (off, len) in [
            (0u64, size as usize + 50),
            (4000, 200),
            (4096, 4096),
            (5000, 9000),
            (8191, 2),
            (12000, 9000),
            (size - 1, 10),
        ] {
            let mut buf = vec![0xAA; len];
            let n = f.read_at(&fs, &node, off, &mut buf).expect("read");
            let end = (off as usize + len).min(size as usize);
            assert_eq!(n, end - off as usize, "{off} {len}");
            assert_eq!(&buf[..n], &want[off as usize..end], "{off} {len}");
        }
        assert_eq!(f.read_at(&fs, &node, size, &mut [0; 4]).expect("eof"), 0);
        assert!(matches!(
            f.read_at(&fs, &plain_node(13), 0, &mut [0; 4]),
            Err(ImageError::Corrupt { .. })
        ));
        // A run beyond the filesystem is an error, not a panic.
        let bad = blocks(vec![ext(0, 5000, 1, false)], 10);
        assert!(bad.read_at(&fs, &node, 0, &mut [0; 4]).is_err());
        let inline = FileData {
            ino: 12,
            size: 5,
            block_size: 4096,
            map: Map::Inline(b"hello".to_vec()),
        };
        let mut b = [0u8; 8];
        assert_eq!(inline.read_at(&fs, &node, 1, &mut b).expect("inline"), 4);
        assert_eq!(&b[..4], b"ello");
    }
}
