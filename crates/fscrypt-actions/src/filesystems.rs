//! The mounted filesystems and their fscrypt state: `fscrypt-rs status`
//! without a path, the overview google/fscrypt's `fscrypt status` gives
//! (which filesystems support encryption, which are set up). Only
//! filesystem types with kernel fscrypt support are looked at, through
//! their main mount (the first mount of each device showing the
//! filesystem's root), so no network or FUSE mount is ever touched.

use std::path::PathBuf;

use fscrypt_linux::policy;

use crate::context::Context;
use crate::source::Source;

/// Filesystem types the kernel can encrypt (fs/crypto users).
pub const CAPABLE_TYPES: &[&str] = &["ext4", "f2fs", "ubifs", "ceph", "lustre"];

/// Whether a filesystem can hold encrypted directories.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Support {
    /// It can (the kernel answers the policy query on its root).
    Supported,
    /// Its type can, but the feature is off (ext4, f2fs: `tune2fs -O
    /// encrypt` / `fsck.f2fs -O encrypt`, unmounted).
    NotEnabled,
    /// This kernel or filesystem cannot.
    NotSupported,
    /// The query failed otherwise (the reason, one line).
    Unknown(String),
}

impl Support {
    /// The word `status` prints (google/fscrypt's column values).
    pub fn word(&self) -> &'static str {
        match self {
            Support::Supported => "supported",
            Support::NotEnabled => "not enabled",
            Support::NotSupported => "not supported",
            Support::Unknown(_) => "unknown",
        }
    }
}

/// The google/fscrypt metadata of a filesystem.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Setup {
    /// No `.fscrypt` directory (`fscrypt-rs setup MNT` makes one).
    Absent,
    /// Set up: how many protectors (kept here, and linked from here) and
    /// policies it holds that this user may read.
    Ready {
        /// Protector files kept here.
        protectors: usize,
        /// Protectors linked from here (kept on another filesystem).
        linked_protectors: usize,
        /// Policy files.
        policies: usize,
    },
    /// A `.fscrypt` that cannot be used (the reason, one line).
    Unusable(String),
}

/// One filesystem of the overview.
#[derive(Clone, Debug)]
pub struct Filesystem {
    /// Its main mount point.
    pub mount_point: PathBuf,
    /// The mount's source (the device).
    pub device: String,
    /// The filesystem type.
    pub fs_type: String,
    /// Whether it can hold encrypted directories.
    pub support: Support,
    /// Its google/fscrypt metadata.
    pub setup: Setup,
}

/// Every mounted filesystem of a type the kernel can encrypt
/// ([`CAPABLE_TYPES`]), once each (its main mount), in mount-table order:
/// whether encryption is supported there and whether it is set up for
/// the google/fscrypt flow.
pub fn overview(ctx: &Context) -> Vec<Filesystem> {
    let main = ctx.main_mounts_where(|m| CAPABLE_TYPES.contains(&m.fs_type.as_str()));
    main.into_iter()
        .filter_map(|mm| {
            let info = ctx
                .mounts()
                .iter()
                .find(|m| m.mount_point == mm.path && (m.major, m.minor) == (mm.major, mm.minor))?;
            let support = match policy::get_policy(&mm.path) {
                Ok(_) | Err(fscrypt_linux::Error::NotEncrypted { .. }) => Support::Supported,
                Err(fscrypt_linux::Error::EncryptionNotSupported { .. }) => {
                    if matches!(info.fs_type.as_str(), "ext4" | "f2fs") {
                        Support::NotEnabled
                    } else {
                        Support::NotSupported
                    }
                }
                Err(e) => Support::Unknown(e.to_string()),
            };
            Some(Filesystem {
                setup: setup_of(ctx, &mm.path),
                mount_point: mm.path,
                device: info.source.clone(),
                fs_type: info.fs_type.clone(),
                support,
            })
        })
        .collect()
}

/// The metadata state of the filesystem mounted at `mount`.
fn setup_of(ctx: &Context, mount: &std::path::Path) -> Setup {
    let store = ctx.store_at(mount);
    let src: &dyn Source = &store;
    if !src.exists() {
        return Setup::Absent;
    }
    if let Err(e) = src.check_setup() {
        return Setup::Unusable(e.to_string());
    }
    let count = |r: Result<Vec<String>, fscrypt_metadata::Error>| r.map(|v| v.len());
    match (
        count(src.protectors()),
        count(src.linked_protectors()),
        count(src.policies()),
    ) {
        (Ok(protectors), Ok(linked_protectors), Ok(policies)) => Setup::Ready {
            protectors,
            linked_protectors,
            policies,
        },
        (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => Setup::Unusable(e.to_string()),
    }
}
