//! fscrypt-ext4: offline, read-only access to kernel-encrypted ext4 images
//! and block devices — a small ext4 reader, just enough to see what the
//! kernel stored for encrypted files (spec §11.1), and the image tools over
//! it (list, resolve, read, extract with the keys given). No kernel module
//! is involved and nothing is ever written to the image.
//!
//! Every on-disk value is bounds-checked; bad data gives an [`Ext4Error`]
//! (or an [`image::ImageError`]), never a panic or an unbounded loop. The
//! layouts follow the ext4 disk format documentation
//! (`Documentation/filesystems/ext4/`) and the kernel structures named
//! below. One module per concern, as in the `ext4-view` crate:
//!
//! | module | on-disk structure / concern | follows (kernel) |
//! | --- | --- | --- |
//! | [`reader`] | [`Reader`]: bytes at an offset, from a [`std::fs::File`] or memory | — |
//! | [`error`] | [`Ext4Error`] | — |
//! | [`fs`] | [`Ext4`]: an opened image, block reads | — |
//! | [`superblock`] | `struct ext4_super_block`, feature bits | `fs/ext4/ext4.h` |
//! | [`block_group`] | `struct ext4_group_desc` (inode table location) | `fs/ext4/ext4.h` |
//! | [`inode`] | `struct ext4_inode`, `i_flags`, times, owners | `fs/ext4/ext4.h` |
//! | [`extent`] | extent trees (`ext4_extent_header`/`_idx`/`ext4_extent`), [`Extent`] runs | `fs/ext4/ext4_extents.h`, `extents.c` |
//! | [`block_map`] | legacy direct/indirect block maps | `fs/ext4/indirect.c` |
//! | [`dir`] | `struct ext4_dir_entry_2`, linear and htree leaf blocks | `fs/ext4/ext4.h`, `namei.c` |
//! | [`dirhash`] | the htree name hash (legacy, half-MD4, TEA) | `fs/ext4/hash.c` |
//! | [`xattr`] | `ext4_xattr_entry`: in-inode area, xattr block, EA inodes | `fs/ext4/xattr.h`, `xattr.c` |
//! | [`inline`] | inline data (`i_block` + `system.data`), fast symlinks | `fs/ext4/inline.c` |
//! | [`image::file`] | the one read path of file contents: [`image::file::FileData::read_at`] | `fs/ext4/inode.c`, `inline.c`; `fs/crypto/bio.c` |
//! | [`image`] | keys from contexts, decrypted and no-key names, contents, extract | `fs/crypto/` (via `fscrypt`) |
//!
//! Not handled: `meta_bg`, journal replay (an image needing recovery is
//! refused by [`image::Image`]), checksums (not verified).

pub mod block_group;
pub mod block_map;
pub mod dir;
pub mod dirhash;
pub mod error;
pub mod extent;

pub mod fs;
pub mod image;
pub mod inline;
pub mod inode;
pub mod reader;
pub mod superblock;
pub mod xattr;

pub use dir::DirEntry;
pub use error::Ext4Error;
pub use extent::Extent;
pub use fs::Ext4;
pub use inode::{
    EXT4_CASEFOLD_FL, EXT4_EA_INODE_FL, EXT4_ENCRYPT_FL, EXT4_EXTENTS_FL, EXT4_INDEX_FL,
    EXT4_INLINE_DATA_FL, EXT4_N_BLOCKS_BYTES, Inode, InodeKind,
};
pub use reader::Reader;
pub use superblock::{
    COMPAT_DIR_INDEX, COMPAT_STABLE_INODES, EXT4_SUPER_MAGIC, INCOMPAT_64BIT, INCOMPAT_CASEFOLD,
    INCOMPAT_ENCRYPT, INCOMPAT_EXTENTS, INCOMPAT_FILETYPE, INCOMPAT_INLINE_DATA, INCOMPAT_META_BG,
    INCOMPAT_RECOVER, Superblock,
};
pub use xattr::{
    EXT4_XATTR_INDEX_ENCRYPTION, EXT4_XATTR_INDEX_SYSTEM, EXT4_XATTR_NAME_ENCRYPTION_CONTEXT,
    MAX_XATTR_ENTRIES, XATTR_SIZE_MAX, Xattr,
};

/// The little-endian `u16` at `off` of `b` (callers bound `off`).
pub(crate) fn le16(b: &[u8], off: usize) -> u16 {
    u16::from_le_bytes([b[off], b[off + 1]])
}

/// The little-endian `u32` at `off` of `b` (callers bound `off`).
pub(crate) fn le32(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes([b[off], b[off + 1], b[off + 2], b[off + 3]])
}
