//! `fscrypt-rs image` unlocked the way a google/fscrypt user knows
//! (issue 26, item 1): with the image's own `.fscrypt` metadata and a
//! passphrase (`--passfile`, `--extpass`), a chosen protector
//! (`--unlock-with ID`), a login protector whose file lives on another
//! filesystem (`--user NAME --metadata DIR`), the same through `image
//! mount`; and a key file that opens nothing is warned about by every
//! command, not only `image info`.
//!
//! Two scratch ext4 filesystems, both set up with `fscrypt-rs setup`: the
//! login filesystem (`FSCRYPT_ROOT_MNT`, it holds the user's login
//! protector) and the one imaged, holding `docs` (a custom passphrase
//! protector) and `home` (the login protector, through a link file). The
//! imaged filesystem is unmounted before any `image` command. Skipped
//! loudly without root, loop devices, `setpriv` or `useradd`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use test_support::loopdev::{MKFS_4K, scratch_ext4};
use test_support::loopfs::LoopExt4;
use test_support::run::assert_ok as ok;
use test_support::run::describe as text;
use test_support::tempdir::TempDir;
use test_support::users::TestUser;

const BIN: &str = env!("CARGO_BIN_EXE_fscrypt-rs");
const LOGIN_PW: &str = "image-login-pw-7";
const DOCS_PW: &str = "image-docs-passphrase-3";

struct Env {
    root: LoopExt4,
    imaged: LoopExt4,
    tmp: TempDir,
    user: TestUser,
    /// The descriptor of `docs`'s custom protector.
    docs_protector: String,
}

impl Env {
    /// `tag`: a short tag of its own per test (the user's name).
    fn new(test: &str, tag: &str) -> Option<Env> {
        if !test_support::skip::setpriv_available(test) {
            return None;
        }
        let root = scratch_ext4(test, 32, MKFS_4K)?;
        let imaged = scratch_ext4(test, 32, MKFS_4K)?;
        let user = TestUser::new(test, tag, LOGIN_PW)?;
        let mut env = Env {
            root,
            imaged,
            tmp: TempDir::new(test),
            user,
            docs_protector: String::new(),
        };
        let mnt = env.imaged.mount_point().to_path_buf();
        ok(&env.rs(&["setup", "--time", "0.001"], b""), "setup");
        ok(&env.rs(&["setup", p(&mnt)], b""), "setup MNT");
        for d in ["docs", "home"] {
            std::fs::create_dir(mnt.join(d)).unwrap();
        }
        std::os::unix::fs::chown(mnt.join("home"), Some(env.user.uid), Some(env.user.uid)).unwrap();
        ok(
            &env.rs(
                &[
                    "encrypt",
                    p(&mnt.join("docs")),
                    "--source",
                    "custom_passphrase",
                    "--name",
                    "docs",
                    "--no-recovery",
                    "--quiet",
                ],
                format!("{DOCS_PW}\n").as_bytes(),
            ),
            "encrypt docs",
        );
        let u = format!("--user={}", env.user.name);
        ok(
            &env.rs(
                &[
                    "encrypt",
                    p(&mnt.join("home")),
                    "--source",
                    "pam_passphrase",
                    &u,
                    "--no-recovery",
                    "--quiet",
                ],
                format!("{LOGIN_PW}\n").as_bytes(),
            ),
            "encrypt home",
        );
        std::fs::write(mnt.join("docs/report.txt"), "the docs plaintext").unwrap();
        std::fs::write(mnt.join("home/notes.txt"), "the home plaintext").unwrap();
        let mut own: Vec<String> = std::fs::read_dir(mnt.join(".fscrypt/protectors"))
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| !n.ends_with(".link"))
            .collect();
        assert_eq!(own.len(), 1, "one protector file on the imaged fs: {own:?}");
        env.docs_protector = own.remove(0);
        for d in ["docs", "home"] {
            ok(
                &env.rs(&["lock", p(&mnt.join(d)), "-q", "--all-users"], b""),
                "lock",
            );
        }
        env.imaged.unmount().unwrap();
        for (name, text) in [("docs.pass", DOCS_PW), ("wrong.pass", "not the passphrase")] {
            let f = env.tmp.join(name);
            std::fs::write(&f, format!("{text}\n")).unwrap();
            std::fs::set_permissions(&f, std::os::unix::fs::PermissionsExt::from_mode(0o600))
                .unwrap();
        }
        Some(env)
    }

    /// `fscrypt-rs ARGS` as root, with the scratch config and login
    /// filesystem.
    fn rs(&self, args: &[&str], stdin: &[u8]) -> Output {
        let mut c = Command::new(BIN);
        c.args(args)
            .env("FSCRYPT_CONF", self.tmp.join("fscrypt.conf"))
            .env("FSCRYPT_ROOT_MNT", self.root.mount_point());
        test_support::run::output(&mut c, stdin)
    }

    /// `fscrypt-rs image VERB IMAGE ARGS`.
    fn image(&self, verb: &str, args: &[&str], stdin: &[u8]) -> Output {
        let mut all = vec!["image", verb, p(self.imaged.image())];
        all.extend_from_slice(args);
        self.rs(&all, stdin)
    }

    fn passfile(&self) -> String {
        p(&self.tmp.join("docs.pass")).to_string()
    }
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn the_images_own_metadata_unlocks_with_a_passphrase() {
    let Some(env) = Env::new("image_pass_own", "io") else {
        return;
    };
    let pf = env.passfile();
    // Without a secret (stdin not a terminal): no-key names, and a note
    // saying how to unlock.
    let o = env.image("ls", &["/docs"], b"");
    ok(&o, "image ls without a secret");
    assert!(!stdout(&o).contains("report.txt"), "{}", text(&o));
    assert!(stderr(&o).contains("--passfile"), "no hint: {}", text(&o));
    // --passfile: the only non-login protector of the policies is chosen.
    let o = env.image("cat", &["/docs/report.txt", "--passfile", &pf], b"");
    ok(&o, "image cat --passfile");
    assert_eq!(stdout(&o), "the docs plaintext");
    // --extpass, and the protector named.
    let cmd = format!("cat {pf}");
    let o = env.image(
        "ls",
        &[
            "/docs",
            "--extpass",
            &cmd,
            "--unlock-with",
            &env.docs_protector,
        ],
        b"",
    );
    ok(&o, "image ls --extpass --unlock-with");
    assert!(stdout(&o).contains("report.txt"), "{}", text(&o));
    // A wrong passphrase: one line, the wrong-secret status, nothing shown.
    let wrong = p(&env.tmp.join("wrong.pass")).to_string();
    let o = env.image("cat", &["/docs/report.txt", "--passfile", &wrong], b"");
    assert_eq!(o.status.code(), Some(12), "{}", text(&o));
    assert!(o.stdout.is_empty(), "{}", text(&o));
    assert_eq!(stderr(&o).trim().lines().count(), 1, "{}", text(&o));
    // An unknown protector: one line naming the ones there are.
    let o = env.image(
        "ls",
        &[
            "/docs",
            "--passfile",
            &pf,
            "--unlock-with",
            "0123456789abcdef",
        ],
        b"",
    );
    assert!(!o.status.success(), "{}", text(&o));
    assert!(stderr(&o).contains(&env.docs_protector), "{}", text(&o));
    // extract works the same.
    let dest = env.tmp.join("out");
    let o = env.image(
        "extract",
        &["/docs", p(&dest), "--passfile", &pf, "-q"],
        b"",
    );
    ok(&o, "image extract --passfile");
    assert_eq!(
        std::fs::read_to_string(dest.join("report.txt")).unwrap(),
        "the docs plaintext"
    );
}

