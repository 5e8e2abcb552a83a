//! The reader's error type: one variant per cause, each naming the image
//! (and the inode, where one is concerned).

use std::path::PathBuf;

/// Errors of the ext4 reader.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Ext4Error {
    /// Reading the device failed.
    #[error("{path}: read error at byte {offset}: {source}")]
    Io {
        /// The device.
        path: PathBuf,
        /// Byte offset of the failed read.
        offset: u64,
        /// OS error.
        source: std::io::Error,
    },
    /// The image could not be opened (missing, not readable, a
    /// directory): nothing was read. The message says what to give.
    #[error("{}", open_message(path, error))]
    Open {
        /// The path given.
        path: PathBuf,
        /// OS error of `open(2)` (or `EISDIR` for a directory); in the
        /// message, not a separate cause, so that it is not printed twice.
        error: std::io::Error,
    },
    /// Not an ext2/3/4 filesystem: no ext4 superblock magic at byte
    /// 1024+0x38, or the file is too short to hold a superblock.
    #[error(
        "{0} is not an ext4 filesystem (no ext4 superblock at byte 1024): give an ext4 image file or block device"
    )]
    NotExt4(PathBuf),
    /// A feature this reader does not handle.
    #[error("{path}: unsupported ext4 layout: {what}")]
    Unsupported {
        /// The device.
        path: PathBuf,
        /// What.
        what: String,
    },
    /// Inconsistent on-disk data.
    #[error("{path}: corrupt ext4 metadata{}: {what}", ino.map(|i| format!(" (inode {i})")).unwrap_or_default())]
    Corrupt {
        /// The device.
        path: PathBuf,
        /// The inode concerned, if any.
        ino: Option<u32>,
        /// What is wrong.
        what: String,
    },
}

/// The one-line message of [`Ext4Error::Open`]: what went wrong and what to
/// give instead.
fn open_message(path: &std::path::Path, source: &std::io::Error) -> String {
    let p = path.display();
    match source.kind() {
        std::io::ErrorKind::NotFound => {
            format!("{p} does not exist: give the path of an ext4 image file or block device")
        }
        std::io::ErrorKind::PermissionDenied => {
            format!("{p}: permission denied: run as a user who may read it (e.g. with sudo)")
        }
        std::io::ErrorKind::IsADirectory => {
            format!("{p} is a directory: give an ext4 image file or block device")
        }
        _ => format!("{p}: cannot open: {source}"),
    }
}
