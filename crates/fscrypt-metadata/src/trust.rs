//! Whose metadata is believed: the one place that decides whether a
//! `.fscrypt` directory or a protector, policy or link file may be used,
//! from the uid that owns it.
//!
//! With the world-writable setup mode (`policies/` and `protectors/` are
//! 01777) any local user can create files there; a planted login protector
//! for another uid, a flood of policies or a protector with ruinous Argon2
//! costs must not change what that other user sees or how fast they log in.
//! The rule is google/fscrypt's since its 2022 fixes (CVE-2022-25326,
//! -25327, -25328; `filesystem.go` `checkOwnership`/`CheckSetup`/
//! `readMetadataFileSafe`, `actions/context.go` `newContextFromUser`,
//! `pam_fscrypt/run_fscrypt.go` `loginProtector`):
//!
//! * a file or directory owned by root (uid 0) is always trusted;
//! * otherwise it must be owned by the trusted user, unless the config's
//!   `allow_cross_user_metadata` is true (then every owner is trusted);
//! * the command-line tools trust the caller (effective uid); run as root
//!   they trust every owner ([`Trust::for_caller`]);
//! * the search for a user's login protector, and everything the PAM module
//!   reads at login, trusts that user, even when root runs it
//!   ([`Trust::for_login`], [`Trust::login_of`]), so the CLI and the module
//!   see the same protector.
//!
//! What happens to an untrusted object is [`crate::store::Store`]'s: files
//! are skipped in listings and refused when named
//! ([`crate::Error::Untrusted`]); a metadata directory is refused
//! ([`crate::Error::UnsafeDirectory`]).

use std::path::Path;

use crate::Error;

/// Whose metadata files and directories are trusted (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Trust {
    /// The trusted non-root uid; `None` trusts every owner.
    trusted_uid: Option<u32>,
    /// The config's `allow_cross_user_metadata`.
    allow_cross_user: bool,
}

impl Trust {
    /// Trusts every owner, as `allow_cross_user_metadata: true` does (also
    /// for [`Trust::login_of`]).
    pub const fn everyone() -> Trust {
        Trust {
            trusted_uid: None,
            allow_cross_user: true,
        }
    }

    /// Trusts root and `uid` only, unless `allow_cross_user` (the config's
    /// `allow_cross_user_metadata`), which trusts every owner.
    pub const fn user(uid: u32, allow_cross_user: bool) -> Trust {
        Trust {
            trusted_uid: if allow_cross_user { None } else { Some(uid) },
            allow_cross_user,
        }
    }

    /// The command-line tools' trust: the effective uid, or every owner
    /// when that is root or `allow_cross_user` (google/fscrypt's
    /// `newContextFromUser`).
    pub fn for_caller(allow_cross_user: bool) -> Trust {
        let euid = rustix::process::geteuid();
        if euid.is_root() {
            Trust {
                trusted_uid: None,
                allow_cross_user,
            }
        } else {
            Trust::user(euid.as_raw(), allow_cross_user)
        }
    }

    /// The trust of everything done for `uid`'s login (the PAM module, and
    /// the search for `uid`'s login protector from the CLI): root and `uid`
    /// only, even when run as root, unless `allow_cross_user`
    /// (google/fscrypt's `pam_fscrypt` `loginProtector`).
    pub const fn for_login(uid: u32, allow_cross_user: bool) -> Trust {
        Trust::user(uid, allow_cross_user)
    }

    /// [`Trust::for_login`] of `uid` with this trust's `allow_cross_user`.
    pub const fn login_of(self, uid: u32) -> Trust {
        Trust::for_login(uid, self.allow_cross_user)
    }

    /// The trusted non-root uid (`None`: every owner is trusted).
    pub const fn trusted_uid(self) -> Option<u32> {
        self.trusted_uid
    }

    /// Whether an object owned by `owner` is trusted.
    pub const fn trusts(self, owner: u32) -> bool {
        match self.trusted_uid {
            None => true,
            Some(uid) => owner == 0 || owner == uid,
        }
    }

    /// Checks a metadata file owned by `owner`.
    ///
    /// # Errors
    /// [`Error::Untrusted`] when it is not trusted.
    pub fn check_file(self, path: &Path, owner: u32) -> Result<(), Error> {
        match self.trusted_uid {
            Some(trusted) if !self.trusts(owner) => Err(Error::Untrusted {
                path: path.to_path_buf(),
                owner,
                trusted,
            }),
            _ => Ok(()),
        }
    }

    /// Checks a metadata directory (or the mount's root) owned by `owner`.
    ///
    /// # Errors
    /// [`Error::UnsafeDirectory`] when it is not trusted.
    pub fn check_dir(self, path: &Path, owner: u32) -> Result<(), Error> {
        match self.trusted_uid {
            Some(trusted) if !self.trusts(owner) => Err(Error::UnsafeDirectory {
                path: path.to_path_buf(),
                owner,
                trusted,
            }),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owners() {
        let t = Trust::user(1000, false);
        assert!(t.trusts(0) && t.trusts(1000) && !t.trusts(1001));
        assert!(t.check_file(Path::new("/x"), 1001).is_err());
        assert!(t.check_dir(Path::new("/x"), 1001).is_err());
        assert!(t.check_file(Path::new("/x"), 0).is_ok());
        let all = Trust::user(1000, true);
        assert!(all.trusts(1001) && all.trusted_uid().is_none());
        assert!(Trust::everyone().trusts(4242));
        // The login search trusts the user, even from an all-trusting root
        // (what for_caller gives root without allow_cross_user).
        let root = Trust {
            trusted_uid: None,
            allow_cross_user: false,
        };
        assert!(root.trusts(1001));
        assert!(!root.login_of(1000).trusts(1001));
        assert!(Trust::everyone().login_of(1000).trusts(1001));
        let login = Trust::user(5, false).login_of(1000);
        assert!(login.trusts(1000) && !login.trusts(5));
        assert!(Trust::user(5, true).login_of(1000).trusts(5));
    }
}
