//! Extended attributes (kernel `fs/ext4/xattr.h`, `xattr.c`): the
//! in-inode area after `i_extra_isize`, the xattr block (`i_file_acl`) and
//! values kept in EA inodes. The fscrypt context is the xattr of name index
//! 9, name `"c"`; inline data continues in `system.data`.

use crate::error::Ext4Error;
use crate::fs::Ext4;
use crate::inode::{EXT4_EA_INODE_FL, Inode, InodeKind};
use crate::reader::Reader;
use crate::superblock::GOOD_OLD_INODE_SIZE;
use crate::{le16, le32};

/// xattr name index `system.` (`EXT4_XATTR_INDEX_SYSTEM`): `system.data`
/// holds the part of an inline-data inode that does not fit `i_block`.
pub const EXT4_XATTR_INDEX_SYSTEM: u8 = 7;
/// xattr name index of the fscrypt context (`EXT4_XATTR_INDEX_ENCRYPTION`).
pub const EXT4_XATTR_INDEX_ENCRYPTION: u8 = 9;
/// xattr name of the fscrypt context.
pub const EXT4_XATTR_NAME_ENCRYPTION_CONTEXT: &[u8] = b"c";
/// Largest xattr value the kernel accepts (`XATTR_SIZE_MAX`).
pub const XATTR_SIZE_MAX: usize = 65536;
/// Most xattr entries read for one inode (in-inode area and block
/// together): more than a 64 KiB block of minimal entries could hold.
pub const MAX_XATTR_ENTRIES: usize = 8192;

const XATTR_MAGIC: u32 = 0xEA02_0000;

/// One stored extended attribute (see [`Ext4::xattrs`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Xattr {
    /// The name index (`e_name_index`): 1 `user.`, 2 POSIX access ACL,
    /// 3 POSIX default ACL, 4 `trusted.`, 6 `security.`, 7 `system.`,
    /// 8 `system.richacl`, 9 the fscrypt context, …
    pub index: u8,
    /// The name without its prefix.
    pub name: Vec<u8>,
    /// The value as stored (ext4's compact format for POSIX ACLs).
    pub value: Vec<u8>,
}

impl Xattr {
    /// The full name the kernel shows (`listxattr`), or `None` for what it
    /// never shows as an xattr: the fscrypt context (index 9),
    /// `system.data` (inline data) and unknown indexes.
    pub fn vfs_name(&self) -> Option<Vec<u8>> {
        let prefix: &[u8] = match self.index {
            1 => b"user.",
            2 if self.name.is_empty() => return Some(b"system.posix_acl_access".to_vec()),
            3 if self.name.is_empty() => return Some(b"system.posix_acl_default".to_vec()),
            4 => b"trusted.",
            6 => b"security.",
            7 if self.name == b"data" => return None,
            7 => b"system.",
            8 if self.name.is_empty() => return Some(b"system.richacl".to_vec()),
            _ => return None,
        };
        let mut n = prefix.to_vec();
        n.extend_from_slice(&self.name);
        Some(n)
    }
}

impl<R: Reader> Ext4<R> {
    /// The value of extended attribute (`index`, `name`), looked up in the
    /// in-inode area first, then in the xattr block.
    ///
    /// # Errors
    /// [`Ext4Error::Corrupt`] for malformed xattr areas,
    /// [`Ext4Error::Unsupported`] for values stored in EA inodes.
    pub fn xattr(
        &self,
        inode: &Inode,
        index: u8,
        name: &[u8],
    ) -> Result<Option<Vec<u8>>, Ext4Error> {
        let isz = inode.raw.len();
        if isz > GOOD_OLD_INODE_SIZE {
            let extra = le16(&inode.raw, 0x80) as usize;
            let start = GOOD_OLD_INODE_SIZE + extra;
            if start + 4 <= isz && le32(&inode.raw, start) == XATTR_MAGIC {
                let area = &inode.raw[start + 4..];
                if let Some(v) = self.find_xattr(inode.ino, area, 0, area, index, name)? {
                    return Ok(Some(v));
                }
            }
        }
        if inode.file_acl != 0 {
            let blk = self.read_block_vec(inode.file_acl)?;
            if le32(&blk, 0) != XATTR_MAGIC {
                return Err(self.corrupt(Some(inode.ino), "bad xattr block magic"));
            }
            return self.find_xattr(inode.ino, &blk, 32, &blk, index, name);
        }
        Ok(None)
    }

