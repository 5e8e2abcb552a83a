//! Shared by the google/fscrypt-style commands (`setup`, `encrypt`,
//! `unlock`, `lock`, `metadata`, and `status` on a kernel filesystem): the
//! front end of `fscrypt_actions` (the flow itself): `MOUNT:ID`
//! arguments, the one table of exit statuses per failure ([`actions`]
//! and [`meta`]), reading the secret a protector needs, and rendering
//! (JSON and text).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::bail;
use fscrypt_actions::Error as ActionError;
use fscrypt_actions::convert::ConvertError;
use fscrypt_actions::policy::MetadataStatus;
use fscrypt_linux::keyring::KeyPresence;
use fscrypt_metadata::Error as MetaError;
use fscrypt_metadata::proto::{EncryptionOptions, ProtectorData, SourceType};
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

/// Exit status after Ctrl-C (128 + SIGINT).
pub const EXIT_INTERRUPTED: u8 = 130;

/// The [`Failure`] for an error of the google/fscrypt flow: THE table of
/// exit statuses (with [`meta`] for the metadata's own errors and
/// [`convert_failure`] for a conversion's).
pub fn actions(e: ActionError) -> anyhow::Error {
    let e = match e {
        ActionError::Metadata(m) => return meta(m),
        ActionError::Convert(c) => return convert_failure(c),
        ActionError::Secret(b) => {
            return match b.downcast::<SecretError>() {
                Ok(s) => s.0,
                Err(b) => anyhow::anyhow!(b),
            };
        }
        e => e,
    };
    let (code, kind) = match &e {
        ActionError::EncryptionNotSupported(_) => (EXIT_UNSUPPORTED, "encryption_not_supported"),
        ActionError::PolicyKeyUnwrap { .. } => (EXIT_CORRUPT, "policy_key_unwrap"),
        ActionError::NotProtectedBy { .. } => (EXIT_NOT_FOUND, "not_found"),
        ActionError::RootNotSetup { .. } => (EXIT_NOT_SETUP, "not_setup"),
        ActionError::WrongLoginPassphrase { .. } => (EXIT_WRONG_SECRET, "wrong_secret"),
        ActionError::AlreadyEncrypted { .. } => (EXIT_ALREADY, "already_encrypted"),
        ActionError::Seal(s) if s.is_wrong_secret() => (EXIT_WRONG_SECRET, "wrong_secret"),
        ActionError::Seal(_) => (1, "device"),
        ActionError::NotEmpty { .. } => (EXIT_NOT_EMPTY, "directory_not_empty"),
        ActionError::LoginProtectorExists { .. } | ActionError::AlreadyProtects { .. } => {
            (EXIT_ALREADY, "already_exists")
        }
        ActionError::Kernel(_)
        | ActionError::Mount(_)
        | ActionError::Io { .. }
        | ActionError::NotEncrypted { .. }
        | ActionError::IdentifierMismatch { .. }
        | ActionError::BadPolicy { .. }
        | ActionError::NoSuchUser { .. }
        | ActionError::NoUserName { .. }
        | ActionError::UserLookup(_)
        | ActionError::LoginCheck { .. }
        | ActionError::Timeout { .. }
        | ActionError::Resolve(_)
        | ActionError::Usage(_) => return anyhow::Error::new(e),
        ActionError::Metadata(_) | ActionError::Convert(_) | ActionError::Secret(_) => {
            unreachable!("mapped above")
        }
    };
    failure(code, kind, e.to_string())
}

/// A front end error (reading a secret) carried through an action's
/// secret callback as [`ActionError::Secret`]; [`actions`] takes it back
/// out as it was (its exit status too).
#[derive(Debug)]
pub struct SecretError(pub anyhow::Error);

impl std::fmt::Display for SecretError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(&self.0, f)
    }
}

impl std::error::Error for SecretError {}

impl SecretError {
    /// `e` as the error of an action's secret callback.
    pub fn wrap(e: anyhow::Error) -> ActionError {
        ActionError::Secret(Box::new(SecretError(e)))
    }
}

/// The exit status and one-line reason of a conversion error.
pub fn convert_failure(e: ConvertError) -> anyhow::Error {
    let (code, kind) = match &e {
        ConvertError::MountPoint(_) => (EXIT_CONVERT_REFUSED, "mount_point"),
        ConvertError::OpenFiles { .. } => (EXIT_CONVERT_REFUSED, "files_open"),
        ConvertError::NoSpace { .. } | ConvertError::NoInodes { .. } => {
            (EXIT_CONVERT_REFUSED, "no_space")
        }
        ConvertError::Locked(_) => (EXIT_CONVERT_REFUSED, "locked"),
        ConvertError::OutsideLink(_) => (EXIT_CONVERT_REFUSED, "hard_link_outside"),
        ConvertError::NotOwner { .. } => (EXIT_CONVERT_REFUSED, "not_owner"),
        ConvertError::Kept { .. } => (1, "changed_during_swap"),
        ConvertError::Interrupted => (EXIT_INTERRUPTED, "interrupted"),
        ConvertError::BadState { .. } => (EXIT_INSECURE, "bad_conversion_state"),
        _ => (1, "convert_failed"),
    };
    failure(code, kind, e.to_string())
}

