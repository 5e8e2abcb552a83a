//! Whether an image is mounted: its block device, or a loop device backed
//! by the image file, appears in `/proc/self/mountinfo`. Used only to word
//! the refusal of an image whose journal is in use ([`super::ImageError::Mounted`]).

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

/// A mount point of the filesystem on `path` (a block device, or an image
/// file behind a loop device), or `None` when it is not mounted or this
/// cannot be told (no `/proc`, no `/sys`).
pub(crate) fn mount_point(path: &Path) -> Option<PathBuf> {
    let meta = std::fs::metadata(path).ok()?;
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let devices: Vec<String> = if meta.file_type().is_block_device() {
        let rdev = meta.rdev();
        vec![format!(
            "{}:{}",
            rustix::fs::major(rdev),
            rustix::fs::minor(rdev)
        )]
    } else if meta.is_file() {
        loop_devices_of(&std::fs::canonicalize(path).ok()?)
    } else {
        return None;
    };
    devices
        .iter()
        .find_map(|dev| mounted_device(&mountinfo, dev))
}

/// The `MAJOR:MINOR` numbers of the loop devices whose backing file is
/// `image` (`/sys/block/loopN/loop/backing_file`).
fn loop_devices_of(image: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir("/sys/block") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("loop"))
        .filter(|e| {
            std::fs::read_to_string(e.path().join("loop/backing_file"))
                .is_ok_and(|b| Path::new(b.trim_end_matches('\n')) == image)
        })
        .filter_map(|e| std::fs::read_to_string(e.path().join("dev")).ok())
        .map(|d| d.trim().to_owned())
        .collect()
}

/// The mount point (field 5, unescaped) of the first `mountinfo` line whose
/// device (field 3) is `dev` (`MAJOR:MINOR`).
fn mounted_device(mountinfo: &str, dev: &str) -> Option<PathBuf> {
    mountinfo.lines().find_map(|line| {
        let mut fields = line.split(' ');
        let device = fields.nth(2)?;
        let point = fields.nth(1)?;
        (device == dev).then(|| PathBuf::from(unescape(point)))
    })
}

/// Undoes the kernel's octal escapes in `mountinfo` (`\040` for a space,
/// `\011`, `\012`, `\134`).
fn unescape(field: &str) -> String {
    let b = field.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && let Some(oct) = b.get(i + 1..i + 4)
            && oct.iter().all(|c| (b'0'..=b'7').contains(c))
        {
            out.push(
                oct.iter()
                    .fold(0u8, |v, c| v.wrapping_mul(8).wrapping_add(c - b'0')),
            );
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    const INFO: &str = "22 1 253:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw\n\
                        40 22 7:3 / /mnt/my\\040disk rw,relatime shared:9 - ext4 /dev/loop3 rw\n";

    #[test]
    fn finds_the_mount_point_of_a_device_number_unescaped() {
        assert_eq!(
            mounted_device(INFO, "7:3"),
            Some(PathBuf::from("/mnt/my disk"))
        );
        assert_eq!(mounted_device(INFO, "253:1"), Some(PathBuf::from("/")));
        assert_eq!(mounted_device(INFO, "7:4"), None);
        assert_eq!(mounted_device("short line\n", "7:4"), None);
    }

    #[test]
    fn unescape_leaves_plain_and_broken_escapes() {
        assert_eq!(unescape("a\\134b\\011"), "a\\b\t");
        assert_eq!(unescape("end\\04"), "end\\04");
    }
}
