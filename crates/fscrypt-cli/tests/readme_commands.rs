//! The README's main command, `cargo run --release -p fscrypt-cli -- demo`,
//! needs cargo to know which of the package's two binaries to run.

#[test]
fn cargo_run_picks_fscrypt_rs() {
    let manifest = include_str!("../Cargo.toml");
    assert!(
        manifest
            .lines()
            .any(|l| l.trim() == r#"default-run = "fscrypt-rs""#),
        "fscrypt-cli has two binaries: `cargo run -p fscrypt-cli` needs default-run = \"fscrypt-rs\""
    );
}