#[test]
fn a_login_protector_on_another_filesystem_unlocks_with_metadata_and_user() {
    let Some(env) = Env::new("image_pass_login", "il") else {
        return;
    };
    let login_meta: PathBuf = env.root.mount_point().join(".fscrypt");
    let pw = format!("{LOGIN_PW}\n");
    // The image holds only a link to the login protector: say where.
    let o = env.image(
        "cat",
        &["/home/notes.txt", "--user", &env.user.name],
        pw.as_bytes(),
    );
    assert!(!o.status.success(), "{}", text(&o));
    assert!(stderr(&o).contains("--metadata"), "{}", text(&o));
    let o = env.image(
        "cat",
        &[
            "/home/notes.txt",
            "--user",
            &env.user.name,
            "--metadata",
            p(&login_meta),
        ],
        pw.as_bytes(),
    );
    ok(&o, "image cat --user --metadata");
    assert_eq!(stdout(&o), "the home plaintext");
    // By uid too (an image from another machine: the name may be unknown).
    let uid = env.user.uid.to_string();
    let o = env.image(
        "cat",
        &[
            "/home/notes.txt",
            "--user",
            &uid,
            "--metadata",
            p(&login_meta),
        ],
        pw.as_bytes(),
    );
    ok(&o, "image cat --user UID");
    assert_eq!(stdout(&o), "the home plaintext");
}

#[test]
fn image_mount_unlocks_with_a_passphrase_and_the_daemon_gets_the_keys() {
    let Some(env) = Env::new("image_pass_mount", "im") else {
        return;
    };
    let mnt = env.tmp.join("view");
    std::fs::create_dir(&mnt).unwrap();
    let pf = env.passfile();
    let o = env.image("mount", &[p(&mnt), "--passfile", &pf], b"");
    ok(&o, "image mount --passfile");
    let read = std::fs::read_to_string(mnt.join("docs/report.txt"));
    let _ = env.rs(&["unmount", p(&mnt)], b"");
    assert_eq!(read.unwrap(), "the docs plaintext");
}

#[test]
fn a_key_file_that_opens_nothing_is_warned_about_by_every_command() {
    let Some(env) = Env::new("image_pass_unmatched", "iu") else {
        return;
    };
    let key = env.tmp.join("stray.key");
    std::fs::write(&key, [7u8; 64]).unwrap();
    for (verb, args) in [("ls", vec!["/"]), ("cat", vec!["/docs/report.txt"])] {
        let mut a = args.clone();
        a.extend(["--key-file", p(&key), "--passfile"]);
        let pf = env.passfile();
        a.push(&pf);
        let o = env.image(verb, &a, b"");
        ok(&o, verb);
        assert!(
            stderr(&o).contains(&format!("key file {}", key.display()))
                && stderr(&o).contains("warning"),
            "image {verb} said nothing about the stray key: {}",
            text(&o)
        );
    }
}
