//! The filesystem root: the root directory's metadata file
//! ([`DIR_META_NAME`]), the first object of a new vault, written into the
//! backing directory by [`create_root`].

use std::fs::OpenOptions;
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;

use fscrypt::{Context, Policy, PolicyV2};

use crate::error::Error;
use crate::layout::{CONTEXT_SIZE, DIR_META_NAME, Header, HeaderKind};

/// The 40 bytes of a fresh v2 context of `policy` with `nonce` (spec §3.2).
pub fn context_bytes(policy: &PolicyV2, nonce: [u8; 16]) -> [u8; CONTEXT_SIZE] {
    let c = Context::new(&Policy::V2(*policy), nonce);
    let mut out = [0u8; CONTEXT_SIZE];
    out.copy_from_slice(&c.to_bytes());
    out
}

/// Writes the root directory's metadata file (a fresh context of `policy`,
/// mode 0600, synced) into an existing, empty backing directory.
///
/// # Errors
/// [`Error::RootExists`] if it already has one, [`Error::Random`],
/// [`Error::CreateRoot`] on an I/O error.
pub fn create_root(backing_dir: &Path, policy: &PolicyV2) -> Result<(), Error> {
    let mut nonce = [0u8; 16];
    fscrypt_crypto::random_bytes(&mut nonce).map_err(Error::Random)?;
    let h = Header {
        kind: HeaderKind::Directory,
        context: context_bytes(policy, nonce),
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
        match Context::parse(&h.context).unwrap() {
            Context::V2(c) => assert_eq!(c.policy, policy),
            other => panic!("{other:?}"),
        }
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
