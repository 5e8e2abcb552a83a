//! `fscrypt-rs status`: encryption status of a directory or filesystem.

use std::path::PathBuf;
use std::process::ExitCode;

use fscrypt::Policy;
use fscrypt_linux::keyring::{self, KeyPresence, KeySpec};
use fscrypt_linux::{Error, ext4, mountinfo, policy};

use super::kernel;

/// Arguments of `fscrypt-rs status`.
#[derive(clap::Args, Debug)]
#[command(
    about = "Show the encryption status of a directory or filesystem",
    long_about = "For an encrypted directory or file: its policy, key identifier and whether \
                  the key is present. For any path: the filesystem holding it and whether it \
                  supports encryption (for ext4 read as root: the encrypt, stable_inodes and \
                  casefold features)."
)]
pub struct Args {
    /// A directory, file or mount point.
    pub path: PathBuf,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs `fscrypt-rs status`.
pub fn exec(args: Args) -> anyhow::Result<ExitCode> {
    let json = args.json;
    kernel::json_errors(json, || exec_inner(args))
}

fn exec_inner(args: Args) -> anyhow::Result<ExitCode> {
    let m = mountinfo::find_mount(&args.path)?;
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
    match policy::get_policy(&args.path) {
        Ok(p) => {
            let spec = match &p {
                Policy::V1(p1) => KeySpec::Descriptor(p1.master_key_descriptor),
                Policy::V2(p2) => KeySpec::Identifier(p2.master_key_identifier),
            };
            out["encrypted"] = true.into();
            out["policy"] = kernel::policy_json(&p);
            let key = match keyring::key_status(&m.mount_point, spec) {
                Ok(st) => match st.presence {
                    KeyPresence::Absent => "absent",
                    KeyPresence::Present => "present",
                    KeyPresence::IncompletelyRemoved => "incompletely_removed",
                },
                Err(_) => "unknown",
            };
            out["key_status"] = key.into();
            policy_text = Some((kernel::policy_text(&p), key));
        }
        Err(Error::NotEncrypted { .. }) => out["encrypted"] = false.into(),
        Err(Error::EncryptionNotSupported { .. }) => out["encrypted"] = false.into(),
        Err(e) => return kernel::fail(args.json, &e),
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
            "Encryption supported: no (for ext4: `tune2fs -O encrypt {}`)\n",
            m.source
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
    kernel::out(format_args!("{o}"))?;
    Ok(ExitCode::SUCCESS)
}
