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
    /// Not an ext2/3/4 filesystem.
    #[error("{0}: not an ext4 filesystem (bad superblock magic)")]
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
