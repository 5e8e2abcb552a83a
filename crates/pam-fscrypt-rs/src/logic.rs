//! What the module does, without FFI: the module's options, the context
//! of a login ([`fscrypt_actions::Context::for_login`]: the config named
//! by `config=`, the login filesystem `root_mnt=`, the user's trust and
//! keyrings), the login flow itself ([`fscrypt_actions::login`]: unlock,
//! lock, re-wrap, each filesystem within a time bound, only filesystem
//! types that can hold fscrypt metadata), and the count of the user's
//! open sessions. Errors are one-line strings without secrets (they go to
//! syslog).

use std::io::{Read, Seek, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use fscrypt_actions::{Context, User, login};

pub use fscrypt_actions::login::Outcome;

/// The config the module reads: never `$FSCRYPT_CONF` (the environment of
/// `su` is the caller's), only this path or the `config=` option.
pub const CONFIG_PATH: &str = "/etc/fscrypt.conf";

/// Module options from the PAM configuration line.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// `lock_policies`: lock the directories at the user's last session close.
    pub lock_policies: bool,
    /// `root_mnt=PATH`: where login protectors live (default `/`).
    pub root_mnt: Option<PathBuf>,
    /// `debug`: log each step.
    pub debug: bool,
    /// `config=PATH`: the google/fscrypt config (default
    /// [`CONFIG_PATH`]); its `allow_cross_user_metadata` and
    /// `use_fs_keyring_for_v1_policies` are used.
    pub config: Option<PathBuf>,
}

impl Options {
    /// Parses the module arguments; unknown ones are returned for a warning.
    pub fn parse<'a>(args: impl Iterator<Item = &'a str>) -> (Options, Vec<String>) {
        let mut o = Options::default();
        let mut unknown = Vec::new();
        for a in args {
            match a {
                "lock_policies" => o.lock_policies = true,
                "debug" => o.debug = true,
                _ => match (a.strip_prefix("root_mnt="), a.strip_prefix("config=")) {
                    (Some(p), _) if !p.is_empty() => o.root_mnt = Some(PathBuf::from(p)),
                    (_, Some(p)) if !p.is_empty() => o.config = Some(PathBuf::from(p)),
                    _ => unknown.push(a.to_string()),
                },
            }
        }
        (o, unknown)
    }

    fn root(&self) -> PathBuf {
        self.root_mnt.clone().unwrap_or_else(|| PathBuf::from("/"))
    }

    /// The context of `uid`'s login: the config at `config=` (default
    /// [`CONFIG_PATH`]), which decides `allow_cross_user_metadata` and
    /// where v1 keys go (`use_fs_keyring_for_v1_policies`), as for the
    /// CLI; login protectors on `root_mnt=`.
    ///
    /// # Errors
    /// The uid has no user.
    pub fn context(&self, uid: u32) -> Result<Context, String> {
        let user = User::of_uid(uid).map_err(|e| e.to_string())?;
        let config = self
            .config
            .clone()
            .unwrap_or_else(|| PathBuf::from(CONFIG_PATH));
        Ok(Context::for_login(&user, &config, &self.root()))
    }
}

/// Directory of the per-user session counts.
pub const COUNT_DIR: &str = "/run/fscrypt-rs";

/// The uid of `user`.
///
/// # Errors
/// Unknown user.
pub fn uid_of(user: &str) -> Result<u32, String> {
    match nix::unistd::User::from_name(user) {
        Ok(Some(u)) => Ok(u.uid.as_raw()),
        Ok(None) => Err("unknown user".into()),
        Err(e) => Err(format!("user lookup failed: {e}")),
    }
}

/// Whether `uid` has a login protector (only one owned by root or the
/// user is considered, unless `allow_cross_user_metadata`).
///
/// # Errors
/// The login filesystem's metadata cannot be read, or does not answer in
/// time.
pub fn has_login_protector(o: &Options, uid: u32) -> Result<bool, String> {
    let ctx = o.context(uid)?;
    login::login_protector(&ctx, uid)
        .map(|p| p.is_some())
        .map_err(|e| e.to_string())
}

