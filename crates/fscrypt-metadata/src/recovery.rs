//! Recovery passphrases, as google/fscrypt 0.3.x makes them: when a
//! directory is protected by a login protector that lives on another
//! filesystem (the root one), `encrypt` adds a second, `custom_passphrase`
//! protector with a random passphrase of 20 letters `a`–`z` (94 bits) and
//! writes instructions into the new directory, so the files stay reachable
//! when the root filesystem (and with it the login protector) is lost.
//!
//! Facts from google/fscrypt's `actions/recovery.go` (the alphabet, the
//! length, the protector name "Recovery passphrase for DIRNAME" with
//! " (2)", " (3)", ... when taken, the file name
//! `fscrypt_recovery_readme.txt`); the text of the file is our own.

use std::io::Write;
use std::path::{Path, PathBuf};

use zeroize::Zeroizing;

use crate::Error;
use crate::actions;
use crate::keys::Key32;
use crate::proto::{HashingCosts, PolicyData, ProtectorData, SourceType};

/// Length of a recovery passphrase, in letters.
pub const PASSPHRASE_LEN: usize = 20;

/// Name of the instructions file written into the encrypted directory.
pub const README_NAME: &str = "fscrypt_recovery_readme.txt";

/// A random passphrase of `len` letters `a`–`z`, each uniform (rejection
/// sampling of random bytes).
///
/// # Errors
/// [`Error::Crypto`] if the system's random source fails.
pub fn random_passphrase(len: usize) -> Result<Zeroizing<Vec<u8>>, Error> {
    let mut out = Zeroizing::new(Vec::with_capacity(len));
    let mut pool = Zeroizing::new([0u8; 64]);
    while out.len() < len {
        fscrypt_crypto::random_bytes(&mut pool[..])?;
        // 234 = 9 * 26: bytes at or above it would bias the letters.
        for &b in pool.iter().filter(|&&b| b < 234) {
            if out.len() == len {
                break;
            }
            out.push(b'a' + b % 26);
        }
    }
    Ok(out)
}

/// The recovery protector's name for a directory called `dirname`: the
/// first of "Recovery passphrase for DIRNAME", "... (2)", ... that `taken`
/// says is free.
pub fn protector_name(dirname: &str, taken: impl Fn(&str) -> bool) -> String {
    let base = format!("Recovery passphrase for {dirname}");
    let mut name = base.clone();
    let mut seq = 1;
    while taken(&name) {
        seq += 1;
        name = format!("{base} ({seq})");
    }
    name
}

/// A new recovery protector named `name` with a random passphrase, added
/// to `policy` (whose key is `policy_key`): `(passphrase, protector)`. The
/// caller stores the protector beside the policy.
///
/// # Errors
/// [`Error::Crypto`]; [`Error::Invalid`] for bad costs.
pub fn add_recovery(
    policy: &mut PolicyData,
    policy_key: &actions::PolicyKey,
    name: &str,
    costs: &HashingCosts,
) -> Result<(Zeroizing<Vec<u8>>, ProtectorData), Error> {
    let pass = random_passphrase(PASSPHRASE_LEN)?;
    let (p, key): (ProtectorData, Key32) =
        actions::new_protector(SourceType::CustomPassphrase, name, costs, &pass, 0)?;
    actions::add_protector_to_policy(policy, policy_key, &p.protector_descriptor, &key)?;
    Ok((pass, p))
}

/// The text of [`README_NAME`]: the passphrase and how to use or remove
/// it, with the commands ready to run: `dir` is the encrypted directory
/// (shell-quoted where needed), `protector` is `MOUNT:ID` of the recovery
/// protector, `policy` `MOUNT:ID` of the directory's policy.
pub fn instructions(
    passphrase: &[u8],
    name: &str,
    dir: &Path,
    protector: &str,
    policy: &str,
) -> Zeroizing<String> {
    let dir = shell_quote(&dir.to_string_lossy());
    Zeroizing::new(format!(
        "This directory has a recovery passphrase, made when it was encrypted:\n\
         \n    {pass}\n\n\
         Its login protector lives on the root filesystem, not beside the directory. If that\n\
         protector is lost (the system is reinstalled, or this disk is moved to another\n\
         machine), the recovery passphrase is the only way back in. Keep a copy somewhere\n\
         safe, away from this disk.\n\
         \n\
         To unlock with it:\n\
         \n    fscrypt-rs unlock {dir} --unlock-with {protector}\n\
         \n\
         (or `fscrypt unlock {dir}` and choose the protector named {name:?}).\n\
         \n\
         The passphrase is long and random, so keeping it is safe. To remove it anyway:\n\
         \n    fscrypt-rs metadata remove-protector-from-policy --protector {protector} --policy {policy}\n",
        pass = String::from_utf8_lossy(passphrase),
    ))
}

