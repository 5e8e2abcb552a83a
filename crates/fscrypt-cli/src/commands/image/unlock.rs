//! The options every `image` command takes to unlock directories with
//! google/fscrypt metadata instead of raw keys: the image's own
//! `/.fscrypt` (read off the image) and any `--metadata DIR`, one
//! protector (`--unlock-with ID`, `--user NAME`, or the only one), and its
//! secret (`--passfile`, `--extpass`, `--key` for a raw-key protector, or
//! the terminal). The unwrapped policy keys join the raw keys
//! (`fscrypt_ext4::image::KeySet::add_raw`); the choosing and unwrapping is
//! [`fscrypt_actions::offline`].

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use fscrypt_actions::User;
use fscrypt_actions::offline::{Choice, MAX_FILE, OfflineMetadata};
use fscrypt_ext4::InodeKind;
use fscrypt_ext4::image::read::Contents;
use fscrypt_ext4::image::{Image, KeySet, join};
use fscrypt_metadata::actions::PolicyKey;
use fscrypt_metadata::proto::SourceType;

use crate::support::gfs::{self, SecretArgs};

/// How to unlock with google/fscrypt metadata.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct UnlockArgs {
    /// A google/fscrypt metadata directory (a `.fscrypt`) read besides the
    /// image's own /.fscrypt, e.g. the root filesystem's, where login
    /// protectors live (the image holds only a link to them). Repeatable.
    #[arg(long = "metadata", value_name = "DIR")]
    pub metadata: Vec<PathBuf>,
    /// Unlock with this protector (its 16 hex digit descriptor, as
    /// `image ls IMAGE /.fscrypt/protectors` or `fscrypt-rs status` shows).
    #[arg(long = "unlock-with", value_name = "ID", conflicts_with = "user")]
    pub unlock_with: Option<String>,
    /// Unlock with this user's login protector (a name known here, or a
    /// uid), with the user's login password.
    #[arg(long, value_name = "NAME|UID")]
    pub user: Option<String>,
    /// The protector's secret: --passfile/--extpass for a passphrase, --key
    /// for a raw-key protector (default: asked on the terminal).
    #[command(flatten)]
    pub secret: SecretArgs,
}

impl UnlockArgs {
    /// Whether an option asks for unlocking with metadata.
    fn given(&self) -> bool {
        !self.metadata.is_empty()
            || self.unlock_with.is_some()
            || self.user.is_some()
            || self.secret.key.is_some()
            || self.secret.pass.is_given()
    }

    /// The policy keys the metadata gives, `(policy descriptor, key)`:
    /// when an option of these asks for it, or when no raw key was given
    /// (`raw_given` false), the image has metadata, and stdin is a
    /// terminal (then the passphrase is asked, as `fscrypt unlock` does).
    /// Otherwise none, with a note on stderr when the image could be
    /// unlocked that way.
    pub fn policy_keys(
        &self,
        image: &Path,
        raw_given: bool,
    ) -> anyhow::Result<Vec<(String, PolicyKey)>> {
        let asked = self.given();
        if !asked && raw_given {
            return Ok(Vec::new());
        }
        let mut meta = OfflineMetadata::new();
        let img = Image::open(image, KeySet::new())?;
        read_image_metadata(&img, &mut meta);
        for d in &self.metadata {
            meta.add_dir(d).map_err(gfs::actions)?;
        }
        for s in &meta.skipped {
            eprintln!("fscrypt-rs: warning: {s}");
        }
        if !asked && !meta.has_policies() {
            return Ok(Vec::new());
        }
        if !asked && !std::io::stdin().is_terminal() {
            eprintln!(
                "fscrypt-rs: note: {} has google/fscrypt metadata: unlock its directories with --passfile \
                 FILE, --extpass CMD, --unlock-with ID or --user NAME (or raw keys with \
                 --key-file)",
                image.display()
            );
            return Ok(Vec::new());
        }
        if !meta.has_policies() {
            anyhow::bail!(
                "{} has no google/fscrypt policies in /.fscrypt{}: give the filesystem's \
                 .fscrypt with --metadata DIR, or the raw keys with --key-file",
                image.display(),
                if self.metadata.is_empty() {
                    ""
                } else {
                    " nor in --metadata"
                }
            );
        }
        let choice = match (&self.unlock_with, &self.user) {
            (Some(id), _) => Choice::Named(id.clone()),
            (None, Some(u)) => Choice::LoginOf(match u.parse::<u32>() {
                Ok(uid) => uid,
                Err(_) => User::named(u).map_err(gfs::actions)?.uid,
            }),
            (None, None) => Choice::Any {
                raw_key: self.secret.key.is_some(),
            },
        };
        crate::support::secret::protect_process();
        let p = meta.choose(&choice).map_err(gfs::actions)?;
        let what = if p.source_type() == SourceType::PamPassphrase {
            format!("the login password of uid {}", p.uid)
        } else {
            format!("protector {}", p.protector_descriptor)
        };
        let secret = gfs::read_secret(&self.secret, p.source_type(), &what, false)?;
        meta.unlock(p, &secret).map_err(gfs::actions)
    }
}

/// How a policy key unwrapped from the metadata is named in messages
/// (`IMAGE:/.fscrypt/policies/DESCRIPTOR`).
pub fn policy_source(image: &Path, name: &str) -> PathBuf {
    PathBuf::from(format!("{}:/.fscrypt/policies/{name}", image.display()))
}

/// Adds the protector and policy files of the image's `/.fscrypt` (none
/// when it has no such directory; an unreadable file is skipped with a
/// warning, as every file of an image is untrusted).
fn read_image_metadata(img: &Image, meta: &mut OfflineMetadata) {
    for (sub, policy) in [("protectors", false), ("policies", true)] {
        let dir = format!("/.fscrypt/{sub}");
        let Ok((node, shown)) = img.resolve(dir.as_bytes()) else {
            continue;
        };
        let listing = match img.list(&node, &shown) {
            Ok(l) => l,
            Err(e) => {
                meta.skipped.push(format!("{shown}: {e}"));
                continue;
            }
        };
        for entry in listing.entries {
            let Ok(name) = std::str::from_utf8(&entry.name) else {
                continue;
            };
            let child_shown = join(&shown, &entry.name);
            let origin = format!("{}:{child_shown}", img_name(img));
            let bytes = img
                .child(&node, &entry, &child_shown)
                .map_err(|e| e.to_string())
                .and_then(|child| {
                    if child.kind() != InodeKind::Regular || child.inode.size > MAX_FILE {
                        return Err(format!("not a regular file of at most {MAX_FILE} bytes"));
                    }
                    let mut out = Vec::new();
                    Contents::new(img, &child, &child_shown)
                        .and_then(|mut c| c.copy_to(&mut out))
                        .map_err(|e| e.to_string())?;
                    Ok(out)
                });
            match bytes {
                Ok(b) if policy => meta.add_policy(name, &b, &origin),
                Ok(b) => meta.add_protector(name, &b, &origin),
                Err(e) => meta.skipped.push(format!("{origin}: skipped: {e}")),
            }
        }
    }
}

fn img_name(img: &Image) -> String {
    img.ext4().path().display().to_string()
}
