//! The Debian package (issue 26 item 2): `scripts/build-deb.sh` builds
//! `fscrypt-rs_<version>_<arch>.deb` with `dpkg-deb`; the package is
//! unpacked into a scratch root with `dpkg-deb -x` (never installed on
//! this machine: no dpkg database, /etc or PAM stack is touched), its file
//! list and control fields are checked, and the unpacked binary runs.
//!
//! Binaries: `$FSCRYPT_RS_DEB_BIN_DIR` (a directory holding `fscrypt-rs`
//! and `libpam_fscrypt_rs.so`, e.g. `target/release` after `cargo build
//! --release -p fscrypt-cli -p pam-fscrypt-rs`), else the ones this test
//! was built with (the debug `fscrypt-rs`, and the PAM module cargo built
//! as a dev-dependency), so the test never waits for a release build.
//! Skipped loudly without `dpkg-deb`.

use std::path::{Path, PathBuf};
use std::process::Command;

use test_support::run::describe as text;
use test_support::tempdir::TempDir;

const BIN: &str = env!("CARGO_BIN_EXE_fscrypt-rs");
const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The directory holding both binaries the script packages.
fn bin_dir(tmp: &TempDir) -> PathBuf {
    if let Some(d) = std::env::var_os("FSCRYPT_RS_DEB_BIN_DIR") {
        return PathBuf::from(d);
    }
    let exe = Path::new(BIN);
    let target = exe.parent().unwrap();
    let pam = [
        target.join("deps/libpam_fscrypt_rs.so"),
        target.join("libpam_fscrypt_rs.so"),
    ]
    .into_iter()
    .find(|p| p.is_file())
    .expect("cargo builds the PAM module's cdylib as a dev-dependency");
    let dir = tmp.sub("bin");
    std::os::unix::fs::symlink(exe, dir.join("fscrypt-rs")).unwrap();
    std::os::unix::fs::symlink(pam, dir.join("libpam_fscrypt_rs.so")).unwrap();
    dir
}

