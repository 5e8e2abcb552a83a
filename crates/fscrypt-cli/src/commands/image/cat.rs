//! `fscrypt-rs image cat IMAGE PATH`.

use std::ffi::OsString;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::process::ExitCode;

use anyhow::bail;
use fscrypt_ext4::InodeKind;
use fscrypt_ext4::image::read::Contents;

/// Arguments of `fscrypt-rs image cat`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub image: super::ImageArgs,
    /// The file in the image (from its root; no-key names accepted).
    pub path: OsString,
}

/// Runs `fscrypt-rs image cat`.
pub fn exec(args: Args) -> anyhow::Result<ExitCode> {
    let img = args.image.open()?;
    let (node, shown) = img.resolve(args.path.as_bytes())?;
    if node.kind() != InodeKind::Regular {
        bail!("{shown}: not a regular file");
    }
    let mut contents = Contents::new(&img, &node, &shown)?;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::with_capacity(1 << 20, stdout.lock());
    contents.copy_to(&mut out)?;
    out.flush()?;
    args.image.warn_unmatched(&img);
    Ok(ExitCode::SUCCESS)
}
