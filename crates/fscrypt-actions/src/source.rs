//! Where a filesystem's google/fscrypt metadata is read from: the small
//! trait every metadata read of the actions goes through. Today one
//! implementation, the mount's `.fscrypt` directory
//! ([`fscrypt_metadata::store::Store`], which applies the context's
//! [`fscrypt_metadata::trust::Trust`] to every directory and file); a
//! filesystem image's metadata is the next.

use std::path::Path;

use fscrypt_metadata::Error;
use fscrypt_metadata::proto::{PolicyData, ProtectorData};
use fscrypt_metadata::store::Store;

/// Read access to one filesystem's metadata (google/fscrypt's
/// `filesystem.Mount` reads).
pub trait Source {
    /// The mount point the metadata belongs to.
    fn mount(&self) -> &Path;
    /// Whether there is metadata at all (a `.fscrypt`).
    fn exists(&self) -> bool;
    /// Checks the metadata is set up and safe to read (directory owners,
    /// modes, no symlinked subdirectories).
    ///
    /// # Errors
    /// [`Error::NotSetup`], [`Error::Insecure`], [`Error::UnsafeDirectory`].
    fn check_setup(&self) -> Result<(), Error>;
    /// Protector `d`, a regular file of a trusted owner.
    ///
    /// # Errors
    /// Not found, untrusted, corrupt, unreadable.
    fn protector(&self, d: &str) -> Result<ProtectorData, Error>;
    /// Whether protector `d` is a regular file of a trusted owner here
    /// (not a link to another filesystem).
    fn has_protector(&self, d: &str) -> bool;
    /// The text of protector `d`'s link file, if there is one.
    ///
    /// # Errors
    /// Untrusted, not a regular file, unreadable.
    fn link(&self, d: &str) -> Result<Option<String>, Error>;
    /// Policy `d`.
    ///
    /// # Errors
    /// Not found, untrusted, corrupt, unreadable.
    fn policy(&self, d: &str) -> Result<PolicyData, Error>;
    /// The protector descriptors (files of trusted owners).
    ///
    /// # Errors
    /// The directory cannot be listed.
    fn protectors(&self) -> Result<Vec<String>, Error>;
    /// The descriptors of the protectors linked from here (link files of
    /// trusted owners naming another filesystem).
    ///
    /// # Errors
    /// The directory cannot be listed.
    fn linked_protectors(&self) -> Result<Vec<String>, Error>;
    /// The policy descriptors (files of trusted owners).
    ///
    /// # Errors
    /// The directory cannot be listed.
    fn policies(&self) -> Result<Vec<String>, Error>;
}

impl Source for Store {
    fn mount(&self) -> &Path {
        Store::mount(self)
    }
    fn exists(&self) -> bool {
        Store::exists(self)
    }
    fn check_setup(&self) -> Result<(), Error> {
        Store::check_setup(self)
    }
    fn protector(&self, d: &str) -> Result<ProtectorData, Error> {
        Store::protector(self, d)
    }
    fn has_protector(&self, d: &str) -> bool {
        Store::has_protector(self, d)
    }
    fn link(&self, d: &str) -> Result<Option<String>, Error> {
        Store::link(self, d)
    }
    fn policy(&self, d: &str) -> Result<PolicyData, Error> {
        Store::policy(self, d)
    }
    fn protectors(&self) -> Result<Vec<String>, Error> {
        Store::protectors(self)
    }
    fn linked_protectors(&self) -> Result<Vec<String>, Error> {
        Store::linked_protectors(self)
    }
    fn policies(&self) -> Result<Vec<String>, Error> {
        Store::policies(self)
    }
}
