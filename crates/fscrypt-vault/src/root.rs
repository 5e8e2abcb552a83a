//! The filesystem root: the root directory's metadata file
//! ([`DIR_META_NAME`]), the first object of a new vault, written into the
//! backing directory by [`create_root`].

use std::fs::OpenOptions;
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;

use fscrypt::{ContextV2, PolicyV2};

use crate::error::Error;
use crate::layout::{DIR_META_NAME, Format, HEADER_USED, Header, HeaderKind};

/// Writes the root directory's metadata file (a fresh context of `policy`,
/// mode 0600, synced) into an existing, empty backing directory, making a
/// vault of the latest format ([`Format::LATEST`], format 3).
///
/// # Errors
/// [`Error::RootExists`] if it already has one, [`Error::Random`],
/// [`Error::CreateRoot`] on an I/O error.
pub fn create_root(backing_dir: &Path, policy: &PolicyV2) -> Result<(), Error> {
    create_root_with(backing_dir, policy, Format::LATEST)
}

/// [`create_root`] for a vault of the given `format` (format 1 only for
/// tests and fixtures: `init` always makes the latest format).
///
/// # Errors
/// As [`create_root`].
pub fn create_root_with(
    backing_dir: &Path,
    policy: &PolicyV2,
    format: Format,
) -> Result<(), Error> {
    let mut nonce = [0u8; 16];
    fscrypt_crypto::random_bytes(&mut nonce).map_err(Error::Random)?;
    let h = Header {
        format,
        kind: HeaderKind::Directory,
        context: ContextV2 {
            policy: *policy,
            nonce,
        },
        size: 0,
    };
    let path = backing_dir.join(DIR_META_NAME);
    let failed = |source: io::Error| Error::CreateRoot {
        path: path.clone(),
        source,
    };
    let f = match OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            return Err(Error::RootExists(backing_dir.to_path_buf()));
        }
        Err(e) => return Err(failed(e)),
    };
    f.write_all_at(&h.to_bytes(), 0).map_err(failed)?;
    f.sync_all().map_err(failed)?;
    Ok(())
}

/// The format of the vault in `backing_dir`: the version byte of its root
/// `fscrypt.dir` (which the mount and `fsck` check in full).
///
/// # Errors
/// The file cannot be read (`NotFound`: not a vault), or its header is
/// damaged (`InvalidData`).
pub fn read_format(backing_dir: &Path) -> io::Result<Format> {
    use std::io::Read;
    let f = OpenOptions::new()
        .read(true)
        .custom_flags((rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NONBLOCK).bits() as i32)
        .open(backing_dir.join(DIR_META_NAME))?;
    let mut b = Vec::with_capacity(HEADER_USED);
    f.take(HEADER_USED as u64).read_to_end(&mut b)?;
    Header::parse_format(&b, HeaderKind::Directory)
        .map_err(|c| io::Error::new(io::ErrorKind::InvalidData, c.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_metadata_file_once() {
        let t = test_support::TempDir::new("vault-root");
        let dir = t.path().to_path_buf();
        let policy = PolicyV2::new_default(fscrypt::KeyIdentifier([7; 16]));
        create_root(&dir, &policy).unwrap();
        let bytes = std::fs::read(dir.join(DIR_META_NAME)).unwrap();
        assert_eq!(bytes.len(), crate::layout::HEADER_USED);
        let h = Header::parse(&bytes, HeaderKind::Directory).unwrap();
        assert_eq!(h.format, Format::LATEST);
        assert_eq!(read_format(&dir).unwrap(), Format::LATEST);
        assert_eq!(h.context.policy, policy);
        let mode = std::fs::metadata(dir.join(DIR_META_NAME))
            .unwrap()
            .permissions();
        assert_eq!(
            std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777,
            0o600
        );
        assert!(matches!(
            create_root(&dir, &policy),
            Err(Error::RootExists(_))
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