    /// Walk xattr entries in `region[start..]`; values are at offsets
    /// relative to `value_base`.
    fn find_xattr(
        &self,
        ino: u32,
        region: &[u8],
        start: usize,
        value_base: &[u8],
        index: u8,
        name: &[u8],
    ) -> Result<Option<Vec<u8>>, Ext4Error> {
        let mut off = start;
        while off + 4 <= region.len() && le32(region, off) != 0 {
            if off + 16 > region.len() {
                return Err(self.corrupt(Some(ino), "xattr entry overflows its area"));
            }
            let name_len = region[off] as usize;
            let name_index = region[off + 1];
            let value_offs = le16(region, off + 2) as usize;
            let value_inum = le32(region, off + 4);
            let value_size = le32(region, off + 8) as usize;
            let name_end = off + 16 + name_len;
            if name_end > region.len() {
                return Err(self.corrupt(Some(ino), "xattr name overflows its area"));
            }
            if name_index == index && &region[off + 16..name_end] == name {
                if value_inum != 0 {
                    return Err(Ext4Error::Unsupported {
                        path: self.path.clone(),
                        what: format!("inode {ino}: xattr value stored in an EA inode"),
                    });
                }
                let v = value_base
                    .get(value_offs..value_offs + value_size)
                    .ok_or_else(|| self.corrupt(Some(ino), "xattr value out of bounds"))?;
                return Ok(Some(v.to_vec()));
            }
            off = (name_end + 3) & !3;
        }
        Ok(None)
    }

    /// Every extended attribute of `inode`: the in-inode area first, then
    /// the xattr block, in stored order. Values kept in an EA inode
    /// (`ea_inode` feature) are read from it, at most
    /// [`XATTR_SIZE_MAX`] bytes. Name indexes are kept as stored (see
    /// [`Xattr::vfs_name`] for the names the kernel shows).
    ///
    /// # Errors
    /// [`Ext4Error::Corrupt`] for malformed xattr areas (an entry or value
    /// out of bounds, more than [`MAX_XATTR_ENTRIES`] entries, a bad EA
    /// inode), [`Ext4Error::Io`].
    pub fn xattrs(&self, inode: &Inode) -> Result<Vec<Xattr>, Ext4Error> {
        let mut out = Vec::new();
        let isz = inode.raw.len();
        if isz > GOOD_OLD_INODE_SIZE + 2 {
            let extra = le16(&inode.raw, 0x80) as usize;
            let start = GOOD_OLD_INODE_SIZE + extra;
            if start + 4 <= isz && le32(&inode.raw, start) == XATTR_MAGIC {
                let area = &inode.raw[start + 4..];
                self.list_xattrs(inode.ino, area, 0, area, &mut out)?;
            }
        }
        if inode.file_acl != 0 {
            self.check_block(inode.ino, inode.file_acl)?;
            let blk = self.read_block_vec(inode.file_acl)?;
            if le32(&blk, 0) != XATTR_MAGIC {
                return Err(self.corrupt(Some(inode.ino), "bad xattr block magic"));
            }
            self.list_xattrs(inode.ino, &blk, 32, &blk, &mut out)?;
        }
        Ok(out)
    }

    /// Append the entries of `region[start..]` to `out` (values at offsets
    /// relative to `value_base`).
    fn list_xattrs(
        &self,
        ino: u32,
        region: &[u8],
        start: usize,
        value_base: &[u8],
        out: &mut Vec<Xattr>,
    ) -> Result<(), Ext4Error> {
        let mut off = start;
        while off + 4 <= region.len() && le32(region, off) != 0 {
            if out.len() >= MAX_XATTR_ENTRIES {
                return Err(self.corrupt(Some(ino), "too many xattr entries"));
            }
            if off + 16 > region.len() {
                return Err(self.corrupt(Some(ino), "xattr entry overflows its area"));
            }
            let name_len = region[off] as usize;
            let index = region[off + 1];
            let value_offs = le16(region, off + 2) as usize;
            let value_inum = le32(region, off + 4);
            let value_size = le32(region, off + 8) as usize;
            let name_end = off + 16 + name_len;
            if name_end > region.len() {
                return Err(self.corrupt(Some(ino), "xattr name overflows its area"));
            }
            let name = region[off + 16..name_end].to_vec();
            let value = if value_inum != 0 {
                self.ea_inode_value(ino, value_inum, value_size)?
            } else {
                value_base
                    .get(value_offs..value_offs.saturating_add(value_size))
                    .ok_or_else(|| self.corrupt(Some(ino), "xattr value out of bounds"))?
                    .to_vec()
            };
            out.push(Xattr { index, name, value });
            off = (name_end + 3) & !3;
        }
        Ok(())
    }

