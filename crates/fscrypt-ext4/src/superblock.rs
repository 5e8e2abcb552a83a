//! The superblock (`struct ext4_super_block`, kernel `fs/ext4/ext4.h`): the
//! fields this reader uses, and the feature bits it looks at.

use std::path::Path;

use crate::error::Ext4Error;
use crate::{le16, le32};

/// ext4 superblock magic (`s_magic`).
pub const EXT4_SUPER_MAGIC: u16 = 0xEF53;
/// Byte offset of the superblock in the device.
pub const SUPERBLOCK_OFFSET: u64 = 1024;
/// Size of the on-disk superblock, bytes.
pub const SUPERBLOCK_SIZE: usize = 1024;
/// `INCOMPAT_FILETYPE`: directory entries carry a file type byte.
pub const INCOMPAT_FILETYPE: u32 = 0x0002;
/// `INCOMPAT_RECOVER`: the journal needs recovery.
pub const INCOMPAT_RECOVER: u32 = 0x0004;
/// `INCOMPAT_META_BG`: group descriptors are scattered (not supported here).
pub const INCOMPAT_META_BG: u32 = 0x0010;
/// `INCOMPAT_EXTENTS`.
pub const INCOMPAT_EXTENTS: u32 = 0x0040;
/// `INCOMPAT_64BIT`: 64-bit block numbers and group descriptors ≥ 64 bytes.
pub const INCOMPAT_64BIT: u32 = 0x0080;
/// `INCOMPAT_INLINE_DATA`.
pub const INCOMPAT_INLINE_DATA: u32 = 0x8000;
/// `INCOMPAT_ENCRYPT` ("encrypt").
pub const INCOMPAT_ENCRYPT: u32 = 0x10000;
/// `INCOMPAT_CASEFOLD`.
pub const INCOMPAT_CASEFOLD: u32 = 0x20000;
/// `COMPAT_DIR_INDEX`: htree directories.
pub const COMPAT_DIR_INDEX: u32 = 0x0020;
/// `COMPAT_STABLE_INODES` ("stable_inodes").
pub const COMPAT_STABLE_INODES: u32 = 0x0800;

/// Smallest inode record (`EXT4_GOOD_OLD_INODE_SIZE`), bytes.
pub(crate) const GOOD_OLD_INODE_SIZE: usize = 128;

/// The superblock fields this reader uses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Superblock {
    /// Total inodes.
    pub inodes_count: u32,
    /// Total blocks.
    pub blocks_count: u64,
    /// First data block (1 for 1 KiB blocks, else 0).
    pub first_data_block: u32,
    /// Block size in bytes (1024 << s_log_block_size).
    pub block_size: u32,
    /// Blocks per group.
    pub blocks_per_group: u32,
    /// Inodes per group.
    pub inodes_per_group: u32,
    /// On-disk inode record size, bytes.
    pub inode_size: u16,
    /// `s_feature_compat`.
    pub feature_compat: u32,
    /// `s_feature_incompat`.
    pub feature_incompat: u32,
    /// `s_feature_ro_compat`.
    pub feature_ro_compat: u32,
    /// `s_uuid`: the UUID used by IV_INO_LBLK_* key derivation (spec §4.5).
    pub uuid: [u8; 16],
    /// Group descriptor size, bytes (32, or `s_desc_size` with 64BIT).
    pub desc_size: u16,
    /// `s_hash_seed`: the seed of the htree directory hash.
    pub hash_seed: [u32; 4],
    /// `s_def_hash_version`: the default htree hash (0 legacy, 1 half-MD4, 2 TEA).
    pub def_hash_version: u8,
    /// `s_flags` (`EXT2_FLAGS_SIGNED_HASH` 1, `EXT2_FLAGS_UNSIGNED_HASH` 2).
    pub flags: u32,
    /// `s_volume_name`, up to its first NUL.
    pub volume_name: Vec<u8>,
}