fn dpkg_deb(args: &[&str], deb: &Path) -> String {
    let o = Command::new("dpkg-deb")
        .args(args)
        .arg(deb)
        .output()
        .unwrap();
    assert!(o.status.success(), "dpkg-deb {args:?}: {}", text(&o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The subcommands `fscrypt-rs --help` lists.
fn commands() -> Vec<String> {
    let help = Command::new(BIN).arg("--help").output().unwrap();
    String::from_utf8_lossy(&help.stdout)
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_string)
        .collect()
}

/// The shell script run in a private mount namespace by
/// [`pam_auth_update_takes_the_profile`]: copies of the directories
/// pam-auth-update reads and writes are bind-mounted over the real ones
/// (each checked to be a mount point before anything runs), so the
/// machine's PAM stack, its saved state and debconf's database are never
/// touched. A stand-in for libpam-fscrypt's profile (`fscrypt`, enabled)
/// is there first; enabling ours must turn it off (`Conflicts:`), and
/// the README's command to switch back must work.
const PAM_AUTH_UPDATE_SCRIPT: &str = r#"set -eu
scratch=$1
profile=$2
for d in /etc/pam.d /usr/share/pam-configs /var/lib/pam /var/cache/debconf; do
    copy=$scratch/copy$(echo "$d" | tr / _)
    cp -a "$d" "$copy"
    mount --bind "$copy" "$d"
    mountpoint -q "$d" || { echo "bind mount over $d failed" >&2; exit 99; }
done
printf 'Name: fscrypt PAM passphrase support\nDefault: yes\nPriority: 100\nAuth-Type: Additional\nAuth-Final:\n\toptional\tpam_fscrypt.so\n' \
    >/usr/share/pam-configs/fscrypt
cp "$profile" /usr/share/pam-configs/fscrypt-rs
export DEBIAN_FRONTEND=noninteractive
pam-auth-update --package >/dev/null 2>&1
echo "== installed"; cat /etc/pam.d/common-auth /etc/pam.d/common-session /etc/pam.d/common-password
pam-auth-update --enable fscrypt-rs >/dev/null 2>&1
echo "== enabled"; cat /etc/pam.d/common-auth /etc/pam.d/common-session /etc/pam.d/common-password
pam-auth-update --disable fscrypt-rs --enable fscrypt >/dev/null 2>&1
echo "== switched back"; cat /etc/pam.d/common-auth /etc/pam.d/common-session /etc/pam.d/common-password
"#;

/// The packaged profile through the real `pam-auth-update`, inside
/// `unshare -m` over copies of its directories: off after installation,
/// its three lines once enabled (google/fscrypt's profile turned off),
/// none once disabled with google/fscrypt's enabled again. Skipped
/// loudly without root, `unshare` or `pam-auth-update`.
fn pam_auth_update_takes_the_profile(profile: &Path, tmp: &TempDir) {
    let t = "package_pam_auth_update";
    if !test_support::skip::is_root() {
        test_support::skip::skip(t, "needs root for a private mount namespace");
        return;
    }
    if !Path::new("/usr/sbin/pam-auth-update").is_file()
        || !test_support::skip::command_exists("unshare", &["--version"])
    {
        test_support::skip::skip(t, "pam-auth-update (libpam-runtime) or unshare is missing");
        return;
    }
    let scratch = tmp.sub("pam-auth-update");
    let mut c = Command::new("unshare");
    c.args(["-m", "--propagation", "private", "bash", "-c"])
        .arg(PAM_AUTH_UPDATE_SCRIPT)
        .arg("bash")
        .arg(&scratch)
        .arg(profile);
    let o = test_support::run::output(&mut c, b"");
    assert!(o.status.success(), "pam-auth-update: {}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    let part = |name: &str| -> String {
        out.split(&format!("== {name}\n"))
            .nth(1)
            .unwrap_or_default()
            .split("== ")
            .next()
            .unwrap_or_default()
            .to_string()
    };
    let installed = part("installed");
    assert!(
        !installed.contains("pam_fscrypt_rs.so") && installed.contains("pam_fscrypt.so"),
        "installing enabled the profile (it is Default: no):\n{installed}"
    );
    let enabled = part("enabled");
    for l in [
        "auth\toptional\tpam_fscrypt_rs.so",
        "session\toptional\tpam_fscrypt_rs.so lock_policies",
        "password\toptional\tpam_fscrypt_rs.so",
    ] {
        assert!(
            enabled.contains(l),
            "{l:?} missing once enabled:\n{enabled}"
        );
    }
    assert!(
        !enabled.contains("pam_fscrypt.so"),
        "google/fscrypt's module stayed enabled beside ours:\n{enabled}"
    );
    let back = part("switched back");
    assert!(
        !back.contains("pam_fscrypt_rs.so") && back.contains("pam_fscrypt.so"),
        "switching back to google/fscrypt's profile:\n{back}"
    );
}

#[test]
fn build_deb_packages_binary_pam_module_profile_docs_and_completions() {
    let t = "package";
    if !test_support::skip::command_exists("dpkg-deb", &["--version"]) {
        test_support::skip::skip(t, "dpkg-deb is missing (Debian's dpkg)");
        return;
    }
    let tmp = TempDir::new(t);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/build-deb.sh");
    let out = tmp.sub("out");
    // Building the package must change nothing on this machine: stand-ins
    // for the commands that would (first on PATH) record any call.
    let guard = tmp.sub("guard");
    let called = tmp.join("called");
    for cmd in ["pam-auth-update", "dpkg-reconfigure", "apt-get", "apt"] {
        let stub = guard.join(cmd);
        std::fs::write(
            &stub,
            format!(
                "#!/bin/sh\necho \"{cmd} $*\" >>'{}'\nexit 1\n",
                called.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&stub, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
    }
    let path = format!(
        "{}:{}",
        guard.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let o = Command::new("bash")
        .arg(&script)
        .arg("--bin-dir")
        .arg(bin_dir(&tmp))
        .arg("--out")
        .arg(&out)
        .env("PATH", path)
        .output()
        .unwrap();
    assert!(o.status.success(), "build-deb.sh: {}", text(&o));
    assert!(
        !called.exists(),
        "build-deb.sh ran a command that changes the machine: {}",
        std::fs::read_to_string(&called).unwrap_or_default()
    );
    let arch = String::from_utf8_lossy(
        &Command::new("dpkg")
            .arg("--print-architecture")
            .output()
            .unwrap()
            .stdout,
    )
    .trim()
    .to_string();
    let deb = out.join(format!("fscrypt-rs_{VERSION}_{arch}.deb"));
    assert!(deb.is_file(), "no {}: {}", deb.display(), text(&o));
    let printed = String::from_utf8_lossy(&o.stdout);
    assert_eq!(printed.lines().last(), Some(deb.to_str().unwrap()));

    // Control fields.
    let field = |f: &str| {
        dpkg_deb(&["-f"], &deb)
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{f}: ")).map(str::to_string))
    };
    assert_eq!(field("Package").as_deref(), Some("fscrypt-rs"));
    assert_eq!(field("Version").as_deref(), Some(VERSION));
    assert_eq!(field("Architecture").as_deref(), Some(arch.as_str()));
    // The description names the command to enable the profile (text, never
    // run: a command substitution there would run it on this machine).
    let info = dpkg_deb(&["-I"], &deb);
    assert!(
        info.contains("\"pam-auth-update --enable fscrypt-rs\""),
        "the description lost its text:\n{info}"
    );
    let depends = field("Depends").unwrap_or_default();
    for dep in ["fuse3", "libc6", "libgcc-s1"] {
        assert!(
            depends
                .split(", ")
                .any(|x| x == dep || x.starts_with(&format!("{dep} ("))),
            "Depends lacks {dep}: {depends:?}"
        );
    }
    assert!(field("Installed-Size").is_some_and(|s| s.parse::<u64>().is_ok_and(|n| n > 0)));

    // The file list: everything root-owned, the helpers are links.
    let list = dpkg_deb(&["-c"], &deb);
    for l in list.lines() {
        assert!(l.contains(" root/root "), "not root-owned: {l}");
    }
    let has = |suffix: &str| list.lines().any(|l| l.contains(suffix));
    for f in [
        "./usr/bin/fscrypt-rs",
        "./usr/sbin/mount.fscrypt-rs -> ../bin/fscrypt-rs",
        "./usr/sbin/mount.fuse.fscrypt-rs -> ../bin/fscrypt-rs",
        "/security/pam_fscrypt_rs.so",
        "./usr/share/pam-configs/fscrypt-rs",
        "./usr/share/man/man1/fscrypt-rs.1.gz",
        "./usr/share/bash-completion/completions/fscrypt-rs",
        "./usr/share/zsh/vendor-completions/_fscrypt-rs",
        "./usr/share/fish/vendor_completions.d/fscrypt-rs.fish",
        "./usr/share/doc/fscrypt-rs/copyright",
    ] {
        assert!(has(f), "{f} is not in the package:\n{list}");
    }
    let cmds = commands();
    assert!(
        cmds.len() > 15 && cmds.iter().any(|c| c == "purge"),
        "{cmds:?}"
    );
    for c in &cmds {
        let page = format!("./usr/share/man/man1/fscrypt-rs-{c}.1.gz");
        assert!(has(&page), "no man page for `{c}` ({page})");
    }

    // Unpacked into a scratch root (no maintainer script runs).
    let root = tmp.sub("root");
    let o = Command::new("dpkg-deb")
        .arg("-x")
        .arg(&deb)
        .arg(&root)
        .output()
        .unwrap();
    assert!(o.status.success(), "dpkg-deb -x: {}", text(&o));
    let o = Command::new(root.join("usr/bin/fscrypt-rs"))
        .arg("--version")
        .output()
        .unwrap();
    assert!(o.status.success(), "--version: {}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains(VERSION),
        "{}",
        text(&o)
    );
    // The helper link reaches the binary, which answers as the helper.
    let helper = root.join("usr/sbin/mount.fscrypt-rs");
    assert_eq!(
        std::fs::canonicalize(&helper).unwrap(),
        std::fs::canonicalize(root.join("usr/bin/fscrypt-rs")).unwrap()
    );
    let o = Command::new(&helper).output().unwrap();
    assert!(
        !o.status.success() && String::from_utf8_lossy(&o.stderr).contains("mount.fscrypt-rs"),
        "{}",
        text(&o)
    );
    // A man page is a man page; the completion is the binary's.
    let man = std::fs::read(root.join("usr/share/man/man1/fscrypt-rs-purge.1.gz")).unwrap();
    assert_eq!(&man[..2], &[0x1f, 0x8b], "not gzip");
    let bash =
        std::fs::read_to_string(root.join("usr/share/bash-completion/completions/fscrypt-rs"))
            .unwrap();
    assert!(bash.contains("purge") && bash.contains("fscrypt-rs"));
    // The PAM profile: off by default, never together with libpam-fscrypt's.
    let profile = std::fs::read_to_string(root.join("usr/share/pam-configs/fscrypt-rs")).unwrap();
    for l in [
        "Default: no",
        "Conflicts: fscrypt",
        "pam_fscrypt_rs.so lock_policies",
    ] {
        assert!(profile.contains(l), "{l:?} missing:\n{profile}");
    }
    pam_auth_update_takes_the_profile(&root.join("usr/share/pam-configs/fscrypt-rs"), &tmp);
    // The module is where the profile's bare name finds it: the directory
    // of this system's pam_unix.so, and stripped.
    let module = list
        .lines()
        .find(|l| l.contains("/security/pam_fscrypt_rs.so"))
        .and_then(|l| l.split_whitespace().last())
        .unwrap()
        .trim_start_matches('.')
        .to_string();
    assert!(
        module.ends_with("-linux-gnu/security/pam_fscrypt_rs.so") && module.contains("lib/"),
        "{module}"
    );
    let so = root.join(module.trim_start_matches('/'));
    if test_support::skip::command_exists("readelf", &["--version"]) {
        let o = Command::new("readelf").arg("-S").arg(&so).output().unwrap();
        let s = String::from_utf8_lossy(&o.stdout);
        assert!(!s.contains(".symtab"), "the PAM module is not stripped");
        let o = Command::new("readelf")
            .args(["--dyn-syms", "-W"])
            .arg(&so)
            .output()
            .unwrap();
        assert!(
            String::from_utf8_lossy(&o.stdout).contains("pam_sm_authenticate"),
            "the module exports no pam_sm_authenticate"
        );
    }
}

#[test]
fn readme_tells_how_to_install() {
    let readme = include_str!("../../../README.md");
    let install: String = readme
        .split("\n## Install\n")
        .nth(1)
        .expect("the README has an Install section")
        .split("\n## ")
        .next()
        .unwrap()
        .to_string();
    for s in [
        "scripts/build-deb.sh",
        "target/debian/fscrypt-rs_<version>_<arch>.deb",
        "--bin-dir",
        "cargo install --path crates/fscrypt-cli",
        "pam-auth-update --enable fscrypt-rs",
        "`Default: no`",
        "Conflicts: fscrypt",
        "fuse3",
        "fscrypt-rs install-docs",
    ] {
        assert!(
            install.contains(s),
            "the README's Install section lacks {s:?}"
        );
    }
}
