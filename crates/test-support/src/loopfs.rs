//! Scratch ext4 filesystems on loop devices, for tests (feature `loopdev`).
//!
//! [`LoopExt4::create`] makes a sparse image in a fresh temporary directory,
//! runs `mkfs.ext4`, attaches it with `losetup` and mounts it; dropping the
//! guard unmounts, detaches and removes the directory, whatever happened in
//! between. Needs root, `/dev/loop-control` and e2fsprogs; use
//! [`LoopExt4::unavailable_reason`] to skip loudly where they are missing.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

/// Errors while building or tearing down a scratch filesystem.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoopError {
    /// A command failed.
    #[error("`{cmd}` failed: {detail}")]
    Command {
        /// The command line.
        cmd: String,
        /// Its stderr or the spawn error.
        detail: String,
    },
    /// A filesystem operation failed.
    #[error("{path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}

fn run(cmd: &str, args: &[&str]) -> Result<String, LoopError> {
    let line = format!("{cmd} {}", args.join(" "));
    let out = Command::new(cmd)
        .args(args)
        .output()
        .map_err(|e| LoopError::Command {
            cmd: line.clone(),
            detail: e.to_string(),
        })?;
    if !out.status.success() {
        return Err(LoopError::Command {
            cmd: line,
            detail: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// A mounted scratch ext4 on a loop device; cleaned up on drop.
#[derive(Debug)]
pub struct LoopExt4 {
    dir: PathBuf,
    image: PathBuf,
    mount_point: PathBuf,
    device: Option<String>,
    mounted: bool,
    mount_options: String,
}

static COUNTER: AtomicU32 = AtomicU32::new(0);

impl LoopExt4 {
    /// Why scratch filesystems cannot be made here, or `None` if they can.
    pub fn unavailable_reason() -> Option<String> {
        if !rustix::process::geteuid().is_root() {
            return Some("not running as root".into());
        }
        if !Path::new("/dev/loop-control").exists() {
            return Some("no /dev/loop-control (loop devices unavailable)".into());
        }
        for tool in ["mkfs.ext4", "losetup", "mount", "umount"] {
            if Command::new(tool).arg("--version").output().is_err() {
                return Some(format!("`{tool}` not found (install e2fsprogs / mount)"));
            }
        }
        None
    }

    /// Create, attach and mount an image of `size_mib` MiB formatted with
    /// `mkfs.ext4 -q <mkfs_args>`, mounted with `-o <mount_options>` (may be
    /// empty).
    ///
    /// # Errors
    /// [`LoopError`] if any step fails (everything done so far is undone).
    pub fn create(
        size_mib: u64,
        mkfs_args: &[&str],
        mount_options: &str,
    ) -> Result<LoopExt4, LoopError> {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let dir = std::env::temp_dir().join(format!(
            "fscrypt-rs-loop-{}-{n}-{nanos}",
            std::process::id()
        ));
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| LoopError::Io { path, source }
        };
        std::fs::create_dir_all(&dir).map_err(io(&dir))?;
        let mut fs = LoopExt4 {
            image: dir.join("image"),
            mount_point: dir.join("mnt"),
            dir,
            device: None,
            mounted: false,
            mount_options: mount_options.to_string(),
        };
        std::fs::create_dir(&fs.mount_point).map_err(io(&fs.mount_point))?;
        let f = std::fs::File::create(&fs.image).map_err(io(&fs.image))?;
        f.set_len(size_mib << 20).map_err(io(&fs.image))?;
        drop(f);
        let image = fs.image.to_string_lossy().into_owned();
        let mut args = vec!["-q", "-F"];
        args.extend_from_slice(mkfs_args);
        args.push(&image);
        run("mkfs.ext4", &args)?;
        fs.device = Some(run("losetup", &["-f", "--show", &image])?);
        fs.mount()?;
        Ok(fs)
    }

    /// Mount (again) after [`LoopExt4::unmount`].
    ///
    /// # Errors
    /// [`LoopError::Command`].
    pub fn mount(&mut self) -> Result<(), LoopError> {
        if self.mounted {
            return Ok(());
        }
        let dev = self.device().to_string_lossy().into_owned();
        let mnt = self.mount_point.to_string_lossy().into_owned();
        if self.mount_options.is_empty() {
            run("mount", &["-t", "ext4", &dev, &mnt])?;
        } else {
            run(
                "mount",
                &["-t", "ext4", "-o", &self.mount_options, &dev, &mnt],
            )?;
        }
        self.mounted = true;
        Ok(())
    }

    /// Unmount (the loop device stays attached).
    ///
    /// # Errors
    /// [`LoopError::Command`].
    pub fn unmount(&mut self) -> Result<(), LoopError> {
        if self.mounted {
            run("umount", &[&self.mount_point.to_string_lossy()])?;
            self.mounted = false;
        }
        Ok(())
    }

    /// The loop device, e.g. `/dev/loop3`.
    pub fn device(&self) -> &Path {
        Path::new(self.device.as_deref().unwrap_or(""))
    }

    /// The mount point.
    pub fn mount_point(&self) -> &Path {
        &self.mount_point
    }

    /// The backing image file.
    pub fn image(&self) -> &Path {
        &self.image
    }
}

impl Drop for LoopExt4 {
    fn drop(&mut self) {
        if self.mounted {
            let mnt = self.mount_point.to_string_lossy().into_owned();
            if run("umount", &[&mnt]).is_err() {
                // Busy (e.g. a test still holds a file open): lazy unmount.
                let _ = run("umount", &["-l", &mnt]);
            }
        }
        if let Some(dev) = self.device.take() {
            let _ = run("losetup", &["-d", &dev]);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
