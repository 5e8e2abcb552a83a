//! A regular file's plaintext as a stream: data pieces of at most
//! [`CHUNK_BYTES`] and holes, never the whole file in memory.

use std::io::Write;

use super::{Crypt, Image, ImageError, Node};
use crate::ext4::{EXT4_INLINE_DATA_FL, InodeKind};

/// Largest piece read and decrypted at once.
pub const CHUNK_BYTES: usize = 1 << 20;

/// One piece of a file, in order.
#[derive(Debug, PartialEq, Eq)]
pub enum Piece<'a> {
    /// Plaintext bytes.
    Data(&'a [u8]),
    /// This many bytes of hole (or unwritten extent): zeros.
    Hole(u64),
}

/// A run of logical blocks: mapped to `physical`, or a hole.
#[derive(Clone, Copy, Debug)]
struct Run {
    lblk: u64,
    count: u64,
    physical: Option<u64>,
}

/// The plaintext of a regular file, piece by piece.
#[derive(Debug)]
pub struct Contents<'a> {
    img: &'a Image,
    node: &'a Node,
    runs: Vec<Run>,
    next_run: usize,
    done_in_run: u64,
    size: u64,
    /// An inline-data file whose bytes (in `buf`) are not yet returned.
    inline: bool,
    buf: Vec<u8>,
}

impl<'a> Contents<'a> {
    /// Prepare to read `node` (a regular file), shown as `shown` in errors.
    ///
    /// # Errors
    /// [`ImageError::NoKey`] for an encrypted file whose key was not given,
    /// [`ImageError::Corrupt`] for encrypted inline data, [`ImageError::Ext4`] for
    /// a corrupt block mapping.
    pub fn new(img: &'a Image, node: &'a Node, shown: &str) -> Result<Contents<'a>, ImageError> {
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
        let fs = img.ext4();
        if node.inode.flags & EXT4_INLINE_DATA_FL != 0 {
            if node.inode.is_encrypted() {
                // ext4 converts inline data before it sets a context.
                return Err(ImageError::Corrupt {
                    path: shown.to_string(),
                    what: "an encrypted file with inline data (ext4 never stores one)".into(),
                });
            }
            let buf = fs.inline_data(&node.inode)?;
            return Ok(Contents {
                img,
                node,
                runs: Vec::new(),
                next_run: 0,
                done_in_run: 0,
                size: buf.len() as u64,
                inline: !buf.is_empty(),
                buf,
            });
        }
        let bs = u64::from(fs.superblock().block_size);
        let size = node.inode.size;
        let nblocks = size.div_ceil(bs);
        let extents = fs.extents(&node.inode)?;
        let mut runs = Vec::new();
        let mut next = 0u64;
        for e in &extents {
            let start = e.logical.max(next);
            let end = (e.logical + u64::from(e.len)).min(nblocks);
            if start >= end {
                continue;
            }
            if start > next {
                runs.push(Run {
                    lblk: next,
                    count: start - next,
                    physical: None,
                });
            }
            runs.push(Run {
                lblk: start,
                count: end - start,
                physical: (!e.unwritten).then_some(e.physical + (start - e.logical)),
            });
            next = end;
        }
        if next < nblocks {
            runs.push(Run {
                lblk: next,
                count: nblocks - next,
                physical: None,
            });
        }
        Ok(Contents {
            img,
            node,
            runs,
            next_run: 0,
            done_in_run: 0,
            size,
            inline: false,
            buf: Vec::new(),
        })
    }

    /// The file size.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The next piece, `None` at the end.
    ///
    /// # Errors
    /// [`ImageError::Ext4`] for a read failure, [`ImageError::Corrupt`] when
    /// decryption fails.
    pub fn next_piece(&mut self) -> Result<Option<Piece<'_>>, ImageError> {
        if self.inline {
            self.inline = false;
            return Ok(Some(Piece::Data(&self.buf)));
        }
        let fs = self.img.ext4();
        let bs = u64::from(fs.superblock().block_size);
        let Some(run) = self.runs.get(self.next_run).copied() else {
            return Ok(None);
        };
        let off = (run.lblk + self.done_in_run) * bs;
        let Some(phys) = run.physical else {
            let len = (run.count - self.done_in_run) * bs;
            self.next_run += 1;
            self.done_in_run = 0;
            return Ok(Some(Piece::Hole(len.min(self.size - off))));
        };
        let chunk_blocks = (CHUNK_BYTES as u64 / bs).max(1);
        let n = (run.count - self.done_in_run).min(chunk_blocks);
        let len = (n * bs) as usize;
        self.buf.resize(len, 0);
        fs.read_blocks(phys + self.done_in_run, &mut self.buf[..len])?;
        if let Some(crypt) = self.node.crypt.inode_crypt() {
            let units_per_block = bs / crypt.data_unit_size() as u64;
            crypt
                .decrypt_data_units(
                    (run.lblk + self.done_in_run) * units_per_block,
                    &mut self.buf[..len],
                )
                .map_err(|e| ImageError::Corrupt {
                    path: format!("inode {}", self.node.ino()),
                    what: format!("decrypt: {e}"),
                })?;
        }
        self.done_in_run += n;
        if self.done_in_run == run.count {
            self.next_run += 1;
            self.done_in_run = 0;
        }
        let valid = (self.size - off).min(len as u64) as usize;
        Ok(Some(Piece::Data(&self.buf[..valid])))
    }

    /// Write the whole plaintext to `out` (holes as zeros). Returns the
    /// bytes written.
    ///
    /// # Errors
    /// As [`Contents::next_piece`]; [`ImageError::Io`] for a write error.
    pub fn copy_to(&mut self, out: &mut dyn Write) -> Result<u64, ImageError> {
        let io = |source| ImageError::Io {
            path: "<output>".into(),
            source,
        };
        let zeros = vec![0u8; 64 * 1024];
        let mut total = 0u64;
        while let Some(p) = self.next_piece()? {
            match p {
                Piece::Data(d) => {
                    out.write_all(d).map_err(io)?;
                    total += d.len() as u64;
                }
                Piece::Hole(mut n) => {
                    total += n;
                    while n > 0 {
                        let k = n.min(zeros.len() as u64) as usize;
                        out.write_all(&zeros[..k]).map_err(io)?;
                        n -= k as u64;
                    }
                }
            }
        }
        Ok(total)
    }
}
