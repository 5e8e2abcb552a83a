//! Where the image's bytes come from: a [`Reader`] reads a range at a byte
//! offset, from a file or block device ([`std::fs::File`]) or from memory
//! (`[u8]`, `Vec<u8>`: tests and the fuzz target, no temporary file).

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

/// Random-access, read-only source of an ext4 image's bytes.
///
/// Implemented for [`File`] (`pread`), byte slices and vectors (a read past
/// the end fails with [`io::ErrorKind::UnexpectedEof`], as `pread` on a
/// short file does), and for references, boxes and `Arc`s of readers.
pub trait Reader {
    /// Fill `buf` with the bytes at byte `offset`.
    ///
    /// # Errors
    /// The OS error, or [`io::ErrorKind::UnexpectedEof`] when the source
    /// ends before `offset + buf.len()`.
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()>;
}

impl Reader for File {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        FileExt::read_exact_at(self, buf, offset)
    }
}

impl Reader for [u8] {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let src = usize::try_from(offset)
            .ok()
            .and_then(|start| self.get(start..start.checked_add(buf.len())?))
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "read beyond the end of the image",
                )
            })?;
        buf.copy_from_slice(src);
        Ok(())
    }
}

impl Reader for Vec<u8> {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.as_slice().read_exact_at(offset, buf)
    }
}

impl<T: Reader + ?Sized> Reader for &T {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        (**self).read_exact_at(offset, buf)
    }
}

impl<T: Reader + ?Sized> Reader for Box<T> {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        (**self).read_exact_at(offset, buf)
    }
}

impl<T: Reader + ?Sized> Reader for Arc<T> {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        (**self).read_exact_at(offset, buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_read_in_bounds_only() {
        let data: Vec<u8> = (0..10).collect();
        let mut b = [0u8; 3];
        data.read_exact_at(7, &mut b).expect("in bounds");
        assert_eq!(b, [7, 8, 9]);
        for off in [8, 11, u64::MAX] {
            let e = data
                .as_slice()
                .read_exact_at(off, &mut b)
                .expect_err("past the end");
            assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
        }
        let slice: &[u8] = &data;
        Reader::read_exact_at(&slice, 10, &mut []).expect("empty read at the end");
    }
}