/// `MOUNT:ID` of `uid`'s login protector (as `fscrypt-rs metadata
/// --protector` takes it), or `None` when the user has none.
///
/// # Errors
/// As [`has_login_protector`].
pub fn login_protector_ref(o: &Options, uid: u32) -> Result<Option<String>, String> {
    let ctx = o.context(uid)?;
    login::login_protector(&ctx, uid)
        .map(|p| {
            p.map(|(store, p)| format!("{}:{}", store.mount().display(), p.protector_descriptor))
        })
        .map_err(|e| e.to_string())
}

/// The log line when a password changes without the old one (as when root
/// sets it): what to run for the login protector `protector` (`MOUNT:ID`).
pub fn rewrap_advice(user: &str, protector: &str) -> String {
    format!(
        "cannot re-wrap {user}'s login protector without the old password (as when root sets \
         it); run `fscrypt-rs metadata change-passphrase --protector {protector}`"
    )
}

/// The debug log line after a login: `n` policies unlocked for `user`.
pub fn unlocked_line(n: usize, user: &str) -> String {
    match n {
        1 => format!("1 policy unlocked for {user}"),
        n => format!("{n} policies unlocked for {user}"),
    }
}

/// The debug log line after the last logout: `n` policies locked for
/// `user`.
pub fn locked_line(n: usize, user: &str) -> String {
    match n {
        1 => format!("1 policy locked for {user}"),
        n => format!("{n} policies locked for {user}"),
    }
}

/// Unlocks every policy the user's login protector protects with the login
/// password.
///
/// # Errors
/// The protector does not open (wrong password) or cannot be read.
pub fn unlock(o: &Options, uid: u32, password: &[u8]) -> Result<Outcome, String> {
    login::unlock(&o.context(uid)?, uid, password).map_err(|e| e.to_string())
}

/// Locks every policy of the user's login protector.
///
/// # Errors
/// The protector cannot be read.
pub fn lock(o: &Options, uid: u32) -> Result<Outcome, String> {
    login::lock(&o.context(uid)?, uid).map_err(|e| e.to_string())
}

/// Re-wraps the user's login protector from `old` to `new` password:
/// whether there was one.
///
/// # Errors
/// Wrong old password, unwritable metadata.
pub fn rewrap(o: &Options, uid: u32, old: &[u8], new: &[u8]) -> Result<bool, String> {
    login::rewrap(&o.context(uid)?, uid, old, new).map_err(|e| e.to_string())
}

/// Adds `delta` to the user's session count (a file under [`COUNT_DIR`],
/// locked while updated) and returns the new count (never below 0).
///
/// # Errors
/// The file cannot be created or locked.
pub fn adjust_count(uid: u32, delta: i64) -> Result<i64, String> {
    std::fs::create_dir_all(COUNT_DIR).map_err(|e| format!("{COUNT_DIR}: {e}"))?;
    let path = Path::new(COUNT_DIR).join(format!("{uid}.count"));
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    nix::fcntl::Flock::lock(
        f.try_clone().map_err(|e| e.to_string())?,
        nix::fcntl::FlockArg::LockExclusive,
    )
    .map(|lock| {
        let mut s = String::new();
        let _ = f.read_to_string(&mut s);
        let n = (s.trim().parse::<i64>().unwrap_or(0) + delta).max(0);
        let _ = f.set_len(0);
        let _ = f.rewind();
        let _ = write!(f, "{n}");
        drop(lock);
        n
    })
    .map_err(|(_, e)| format!("lock {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_lines_count_policies_in_good_english() {
        assert_eq!(unlocked_line(1, "ann"), "1 policy unlocked for ann");
        assert_eq!(unlocked_line(2, "ann"), "2 policies unlocked for ann");
        assert_eq!(unlocked_line(0, "ann"), "0 policies unlocked for ann");
        assert_eq!(locked_line(1, "ann"), "1 policy locked for ann");
        assert_eq!(locked_line(3, "ann"), "3 policies locked for ann");
    }

    #[test]
    fn rewrap_advice_names_the_protector_not_a_placeholder() {
        let s = rewrap_advice("ann", "/:0123456789abcdef");
        assert!(
            s.ends_with("`fscrypt-rs metadata change-passphrase --protector /:0123456789abcdef`"),
            "{s}"
        );
        assert!(!s.contains("ROOT:ID"), "{s}");
        assert_eq!(s.lines().count(), 1, "{s}");
    }
}
