//! Extended attributes of an image object as the kernel shows them
//! (`listxattr`/`getxattr`): names with their prefixes, POSIX ACLs turned
//! from ext4's compact on-disk format into the VFS one. xattr values are
//! not encrypted by fscrypt, so they read the same with or without a key.

use crate::{Ext4, Inode, Reader};

use super::ImageError;

/// `EXT4_ACL_VERSION`: the on-disk ACL header version.
const EXT4_ACL_VERSION: u32 = 1;
/// `POSIX_ACL_XATTR_VERSION`: the VFS ACL header version.
const POSIX_ACL_XATTR_VERSION: u32 = 2;
/// `ACL_UNDEFINED_ID`: the id of entries that name no user or group.
const ACL_UNDEFINED_ID: u32 = u32::MAX;
/// Tags with an id (`ACL_USER`, `ACL_GROUP`): 8-byte entries on disk.
const ACL_USER: u16 = 0x02;
const ACL_GROUP: u16 = 0x08;
/// Tags without one (`ACL_USER_OBJ`, `ACL_GROUP_OBJ`, `ACL_MASK`,
/// `ACL_OTHER`): 4-byte entries on disk.
const SHORT_TAGS: [u16; 4] = [0x01, 0x04, 0x10, 0x20];
/// Most ACL entries (`EXT4_ACL_MAX_ENTRIES` is far lower; a bound only).
const MAX_ACL_ENTRIES: usize = 32768;

/// Turn an ext4 on-disk POSIX ACL (`ext4_acl_header` version 1, then
/// entries of 4 bytes for tags without an id and 8 bytes for `ACL_USER` /
/// `ACL_GROUP`, `fs/ext4/acl.c`) into the VFS xattr format
/// (`posix_acl_xattr_header` version 2, then 8-byte entries, ids of
/// short entries `ACL_UNDEFINED_ID`).
///
/// # Errors
/// A one-line reason for a malformed value.
pub fn ext4_acl_to_vfs(disk: &[u8]) -> Result<Vec<u8>, String> {
    if disk.len() < 4 || u32::from_le_bytes(disk[..4].try_into().expect("4")) != EXT4_ACL_VERSION {
        return Err("bad POSIX ACL header".into());
    }
    let mut out = POSIX_ACL_XATTR_VERSION.to_le_bytes().to_vec();
    let mut off = 4;
    let mut n = 0usize;
    while off < disk.len() {
        n += 1;
        if n > MAX_ACL_ENTRIES || off + 4 > disk.len() {
            return Err("truncated POSIX ACL entry".into());
        }
        let tag = u16::from_le_bytes([disk[off], disk[off + 1]]);
        let perm = u16::from_le_bytes([disk[off + 2], disk[off + 3]]);
        let id = match tag {
            ACL_USER | ACL_GROUP => {
                let b = disk
                    .get(off + 4..off + 8)
                    .ok_or("truncated POSIX ACL entry")?;
                off += 8;
                u32::from_le_bytes(b.try_into().expect("4"))
            }
            t if SHORT_TAGS.contains(&t) => {
                off += 4;
                ACL_UNDEFINED_ID
            }
            t => return Err(format!("unknown POSIX ACL tag {t:#x}")),
        };
        out.extend_from_slice(&tag.to_le_bytes());
        out.extend_from_slice(&perm.to_le_bytes());
        out.extend_from_slice(&id.to_le_bytes());
    }
    Ok(out)
}

/// xattrs as the kernel shows them: `(full name, value)`, and reasons for
/// those that cannot be shown.
pub type VfsXattrs = (Vec<(Vec<u8>, Vec<u8>)>, Vec<String>);

/// The xattrs of `inode` as the kernel shows them: `(full name, value)`
/// in stored order, without the fscrypt context and `system.data`; plus a
/// reason for each stored xattr that cannot be shown (a malformed ACL, an
/// unknown name index).
///
/// # Errors
/// [`ImageError::Ext4`] for a malformed xattr area (then none is known).
pub fn vfs_xattrs<R: Reader>(fs: &Ext4<R>, inode: &Inode) -> Result<VfsXattrs, ImageError> {
    let mut out = Vec::new();
    let mut errors = Vec::new();
    for x in fs.xattrs(inode)? {
        let Some(name) = x.vfs_name() else {
            if !matches!(x.index, 7 | 9) {
                errors.push(format!(
                    "xattr with unknown name index {} not restored",
                    x.index
                ));
            }
            continue;
        };
        let value = if matches!(x.index, 2 | 3) {
            match ext4_acl_to_vfs(&x.value) {
                Ok(v) => v,
                Err(e) => {
                    errors.push(format!("{}: {e}", String::from_utf8_lossy(&name)));
                    continue;
                }
            }
        } else {
            x.value
        };
        out.push((name, value));
    }
    Ok((out, errors))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acl_conversion() {
        // user::rw- user:1234:rw- group::r-- mask::rw- other::---
        let mut d = 1u32.to_le_bytes().to_vec();
        d.extend_from_slice(&[1, 0, 6, 0]);
        d.extend_from_slice(&[2, 0, 6, 0]);
        d.extend_from_slice(&1234u32.to_le_bytes());
        d.extend_from_slice(&[4, 0, 4, 0]);
        d.extend_from_slice(&[0x10, 0, 6, 0]);
        d.extend_from_slice(&[0x20, 0, 0, 0]);
        let v = ext4_acl_to_vfs(&d).expect("valid");
        assert_eq!(v.len(), 4 + 5 * 8);
        assert_eq!(&v[..4], &2u32.to_le_bytes());
        assert_eq!(&v[4..12], &[1, 0, 6, 0, 0xff, 0xff, 0xff, 0xff]);
        assert_eq!(&v[12..20], &[2, 0, 6, 0, 0xd2, 0x04, 0, 0]);
        assert!(ext4_acl_to_vfs(&d[..d.len() - 2]).is_err());
        assert!(ext4_acl_to_vfs(&d[..10]).is_err());
        assert!(ext4_acl_to_vfs(&[2, 0, 0, 0]).is_err());
        let mut bad = d.clone();
        bad[4] = 0x40;
        assert!(ext4_acl_to_vfs(&bad).is_err());
        assert_eq!(
            ext4_acl_to_vfs(&1u32.to_le_bytes()).expect("empty"),
            2u32.to_le_bytes()
        );
    }
}
