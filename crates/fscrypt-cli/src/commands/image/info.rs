//! `fscrypt-rs image info IMAGE [--json]`.

use std::collections::HashSet;
use std::process::ExitCode;

use fscrypt_ext4::InodeKind;
use fscrypt_ext4::image::{Image, Node, join, keys::policy_key};

/// Arguments of `fscrypt-rs image info`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub image: super::ImageArgs,
    /// JSON output.
    #[arg(long)]
    pub json: bool,
}

const COMPAT: &[(u32, &str)] = &[
    (0x1, "dir_prealloc"),
    (0x2, "imagic_inodes"),
    (0x4, "has_journal"),
    (0x8, "ext_attr"),
    (0x10, "resize_inode"),
    (0x20, "dir_index"),
    (0x200, "sparse_super2"),
    (0x400, "fast_commit"),
    (0x800, "stable_inodes"),
    (0x1000, "orphan_file"),
];
const INCOMPAT: &[(u32, &str)] = &[
    (0x1, "compression"),
    (0x2, "filetype"),
    (0x4, "needs_recovery"),
    (0x8, "journal_dev"),
    (0x10, "meta_bg"),
    (0x40, "extent"),
    (0x80, "64bit"),
    (0x100, "mmp"),
    (0x200, "flex_bg"),
    (0x400, "ea_inode"),
    (0x1000, "dirdata"),
    (0x2000, "metadata_csum_seed"),
    (0x4000, "large_dir"),
    (0x8000, "inline_data"),
    (0x10000, "encrypt"),
    (0x20000, "casefold"),
];
const RO_COMPAT: &[(u32, &str)] = &[
    (0x1, "sparse_super"),
    (0x2, "large_file"),
    (0x8, "huge_file"),
    (0x10, "uninit_bg"),
    (0x20, "dir_nlink"),
    (0x40, "extra_isize"),
    (0x100, "quota"),
    (0x200, "bigalloc"),
    (0x400, "metadata_csum"),
    (0x1000, "read-only"),
    (0x2000, "project"),
    (0x8000, "verity"),
    (0x10000, "orphan_present"),
];

fn names(bits: u32, table: &[(u32, &str)], out: &mut Vec<String>) {
    let mut rest = bits;
    for (b, n) in table {
        if bits & b != 0 {
            out.push((*n).to_string());
            rest &= !b;
        }
    }
    if rest != 0 {
        out.push(format!("unknown({rest:#x})"));
    }
}

/// An encrypted directory found from the root.
struct Found {
    path: String,
    policy: String,
    key: String,
    unlocked: bool,
}

/// Walk unencrypted directories from the root; record the encrypted
/// directories met (their contents are not entered).
fn find_encrypted(img: &Image, errors: &mut Vec<String>) -> Vec<Found> {
    let mut found = Vec::new();
    let root = match img.root() {
        Ok(r) => r,
        Err(e) => {
            errors.push(e.to_string());
            return found;
        }
    };
    let mut seen = HashSet::new();
    let mut stack: Vec<(Node, String)> = vec![(root, "/".into())];
    while let Some((dir, shown)) = stack.pop() {
        if !seen.insert(dir.ino()) {
            continue;
        }
        if let Some(p) = dir.crypt.policy() {
            found.push(Found {
                path: shown,
                policy: fscrypt_linux::policy::describe(p),
                key: policy_key(p),
                unlocked: !dir.crypt.is_locked(),
            });
            continue;
        }
        let listing = match img.list(&dir, &shown) {
            Ok(l) => l,
            Err(e) => {
                errors.push(e.to_string());
                continue;
            }
        };
        errors.extend(listing.errors);
        for e in listing.entries.iter().rev() {
            if e.file_type != 2 {
                continue;
            }
            let cs = join(&shown, &e.name);
            match img.child(&dir, e, &cs) {
                Ok(c) if c.kind() == InodeKind::Directory => stack.push((c, cs)),
                Ok(_) => {}
                Err(err) => errors.push(err.to_string()),
            }
        }
    }
    found.sort_by(|a, b| a.path.cmp(&b.path));
    found
}

/// Runs `fscrypt-rs image info`.
pub fn exec(args: Args) -> anyhow::Result<ExitCode> {
    let json = args.json;
    crate::support::kernel::json_errors(json, || exec_inner(&args))
}

fn exec_inner(args: &Args) -> anyhow::Result<ExitCode> {
    let img = args.image.open()?;
    let sb = img.ext4().superblock().clone();
    let mut features = Vec::new();
    names(sb.feature_compat, COMPAT, &mut features);
    names(sb.feature_incompat, INCOMPAT, &mut features);
    names(sb.feature_ro_compat, RO_COMPAT, &mut features);
    let uuid: String = sb.uuid.iter().map(|b| format!("{b:02x}")).collect();
    let mut errors = Vec::new();
    let found = find_encrypted(&img, &mut errors);
    let keys: Vec<(String, String, String, bool)> = img
        .keys()
        .keys()
        .iter()
        .map(|k| {
            (
                k.source.display().to_string(),
                k.identifier.to_string(),
                k.named_descriptor.unwrap_or(k.descriptor).to_string(),
                k.matched(),
            )
        })
        .collect();
    if args.json {
        let v = serde_json::json!({
            "image": args.image.image.display().to_string(),
            "uuid": uuid,
            "volume_name": String::from_utf8_lossy(&sb.volume_name),
            "block_size": sb.block_size,
            "blocks": sb.blocks_count,
            "inodes": sb.inodes_count,
            "features": features,
            "encrypted_directories": found.iter().map(|f| serde_json::json!({
                "path": f.path, "policy": f.policy, "key": f.key, "unlocked": f.unlocked,
            })).collect::<Vec<_>>(),
            "keys": keys.iter().map(|(s, id, d, m)| serde_json::json!({
                "file": s, "identifier": id, "descriptor": d, "matched": m,
            })).collect::<Vec<_>>(),
            "errors": errors,
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        println!("image:       {}", args.image.image.display());
        println!("uuid:        {uuid}");
        println!("block size:  {}", sb.block_size);
        println!("blocks:      {}", sb.blocks_count);
        println!("inodes:      {}", sb.inodes_count);
        println!("features:    {}", features.join(" "));
        println!("encrypted directories: {}", found.len());
        for f in &found {
            let state = if f.unlocked { "key given" } else { "no key" };
            // The policy's description names its key once (identifier or
            // descriptor); the JSON output has it apart as "key".
            println!("  {}  {}  ({state})", f.path, f.policy);
        }
        for (s, id, d, m) in &keys {
            let m = if *m { "matched" } else { "not used" };
            println!("key file {s}: identifier {id}, v1 descriptor {d}: {m}");
        }
        for e in &errors {
            eprintln!("fscrypt-rs: {e}");
        }
    }
    Ok(if errors.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
