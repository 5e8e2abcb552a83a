//! fscrypt-actions: the google/fscrypt-compatible flow as a library, used
//! by the CLI (`fscrypt-rs setup|encrypt|unlock|lock|status|metadata`) and
//! the PAM module (`pam_fscrypt_rs.so`), as google/fscrypt's `actions/`
//! package serves its `fscrypt` tool and `pam_fscrypt`. Nothing here
//! prints or prompts: secrets come in as values (or through a callback
//! asked at the point of the flow that needs them, [`metadata::GetSecret`]), results go out as
//! reports the front ends render, failures as [`Error`] (one variant per
//! cause; the CLI maps them to exit statuses in one table).
//!
//! | module | concern |
//! |---|---|
//! | [`context`] | one [`Context`] per action: config, mount table (read once), trusted user, target user |
//! | [`keyring`] | the one place choosing the filesystem or the user keyring for v1 keys (`use_fs_keyring_for_v1_policies`) |
//! | [`source`] | the trait metadata reads go through (a mount's `.fscrypt` today) |
//! | [`protector`] | locate (links followed everywhere), choose, open, re-wrap |
//! | [`policy`] | kernel policy of a policy file; unlock, lock with the open-file report, purge (every key of a filesystem), status |
//! | [`filesystems`] | the mounted filesystems that can be encrypted and their setup state (`status` without a path) |
//! | [`create`] | encrypting a directory: protector, policy, key, policy set, undone on failure |
//! | [`login`] | login protectors at login: unlock, lock, re-wrap (the PAM module's flow) |
//! | [`metadata`] | metadata management: create, destroy, link and re-key protectors and policies; dump (`fscrypt-rs metadata`) |
//! | [`sealed`] | sealed protectors on kernel directories: a `custom_passphrase` protector whose passphrase a TPM2, PKCS#11 token or FIDO2 authenticator releases; the sidecar keeping the sealed record |
//! | [`offline`] | unlocking an unmounted filesystem (an image) from its metadata given as bytes: choose, open, unwrap every policy |
//! | [`setup`] | the global config (calibrated costs) and a filesystem's `.fscrypt` (`fscrypt-rs setup`) |
//! | [`convert`] | in-place, resumable conversion of a non-empty directory (`encrypt --convert`) |
//! | [`pam_auth`] | checking a login password through PAM (`dlopen`ed libpam) |
//! | [`error`] | [`Error`] |
//!
//! The facts (formats, rules, algorithms) were learnt from google/fscrypt's
//! sources (Apache-2.0); no code was copied.

pub mod context;
pub mod convert;
pub mod create;
pub mod error;
pub mod filesystems;
pub mod keyring;
pub mod login;
pub mod metadata;
pub mod offline;
pub mod pam_auth;
pub mod policy;
pub mod protector;
pub mod sealed;
pub mod setup;
pub mod source;

pub use context::{Context, User};
pub use error::{Error, Result};
