//! Shared by the google/fscrypt-style commands (`setup`, `encrypt`,
//! `unlock`, `lock`, `metadata`, and `status` on a kernel filesystem):
//! locating a directory's mount and metadata, `MOUNT:ID` arguments, exit
//! statuses per failure, reading the secret a protector needs, and the
//! kernel keyring steps. The metadata itself is `fscrypt_metadata`'s.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::bail;
use fscrypt::{
    EncryptionMode, KeyDescriptor, KeyIdentifier, Policy, PolicyFlags, PolicyV1, PolicyV2,
};
use fscrypt_linux::keyring::{self, KeyPresence, KeySpec};
use fscrypt_linux::{mountinfo, policy};
use fscrypt_metadata::Error as MetaError;
use fscrypt_metadata::links::MainMount;
use fscrypt_metadata::proto::{EncryptionOptions, PolicyData, ProtectorData, SourceType};
use fscrypt_metadata::store::Store;
use fscrypt_metadata::trust::Trust;
use zeroize::Zeroizing;

use crate::support::secret::{self, EXIT_WRONG_SECRET, PassSource};

/// Exit status: a metadata file is corrupt or truncated.
pub const EXIT_CORRUPT: u8 = 20;
/// Exit status: a metadata directory is a symlink, not a directory,
/// world-writable without the sticky bit, or owned by another user (an
/// unsafe metadata directory); or a named metadata file was written by
/// another user.
pub const EXIT_INSECURE: u8 = 21;
/// Exit status: the filesystem (or the global config) is not set up.
pub const EXIT_NOT_SETUP: u8 = 22;
/// Exit status: `encrypt` on a directory that is not empty.
pub const EXIT_NOT_EMPTY: u8 = 23;
/// Exit status: no such protector or policy.
pub const EXIT_NOT_FOUND: u8 = 24;
/// Exit status: already set up, or the directory is already encrypted.
pub const EXIT_ALREADY: u8 = 25;
/// Exit status: the filesystem does not support encryption.
pub const EXIT_UNSUPPORTED: u8 = 26;
/// Exit status: `encrypt --convert` refused (mount point, open files, too
/// little space) or found a pending conversion without `--convert`.
pub const EXIT_CONVERT_REFUSED: u8 = 27;

/// A failure with its own exit status (printed as one line by [`report`]).
#[derive(Debug)]
pub struct Failure {
    /// The exit status.
    pub code: u8,
    /// Machine-readable kind for `--json`.
    pub kind: &'static str,
    /// The one-line reason.
    pub message: String,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Failure {}

/// A [`Failure`] as an `anyhow::Error`.
pub fn failure(code: u8, kind: &'static str, message: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(Failure {
        code,
        kind,
        message: message.into(),
    })
}

/// The [`Failure`] for a metadata error.
pub fn meta(e: MetaError) -> anyhow::Error {
    let (code, kind) = match &e {
        MetaError::WrongSecret { .. } => (EXIT_WRONG_SECRET, "wrong_secret"),
        MetaError::Corrupt { .. } => (EXIT_CORRUPT, "corrupt_metadata"),
        MetaError::Insecure { .. } => (EXIT_INSECURE, "insecure_metadata"),
        MetaError::UnsafeDirectory { .. } => (EXIT_INSECURE, "unsafe_metadata_directory"),
        MetaError::Untrusted { .. } => (EXIT_INSECURE, "untrusted_metadata"),
        MetaError::NotSetup { .. } => (EXIT_NOT_SETUP, "not_setup"),
        MetaError::Config { .. } => (EXIT_NOT_SETUP, "bad_config"),
        MetaError::AlreadySetup { .. } => (EXIT_ALREADY, "already_setup"),
        MetaError::NotFound { .. } => (EXIT_NOT_FOUND, "not_found"),
        MetaError::Invalid(_) | MetaError::Io { .. } | MetaError::Crypto(_) => (1, "failed"),
    };
    failure(code, kind, e.to_string())
}