    /// The value of an xattr of inode `ino` stored in EA inode `inum`.
    fn ea_inode_value(&self, ino: u32, inum: u32, size: usize) -> Result<Vec<u8>, Ext4Error> {
        if size > XATTR_SIZE_MAX {
            return Err(self.corrupt(Some(ino), format!("xattr value of {size} bytes")));
        }
        let ea = self.read_inode(inum)?;
        if ea.flags & EXT4_EA_INODE_FL == 0
            || ea.kind() != InodeKind::Regular
            || ea.size != size as u64
            || ea.has_inline_data()
        {
            return Err(self.corrupt(
                Some(ino),
                format!("xattr value inode {inum} is not an EA inode of {size} bytes"),
            ));
        }
        let extents = self.extents(&ea)?;
        let bs = self.sb.block_size as usize;
        let mut v = Vec::with_capacity(size);
        let mut lblk = 0u64;
        while v.len() < size {
            match self.read_logical_block(&extents, lblk)? {
                Some(b) => v.extend_from_slice(&b),
                None => v.resize(v.len() + bs, 0),
            }
            lblk += 1;
        }
        v.truncate(size);
        Ok(v)
    }

    /// The fscrypt context xattr (index 9, name `"c"`), if any (spec §11.1).
    ///
    /// # Errors
    /// As [`Ext4::xattr`].
    pub fn encryption_context(&self, inode: &Inode) -> Result<Option<Vec<u8>>, Ext4Error> {
        self.xattr(
            inode,
            EXT4_XATTR_INDEX_ENCRYPTION,
            EXT4_XATTR_NAME_ENCRYPTION_CONTEXT,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::tests::null_fs;
    use crate::inode::EXT4_N_BLOCKS_BYTES;

    /// A 256-byte inode whose in-inode xattr area holds `entries` (raw
    /// bytes after the magic) and `value` at area offset 64.
    fn xattr_inode(entries: &[u8], value: &[u8]) -> Inode {
        let mut raw = vec![0u8; 256];
        raw[0x80..0x82].copy_from_slice(&32u16.to_le_bytes());
        raw[160..164].copy_from_slice(&XATTR_MAGIC.to_le_bytes());
        raw[164..164 + entries.len()].copy_from_slice(entries);
        raw[164 + 64..164 + 64 + value.len()].copy_from_slice(value);
        Inode {
            ino: 12,
            mode: 0o100644,
            size: 0,
            flags: 0,
            blocks: 0,
            block: [0; EXT4_N_BLOCKS_BYTES],
            file_acl: 0,
            raw,
        }
    }

    fn entry(index: u8, name: &[u8], offs: u16, inum: u32, size: u32) -> Vec<u8> {
        let mut e = vec![name.len() as u8, index];
        e.extend_from_slice(&offs.to_le_bytes());
        e.extend_from_slice(&inum.to_le_bytes());
        e.extend_from_slice(&size.to_le_bytes());
        e.extend_from_slice(&[0; 4]);
        e.extend_from_slice(name);
        while e.len() % 4 != 0 {
            e.push(0);
        }
        e
    }

    #[test]
    fn xattrs_listed_and_bounded() {
        let fs = null_fs();
        let mut es = entry(1, b"a", 64, 0, 3);
        es.extend(entry(9, b"c", 64, 0, 1));
        es.extend(entry(2, b"", 64, 0, 0));
        let x = fs.xattrs(&xattr_inode(&es, b"xyz")).expect("valid");
        assert_eq!(x.len(), 3);
        assert_eq!(x[0].vfs_name().as_deref(), Some(&b"user.a"[..]));
        assert_eq!(x[0].value, b"xyz");
        assert_eq!(x[1].vfs_name(), None, "the fscrypt context is never shown");
        assert_eq!(
            x[2].vfs_name().as_deref(),
            Some(&b"system.posix_acl_access"[..])
        );
        assert!(x[2].value.is_empty());
        // A value beyond the area, a huge size, a name beyond the area.
        for es in [
            entry(1, b"a", 80, 0, 20),
            entry(1, b"a", 64, 0, u32::MAX),
            entry(1, b"a", 0xFFFF, 0, 1),
        ] {
            assert!(matches!(
                fs.xattrs(&xattr_inode(&es, b"")),
                Err(Ext4Error::Corrupt { .. })
            ));
        }
        let mut long = entry(1, b"a", 64, 0, 1);
        long[0] = 200;
        assert!(fs.xattrs(&xattr_inode(&long, b"")).is_err());
        // An EA inode value: too large, or its inode unreadable: an error.
        assert!(
            fs.xattrs(&xattr_inode(&entry(1, b"a", 0, 13, 1 << 20), b""))
                .is_err()
        );
        assert!(
            fs.xattrs(&xattr_inode(&entry(1, b"a", 0, 13, 100), b""))
                .is_err()
        );
        assert_eq!(
            Xattr {
                index: 7,
                name: b"data".to_vec(),
                value: vec![]
            }
            .vfs_name(),
            None,
            "inline data is not an xattr to restore"
        );
    }
}
