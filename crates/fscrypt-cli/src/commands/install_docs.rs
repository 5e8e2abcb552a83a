//! `fscrypt-rs install-docs`: shell completions (bash, zsh, fish) and man
//! pages, generated from the command-line definition itself so that they
//! always match `--help`.
//!
//! Layout under `--prefix` (default `/usr/local`), as distributions expect:
//!
//! | file | for |
//! |------|-----|
//! | `share/bash-completion/completions/fscrypt-rs` | bash-completion |
//! | `share/zsh/site-functions/_fscrypt-rs` | zsh (`fpath`) |
//! | `share/fish/vendor_completions.d/fscrypt-rs.fish` | fish |
//! | `share/man/man1/fscrypt-rs.1`, `fscrypt-rs-<command>.1` | man(1) |
//!
//! Every file is written atomically (temporary file, fsync, rename), so an
//! interrupted run leaves each file old or new.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use clap_complete::Shell;

/// Arguments of `fscrypt-rs install-docs`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Installation prefix: files go under PREFIX/share.
    #[arg(long, default_value = "/usr/local", value_name = "PREFIX")]
    pub prefix: PathBuf,
    /// Print the paths written.
    #[arg(long, short)]
    pub verbose: bool,
}

/// Writes `bytes` to `path` atomically (temp file beside it, fsync, rename),
/// creating the parent directories.
fn write_atomic(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let dir = path.parent().context("a file path has a parent")?;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let name = path.file_name().context("a file path has a name")?;
    let tmp = dir.join(format!(
        ".{}.tmp-{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    let result = (|| -> std::io::Result<()> {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.with_context(|| format!("writing {}", path.display()))
}

/// The man page of `cmd` (roff), titled `title`.
fn man_page(cmd: clap::Command, title: &str) -> anyhow::Result<Vec<u8>> {
    let mut out = Vec::new();
    clap_mangen::Man::new(cmd)
        .title(title.to_uppercase())
        .render(&mut out)
        .context("rendering a man page")?;
    Ok(out)
}

/// Every file `install-docs` writes, as (path under the prefix, contents).
///
/// # Errors
/// Rendering fails (a bug).
pub fn generate(cli: &clap::Command) -> anyhow::Result<Vec<(PathBuf, Vec<u8>)>> {
    let bin = cli.get_name().to_owned();
    let mut files = Vec::new();
    for (shell, rel) in [
        (
            Shell::Bash,
            format!("share/bash-completion/completions/{bin}"),
        ),
        (Shell::Zsh, format!("share/zsh/site-functions/_{bin}")),
        (
            Shell::Fish,
            format!("share/fish/vendor_completions.d/{bin}.fish"),
        ),
    ] {
        let mut out = Vec::new();
        clap_complete::generate(shell, &mut cli.clone(), bin.clone(), &mut out);
        files.push((PathBuf::from(rel), out));
    }
    let man = PathBuf::from("share/man/man1");
    let mut top = cli.clone();
    top.build();
    files.push((man.join(format!("{bin}.1")), man_page(top.clone(), &bin)?));
    for sub in top.get_subcommands().filter(|s| s.get_name() != "help") {
        let name = format!("{bin}-{}", sub.get_name());
        let page = sub
            .clone()
            .display_name(name.clone())
            .bin_name(format!("{bin} {}", sub.get_name()));
        files.push((man.join(format!("{name}.1")), man_page(page, &name)?));
    }
    Ok(files)
}

/// Runs `fscrypt-rs install-docs` for the command line `cli`.
///
/// # Errors
/// A file cannot be written (the message names it).
pub fn exec(args: Args, cli: clap::Command) -> anyhow::Result<ExitCode> {
    let files = generate(&cli)?;
    for (rel, bytes) in &files {
        let path = args.prefix.join(rel);
        write_atomic(&path, bytes)?;
        if args.verbose {
            println!("{}", path.display());
        }
    }
    println!(
        "installed {} files under {}/share (completions for bash, zsh, fish; man pages: man fscrypt-rs)",
        files.len(),
        args.prefix.display()
    );
    Ok(ExitCode::SUCCESS)
}
