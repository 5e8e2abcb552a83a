//! The in-process mount harness of the real-mount tests (feature `fuse`):
//! a vault (backing directory with its root context, mount point) mounted
//! by `fscrypt_fuse::mount_background` in a thread of the test process, and
//! unmounted when dropped, even when the test panics.

use std::path::{Path, PathBuf};
use std::time::Duration;

use fscrypt::{KeyIdentifier, MasterKey, PolicyV2};
use fscrypt_fuse::{BackgroundMount, EncryptedFs, FsOptions, MountConfig};

use crate::TempDir;
use crate::mount::{is_mounted, wait_mounted};

/// The test master key: 64 fixed bytes.
pub const KEY: [u8; 64] = {
    let mut k = [0u8; 64];
    let mut i = 0;
    while i < 64 {
        k[i] = (i as u8).wrapping_mul(7).wrapping_add(3);
        i += 1;
    }
    k
};

/// [`KEY`] as a master key.
pub fn master() -> MasterKey {
    MasterKey::new(&KEY).expect("master key")
}

/// The default v2 policy for [`KEY`].
pub fn policy() -> PolicyV2 {
    let id: KeyIdentifier = master().identifier();
    PolicyV2::new_default(id)
}

/// An in-process [`EncryptedFs`] over `backing` with [`policy`] and
/// default options, unlocked with [`master`] or locked.
///
/// # Panics
/// If the filesystem cannot be opened.
pub fn open_fs(backing: impl AsRef<Path>, unlocked: bool) -> EncryptedFs {
    EncryptedFs::new(
        backing.as_ref(),
        policy(),
        unlocked.then(master),
        FsOptions::default(),
    )
    .unwrap()
}

/// The mount configuration the tests use (`allow_other`, and `suid`/`dev`
/// as on a local filesystem, for the POSIX suites).
pub fn mount_config(backing: &Path, policy: PolicyV2, unlocked: bool) -> MountConfig {
    MountConfig {
        noexec: false,
        backing_dir: backing.to_path_buf(),
        policy,
        master_key: if unlocked { Some(master()) } else { None },
        read_only: false,
        allow_other: true,
        suid: true,
        dev: true,
        fs_name: "fscrypt-test".into(),
        shared_storage: false,
        acl: false,
        default_permissions: false,
        inode_limit: None,
        io_uring: true,
        idle: None,
        state_dir: None,
    }
}

/// Mounts `config` on `mnt` in the background and waits (up to 5 s) until
/// the mount is live.
///
/// # Panics
/// If mounting fails or the mount does not appear.
pub fn mount_live(config: MountConfig, mnt: &Path) -> BackgroundMount {
    let m = fscrypt_fuse::mount_background(config, mnt).expect("mount");
    assert!(
        wait_mounted(mnt, Duration::from_secs(5)),
        "mount did not appear"
    );
    m
}

/// A vault: backing dir (with root context), mountpoint, maybe a live mount
/// (unmounted on drop).
pub struct Vault {
    /// The live mount, if any.
    pub mount: Option<BackgroundMount>,
    /// The mount point.
    pub mnt: TempDir,
    /// The backing directory.
    pub backing: TempDir,
    /// The root directory's policy.
    pub policy: PolicyV2,
    /// Mount with POSIX ACLs (`-o acl`).
    pub acl: bool,
    /// Mount without `allow_other` (only this process's user; no
    /// `default_permissions`): what `fscrypt-rs mount` does by default.
    pub owner_only: bool,
    /// [`MountConfig::inode_limit`] (none by default).
    pub inode_limit: Option<usize>,
    /// This machine's state of the vault (the generations seen, to notice
    /// a file put back to an earlier version of itself).
    pub state: TempDir,
}

impl Vault {
    /// A new vault with the default policy, mounted with the key.
    pub fn new(tag: &str) -> Vault {
        Vault::with_policy(tag, policy())
    }

    /// A new vault with `policy`, mounted with the key (of the latest
    /// format, as `fscrypt-rs init` makes).
    pub fn with_policy(tag: &str, policy: PolicyV2) -> Vault {
        Vault::with_format(tag, policy, fscrypt_fuse::layout::Format::LATEST)
    }