/// Checks `pass` is `user`'s login password before a login protector is
/// made with it ([`fscrypt_actions::create::check_login_passphrase`]);
/// without libpam the check is skipped with a warning.
///
/// # Errors
/// [`EXIT_WRONG_SECRET`] when PAM refuses it; PAM that cannot start.
pub fn check_login_passphrase(user: &str, pass: &[u8]) -> anyhow::Result<()> {
    match fscrypt_actions::create::check_login_passphrase(user, pass) {
        Ok(true) => Ok(()),
        Ok(false) => {
            eprintln!(
                "fscrypt-rs: warning: libpam.so.0 not found, so the login passphrase of {user} \
                 was not checked: a wrong one makes a protector that never opens at login"
            );
            Ok(())
        }
        Err(e) => Err(actions(e)),
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
    fscrypt_actions::protector::describe(p)
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

/// A sealed protector's record as JSON: its `kind` and the fields of
/// [`fscrypt_seal::Sealed::describe`] (nothing secret).
pub fn sealed_json(s: &fscrypt_seal::Sealed) -> serde_json::Value {
    let mut j = serde_json::json!({"kind": s.kind().label()});
    for (k, v) in s.describe() {
        j[k] = v.into();
    }
    j
}

/// The passphrase of the located protector `l` from its device, when it
/// is a sealed protector ([`fscrypt_actions::sealed`]); `None` when it is
/// not, or when the device refused (the refusal printed on stderr, so
/// the caller asks for the recovery passphrase instead; a failed PIN
/// prompt is such a refusal too).
pub fn sealed_passphrase(
    device: &crate::support::seal::DeviceArgs,
    l: &fscrypt_actions::protector::Located,
) -> Option<Zeroizing<Vec<u8>>> {
    let mut ui = crate::support::seal::Prompter::new(device.pin_file.as_deref(), None);
    match fscrypt_actions::sealed::unseal(l, &device.unseal_options(None), &mut ui) {
        Ok(p) => p,
        Err(e) => {
            eprintln!(
                "fscrypt-rs: sealed protector {}: {e}; falling back to its (recovery) passphrase",
                l.data.protector_descriptor
            );
            None
        }
    }
}

/// Renders the google/fscrypt part of `fscrypt-rs status PATH`
/// ([`fscrypt_actions::policy::status`]) as JSON and text.
pub fn render_status(st: &MetadataStatus) -> (serde_json::Value, String) {
    let mut text = String::new();
    let protector_line =
        |e: &fscrypt_actions::policy::ProtectorEntry, text: &mut String| -> serde_json::Value {
            let d = &e.descriptor;
            let linked = e
                .linked_from
                .as_ref()
                .map(|m| format!(" (linked: on {})", m.display()))
                .unwrap_or_default();
            let sealed = match &e.sealed {
                Some(Ok(s)) => format!(
                    ", sealed to {}: {}",
                    s.kind(),
                    crate::support::seal::describe_sealed(s)
                ),
                Some(Err(err)) => format!(", sealed record unreadable: {err}"),
                None => String::new(),
            };
            let mut j = match &e.data {
                Ok(p) => {
                    text.push_str(&format!(
                        "  {d}  {}{linked}{sealed}\n",
                        describe_protector(p)
                    ));
                    protector_json(p)
                }
                Err(err) => {
                    text.push_str(&format!("  {d}  unreadable{linked}: {err}\n"));
                    serde_json::json!({"descriptor": d, "error": err})
                }
            };
            j["linked_from"] = e
                .linked_from
                .as_ref()
                .map(|m| m.display().to_string())
                .into();
            match &e.sealed {
                Some(Ok(s)) => j["sealed"] = sealed_json(s),
                Some(Err(err)) => j["sealed"] = serde_json::json!({"error": err}),
                None => {}
            }
            j
        };
    match st {
        MetadataStatus::Unusable(msg) => (
            serde_json::json!({"ok": false, "message": msg}),
            format!("fscrypt metadata: {msg}\n"),
        ),
        MetadataStatus::Policy {
            descriptor: d,
            presence,
            data,
        } => {
            let state = presence_word(*presence);
            match data {
                Ok((p, prots)) => {
                    text.push_str(&format!(
                        "fscrypt policy {d} (v{}), {state}; protectors:\n",
                        p.opts().version()
                    ));
                    let prots: Vec<serde_json::Value> =
                        prots.iter().map(|e| protector_line(e, &mut text)).collect();
                    (
                        serde_json::json!({"policy": d, "state": state, "options": options_json(&p.opts()), "protectors": prots}),
                        text,
                    )
                }
                Err(e) => (
                    serde_json::json!({"policy": d, "state": state, "error": e}),
                    format!("fscrypt policy {d}: {e}\n"),
                ),
            }
        }
        MetadataStatus::Mount {
            base_dir,
            protectors,
            policies,
        } => {
            text.push_str(&format!(
                "fscrypt metadata at {}: {} protectors, {} policies\nProtectors:\n",
                base_dir.display(),
                protectors.len(),
                policies.len()
            ));
            let pj: Vec<serde_json::Value> = protectors
                .iter()
                .map(|e| protector_line(e, &mut text))
                .collect();
            text.push_str("Policies:\n");
            let mut polj = Vec::new();
            for e in policies {
                let d = &e.descriptor;
                match &e.data {
                    Ok((presence, slots)) => {
                        let state = presence_word(*presence);
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
                        polj.push(serde_json::json!({"descriptor": d, "error": e}));
                    }
                }
            }
            (
                serde_json::json!({"protectors": pj, "policies": polj}),
                text,
            )
        }
    }
}
