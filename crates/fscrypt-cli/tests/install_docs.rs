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