/// The policy key, unwrapped by an opened protector. The protector's
/// secret was right, so a slot that does not unwrap means a damaged or
/// edited policy file: [`EXIT_CORRUPT`], not "wrong passphrase".
///
/// # Errors
/// That, and the policy's other errors.
pub fn open_policy(
    store: &Store,
    policy: &PolicyData,
    protector: &str,
    protector_key: &fscrypt_metadata::keys::Key32,
) -> anyhow::Result<fscrypt_metadata::actions::PolicyKey> {
    fscrypt_metadata::actions::open_policy(policy, protector, protector_key).map_err(|e| match e {
        MetaError::WrongSecret { .. } => failure(
            EXIT_CORRUPT,
            "policy_key_unwrap",
            format!(
                "policy {d}'s key does not unwrap with protector {protector}, whose secret is right: \
                 the policy file is damaged or was edited; restore {} from a backup, or unlock with \
                 another protector",
                store.policy_dir().join(&policy.key_descriptor).display(),
                d = policy.key_descriptor,
            ),
        ),
        e => meta(e),
    })
}

/// Checks `pass` is `user`'s login password before a login protector is
/// made with it (google/fscrypt's check, PAM service `fscrypt`). Without
/// libpam the check is skipped with a warning.
///
/// # Errors
/// [`EXIT_WRONG_SECRET`] when PAM refuses it; PAM that cannot start.
pub fn check_login_passphrase(user: &str, pass: &[u8]) -> anyhow::Result<()> {
    use fscrypt_linux::pam_auth::{self, PamAuthError};
    match pam_auth::check_password("fscrypt", user, pass) {
        Ok(()) => Ok(()),
        Err(PamAuthError::Unavailable) => {
            eprintln!(
                "fscrypt-rs: warning: libpam.so.0 not found, so the login passphrase of {user} \
                 was not checked: a wrong one makes a protector that never opens at login"
            );
            Ok(())
        }
        Err(PamAuthError::Refused(_)) => Err(failure(
            EXIT_WRONG_SECRET,
            "wrong_secret",
            format!("that is not the login passphrase of {user}; try again"),
        )),
        Err(e) => Err(anyhow::anyhow!(
            "checking the login passphrase of {user}: {e}"
        )),
    }
}

/// Runs a command body; a [`Failure`] is printed (one line on stderr, and
/// an `{"ok":false,...}` object on stdout with `--json`) and becomes its
/// exit status; other errors go back to `main` (exit 1).
pub fn report(
    json: bool,
    f: impl FnOnce() -> anyhow::Result<ExitCode>,
) -> anyhow::Result<ExitCode> {
    match f() {
        Ok(code) => Ok(code),
        Err(e) => {
            let (code, kind) = match e.downcast_ref::<Failure>() {
                Some(f) => (f.code, f.kind),
                None => (1, "failed"),
            };
            let text = crate::error_text(&e);
            if json {
                crate::support::kernel::print_json(&serde_json::json!({
                    "ok": false, "error": kind, "message": text,
                }))?;
            }
            eprintln!("fscrypt-rs: {text}");
            Ok(ExitCode::from(code))
        }
    }
}

/// The mount point of the filesystem holding `path`.
///
/// # Errors
/// The path cannot be examined.
pub fn mount_of(path: &Path) -> anyhow::Result<PathBuf> {
    Ok(mountinfo::find_mount(path)?.mount_point)
}

/// A `MOUNTPOINT:ID` argument (google/fscrypt's protector and policy
/// references).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MountId {
    /// The mount point.
    pub mount: PathBuf,
    /// The descriptor.
    pub id: String,
}

impl std::str::FromStr for MountId {
    type Err = String;
    fn from_str(s: &str) -> Result<MountId, String> {
        let (m, id) = s
            .rsplit_once(':')
            .ok_or_else(|| format!("{s:?} is not MOUNTPOINT:ID (e.g. /mnt:1234abcd5678ef90)"))?;
        if m.is_empty() || id.is_empty() {
            return Err(format!("{s:?} is not MOUNTPOINT:ID"));
        }
        Ok(MountId {
            mount: PathBuf::from(m),
            id: id.to_string(),
        })
    }
}

