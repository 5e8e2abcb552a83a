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
//! | `share/man/man1/fscrypt-rs.1`, `fscrypt-rs-<command>[-<subcommand>...].1` | man(1) |
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

/// The man page of `cmd` (roff), titled `title`, its footer naming
/// `source` (the program and its version, on every page: clap_mangen
/// would name the subcommand alone).
fn man_page(cmd: clap::Command, title: &str, source: &str) -> anyhow::Result<Vec<u8>> {
    let mut out = Vec::new();
    clap_mangen::Man::new(cmd)
        .title(title.to_uppercase())
        .source(source)
        .render(&mut out)
        .context("rendering a man page")?;
    Ok(out)
}

/// Appends to `files` the man page of the built command `cmd`, named
/// `<display name>.1` under `dir`, then those of its visible subcommands,
/// recursively. The names are the ones clap_mangen's SUBCOMMANDS sections
/// refer to (`fscrypt-rs-image(1)` lists `fscrypt-rs-image-mount(1)`), so
/// every page a page names exists. `source`: see [`man_page`].
fn man_pages(
    cmd: &clap::Command,
    source: &str,
    dir: &Path,
    files: &mut Vec<(PathBuf, Vec<u8>)>,
) -> anyhow::Result<()> {
    let name = cmd.get_display_name().unwrap_or(cmd.get_name()).to_owned();
    files.push((
        dir.join(format!("{name}.1")),
        man_page(cmd.clone(), &name, source)?,
    ));
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        man_pages(sub, source, dir, files)?;
    }
    Ok(())
}

/// The bash completion script of `cli` for the binary `bin`.
///
/// clap_complete's bash generator (up to at least 4.6.12, clap-rs/clap
/// issues #6421 and #6529) spells the states of its dispatch loop with the
/// binary name's hyphens as `__` (`fscrypt__rs__subcmd__mount`) but the
/// case arms that complete them with `__subcmd__`
/// (`fscrypt__subcmd__rs__subcmd__mount`): with a hyphenated binary name
/// no arm matches and nothing past the first word completes. The arms are
/// renamed here the way the loop spells them (what the upstream fix,
/// clap-rs/clap pull request #6428, does in the generator), which is a
/// no-op once clap_complete spells them alike. Then every state the loop
/// can reach must have its arm.
///
/// # Errors
/// A state has no arm (clap_complete's output changed shape: a bug to fix
/// here, not a script to install).
fn bash_completion(cli: &clap::Command, bin: &str) -> anyhow::Result<Vec<u8>> {
    let mut out = Vec::new();
    clap_complete::generate(Shell::Bash, &mut cli.clone(), bin, &mut out);
    let script = String::from_utf8(out).context("bash completion script is not UTF-8")?;
    let loop_prefix = format!("{}__subcmd__", bin.replace('-', "__"));
    let arm_prefix = format!("{}__subcmd__", bin.replace('-', "__subcmd__"));
    let mut fixed = String::with_capacity(script.len());
    for line in script.split_inclusive('\n') {
        let text = line.trim_start();
        let indent = &line[..line.len() - text.len()];
        match text.strip_prefix(&arm_prefix) {
            Some(rest) if rest.trim_end().ends_with(')') => {
                fixed.push_str(indent);
                fixed.push_str(&loop_prefix);
                fixed.push_str(rest);
            }
            _ => fixed.push_str(line),
        }
    }
    let arms: std::collections::HashSet<&str> = fixed
        .lines()
        .filter_map(|l| l.trim().strip_suffix(')'))
        .collect();
    for state in fixed
        .lines()
        .filter_map(|l| l.trim().strip_prefix("cmd=\""))
        .filter_map(|s| s.strip_suffix('"'))
        .filter(|s| !s.is_empty())
    {
        anyhow::ensure!(
            arms.contains(state),
            "bash completion script: no case arm completes state {state}"
        );
    }
    Ok(fixed.into_bytes())
}

/// Every file `install-docs` writes, as (path under the prefix, contents):
/// the completion scripts, then the man pages of `cli` and of every
/// visible command under it, nested ones included (`fscrypt-rs.1`,
/// `fscrypt-rs-image.1`, `fscrypt-rs-image-mount.1`, ...; `help` has none,
/// `--help` is the same text).
///
/// # Errors
/// Rendering fails (a bug).
pub fn generate(cli: &clap::Command) -> anyhow::Result<Vec<(PathBuf, Vec<u8>)>> {
    let bin = cli.get_name().to_owned();
    let mut files = vec![(
        PathBuf::from(format!("share/bash-completion/completions/{bin}")),
        bash_completion(cli, &bin)?,
    )];
    for (shell, rel) in [
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
    // Without `help` subcommands (global setting: nested ones too), so no
    // SUBCOMMANDS section names a `...-help(1)` page.
    let mut top = cli.clone().disable_help_subcommand(true);
    top.build();
    let source = format!("{bin} {}", top.get_version().unwrap_or_default());
    man_pages(
        &top,
        source.trim_end(),
        Path::new("share/man/man1"),
        &mut files,
    )?;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn app(name: &'static str) -> clap::Command {
        clap::Command::new(name).subcommand(
            clap::Command::new("thunder")
                .arg(clap::Arg::new("lightning").long("lightning"))
                .subcommand(clap::Command::new("deep-down")),
        )
    }

    fn raw_bash(cmd: &clap::Command, bin: &str) -> String {
        let mut out = Vec::new();
        clap_complete::generate(Shell::Bash, &mut cmd.clone(), bin, &mut out);
        String::from_utf8(out).expect("UTF-8")
    }

    #[test]
    fn hyphenated_binary_arms_match_the_loop_states() {
        let script = String::from_utf8(bash_completion(&app("my-app"), "my-app").expect("bash"))
            .expect("UTF-8");
        for state in [
            "my__app__subcmd__thunder",
            "my__app__subcmd__thunder__subcmd__deep__subcmd__down",
        ] {
            assert!(script.contains(&format!("cmd=\"{state}\"")), "{script}");
            assert!(
                script.contains(&format!("\n        {state})\n")),
                "{script}"
            );
        }
        assert!(!script.contains("my__subcmd__app"), "{script}");
    }

    #[test]
    fn a_binary_without_hyphens_keeps_clap_completes_script() {
        let cmd = app("myapp");
        let script = bash_completion(&cmd, "myapp").expect("bash");
        assert_eq!(
            String::from_utf8(script).expect("UTF-8"),
            raw_bash(&cmd, "myapp")
        );
    }
}
