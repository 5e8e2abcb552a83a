//! A regular file's plaintext as a stream: data pieces of at most
//! [`CHUNK_BYTES`] and holes, never the whole file in memory (`image cat`,
//! `image extract`), read through [`FileData::read_at`].

use std::io::Write;

use super::file::{FileData, Span};
use super::{Image, ImageError, Node};
use crate::Reader;

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

/// The plaintext of a regular file, piece by piece, over the one read
/// path ([`FileData::read_at`]).
#[derive(Debug)]
pub struct Contents<'a, R = std::fs::File> {
    img: &'a Image<R>,
    node: &'a Node,
    file: FileData,
    pos: u64,
    buf: Vec<u8>,
}

impl<'a, R: Reader> Contents<'a, R> {
    /// Prepare to read `node` (a regular file), shown as `shown` in errors.
    ///
    /// # Errors
    /// As [`FileData::open`]: [`ImageError::NoKey`] for an encrypted file
    /// whose key was not given, [`ImageError::Corrupt`] for encrypted
    /// inline data, [`ImageError::Ext4`] for a corrupt block mapping.
    pub fn new(
        img: &'a Image<R>,
        node: &'a Node,
        shown: &str,
    ) -> Result<Contents<'a, R>, ImageError> {
        Ok(Contents {
            file: FileData::open(img.ext4(), node, shown)?,
            img,
            node,
            pos: 0,
            buf: Vec::new(),
        })
    }

    /// The file size.
    pub fn size(&self) -> u64 {
        self.file.size()
    }

    /// The next piece, `None` at the end.
    ///
    /// # Errors
    /// [`ImageError::Ext4`] for a read failure, [`ImageError::Corrupt`] when
    /// decryption fails.
    pub fn next_piece(&mut self) -> Result<Option<Piece<'_>>, ImageError> {
        let end = match self.file.span_at(self.pos) {
            None => return Ok(None),
            Some(Span::Hole(end)) => {
                let n = end - self.pos;
                self.pos = end;
                return Ok(Some(Piece::Hole(n)));
            }
            Some(Span::Data(end)) => end,
        };
        let n = (end - self.pos).min(CHUNK_BYTES as u64) as usize;
        self.buf.resize(n, 0);
        let got = self
            .file
            .read_at(self.img.ext4(), self.node, self.pos, &mut self.buf[..n])?;
        if got == 0 {
            return Ok(None);
        }
        self.pos += got as u64;
        Ok(Some(Piece::Data(&self.buf[..got])))
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