/// The descriptor (hex) and key specifier of a kernel policy.
pub fn policy_key_spec(p: &Policy) -> (String, KeySpec) {
    match p {
        Policy::V1(p1) => (
            hex::encode(p1.master_key_descriptor.0),
            KeySpec::Descriptor(p1.master_key_descriptor),
        ),
        Policy::V2(p2) => (
            hex::encode(p2.master_key_identifier.0),
            KeySpec::Identifier(p2.master_key_identifier),
        ),
    }
}

/// The kernel policy for a google/fscrypt policy.
///
/// # Errors
/// Bad padding or descriptor.
pub fn kernel_policy(p: &PolicyData) -> anyhow::Result<Policy> {
    let o = p.opts();
    let flags = PolicyFlags(0)
        .with_padding(o.padding as usize)
        .ok_or_else(|| anyhow::anyhow!("padding {} is invalid", o.padding))?;
    let contents = EncryptionMode(o.contents as u8);
    let filenames = EncryptionMode(o.filenames as u8);
    let raw = hex::decode(&p.key_descriptor)?;
    Ok(if o.version() == 1 {
        Policy::V1(PolicyV1 {
            contents_mode: contents,
            filenames_mode: filenames,
            flags,
            master_key_descriptor: KeyDescriptor(
                raw.try_into()
                    .map_err(|_| anyhow::anyhow!("bad descriptor"))?,
            ),
        })
    } else {
        Policy::V2(PolicyV2 {
            contents_mode: contents,
            filenames_mode: filenames,
            flags,
            log2_data_unit_size: 0,
            master_key_identifier: KeyIdentifier(
                raw.try_into()
                    .map_err(|_| anyhow::anyhow!("bad identifier"))?,
            ),
        })
    })
}

/// Adds a policy key to the filesystem keyring of `mount` (v2: by
/// identifier, checked against the policy; v1: by descriptor).
///
/// # Errors
/// Keyring errors; an identifier that differs from the policy's.
pub fn add_policy_key(mount: &Path, p: &PolicyData, key: &[u8]) -> anyhow::Result<()> {
    match kernel_policy(p)? {
        Policy::V2(p2) => {
            let id = keyring::add_key_v2(mount, key)?;
            if id != p2.master_key_identifier {
                bail!(
                    "the kernel computed another key identifier than policy {}",
                    p.key_descriptor
                );
            }
        }
        Policy::V1(p1) if v1_in_user_keyring() => {
            keyring::user::add(&fs_type(mount), p1.master_key_descriptor, key)?
        }
        Policy::V1(p1) => keyring::add_key_v1(mount, p1.master_key_descriptor, key)?,
    }
    Ok(())
}

/// The filesystem type mounted at `mount` (`ext4`...; empty if unknown).
pub fn fs_type(mount: &Path) -> String {
    mountinfo::find_mount(mount)
        .map(|m| m.fs_type)
        .unwrap_or_default()
}

/// Whether v1 policy keys go to the caller's user keyring (google/fscrypt's
/// default) rather than the filesystem keyring: the config's
/// `use_fs_keyring_for_v1_policies` is false. No readable config: the
/// filesystem keyring.
pub fn v1_in_user_keyring() -> bool {
    fscrypt_metadata::config::Config::load().is_ok_and(|c| !c.use_fs_keyring_for_v1_policies)
}

/// Whether the key of a policy is present: in the filesystem keyring, or
/// for v1 also in the caller's user keyring.
pub fn key_presence(mount: &Path, p: &Policy) -> Option<KeyPresence> {
    if let Policy::V1(p1) = p
        && keyring::user::has(&fs_type(mount), p1.master_key_descriptor).unwrap_or(false)
    {
        return Some(KeyPresence::Present);
    }
    keyring::key_status(mount, policy_key_spec(p).1)
        .ok()
        .map(|s| s.presence)
}

