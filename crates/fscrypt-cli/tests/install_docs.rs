//! `fscrypt-rs install-docs`: completions for bash, zsh and fish and one man
//! page per command, generated from the clap definition, written under a
//! prefix.

use std::path::Path;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_fscrypt-rs");

#[test]
fn completions_and_man_pages_match_the_command_line() {
    let tmp = test_support::TempDir::new("docs");
    let dir = tmp.join("prefix");
    test_support::run::succeed(
        Command::new(BIN)
            .args(["install-docs", "--prefix"])
            .arg(&dir),
    );
    let share = dir.join("share");
    let read = |rel: &str| {
        std::fs::read_to_string(share.join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
    };
    let bash = read("bash-completion/completions/fscrypt-rs");
    let zsh = read("zsh/site-functions/_fscrypt-rs");
    let fish = read("fish/vendor_completions.d/fscrypt-rs.fish");
    // Every subcommand of `fscrypt-rs --help` is completed and has a page.
    let help = Command::new(BIN).arg("--help").output().expect("--help");
    let help = String::from_utf8_lossy(&help.stdout).into_owned();
    let commands: Vec<&str> = help
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .collect();
    assert!(
        commands.len() > 15,
        "commands parsed from --help: {commands:?}"
    );
    for c in &commands {
        for (shell, text) in [("bash", &bash), ("zsh", &zsh), ("fish", &fish)] {
            assert!(text.contains(c), "{shell} completion lacks {c}");
        }
        let page = read(&format!("man/man1/fscrypt-rs-{c}.1"));
        assert!(
            page.contains(".TH") && page.contains(".SH SYNOPSIS"),
            "{c}.1"
        );
    }
    assert!(read("man/man1/fscrypt-rs.1").contains("install\\-docs"));
    // bash accepts the completion script and registers it.
    if Path::new("/bin/bash").exists() {
        let script = share.join("bash-completion/completions/fscrypt-rs");
        let ok = Command::new("bash")
            .arg("-c")
            .arg(format!(
                "source '{}' && complete -p fscrypt-rs",
                script.display()
            ))
            .output()
            .expect("bash");
        assert!(
            ok.status.success(),
            "{}",
            String::from_utf8_lossy(&ok.stderr)
        );
    }
}

/// Runs `install-docs` into a fresh prefix; returns the temporary directory
/// (kept alive by the caller) and the prefix's `share` directory.
fn install() -> (test_support::TempDir, std::path::PathBuf) {
    let tmp = test_support::TempDir::new("docs");
    let dir = tmp.join("prefix");
    test_support::run::succeed(
        Command::new(BIN)
            .args(["install-docs", "--prefix"])
            .arg(&dir),
    );
    (tmp, dir.join("share"))
}

/// What bash's completion for `fscrypt-rs` offers when the command line is
/// `words` and the cursor is at the end of the last word (`""` for a new
/// word): the installed script is sourced, the function `complete -p`
/// names is called as bash calls it (`COMP_WORDS`, `COMP_CWORD`; command,
/// current word, previous word), and `COMPREPLY` is returned one word per
/// element. `None` when bash is not installed.
fn bash_complete(share: &Path, words: &[&str]) -> Option<Vec<String>> {
    if !Path::new("/bin/bash").exists() && !Path::new("/usr/bin/bash").exists() {
        return None;
    }
    let script = share.join("bash-completion/completions/fscrypt-rs");
    let out = Command::new("bash")
        .arg("-c")
        .arg(
            r#"set -u
source "$1" || exit 3
shift
spec=$(complete -p fscrypt-rs) || exit 4
fn=${spec#*-F }
fn=${fn%% *}
COMP_WORDS=("$@")
COMP_CWORD=$(( $# - 1 ))
COMPREPLY=()
"$fn" "${COMP_WORDS[0]}" "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
printf '%s\n' "${COMPREPLY[@]}"
"#,
        )
        .arg("bash")
        .arg(&script)
        .args(words)
        .output()
        .expect("running bash");
    assert!(
        out.status.success(),
        "bash completion for {words:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| !l.is_empty())
            .map(str::to_owned)
            .collect(),
    )
}

#[test]
fn bash_completes_options_and_nested_subcommands() {
    let (_tmp, share) = install();
    let Some(top) = bash_complete(&share, &["fscrypt-rs", ""]) else {
        eprintln!("SKIPPED bash_completes_options_and_nested_subcommands: no bash");
        return;
    };
    // Control: the first word (this worked before too).
    for c in ["mount", "image", "metadata", "install-docs"] {
        assert!(top.iter().any(|w| w == c), "fscrypt-rs <TAB>: {top:?}");
    }
    let cases: &[(&[&str], &[&str])] = &[
        // A subcommand's options.
        (
            &["fscrypt-rs", "mount", "--"],
            &["--key-file", "--foreground", "--help"],
        ),
        // A nested subcommand, then its options.
        (
            &["fscrypt-rs", "image", ""],
            &["info", "ls", "cat", "extract", "mount"],
        ),
        (
            &["fscrypt-rs", "image", "mount", "--"],
            &["--key-file", "--key-dir", "--foreground", "--nonempty"],
        ),
        // Two levels down.
        (
            &["fscrypt-rs", "metadata", "create", ""],
            &["protector", "policy"],
        ),
        // An option's possible values.
        (
            &["fscrypt-rs", "encrypt", "--source", ""],
            &["custom_passphrase", "raw_key", "pam_passphrase"],
        ),
    ];
    for (words, want) in cases {
        let got = bash_complete(&share, words).expect("bash");
        for w in *want {
            assert!(
                got.iter().any(|g| g == w),
                "{} <TAB> offers {got:?}, not {w}",
                words.join(" ")
            );
        }
    }
}

#[test]
fn every_man_page_a_page_refers_to_is_installed() {
    let (_tmp, share) = install();
    let man = share.join("man/man1");
    let mut pages: Vec<String> = std::fs::read_dir(&man)
        .expect("man1")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    pages.sort();
    // One page per nested command, named as its parent's page names it.
    for want in [
        "fscrypt-rs.1",
        "fscrypt-rs-image.1",
        "fscrypt-rs-image-mount.1",
        "fscrypt-rs-image-extract.1",
        "fscrypt-rs-protector-add.1",
        "fscrypt-rs-metadata-create.1",
        "fscrypt-rs-metadata-create-protector.1",
        "fscrypt-rs-metadata-change-passphrase.1",
    ] {
        assert!(pages.iter().any(|p| p == want), "{want} not in {pages:?}");
    }
    let page = std::fs::read_to_string(man.join("fscrypt-rs-image-mount.1")).expect("page");
    assert!(
        page.contains(".TH FSCRYPT-RS-IMAGE-MOUNT 1")
            && page.contains("\"fscrypt-rs ")
            && page.contains("fscrypt\\-rs image mount"),
        "fscrypt-rs-image-mount.1:\n{page}"
    );
    // Every `fscrypt-rs...(1)` reference in any page has its file.
    let mut refs = 0;
    for p in &pages {
        let text = std::fs::read_to_string(man.join(p)).expect("page");
        let text = text.replace("\\-", "-");
        let mut rest = text.as_str();
        while let Some(at) = rest.find("fscrypt-rs") {
            let tail = &rest[at..];
            let name_len = tail
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
                .unwrap_or(tail.len());
            if let Some(section) = tail[name_len..]
                .strip_prefix('(')
                .and_then(|s| s.split_once(')'))
                .map(|(s, _)| s)
            {
                let file = format!("{}.{section}", &tail[..name_len]);
                assert!(
                    pages.contains(&file),
                    "{p} refers to {}({section}), which is not installed",
                    &tail[..name_len]
                );
                refs += 1;
            }
            rest = &tail[name_len..];
        }
    }
    assert!(refs > 30, "only {refs} page references found");
}

#[test]
fn top_level_descriptions_say_what_the_commands_do() {
    let help = Command::new(BIN).arg("--help").output().expect("--help");
    let help = String::from_utf8_lossy(&help.stdout).into_owned();
    let line = |c: &str| {
        help.lines()
            .find(|l| l.split_whitespace().next() == Some(c))
            .unwrap_or_else(|| panic!("no {c} in --help:\n{help}"))
            .to_owned()
    };
    assert!(line("image").contains("mount"), "{}", line("image"));
    assert!(line("encrypt").contains("--convert"), "{}", line("encrypt"));
    let metadata = line("metadata");
    assert!(
        metadata.contains("Create") && !metadata.contains("Inspect"),
        "{metadata}"
    );
    // Each command's own --help has its long description (exit statuses).
    for c in ["encrypt", "metadata"] {
        let out = Command::new(BIN)
            .args([c, "--help"])
            .output()
            .expect("--help");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("Exit status"), "{c} --help:\n{text}");
    }
    let out = Command::new(BIN)
        .args(["image", "--help"])
        .output()
        .expect("--help");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("image mount"), "image --help:\n{text}");
}

/// Every command whose arguments carry a long description shows it with
/// `--help` (`-h` keeps the one line): a doc comment on its variant in
/// `main.rs` used to replace both with one line (`lock --help` had no
/// exit statuses).
#[test]
fn long_help_is_not_cut_to_one_line() {
    let first_line = |c: &str, flag: &str| {
        let out = Command::new(BIN).args([c, flag]).output().expect("help");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .next()
            .unwrap_or_default()
            .to_owned()
    };
    for c in [
        "add-key",
        "remove-key",
        "key-status",
        "set-policy",
        "import-key",
        "generate-key",
        "prepare-key",
        "status",
        "setup",
        "unlock",
        "lock",
        "verify",
        "encrypt",
        "metadata",
        "image",
    ] {
        assert_ne!(
            first_line(c, "--help"),
            first_line(c, "-h"),
            "{c} --help shows only its one-line description"
        );
    }
}