    /// A new vault with `policy` in the on-disk `format` (format 1 for the
    /// tests that keep old vaults working), mounted with the key.
    pub fn with_format(tag: &str, policy: PolicyV2, format: fscrypt_fuse::layout::Format) -> Vault {
        let backing = TempDir::new(&format!("{tag}-backing"));
        let mnt = TempDir::new(&format!("{tag}-mnt"));
        fscrypt_fuse::create_root_with(backing.path(), &policy, format).expect("create_root");
        let mut v = Vault {
            mount: None,
            mnt,
            backing,
            policy,
            acl: false,
            owner_only: false,
            inode_limit: None,
            state: TempDir::new(&format!("{tag}-state")),
        };
        v.remount(true);
        v
    }

    /// The configuration of this vault's mounts.
    pub fn config(&self, unlocked: bool) -> MountConfig {
        MountConfig {
            acl: self.acl,
            allow_other: !self.owner_only,
            inode_limit: self.inode_limit,
            state_dir: Some(self.state.path().join("vault")),
            ..mount_config(self.backing.path(), self.policy, unlocked)
        }
    }

    /// (Re)mounts, with the key or locked.
    pub fn remount(&mut self, unlocked: bool) {
        if let Some(m) = self.mount.take() {
            m.unmount().expect("unmount");
        }
        self.mount = Some(mount_live(self.config(unlocked), self.mnt.path()));
    }

    /// A path in the mount.
    pub fn p(&self, rel: &str) -> PathBuf {
        self.mnt.path().join(rel)
    }
}

impl Drop for Vault {
    fn drop(&mut self) {
        if let Some(m) = self.mount.take() {
            let _ = m.unmount();
        }
        if is_mounted(self.mnt.path()) {
            crate::clear_mount(self.mnt.path());
        }
    }
}

/// The tree below the root of `fs` read through `EncryptedFs` itself (no
/// mount), as a [`crate::fixture::Tree`], and the plaintext of every regular
/// file by FUSE inode number. Panics on any error, or when a file's
/// contents do not have the size its attributes report.
pub fn read_tree(
    fs: &EncryptedFs,
) -> (
    crate::fixture::Tree,
    std::collections::HashMap<u64, Vec<u8>>,
) {
    let mut tree = crate::fixture::Tree::new();
    let mut data = std::collections::HashMap::new();
    read_dir_into(fs, fscrypt_fuse::ROOT, "", &mut tree, &mut data);
    (tree, data)
}

fn read_dir_into(
    fs: &EncryptedFs,
    dir: fscrypt_fuse::InodeNo,
    prefix: &str,
    out: &mut crate::fixture::Tree,
    data: &mut std::collections::HashMap<u64, Vec<u8>>,
) {
    use crate::fixture::{dir_entry, file_entry, symlink_entry};
    let fh = fs.opendir(dir).unwrap();
    let mut names: Vec<std::ffi::OsString> = Vec::new();
    fs.readdir(fh, 0, |_, _, _, name| {
        if name != "." && name != ".." {
            names.push(name.to_owned());
        }
        false
    })
    .unwrap();
    fs.releasedir(fh).unwrap();
    for name in names {
        let attr = fs.lookup(dir, &name).unwrap();
        let ino = fscrypt_fuse::InodeNo(attr.ino.0);
        let rel = format!("{prefix}{}", name.to_str().unwrap());
        match attr.kind {
            fuser::FileType::Directory => {
                out.insert(rel.clone(), dir_entry());
                read_dir_into(fs, ino, &format!("{rel}/"), out, data);
            }
            fuser::FileType::Symlink => {
                let target = String::from_utf8(fs.readlink(ino).unwrap()).unwrap();
                out.insert(rel, symlink_entry(&target));
            }
            _ => {
                let fh = fs
                    .open(ino, rustix::fs::OFlags::RDONLY.bits() as i32)
                    .unwrap();
                let mut bytes = Vec::new();
                let mut buf = Vec::new();
                loop {
                    let r = fs.read(fh, bytes.len() as u64, 65536, &mut buf).unwrap();
                    if r.is_empty() {
                        break;
                    }
                    bytes.extend_from_slice(&buf[r]);
                }
                fs.release(fh).unwrap();
                assert_eq!(bytes.len() as u64, attr.size, "{rel}: size");
                out.insert(rel, file_entry(&bytes));
                data.insert(attr.ino.0, bytes);
            }
        }
    }
}