/// The word for a key presence.
pub fn presence_word(p: Option<KeyPresence>) -> &'static str {
    match p {
        Some(KeyPresence::Present) => "unlocked",
        Some(KeyPresence::Absent) => "locked",
        Some(KeyPresence::IncompletelyRemoved) => "partially_locked",
        None => "unknown",
    }
}

/// A protector's description as `fscrypt status` words it.
pub fn describe_protector(p: &ProtectorData) -> String {
    match p.source_type() {
        SourceType::PamPassphrase => format!("login protector for uid {}", p.uid),
        SourceType::CustomPassphrase => format!("custom protector {:?}", p.name),
        SourceType::RawKey => format!("raw key protector {:?}", p.name),
        SourceType::Default => "unknown protector".to_string(),
    }
}

/// Where the secret for a protector comes from.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct SecretArgs {
    /// For raw_key protectors: the 32-byte key file.
    #[arg(long, value_name = "FILE")]
    pub key: Option<PathBuf>,
    /// Passphrase source (default: the terminal, else one line of stdin).
    #[command(flatten)]
    pub pass: PassSource,
}

/// The output flags of the google/fscrypt-style commands.
#[derive(clap::Args, Debug, Clone, Copy)]
pub struct OutputArgs {
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// Print nothing but errors.
    #[arg(long, short)]
    pub quiet: bool,
}

/// Reads the secret for a protector of `source`: the raw key file, or a
/// passphrase (asked twice on a terminal when `confirm`).
///
/// # Errors
/// A raw key protector without `--key`, a key that is not 32 bytes,
/// unreadable input.
pub fn read_secret(
    args: &SecretArgs,
    source: SourceType,
    what: &str,
    confirm: bool,
) -> anyhow::Result<Zeroizing<Vec<u8>>> {
    if source == SourceType::RawKey {
        let Some(path) = &args.key else {
            bail!("{what} is a raw_key protector: give its 32-byte key file with --key FILE");
        };
        let k = secret::read_key_file(path)?;
        if k.len() != 32 {
            return Err(failure(
                EXIT_WRONG_SECRET,
                "wrong_secret",
                format!(
                    "key file {} is {} bytes; a raw_key protector needs exactly 32",
                    path.display(),
                    k.len()
                ),
            ));
        }
        return Ok(Zeroizing::new(k.to_vec()));
    }
    let p = args
        .pass
        .read(&format!("Enter the passphrase for {what}: "), confirm)?;
    Ok(Zeroizing::new(p.to_vec()))
}

/// The options of a policy as JSON.
pub fn options_json(o: &EncryptionOptions) -> serde_json::Value {
    let mode = |m: i32| {
        fscrypt_metadata::proto::Mode::try_from(m)
            .map(|m| m.name().to_string())
            .unwrap_or_else(|_| m.to_string())
    };
    serde_json::json!({
        "padding": o.padding,
        "contents": mode(o.contents),
        "filenames": mode(o.filenames),
        "policy_version": o.version(),
    })
}

/// A protector as JSON (no secret material: no salt, no wrapped key).
pub fn protector_json(p: &ProtectorData) -> serde_json::Value {
    let mut j = serde_json::json!({
        "descriptor": p.protector_descriptor,
        "source": p.source_type().name(),
        "name": p.name,
        "description": describe_protector(p),
    });
    if let Some(c) = &p.costs {
        j["costs"] = serde_json::json!({
            "time": c.time, "memory_kib": c.memory, "parallelism": c.parallelism,
            "truncation_fixed": c.truncation_fixed,
        });
    }
    if p.source_type() == SourceType::PamPassphrase {
        j["uid"] = p.uid.into();
    }
    j
}

