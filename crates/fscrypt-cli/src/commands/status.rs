//! `fscrypt-rs status`: encryption status of a directory or filesystem.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use fscrypt::Policy;
use fscrypt_ext4 as ext4;
use fscrypt_linux::keyring::KeyPresence;
use fscrypt_linux::{Error, mountinfo, policy};

use crate::support::kernel;
use crate::support::mounts::{self, MountState};

/// Arguments of `fscrypt-rs status`.
#[derive(clap::Args, Debug)]
#[command(
    about = "Show the encryption status of a directory, filesystem or fscrypt-rs vault (no \
             argument: every filesystem that can be encrypted)",
    long_about = "Without an argument: every mounted filesystem of a type that can be \
                  encrypted, whether encryption is enabled on it and whether it is set up for \
                  the google/fscrypt flow (as `fscrypt status`). For an encrypted directory or file: its policy, key identifier and whether \
                  the key is present. For any path: the filesystem holding it and whether it \
                  supports encryption (for ext4 read as root: the encrypt, stable_inodes and \
                  casefold features). For a path in a fscrypt-rs vault or in one of its mounts: \
                  the vault, its policy, key identifier and protector kinds, and its mounts \
                  (unlocked, locked or dead)."
)]
pub struct Args {
    /// A directory, file or mount point. Without one: every mounted
    /// filesystem that can be encrypted (ext4, f2fs, ubifs, ceph, lustre),
    /// whether encryption is enabled there and whether it is set up
    /// (`fscrypt-rs setup MNT`).
    pub path: Option<PathBuf>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Why a filesystem without kernel fscrypt support has none, and what to
/// do, for `status`'s "Encryption supported: no (...)" line: the tune2fs
/// command for ext4; for an `image mount` (a `fuse.fscrypt-rs` mount that
/// is not a vault's, its source the image), that it is a read-only view of
/// an image and the command that lists the image's encrypted directories;
/// else that an fscrypt-rs vault works on any filesystem.
fn unsupported_advice(fs_type: &str, source: &str, mount_point: &Path) -> String {
    if fs_type == "ext4" {
        format!("enable it, unmounted: `tune2fs -O encrypt {source}`")
    } else if fs_type == mounts::FS_TYPE {
        format!(
            "{} is a read-only `fscrypt-rs image mount` of {source}; `fscrypt-rs image info {source}` lists its encrypted directories",
            mount_point.display()
        )
    } else {
        format!(
            "{fs_type} has no kernel fscrypt support; a vault (`fscrypt-rs init DIR`) works on any filesystem"
        )
    }
}

/// `status PATH`'s arguments once the path is known.
struct PathArgs {
    path: PathBuf,
    json: bool,
}

/// `fscrypt-rs status` without a path: every filesystem that can be
/// encrypted ([`fscrypt_actions::filesystems::overview`]).
fn overview(ctx: &fscrypt_actions::Context, json: bool) -> anyhow::Result<ExitCode> {
    use fscrypt_actions::filesystems::{Setup, Support};
    let list = fscrypt_actions::filesystems::overview(ctx);
    let supported = list
        .iter()
        .filter(|f| f.support == Support::Supported)
        .count();
    let set_up = list
        .iter()
        .filter(|f| matches!(f.setup, Setup::Ready { .. }))
        .count();
    if json {
        let fs: Vec<serde_json::Value> = list
            .iter()
            .map(|f| {
                let mut j = serde_json::json!({
                    "mount_point": f.mount_point.display().to_string(),
                    "device": f.device,
                    "filesystem": f.fs_type,
                    "encryption": f.support.word(),
                });
                if let Support::Unknown(e) = &f.support {
                    j["encryption_error"] = e.as_str().into();
                }
                match &f.setup {
                    Setup::Absent => j["fscrypt_metadata"] = false.into(),
                    Setup::Ready {
                        protectors,
                        linked_protectors,
                        policies,
                    } => {
                        j["fscrypt_metadata"] = true.into();
                        j["protectors"] = (*protectors).into();
                        j["linked_protectors"] = (*linked_protectors).into();
                        j["policies"] = (*policies).into();
                    }
                    Setup::Unusable(e) => {
                        j["fscrypt_metadata"] = false.into();
                        j["metadata_error"] = e.as_str().into();
                    }
                }
                j
            })
            .collect();
        kernel::print_json(&serde_json::json!({
            "ok": true,
            "filesystems_supporting_encryption": supported,
            "filesystems_with_fscrypt_metadata": set_up,
            "filesystems": fs,
        }))?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut rows = vec![[
        "MOUNTPOINT".to_string(),
        "DEVICE".to_string(),
        "FILESYSTEM".to_string(),
        "ENCRYPTION".to_string(),
        "FSCRYPT".to_string(),
    ]];
    let mut notes = String::new();
    for f in &list {
        let meta = match &f.setup {
            Setup::Absent => "no".to_string(),
            Setup::Ready {
                protectors,
                linked_protectors,
                policies,
            } => format!(
                "yes ({} protectors, {policies} policies)",
                protectors + linked_protectors
            ),
            Setup::Unusable(e) => {
                notes.push_str(&format!("{}: {e}\n", f.mount_point.display()));
                "unusable".to_string()
            }
        };
        if let Support::Unknown(e) = &f.support {
            notes.push_str(&format!("{}: {e}\n", f.mount_point.display()));
        }
        rows.push([
            f.mount_point.display().to_string(),
            f.device.clone(),
            f.fs_type.clone(),
            f.support.word().to_string(),
            meta,
        ]);
    }
    let mut widths = [0usize; 5];
    for r in &rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut o = format!(
        "filesystems supporting encryption: {supported}\nfilesystems with fscrypt metadata: {set_up}\n\n"
    );
    for r in &rows {
        let line: Vec<String> = r
            .iter()
            .zip(widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        o.push_str(line.join("  ").trim_end());
        o.push('\n');
    }
    o.push_str(&notes);
    if list.iter().any(|f| f.support == Support::NotEnabled) {
        o.push_str(
            "Enable encryption on an unmounted ext4 filesystem with `tune2fs -O encrypt DEVICE`.\n",
        );
    }
    if list
        .iter()
        .any(|f| f.support == Support::Supported && f.setup == Setup::Absent)
    {
        o.push_str("Set a filesystem up with `fscrypt-rs setup MOUNTPOINT`; `fscrypt-rs status MOUNTPOINT` lists its protectors and policies.\n");
    }
    kernel::out(format_args!("{o}"))?;
    Ok(ExitCode::SUCCESS)
}

/// Runs `fscrypt-rs status`.
pub fn exec(args: Args) -> anyhow::Result<ExitCode> {
    let json = args.json;
    kernel::json_errors(json, || exec_inner(args))
}

fn exec_inner(args: Args) -> anyhow::Result<ExitCode> {
    // One mount table for the whole command (the vault check, the mount,
    // the metadata).
    let ctx = fscrypt_actions::Context::for_caller();
    let Some(path) = args.path.clone() else {
        return overview(&ctx, args.json);
    };
    let args = PathArgs {
        path,
        json: args.json,
    };
    if let Some((vault_dir, mount)) = vault_target(&args.path, ctx.mounts()) {
        return vault_status(&args, &vault_dir, mount.as_deref());
    }
    let m = ctx.mount_of(&args.path)?;
    let mut out = serde_json::json!({
        "ok": true,
        "path": args.path.display().to_string(),
        "mount_point": m.mount_point.display().to_string(),
        "filesystem": m.fs_type,
        "device": m.source,
        "inlinecrypt": m.inlinecrypt(),
    });
    // Encryption support: the filesystem root answers ENODATA (supported,
    // not encrypted) or ENOTTY/EOPNOTSUPP (unsupported).
    let supported = match policy::get_policy(&m.mount_point) {
        Ok(_) | Err(Error::NotEncrypted { .. }) => Some(true),
        Err(Error::EncryptionNotSupported { .. }) => Some(false),
        Err(_) => None,
    };
    out["encryption_supported"] = supported.into();
    if m.fs_type == "ext4"
        && let Ok(fs) = ext4::Ext4::open(&m.device_path())
    {
        {
            let sb = fs.superblock();
            out["ext4_encrypt"] = (sb.feature_incompat & ext4::INCOMPAT_ENCRYPT != 0).into();
            out["ext4_stable_inodes"] =
                (sb.feature_compat & ext4::COMPAT_STABLE_INODES != 0).into();
            out["ext4_casefold"] = (sb.feature_incompat & ext4::INCOMPAT_CASEFOLD != 0).into();
            out["block_size"] = sb.block_size.into();
        }
    }
    let mut policy_text = None;
    let mut kernel_policy = None;
    match policy::get_policy(&args.path) {
        Ok(p) => {
            kernel_policy = Some(p);
            out["encrypted"] = true.into();
            out["policy"] = kernel::policy_json(&p);
            // The filesystem keyring, or for v1 also the user keyring.
            let key = match ctx.keyring().presence(&m.mount_point, &m.fs_type, &p) {
                Some(KeyPresence::Absent) => "absent",
                Some(KeyPresence::Present) => "present",
                Some(KeyPresence::IncompletelyRemoved) => "incompletely_removed",
                None => "unknown",
            };
            out["key_status"] = key.into();
            policy_text = Some((kernel::policy_text(&p), key));
        }
        Err(Error::NotEncrypted { .. }) => out["encrypted"] = false.into(),
        Err(Error::EncryptionNotSupported { .. }) => out["encrypted"] = false.into(),
        Err(e) => return kernel::fail(args.json, &e),
    }
    // google/fscrypt metadata (.fscrypt at the mount's root), if any.
    let gfs =
        fscrypt_actions::policy::status(&ctx, &args.path, &m.mount_point, kernel_policy.as_ref())
            .map(|st| crate::support::gfs::render_status(&st));
    if let Some((j, _)) = &gfs {
        out["fscrypt_metadata"] = j.clone();
    }
    if args.json {
        kernel::print_json(&out)?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut o = String::new();
    o.push_str(&format!(
        "{}: on {} filesystem {} mounted at {}{}\n",
        args.path.display(),
        m.fs_type,
        m.source,
        m.mount_point.display(),
        if m.inlinecrypt() {
            " (inlinecrypt)"
        } else {
            ""
        }
    ));
    match supported {
        Some(true) => o.push_str("Encryption supported: yes\n"),
        Some(false) => o.push_str(&format!(
            "Encryption supported: no ({})\n",
            unsupported_advice(&m.fs_type, &m.source, &m.mount_point)
        )),
        None => o.push_str("Encryption supported: unknown\n"),
    }
    if let Some(v) = out.get("ext4_stable_inodes") {
        o.push_str(&format!(
            "ext4 stable_inodes (needed for IV_INO_LBLK_*): {}\n",
            if v == true { "yes" } else { "no" }
        ));
    }
    match policy_text {
        Some((text, key)) => {
            o.push_str(&text);
            o.push_str(&format!("Key: {key}\n"));
        }
        None => o.push_str(&format!("{}: not encrypted\n", args.path.display())),
    }
    if let Some((_, text)) = &gfs {
        o.push_str(text);
    }
    kernel::out(format_args!("{o}"))?;
    Ok(ExitCode::SUCCESS)
}

/// The vault `path` belongs to: through a fscrypt-rs mount holding it (live
/// or dead), or as (a path inside) a backing directory. Returns the vault
/// directory and the mount point the path was reached through.
fn vault_target(path: &Path, table: &[mountinfo::MountInfo]) -> Option<(PathBuf, Option<PathBuf>)> {
    let abs = mounts::absolute(path);
    // The innermost mount holding the path (later entries are on top).
    let holder = table
        .iter()
        .filter(|m| abs.starts_with(&m.mount_point))
        .fold(None::<&mountinfo::MountInfo>, |best, m| match best {
            Some(b) if b.mount_point.as_os_str().len() > m.mount_point.as_os_str().len() => Some(b),
            _ => Some(m),
        });
    if let Some(m) = holder.filter(|m| m.fs_type == mounts::FS_TYPE) {
        let vault = mounts::daemons()
            .into_iter()
            .find(|d| d.mountpoint == m.mount_point)
            .map(|d| d.cipherdir)
            .or_else(|| {
                let source = PathBuf::from(&m.source);
                fscrypt_fuse::vault::Vault::config_path(&source)
                    .is_file()
                    .then_some(source)
            });
        return vault.map(|v| (v, Some(m.mount_point.clone())));
    }
    mounts::enclosing_vault(path).map(|v| (v, None))
}

/// `status` of a path in a vault or one of its mounts.
fn vault_status(args: &PathArgs, vault_dir: &Path, via: Option<&Path>) -> anyhow::Result<ExitCode> {
    let vault = fscrypt_fuse::vault::Vault::open(vault_dir)?;
    let policy = Policy::V2(*vault.policy());
    let mut protectors = Vec::new();
    if vault.has_passphrase() {
        protectors.push("passphrase");
    }
    if vault.has_key_file() {
        protectors.push("key_file");
    }
    if vault.has_recovery_key() {
        protectors.push("recovery_key");
    }
    let list = mounts::vault_mounts(vault_dir);
    if args.json {
        let out = serde_json::json!({
            "ok": true,
            "path": args.path.display().to_string(),
            "vault": vault_dir.display().to_string(),
            "through_mount": via.map(|m| m.display().to_string()),
            "policy": kernel::policy_json(&policy),
            "key_identifier": vault.key_identifier().to_string(),
            "protectors": protectors,
            "mounts": list.iter().map(|m| serde_json::json!({
                "mount_point": m.mount_point.display().to_string(),
                "state": m.state.word(),
                "pid": m.pid,
            })).collect::<Vec<_>>(),
        });
        kernel::print_json(&out)?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut o = String::new();
    match via {
        Some(m) => o.push_str(&format!(
            "{}: in the fscrypt-rs mount {} of the vault {}\n",
            args.path.display(),
            m.display(),
            vault_dir.display()
        )),
        None => o.push_str(&format!(
            "{}: in the fscrypt-rs vault (backing directory) {}\n",
            args.path.display(),
            vault_dir.display()
        )),
    }
    o.push_str(&format!("Vault: {}\n", vault_dir.display()));
    o.push_str(&kernel::policy_text(&policy));
    o.push_str(&format!("Key identifier: {}\n", vault.key_identifier()));
    o.push_str(&format!(
        "Protectors: {}\n",
        protectors
            .iter()
            .map(|p| p.replace('_', " "))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    if list.is_empty() {
        o.push_str("Mounts: none\n");
    } else {
        o.push_str("Mounts:\n");
        for m in &list {
            let extra = match (m.state, m.pid) {
                (MountState::Dead, _) => format!(
                    " (its daemon is gone; clear it with `{}`)",
                    mounts::clear_command(&m.mount_point)
                ),
                (_, Some(pid)) => format!(" (daemon pid {pid})"),
                (_, None) => String::new(),
            };
            o.push_str(&format!(
                "\t{}: {}{extra}\n",
                m.mount_point.display(),
                m.state.word()
            ));
        }
    }
    kernel::out(format_args!("{o}"))?;
    Ok(ExitCode::SUCCESS)
}