impl Superblock {
    /// Parse the 1024 superblock bytes of the image `path` (named in errors).
    ///
    /// # Errors
    /// [`Ext4Error::NotExt4`] for a bad magic, [`Ext4Error::Unsupported`]
    /// (META_BG, block sizes above 64 KiB), [`Ext4Error::Corrupt`] for
    /// impossible sizes.
    pub fn parse(path: &Path, b: &[u8; SUPERBLOCK_SIZE]) -> Result<Superblock, Ext4Error> {
        if le16(b, 0x38) != EXT4_SUPER_MAGIC {
            return Err(Ext4Error::NotExt4(path.to_path_buf()));
        }
        let corrupt = |what: &str| Ext4Error::Corrupt {
            path: path.to_path_buf(),
            ino: None,
            what: what.into(),
        };
        let log_bs = le32(b, 0x18);
        if log_bs > 6 {
            return Err(Ext4Error::Unsupported {
                path: path.to_path_buf(),
                what: format!("block size 1024 << {log_bs}"),
            });
        }
        let block_size = 1024u32 << log_bs;
        let rev_level = le32(b, 0x4C);
        let inode_size = if rev_level == 0 { 128 } else { le16(b, 0x58) };
        if (inode_size as usize) < GOOD_OLD_INODE_SIZE
            || !inode_size.is_power_of_two()
            || u32::from(inode_size) > block_size
        {
            return Err(corrupt("bad inode size"));
        }
        let incompat = le32(b, 0x60);
        let desc_size = if incompat & INCOMPAT_64BIT != 0 {
            le16(b, 0xFE)
        } else {
            32
        };
        if desc_size < 32 || u32::from(desc_size) > block_size || !desc_size.is_power_of_two() {
            return Err(corrupt("bad group descriptor size"));
        }
        if incompat & INCOMPAT_META_BG != 0 {
            return Err(Ext4Error::Unsupported {
                path: path.to_path_buf(),
                what: "meta_bg group descriptor layout".into(),
            });
        }
        let blocks_hi = if incompat & INCOMPAT_64BIT != 0 {
            le32(b, 0x150)
        } else {
            0
        };
        let blocks_per_group = le32(b, 0x20);
        let inodes_per_group = le32(b, 0x28);
        if blocks_per_group == 0 || inodes_per_group == 0 {
            return Err(corrupt("zero blocks or inodes per group"));
        }
        let mut uuid = [0u8; 16];
        uuid.copy_from_slice(&b[0x68..0x78]);
        let hash_seed = [le32(b, 0xEC), le32(b, 0xF0), le32(b, 0xF4), le32(b, 0xF8)];
        let name = &b[0x78..0x88];
        let volume_name = name[..name.iter().position(|&c| c == 0).unwrap_or(16)].to_vec();
        Ok(Superblock {
            hash_seed,
            def_hash_version: b[0xFC],
            flags: le32(b, 0x160),
            volume_name,
            inodes_count: le32(b, 0x0),
            blocks_count: u64::from(le32(b, 0x4)) | (u64::from(blocks_hi) << 32),
            first_data_block: le32(b, 0x14),
            block_size,
            blocks_per_group,
            inodes_per_group,
            inode_size,
            feature_compat: le32(b, 0x5C),
            feature_incompat: incompat,
            feature_ro_compat: le32(b, 0x64),
            uuid,
            desc_size,
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn sb_bytes() -> [u8; 1024] {
        let mut b = [0u8; 1024];
        b[0x0..0x4].copy_from_slice(&64u32.to_le_bytes());
        b[0x4..0x8].copy_from_slice(&1024u32.to_le_bytes());
        b[0x18..0x1C].copy_from_slice(&2u32.to_le_bytes());
        b[0x20..0x24].copy_from_slice(&32768u32.to_le_bytes());
        b[0x28..0x2C].copy_from_slice(&64u32.to_le_bytes());
        b[0x38..0x3A].copy_from_slice(&EXT4_SUPER_MAGIC.to_le_bytes());
        b[0x4C..0x50].copy_from_slice(&1u32.to_le_bytes());
        b[0x58..0x5A].copy_from_slice(&256u16.to_le_bytes());
        b[0x68..0x78].copy_from_slice(&[7u8; 16]);
        b
    }

    #[test]
    fn superblock_parses_and_rejects() {
        let p = Path::new("x");
        let sb = Superblock::parse(p, &sb_bytes()).expect("valid");
        assert_eq!(sb.block_size, 4096);
        assert_eq!(sb.inode_size, 256);
        assert_eq!(sb.uuid, [7u8; 16]);
        assert_eq!(sb.desc_size, 32);
        let mut b = sb_bytes();
        b[0x38] = 0;
        assert!(matches!(
            Superblock::parse(p, &b),
            Err(Ext4Error::NotExt4(_))
        ));
        let mut b = sb_bytes();
        b[0x58] = 100;
        assert!(matches!(
            Superblock::parse(p, &b),
            Err(Ext4Error::Corrupt { .. })
        ));
        let mut b = sb_bytes();
        b[0x60] = INCOMPAT_META_BG as u8;
        assert!(matches!(
            Superblock::parse(p, &b),
            Err(Ext4Error::Unsupported { .. })
        ));
        let mut b = sb_bytes();
        b[0x18] = 40;
        assert!(matches!(
            Superblock::parse(p, &b),
            Err(Ext4Error::Unsupported { .. })
        ));
    }

    #[test]
    fn garbage_never_panics() {
        // Any superblock bytes: typed result, no panic.
        let mut seed = 0x1234_5678u32;
        for _ in 0..2000 {
            let mut b = sb_bytes();
            for _ in 0..8 {
                seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12345);
                let i = (seed >> 8) as usize % 1024;
                b[i] = (seed >> 3) as u8;
            }
            let _ = Superblock::parse(Path::new("x"), &b);
        }
    }
}