/// The kernel policy of `dir`, or `None` when it is not encrypted.
///
/// # Errors
/// Unsupported filesystem or other errors.
pub fn dir_policy(dir: &Path) -> anyhow::Result<Option<Policy>> {
    match policy::get_policy(dir) {
        Ok(p) => Ok(Some(p)),
        Err(fscrypt_linux::Error::NotEncrypted { .. }) => Ok(None),
        Err(e @ fscrypt_linux::Error::EncryptionNotSupported { .. }) => Err(failure(
            EXIT_UNSUPPORTED,
            "encryption_not_supported",
            format!("{e} (for ext4: `tune2fs -O encrypt DEVICE` while unmounted)"),
        )),
        Err(e) => Err(e.into()),
    }
}

/// Whose metadata the commands use ([`Trust::for_caller`]): the caller's
/// and root's, every user's when run as root or when the config sets
/// `allow_cross_user_metadata` (no readable config: it is false).
pub fn trust() -> Trust {
    Trust::for_caller(
        fscrypt_metadata::config::Config::load().is_ok_and(|c| c.allow_cross_user_metadata),
    )
}

/// The store of the filesystem holding `path`, checked.
///
/// # Errors
/// Not set up, insecure.
pub fn store_of(path: &Path) -> anyhow::Result<Store> {
    let store = Store::new(mount_of(path)?, trust());
    store.check_setup().map_err(meta)?;
    Ok(store)
}

/// The google/fscrypt part of `fscrypt-rs status PATH`: `None` when the
/// filesystem has no `.fscrypt`. For an encrypted directory: its policy's
/// metadata, lock state and protectors; for the mount point: every
/// protector and policy with its lock state.
pub fn status_section(
    path: &Path,
    mount: &Path,
    kpolicy: Option<&Policy>,
) -> Option<(serde_json::Value, String)> {
    let store = Store::new(mount, trust());
    if !store.exists() {
        return None;
    }
    if let Err(e) = store.check_setup() {
        let msg = e.to_string();
        return Some((
            serde_json::json!({"ok": false, "message": msg}),
            format!("fscrypt metadata: {msg}\n"),
        ));
    }
    let mut text = String::new();
    let protector_line = |d: &str, text: &mut String| -> serde_json::Value {
        match store.protector(d) {
            Ok(p) => {
                text.push_str(&format!("  {d}  {}\n", describe_protector(&p)));
                protector_json(&p)
            }
            Err(e) => {
                text.push_str(&format!("  {d}  unreadable: {e}\n"));
                serde_json::json!({"descriptor": d, "error": e.to_string()})
            }
        }
    };
    if let Some(kp) = kpolicy {
        let (d, _) = policy_key_spec(kp);
        let state = presence_word(key_presence(mount, kp));
        return Some(match store.policy(&d) {
            Ok(p) => {
                text.push_str(&format!(
                    "fscrypt policy {d} (v{}), {state}; protectors:\n",
                    p.opts().version()
                ));
                let prots: Vec<serde_json::Value> = p
                    .wrapped_policy_keys
                    .iter()
                    .map(|s| protector_line(&s.protector_descriptor, &mut text))
                    .collect();
                (
                    serde_json::json!({"policy": d, "state": state, "options": options_json(&p.opts()), "protectors": prots}),
                    text,
                )
            }
            Err(e) => (
                serde_json::json!({"policy": d, "state": state, "error": e.to_string()}),
                format!("fscrypt policy {d}: {e}\n"),
            ),
        });
    }
    if std::fs::canonicalize(path).ok().as_deref() != Some(mount) {
        return None;
    }
    let prots = store.protectors().unwrap_or_default();
    let pols = store.policies().unwrap_or_default();
    text.push_str(&format!(
        "fscrypt metadata at {}: {} protectors, {} policies\nProtectors:\n",
        store.base_dir().display(),
        prots.len(),
        pols.len()
    ));
    let pj: Vec<serde_json::Value> = prots.iter().map(|d| protector_line(d, &mut text)).collect();
    text.push_str("Policies:\n");
    let mut polj = Vec::new();
    for d in &pols {
        match store.policy(d) {
            Ok(p) => {
                let state = kernel_policy(&p)
                    .ok()
                    .map(|kp| presence_word(key_presence(mount, &kp)))
                    .unwrap_or("unknown");
                let slots: Vec<String> = p
                    .wrapped_policy_keys
                    .iter()
                    .map(|s| s.protector_descriptor.clone())
                    .collect();
                text.push_str(&format!(
                    "  {d}  {state}  protectors {}\n",
                    slots.join(", ")
                ));
                polj.push(
                    serde_json::json!({"descriptor": d, "state": state, "protectors": slots}),
                );
            }
            Err(e) => {
                text.push_str(&format!("  {d}  unreadable: {e}\n"));
                polj.push(serde_json::json!({"descriptor": d, "error": e.to_string()}));
            }
        }
    }
    Some((
        serde_json::json!({"protectors": pj, "policies": polj}),
        text,
    ))
}

