//! `fscrypt-rs info CIPHERDIR [--json]`: what a vault's config says, without
//! the key: format and version, creation time (when recorded), the root
//! policy, the master key identifier, and each protector with its kind and
//! KDF cost (with an estimate of the unlock time on this machine).
//!
//! Nothing secret is shown: no wrapped key, nonce or salt (the salt is not
//! secret, but has no use to a reader). The config is read by
//! `fscrypt_vault::Vault::open_with` (a regular file only, bounded in size and
//! cost).

use std::path::PathBuf;
use std::process::ExitCode;

use fscrypt_vault::FS_BLOCK_SIZE;
use fscrypt_vault::config::{FORMAT_NAME, ProtectorRecord, format_rfc3339};
use serde_json::json;

use crate::support::unlock::ConfigArg;
use crate::support::{seal, secret};

/// Arguments of `fscrypt-rs info`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The vault (directory made by `fscrypt-rs init`).
    pub cipherdir: PathBuf,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
    /// Where the vault's config is (default: in CIPHERDIR).
    #[command(flatten)]
    pub config: ConfigArg,
}

/// What a format 3 vault authenticates, as `info` shows it.
const INTEGRITY_V3: &str =
    "authenticated (contents, sizes, names, file locations; rollback on this machine)";

/// Runs `fscrypt-rs info`.
pub fn exec(args: Args) -> anyhow::Result<ExitCode> {
    let vault = args.config.open(&args.cipherdir)?;
    let p = vault.policy();
    let data_unit = match p.log2_data_unit_size {
        0 => FS_BLOCK_SIZE,
        n => 1u32 << n,
    };
    let created = vault.created();
    // The on-disk format of the files (the root's `fscrypt.dir`), apart from
    // the config's own version.
    let data_format = fscrypt_vault::read_format(&args.cipherdir);
    let data_format_text = match &data_format {
        Ok(fscrypt_vault::layout::Format::V1) => {
            "1 (file sizes in the headers: stat reads each file once)".to_owned()
        }
        Ok(fscrypt_vault::layout::Format::V3) => "3".to_owned(),
        Ok(f) => format!("{f} (file sizes in the backing lengths)"),
        Err(e) => {
            format!("unknown: the root's fscrypt.dir cannot be read ({e}); run fscrypt-rs fsck")
        }
    };
    // What the data format authenticates (docs/vault-format.md §10).
    let integrity = match &data_format {
        Ok(fscrypt_vault::layout::Format::V3) => Some(INTEGRITY_V3.to_owned()),
        Ok(f) => Some(format!("none (format {f})")),
        Err(_) => None,
    };
    // One probe per passphrase protector (a few milliseconds each).
    let estimates: Vec<Option<std::time::Duration>> = vault
        .protectors()
        .iter()
        .map(|p| match &p.record {
            ProtectorRecord::Passphrase { params, .. } => Some(params.estimate()),
            _ => None,
        })
        .collect();
    let used = fscrypt_vault::usage::last_use(&vault.key_identifier());
    let mut protectors: Vec<serde_json::Value> = vault
        .protectors()
        .iter()
        .zip(&estimates)
        .map(|(p, estimate)| match &p.record {
            ProtectorRecord::Passphrase { params, .. } => json!({
                "name": p.name,
                "created": p.created,
                "kind": "passphrase",
                "kdf": "argon2id",
                "argon2_version": 19,
                "m_cost_kib": params.m_cost_kib,
                "t_cost": params.t_cost,
                "p_cost": params.p_cost,
                "estimated_unlock_seconds": estimate
                    .map(|d| (d.as_secs_f64() * 100.0).round() / 100.0),
            }),
            ProtectorRecord::KeyFile { .. } => json!({
                "name": p.name,
                "created": p.created,
                "kind": "key_file",
                "kdf": "hkdf-sha512",
            }),
            ProtectorRecord::RecoveryKey { .. } => json!({
                "name": p.name,
                "created": p.created,
                "kind": "recovery_key",
                "kdf": "hkdf-sha512",
            }),
            ProtectorRecord::Sealed { kind, .. } => {
                let fields: serde_json::Map<String, serde_json::Value> = seal::record_of(p)
                    .ok()
                    .flatten()
                    .map(|s| s.describe())
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(k, v)| (k.to_owned(), v.into()))
                    .collect();
                json!({
                    "name": p.name,
                    "created": p.created,
                    "kind": kind.label(),
                    "kdf": "hkdf-sha512",
                    "sealed": fields,
                })
            }
        })
        .collect();
    for (json, p) in protectors.iter_mut().zip(vault.protectors()) {
        json["last_used"] = used.get(&p.name).copied().into();
    }
    if args.json {
        let out = json!({
            "cipherdir": args.cipherdir.display().to_string(),
            "format": FORMAT_NAME,
            "version": vault.config_version(),
            "data_format": data_format.as_ref().ok().map(|f| f.byte()),
            "integrity": integrity,
            "created": created,
            "created_utc": created.map(format_rfc3339),
            "key_identifier": vault.key_identifier().to_string(),
            "policy": {
                "version": 2,
                "contents_encryption_mode": p.contents_mode.0,
                "contents_encryption_mode_name": p.contents_mode.to_string(),
                "filenames_encryption_mode": p.filenames_mode.0,
                "filenames_encryption_mode_name": p.filenames_mode.to_string(),
                "flags": p.flags.bits(),
                "padding": p.flags.padding(),
                "direct_key": p.flags.direct_key(),
                "log2_data_unit_size": p.log2_data_unit_size,
                "data_unit_size": data_unit,
            },
            "protectors": protectors,
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!("Vault {}", args.cipherdir.display());
    println!(
        "  format: {FORMAT_NAME}, version {}",
        vault.config_version()
    );
    println!("  data format: {data_format_text}");
    if let Some(i) = &integrity {
        println!("  integrity: {i}");
    }
    println!(
        "  created: {}",
        created.map_or_else(|| "not recorded".to_owned(), format_rfc3339)
    );
    println!("  key identifier: {}", vault.key_identifier());
    println!(
        "  policy: v2, contents {} ({}), filenames {} ({}), padding {}, data unit {} bytes{}, flags {:#04x}{}",
        p.contents_mode,
        p.contents_mode.0,
        p.filenames_mode,
        p.filenames_mode.0,
        p.flags.padding(),
        data_unit,
        if p.log2_data_unit_size == 0 {
            " (the block size)"
        } else {
            ""
        },
        p.flags.bits(),
        if p.flags.direct_key() {
            " (DIRECT_KEY)"
        } else {
            ""
        }
    );
    println!(
        "  protectors: {} (last used on this machine: {})",
        protectors.len(),
        if used.is_empty() {
            "never recorded".to_owned()
        } else {
            vault
                .protectors()
                .iter()
                .filter_map(|p| {
                    used.get(&p.name)
                        .map(|t| format!("{} {}", p.name, format_rfc3339(*t)))
                })
                .collect::<Vec<_>>()
                .join(", ")
        }
    );
    for (i, (pr, estimate)) in vault.protectors().iter().zip(&estimates).enumerate() {
        match &pr.record {
            ProtectorRecord::Passphrase { params, .. } => println!(
                "    {}. {}: passphrase, Argon2id v1.3, m={} KiB{}, t={}, p={} (about {} to unlock here)",
                i + 1,
                pr.name,
                params.m_cost_kib,
                if params.m_cost_kib >= 1024 {
                    format!(" ({} MiB)", params.m_cost_kib / 1024)
                } else {
                    String::new()
                },
                params.t_cost,
                params.p_cost,
                secret::format_seconds(estimate.unwrap_or_default())
            ),
            ProtectorRecord::KeyFile { .. } => {
                println!("    {}. {}: key file, HKDF-SHA512", i + 1, pr.name);
            }
            ProtectorRecord::RecoveryKey { .. } => {
                println!("    {}. {}: recovery key, HKDF-SHA512", i + 1, pr.name);
            }
            ProtectorRecord::Sealed { kind, .. } => {
                println!(
                    "    {}. {}: {kind}, HKDF-SHA512, {}",
                    i + 1,
                    pr.name,
                    seal::describe(pr)
                );
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339() {
        assert_eq!(format_rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(format_rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(format_rfc3339(1_767_225_599), "2025-12-31T23:59:59Z");
        assert_eq!(format_rfc3339(1_767_225_600), "2026-01-01T00:00:00Z");
        assert_eq!(format_rfc3339(4_102_444_800), "2100-01-01T00:00:00Z");
    }
}
