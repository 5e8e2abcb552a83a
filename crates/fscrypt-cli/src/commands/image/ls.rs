//! `fscrypt-rs image ls IMAGE [PATH] [-l] [-R] [--json]`.

use std::ffi::OsString;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::process::ExitCode;

use fscrypt_ext4::InodeKind;
use fscrypt_ext4::image::{Image, Node, join};

/// Arguments of `fscrypt-rs image ls`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub image: super::ImageArgs,
    /// The directory in the image (default: the root; no-key names accepted).
    pub path: Option<OsString>,
    /// Long listing: mode, owner, size, modification time, name, symlink
    /// target and the policy of encrypted directories.
    #[arg(short = 'l')]
    pub long: bool,
    /// Recursive: one line per object below PATH, as a path relative to it.
    #[arg(short = 'R')]
    pub recursive: bool,
    /// JSON: an array of objects.
    #[arg(long)]
    pub json: bool,
}

struct Lister<'a> {
    img: &'a Image,
    args: &'a Args,
    out: Box<dyn Write + 'a>,
    json: Vec<serde_json::Value>,
    errors: u64,
    ancestors: Vec<u32>,
}

impl Lister<'_> {
    fn line(&mut self, node: &Node, shown: &str, rel: &[u8]) -> anyhow::Result<()> {
        let i = &node.inode;
        let target = if node.kind() == InodeKind::Symlink && (self.args.long || self.args.json) {
            match self.img.read_link(node, shown) {
                Ok(t) => Some(t),
                Err(e) => {
                    self.error(&e.to_string());
                    None
                }
            }
        } else {
            None
        };
        let policy = node
            .crypt
            .policy()
            .filter(|_| node.kind() == InodeKind::Directory)
            .map(fscrypt_linux::policy::describe);
        if self.args.json {
            self.json.push(serde_json::json!({
                "name": String::from_utf8_lossy(rel),
                "ino": node.ino(),
                "mode": format!("{:o}", i.mode),
                "uid": i.uid(),
                "gid": i.gid(),
                "size": i.size,
                "mtime": i.mtime().0,
                "encrypted": i.is_encrypted(),
                "locked": node.crypt.is_locked(),
                "target": target.as_ref().map(|t| String::from_utf8_lossy(t).into_owned()),
                "policy": policy,
            }));
            return Ok(());
        }
        if self.args.long {
            // A symlink's size as ls(1) shows it: its target's length (the
            // stored size of an encrypted one is its ciphertext's).
            let size = target.as_ref().map_or(i.size, |t| t.len() as u64);
            let mtime = match u64::try_from(i.mtime().0) {
                Ok(secs) => fscrypt_vault::config::format_rfc3339(secs),
                Err(_) => i.mtime().0.to_string(),
            };
            write!(
                self.out,
                "{} {:>5} {:>5} {:>10} {:>20} ",
                super::mode_string(i.mode),
                i.uid(),
                i.gid(),
                size,
                mtime
            )?;
        }
        self.out.write_all(rel)?;
        if let Some(t) = target {
            self.out.write_all(b" -> ")?;
            self.out.write_all(&t)?;
        }
        if self.args.long
            && let Some(p) = policy
        {
            write!(
                self.out,
                "  [{p}{}]",
                if node.crypt.is_locked() {
                    ", locked"
                } else {
                    ""
                }
            )?;
        }
        self.out.write_all(b"\n")?;
        Ok(())
    }

    fn error(&mut self, msg: &str) {
        eprintln!("fscrypt-rs: {msg}");
        self.errors += 1;
    }

    fn dir(&mut self, dir: &Node, shown: &str, prefix: &[u8]) -> anyhow::Result<()> {
        if self.ancestors.contains(&dir.ino()) {
            self.error(&format!("{shown}: directory loop; not listed again"));
            return Ok(());
        }
        let listing = match self.img.list(dir, shown) {
            Ok(l) => l,
            Err(e) => {
                self.error(&e.to_string());
                return Ok(());
            }
        };
        for e in &listing.errors {
            self.error(e);
        }
        self.ancestors.push(dir.ino());
        for entry in listing.entries {
            let child_shown = join(shown, &entry.name);
            let mut rel = prefix.to_vec();
            if !rel.is_empty() {
                rel.push(b'/');
            }
            rel.extend_from_slice(&entry.name);
            let child = match self.img.child(dir, &entry, &child_shown) {
                Ok(c) => c,
                Err(e) => {
                    self.error(&e.to_string());
                    continue;
                }
            };
            self.line(&child, &child_shown, &rel)?;
            if self.args.recursive && child.kind() == InodeKind::Directory {
                self.dir(&child, &child_shown, &rel)?;
            }
        }
        self.ancestors.pop();
        Ok(())
    }
}

/// Runs `fscrypt-rs image ls`.
pub fn exec(args: Args) -> anyhow::Result<ExitCode> {
    let json = args.json;
    crate::support::kernel::json_errors(json, || exec_inner(&args))
}

fn exec_inner(args: &Args) -> anyhow::Result<ExitCode> {
    let img = args.image.open()?;
    let path = args.path.as_ref().map(|p| p.as_bytes()).unwrap_or(b"/");
    let (node, shown) = img.resolve(path)?;
    let stdout = std::io::stdout();
    let mut l = Lister {
        img: &img,
        args,
        out: Box::new(std::io::BufWriter::new(stdout.lock())),
        json: Vec::new(),
        errors: 0,
        ancestors: Vec::new(),
    };
    if node.kind() == InodeKind::Directory {
        l.dir(&node, &shown, b"")?;
    } else {
        let name = path.rsplit(|&c| c == b'/').next().unwrap_or(path).to_vec();
        l.line(&node, &shown, &name)?;
    }
    if args.json {
        let v = serde_json::Value::Array(std::mem::take(&mut l.json));
        writeln!(l.out, "{}", serde_json::to_string_pretty(&v)?)?;
    }
    l.out.flush()?;
    args.image.warn_unmatched(&img);
    Ok(if l.errors == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