/// The main mount of every mounted filesystem (the first mount of each
/// device whose root is the filesystem's root), for following link files.
pub fn main_mounts() -> Vec<MainMount> {
    let mut out: Vec<MainMount> = Vec::new();
    for m in mountinfo::read_mountinfo().unwrap_or_default() {
        if m.root != Path::new("/") || out.iter().any(|o| (o.major, o.minor) == (m.major, m.minor))
        {
            continue;
        }
        out.push(MainMount {
            path: m.mount_point,
            major: m.major,
            minor: m.minor,
        });
    }
    out
}

/// The main mount of the filesystem holding `path`.
///
/// # Errors
/// The path cannot be examined.
pub fn main_mount_of(path: &Path) -> anyhow::Result<MainMount> {
    let m = mountinfo::find_mount(path)?;
    Ok(MainMount {
        path: m.mount_point,
        major: m.major,
        minor: m.minor,
    })
}

/// A login user: name and uid.
#[derive(Clone, Debug)]
pub struct LoginUser {
    /// The user name.
    pub name: String,
    /// The uid.
    pub uid: u32,
}

/// The user named `name` (through NSS), or the caller's (real uid) when
/// `None`.
///
/// # Errors
/// No such user.
pub fn login_user(name: Option<&str>) -> anyhow::Result<LoginUser> {
    let u = match name {
        Some(n) => nix::unistd::User::from_name(n)?.ok_or_else(|| {
            anyhow::anyhow!("there is no user {n:?}; check the name given to --user")
        })?,
        None => {
            let uid = nix::unistd::getuid();
            nix::unistd::User::from_uid(uid)?.ok_or_else(|| {
                anyhow::anyhow!("uid {uid} has no user name; give one with --user")
            })?
        }
    };
    Ok(LoginUser {
        name: u.name,
        uid: u.uid.as_raw(),
    })
}

/// The login protectors' filesystem (`$FSCRYPT_ROOT_MNT`, else `/`),
/// checked.
///
/// # Errors
/// Not set up, insecure.
pub fn root_store() -> anyhow::Result<Store> {
    let root = fscrypt_metadata::config::root_mount();
    let root = std::fs::canonicalize(&root).unwrap_or(root);
    let store = Store::new(root, trust());
    store.check_setup().map_err(|e| match e {
        MetaError::NotSetup { mount } => failure(
            EXIT_NOT_SETUP,
            "not_setup",
            format!(
                "login protectors live on the root filesystem {}, which is not set up; run                  `fscrypt-rs setup {}` first",
                mount.display(),
                mount.display()
            ),
        ),
        e => meta(e),
    })?;
    Ok(store)
}

/// Protector `d` of a policy on `store`: the file there, or the one its
/// link file points to.
///
/// # Errors
/// Not found (exit 24), unreadable, a link to no mounted filesystem.
pub fn locate_protector(store: &Store, d: &str) -> anyhow::Result<(Store, ProtectorData)> {
    fscrypt_metadata::login::locate_protector(store, d, &main_mounts()).map_err(meta)
}