/// `s` as one shell word: unchanged when it holds only characters no shell
/// treats specially, else in single quotes (a `'` inside as `'\''`).
fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|c| c.is_ascii_alphanumeric() || b"/._-+,:@%=".contains(&c))
    {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// Writes `text` (from [`instructions`]) as [`README_NAME`] into `dir`
/// (the encrypted, unlocked directory): a new file, never through a
/// symlink, mode 0600, owned by `owner` (uid, gid), synced. Returns its
/// path.
///
/// # Errors
/// [`Error::Io`], also when the file exists.
pub fn write_instructions(dir: &Path, owner: (u32, u32), text: &str) -> Result<PathBuf, Error> {
    let path = dir.join(README_NAME);
    let io = |e| Error::io(&path, e);
    let mut f = crate::store::open_nofollow(
        &path,
        rustix::fs::OFlags::WRONLY | rustix::fs::OFlags::CREATE | rustix::fs::OFlags::EXCL,
        0o600,
    )
    .map_err(io)?;
    f.write_all(text.as_bytes()).map_err(io)?;
    std::os::unix::fs::fchown(&f, Some(owner.0), Some(owner.1)).map_err(io)?;
    f.sync_all().map_err(io)?;
    Ok(path)
}

/// Moves the instructions waiting in `stash` (an encrypted directory with
/// `dir`'s policy, so the kernel allows the rename) into `dir`, under
/// another name if `dir` has a file of that name, keeps `dir`'s times,
/// and removes `stash`. Returns where they are now; `None` (and `stash`
/// removed if empty) when none wait.
///
/// # Errors
/// [`Error::Io`].
pub fn deliver(stash: &Path, dir: &Path) -> Result<Option<PathBuf>, Error> {
    let from = stash.join(README_NAME);
    if std::fs::symlink_metadata(&from).is_err() {
        let _ = std::fs::remove_dir(stash);
        return Ok(None);
    }
    let mut to = dir.join(README_NAME);
    let mut n = 1;
    while std::fs::symlink_metadata(&to).is_ok() {
        n += 1;
        to = dir.join(format!("fscrypt_recovery_readme ({n}).txt"));
    }
    let times = std::fs::metadata(dir).and_then(|m| Ok((m.accessed()?, m.modified()?)));
    std::fs::rename(&from, &to).map_err(|e| Error::io(&from, e))?;
    if let Ok((a, m)) = times {
        let t = std::fs::FileTimes::new().set_accessed(a).set_modified(m);
        let _ = std::fs::File::open(dir).and_then(|f| f.set_times(t));
    }
    std::fs::remove_dir(stash).map_err(|e| Error::io(stash, e))?;
    Ok(Some(to))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passphrases_are_lowercase_letters_of_the_asked_length() {
        let a = random_passphrase(PASSPHRASE_LEN).unwrap();
        let b = random_passphrase(PASSPHRASE_LEN).unwrap();
        assert_eq!(a.len(), PASSPHRASE_LEN);
        assert!(a.iter().all(|c| c.is_ascii_lowercase()), "{:?}", &a[..]);
        assert_ne!(&a[..], &b[..]);
        // Every letter turns up (uniformity, loosely): 26 * 200 draws.
        let many = random_passphrase(26 * 200).unwrap();
        for c in b'a'..=b'z' {
            let n = many.iter().filter(|&&x| x == c).count();
            assert!((100..=320).contains(&n), "{} drawn {n} times", c as char);
        }
    }

    #[test]
    fn names_skip_those_taken() {
        assert_eq!(protector_name("d", |_| false), "Recovery passphrase for d");
        let taken = ["Recovery passphrase for d", "Recovery passphrase for d (2)"];
        assert_eq!(
            protector_name("d", |n| taken.contains(&n)),
            "Recovery passphrase for d (3)"
        );
    }

    #[test]
    fn the_recovery_protector_opens_the_policy() {
        let costs = HashingCosts {
            time: 1,
            memory: 256,
            parallelism: 1,
            truncation_fixed: true,
        };
        let (pk_prot, pkey) =
            actions::new_protector(SourceType::CustomPassphrase, "main", &costs, b"pw", 0).unwrap();
        let opts = crate::proto::EncryptionOptions::defaults(2);
        let (mut policy, key) =
            actions::new_policy(&opts, &pk_prot.protector_descriptor, &pkey).unwrap();
        let (pass, rp) =
            add_recovery(&mut policy, &key, "Recovery passphrase for d", &costs).unwrap();
        assert_eq!(policy.wrapped_policy_keys.len(), 2);
        assert_eq!(rp.source_type(), SourceType::CustomPassphrase);
        let rkey = actions::open_protector(&rp, &pass).unwrap();
        let got = actions::open_policy(&policy, &rp.protector_descriptor, &rkey).unwrap();
        assert_eq!(&got[..], &key[..]);
        assert!(actions::open_protector(&rp, b"wrong").is_err());
        let text = instructions(&pass, &rp.name, Path::new("/m/d"), "/m:aa", "/m:bb");
        assert!(text.contains(std::str::from_utf8(&pass).unwrap()));
        // The commands name the directory, not a placeholder.
        assert!(
            text.contains("fscrypt-rs unlock /m/d --unlock-with /m:aa"),
            "{}",
            *text
        );
        assert!(text.contains("`fscrypt unlock /m/d`"), "{}", *text);
        assert!(!text.contains("DIR"), "{}", *text);
        let spaced = instructions(&pass, "n", Path::new("/m/it's mine"), "/m:aa", "/m:bb");
        assert!(
            spaced.contains("unlock '/m/it'\\''s mine' --unlock-with"),
            "{}",
            *spaced
        );
    }
}
