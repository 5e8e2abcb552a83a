//! `fscrypt-rs image ...`: offline access to kernel-encrypted ext4 images
//! and block devices (read-only, no kernel; `fscrypt_ext4::image`).

use std::path::PathBuf;
use std::process::ExitCode;

use fscrypt_ext4::image::{Image, KeySet};
use fscrypt_metadata::actions::PolicyKey;

pub mod cat;
pub mod extract;
pub mod info;
pub mod ls;
pub mod mount;
pub mod unlock;

/// Arguments of `fscrypt-rs image`.
#[derive(clap::Args, Debug)]
#[command(
    about = "Read a kernel-encrypted ext4 image or block device offline (read-only), with raw \
             keys or its google/fscrypt passphrases: info, ls, cat, extract, or mount it \
             through FUSE",
    long_about = "Read an ext4 image file or block device without the kernel: list, print and \
                  extract files of encrypted directories, or mount the whole image read-only \
                  through FUSE (image mount), with the master keys given \
                  (--key-file, --key-dir; v2 key identifiers and v1 descriptors are matched \
                  automatically), or unlocked with the image's google/fscrypt metadata \
                  (/.fscrypt, and --metadata DIR for a login protector on another filesystem) \
                  and a passphrase (--passfile, --extpass, the terminal), a chosen protector \
                  (--unlock-with ID) or a user's login password (--user NAME). Directories whose key is not given show the kernel's no-key \
                  names. The image is opened read-only and never modified.\n\nSupported: v1 and \
                  v2 policies with AES-256-XTS/AES-256-CTS (and the other modes without \
                  IV_INO_LBLK flags the format crate implements), 1 and 4 KiB blocks, extents and \
                  block maps, htree directories, fast and slow symlinks, sparse files, inline data. Not yet: \
                  journal replay (an \
                  image that needs recovery is refused), xattrs in extract."
)]
pub struct Args {
    #[command(subcommand)]
    command: Sub,
}

#[derive(clap::Subcommand, Debug)]
enum Sub {
    /// Features, block size, encrypted directories with their policies and
    /// keys, and which given keys matched.
    Info(info::Args),
    /// List a directory (decrypted names, or the kernel's no-key names).
    Ls(ls::Args),
    /// Print a file's plaintext to stdout.
    Cat(cat::Args),
    /// Copy a file or tree out of the image (contents, symlinks, hard links,
    /// modes, owners, times; sparse files stay sparse).
    Extract(extract::Args),
    /// Mount the whole image read-only through FUSE (decrypted names and
    /// contents where the key is given, the kernel's no-key names and
    /// ENOKEY on open elsewhere); unmount with `fscrypt-rs unmount`.
    Mount(mount::Args),
}

/// The image and keys every `image` command takes.
#[derive(clap::Args, Debug)]
pub struct ImageArgs {
    /// The ext4 image file or block device (opened read-only).
    pub image: PathBuf,
    /// A file holding a raw master key (16 to 64 bytes; 64 for AES-256-XTS).
    /// Repeat for several keys. A v1 key added under a descriptor other than
    /// its e4crypt one is matched when the file is named `<descriptor>` or
    /// `<descriptor>.key` (16 hex digits).
    #[arg(long = "key-file", value_name = "FILE")]
    pub key_files: Vec<PathBuf>,
    /// A directory of key files (every regular file in it).
    #[arg(long = "key-dir", value_name = "DIR")]
    pub key_dirs: Vec<PathBuf>,
    /// Unlocking with the google/fscrypt metadata (a passphrase, a login
    /// password, a protector's raw key) instead of raw master keys.
    #[command(flatten)]
    pub unlock: unlock::UnlockArgs,
}

impl ImageArgs {
    /// The raw keys of `--key-file` and `--key-dir`.
    ///
    /// # Errors
    /// A bad key file or directory.
    pub fn raw_keys(&self) -> anyhow::Result<KeySet> {
        let mut keys = KeySet::new();
        for f in &self.key_files {
            keys.add_file(f)?;
        }
        for d in &self.key_dirs {
            keys.add_dir(d)?;
        }
        Ok(keys)
    }

    /// The raw keys, and the policy keys the google/fscrypt metadata
    /// gives ([`unlock::UnlockArgs::policy_keys`], also in the set).
    ///
    /// # Errors
    /// A bad key file, the metadata's one-line reasons.
    pub fn key_set(&self) -> anyhow::Result<(KeySet, Vec<(String, PolicyKey)>)> {
        let mut keys = self.raw_keys()?;
        let raw_given = !self.key_files.is_empty() || !self.key_dirs.is_empty();
        let unlocked = self.unlock.policy_keys(&self.image, raw_given)?;
        for (name, key) in &unlocked {
            keys.add_raw(&key[..], &unlock::policy_source(&self.image, name))?;
        }
        Ok((keys, unlocked))
    }

    /// After a command (`ls`, `cat`, `extract`): one warning on stderr per
    /// key file that no object the command read was encrypted with (a
    /// wrong key file is otherwise silent: its directories just stay
    /// locked). `image info` checks the whole image.
    pub fn warn_unmatched(&self, img: &Image) {
        for k in img.keys().keys().iter().filter(|k| !k.matched()) {
            let given = self.key_files.contains(&k.source)
                || self.key_dirs.iter().any(|d| k.source.starts_with(d));
            if given {
                eprintln!(
                    "fscrypt-rs: warning: key file {}: nothing this command read is encrypted with it \
                     (identifier {}, v1 descriptor {}); `fscrypt-rs image info` lists the \
                     image's policies",
                    k.source.display(),
                    k.identifier,
                    k.named_descriptor.unwrap_or(k.descriptor)
                );
            }
        }
    }

    /// Load the keys ([`Self::key_set`]) and open the image.
    ///
    /// # Errors
    /// A bad key file, the metadata's one-line reasons, the image's.
    pub fn open(&self) -> anyhow::Result<Image> {
        Ok(Image::open(&self.image, self.key_set()?.0)?)
    }
}

/// `rwxr-xr-x`-style mode with the type letter.
pub fn mode_string(mode: u16) -> String {
    let t = match mode & 0xF000 {
        0x4000 => 'd',
        0xA000 => 'l',
        0x8000 => '-',
        0x2000 => 'c',
        0x6000 => 'b',
        0x1000 => 'p',
        0xC000 => 's',
        _ => '?',
    };
    let mut s = String::from(t);
    for (i, c) in "rwxrwxrwx".chars().enumerate() {
        s.push(if mode & (0o400 >> i) != 0 { c } else { '-' });
    }
    s
}

/// Runs `fscrypt-rs image` (a failure of the metadata unlocking exits
/// with the google/fscrypt commands' status for it, e.g. 12 for a wrong
/// passphrase: [`crate::support::gfs::report`]).
pub fn exec(args: Args) -> anyhow::Result<ExitCode> {
    crate::support::gfs::report(false, || match args.command {
        Sub::Info(a) => info::exec(a),
        Sub::Ls(a) => ls::exec(a),
        Sub::Cat(a) => cat::exec(a),
        Sub::Extract(a) => extract::exec(a),
        Sub::Mount(a) => mount::exec(a),
    })
}
