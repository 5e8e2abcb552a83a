//! The filesystem-facing layer: everything a filesystem needs to handle names,
//! no-key names and symlink targets of encrypted directories, so that it never
//! touches the format's internals (kernel `fs/crypto/hooks.c` and the
//! `fscrypt_setup_filename()` / `fscrypt_match_name()` /
//! `fscrypt_fname_disk_to_usr()` part of `fs/crypto/fname.c`; spec §7, §8).
//!
//! A filesystem passes `Some(&InodeCrypt)` for a directory (or symlink) whose
//! key is present and `None` for one whose key is absent; the hooks then apply
//! the kernel's rules:
//!
//! | operation | with the key | without the key |
//! |-----------|--------------|-----------------|
//! | [`FscryptName::for_lookup`] | the name's ciphertext | the decoded no-key name (ENOENT if malformed) |
//! | [`FscryptName::for_create`] | the name's ciphertext | ENOKEY |
//! | [`present_entry`] | the plaintext name | the no-key name |
//! | [`get_symlink`] | the plaintext target | the no-key name of its ciphertext |
//! | [`prepare_symlink`] | the blob size | ENOKEY |
//! | [`prepare_link`] / [`prepare_rename`] | EXDEV across policies | ENOKEY |
//!
//! Errors are [`Error::Hook`] ([`HookError`]) or [`Error::Name`]; the errno
//! each stands for is in the variant docs.

use crate::error::{Error, HookError, NameError};
use crate::fname::{FNAME_MIN_MSG_LEN, FnameBuf, NAME_MAX, encrypted_size, is_dot_or_dotdot};
use crate::keysetup::InodeCrypt;
use crate::nokey::{self, NoKeyName, NoKeyNameBuf};
use crate::policy::Policy;
use crate::symlink::{SYMLINK_BLOB_OVERHEAD, parse_blob};

/// A name given by a user, prepared for a directory operation (kernel
/// `struct fscrypt_name` after `fscrypt_setup_filename()`).
#[derive(Debug, Clone)]
pub enum FscryptName {
    /// The directory's key is present: the exact on-disk ciphertext.
    Ciphertext(FnameBuf),
    /// The key is absent: a no-key name (spec §8.1), which identifies the
    /// entry by its ciphertext or, for long names, a prefix and a digest.
    NoKey(NoKeyName),
}

/// Checks a plaintext name the way the VFS and fscrypt do before encrypting it.
fn check_plain(name: &[u8]) -> Result<(), Error> {
    if name.is_empty() {
        return Err(NameError::Empty.into());
    }
    if name.len() > NAME_MAX {
        return Err(NameError::TooLong {
            len: name.len(),
            max: NAME_MAX,
        }
        .into());
    }
    if name.iter().any(|&b| b == 0 || b == b'/') {
        return Err(NameError::InvalidPlaintext.into());
    }
    Ok(())
}

impl FscryptName {
    /// Prepares `name` for a lookup in `dir` (kernel
    /// `fscrypt_setup_filename(dir, name, lookup = 1)`).
    ///
    /// With the key the name is encrypted; without it, `name` must be a no-key
    /// name the kernel could have presented.
    ///
    /// # Errors
    /// With the key: [`NameError::Empty`], [`NameError::TooLong`]
    /// (ENAMETOOLONG), [`NameError::InvalidPlaintext`]. Without the key:
    /// [`HookError::NotFound`] (ENOENT) for anything that is not a well-formed
    /// no-key name, as the kernel answers.
    pub fn for_lookup(dir: Option<&InodeCrypt>, name: &[u8]) -> Result<FscryptName, Error> {
        match dir {
            Some(d) => {
                check_plain(name)?;
                Ok(FscryptName::Ciphertext(d.encrypt_filename(name)?))
            }
            None => {
                if is_dot_or_dotdot(name) {
                    return Err(HookError::NotFound.into());
                }
                NoKeyName::decode(name)
                    .map(FscryptName::NoKey)
                    .map_err(|_| HookError::NotFound.into())
            }
        }
    }

    /// Prepares `name` for creating an entry in `dir` (kernel
    /// `fscrypt_setup_filename(dir, name, lookup = 0)` after
    /// `fscrypt_prepare_new_inode()`): returns the ciphertext to store.
    ///
    /// # Errors
    /// [`HookError::KeyRequired`] (ENOKEY) without the key; otherwise as
    /// [`FscryptName::for_lookup`] with the key.
    pub fn for_create(dir: Option<&InodeCrypt>, name: &[u8]) -> Result<FnameBuf, Error> {
        let d = dir.ok_or(HookError::KeyRequired)?;
        check_plain(name)?;
        if is_dot_or_dotdot(name) {
            return Err(NameError::InvalidPlaintext.into());
        }
        d.encrypt_filename(name)
    }

    /// The exact on-disk ciphertext when it is known: always with the key, and
    /// for no-key names of ciphertexts up to 149 bytes. `None` means the
    /// directory must be scanned with [`FscryptName::matches`].
    pub fn disk_name(&self) -> Option<&[u8]> {
        match self {
            FscryptName::Ciphertext(c) => Some(c),
            FscryptName::NoKey(n) => n.ciphertext(),
        }
    }

    /// The dirhash words a no-key name carries (`(0, 0)` with the key or for
    /// directories without hashes), for filesystems with hashed directories.
    pub fn hashes(&self) -> (u32, u32) {
        match self {
            FscryptName::Ciphertext(_) => (0, 0),
            FscryptName::NoKey(n) => (n.hash, n.minor_hash),
        }
    }

    /// Whether a directory entry whose on-disk name is `ciphertext` is the one
    /// this name refers to (kernel `fscrypt_match_name()`).
    pub fn matches(&self, ciphertext: &[u8]) -> bool {
        match self {
            FscryptName::Ciphertext(c) => &**c == ciphertext,
            FscryptName::NoKey(n) => n.matches(ciphertext),
        }
    }
}

/// A directory entry's name as presented to the user.
#[derive(Debug, Clone)]
pub enum PresentedName {
    /// The decrypted plaintext name.
    Plain(FnameBuf),
    /// The kernel's no-key name (spec §8.1).
    NoKey(NoKeyNameBuf),
}

impl std::ops::Deref for PresentedName {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            PresentedName::Plain(p) => p,
            PresentedName::NoKey(n) => n.as_bytes(),
        }
    }
}

/// Presents an on-disk entry name of `dir` (kernel
/// `fscrypt_fname_disk_to_usr()`): the plaintext with the key, the no-key name
/// with the given dirhash words without it (`0, 0` for directories without
/// hashes).
///
/// # Errors
/// With the key, as [`InodeCrypt::decrypt_filename`]:
/// [`NameError::BadCiphertextLength`] and [`NameError::InvalidDecryptedName`]
/// (EUCLEAN: a corrupt entry the filesystem should skip or report). Without
/// the key, [`NameError::BadCiphertextLength`] for an empty or over-long name.
pub fn present_entry(
    dir: Option<&InodeCrypt>,
    ciphertext: &[u8],
    hash: u32,
    minor_hash: u32,
) -> Result<PresentedName, Error> {
    match dir {
        Some(d) => Ok(PresentedName::Plain(d.decrypt_filename(ciphertext)?)),
        None => {
            if ciphertext.is_empty() || ciphertext.len() > NAME_MAX {
                return Err(NameError::BadCiphertextLength {
                    len: ciphertext.len(),
                    min: 1,
                    max: NAME_MAX,
                }
                .into());
            }
            Ok(PresentedName::NoKey(nokey::encode(
                ciphertext, hash, minor_hash,
            )))
        }
    }
}

/// The target of an encrypted symlink as `readlink` presents it (kernel
/// `fscrypt_get_symlink()`): the plaintext with the symlink's key, the no-key
/// name of the ciphertext (hashes 0) without it.
///
/// # Errors
/// [`NameError::CorruptSymlink`] (EUCLEAN) for a malformed blob; with the key
/// also [`NameError::InvalidDecryptedName`].
pub fn get_symlink(link: Option<&InodeCrypt>, blob: &[u8]) -> Result<Vec<u8>, Error> {
    match link {
        Some(l) => l.decrypt_symlink(blob),
        None => Ok(nokey::encode(parse_blob(blob)?, 0, 0).as_bytes().to_vec()),
    }
}

/// Checks that a symlink with a `target_len`-byte target can be created in
/// `dir` and returns the size of its on-disk blob (kernel
/// `fscrypt_prepare_symlink()`); `max_len` is the largest blob the filesystem
/// stores (ext4: the block size) and `padding` the policy's filename padding.
///
/// # Errors
/// [`HookError::KeyRequired`] (ENOKEY) without the directory's key,
/// [`NameError::Empty`] for an empty target, [`NameError::TooLong`]
/// (ENAMETOOLONG) when the encrypted target does not fit `max_len`.
pub fn prepare_symlink(
    dir: Option<&InodeCrypt>,
    target_len: usize,
    padding: usize,
    max_len: usize,
) -> Result<usize, Error> {
    dir.ok_or(HookError::KeyRequired)?;
    if target_len == 0 {
        return Err(NameError::Empty.into());
    }
    let max_ct = max_len.saturating_sub(SYMLINK_BLOB_OVERHEAD);
    encrypted_size(target_len, padding, max_ct)
        .filter(|&n| n >= FNAME_MIN_MSG_LEN)
        .map(|n| n + SYMLINK_BLOB_OVERHEAD)
        .ok_or_else(|| {
            NameError::TooLong {
                len: target_len,
                max: max_ct,
            }
            .into()
        })
}

/// An inode taking part in a link or rename, as the checks need it.
#[derive(Debug, Clone, Copy)]
pub struct LinkInode<'a> {
    /// Its encryption policy (`None`: not encrypted).
    pub policy: Option<&'a Policy>,
    /// Whether it is a FIFO, socket or device node (never encrypted; always
    /// allowed in an encrypted directory, as the kernel does).
    pub special: bool,
}

/// Whether `child` may be an entry of a directory with policy `parent`
/// (kernel `fscrypt_has_permitted_context()`): always in an unencrypted
/// directory; in an encrypted one, special files always, other files only
/// with the same policy.
pub fn has_permitted_context(parent: Option<&Policy>, child: LinkInode<'_>) -> bool {
    match (parent, child.policy) {
        (None, _) => true,
        (Some(_), _) if child.special => true,
        (Some(p), Some(c)) => p == c,
        (Some(_), None) => false,
    }
}

/// Checks a hard link of `inode` into `dir` (kernel `__fscrypt_prepare_link()`).
/// `dir_has_key` tells whether `dir`'s key is present.
///
/// # Errors
/// [`HookError::KeyRequired`] (ENOKEY) when `dir` is encrypted and its key is
/// absent; [`HookError::CrossPolicy`] (EXDEV) when the policies differ.
pub fn prepare_link(
    dir: Option<&Policy>,
    dir_has_key: bool,
    inode: LinkInode<'_>,
) -> Result<(), Error> {
    if dir.is_some() && !dir_has_key {
        return Err(HookError::KeyRequired.into());
    }
    if !has_permitted_context(dir, inode) {
        return Err(HookError::CrossPolicy.into());
    }
    Ok(())
}

/// One side of a rename: the directory, whether its key is present, and the
/// entry in it (`None` for a destination that does not exist).
#[derive(Debug, Clone, Copy)]
pub struct RenameSide<'a> {
    /// The directory's policy (`None`: not encrypted).
    pub dir: Option<&'a Policy>,
    /// Whether the directory's key is present.
    pub dir_has_key: bool,
    /// The entry renamed from / replaced or exchanged at this side.
    pub inode: Option<LinkInode<'a>>,
}

/// Checks a rename from `old` to `new` (kernel `__fscrypt_prepare_rename()`):
/// both directories need their keys when encrypted; the moved entry must be
/// permitted in the new directory and, for `RENAME_EXCHANGE` (`exchange`), the
/// other entry in the old one. `same_dir` skips the policy checks as the
/// kernel does when both directories are one.
///
/// # Errors
/// [`HookError::KeyRequired`] (ENOKEY), [`HookError::CrossPolicy`] (EXDEV).
pub fn prepare_rename(
    old: RenameSide<'_>,
    new: RenameSide<'_>,
    same_dir: bool,
    exchange: bool,
) -> Result<(), Error> {
    for side in [&old, &new] {
        if side.dir.is_some() && !side.dir_has_key {
            return Err(HookError::KeyRequired.into());
        }
    }
    if same_dir {
        return Ok(());
    }
    if let Some(moved) = old.inode
        && new.dir.is_some()
        && !has_permitted_context(new.dir, moved)
    {
        return Err(HookError::CrossPolicy.into());
    }
    if exchange
        && let Some(other) = new.inode
        && old.dir.is_some()
        && !has_permitted_context(old.dir, other)
    {
        return Err(HookError::CrossPolicy.into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Context, FileType, InodeParams, MasterKey, PolicyV2};

    fn dir(file_type: FileType) -> (InodeCrypt, Policy) {
        let mk = MasterKey::new(&[0x42; 64]).unwrap();
        let p = Policy::V2(PolicyV2::new_default(mk.identifier()));
        let params = InodeParams {
            file_type,
            ino: 2,
            fs_uuid: [0; 16],
            fs_block_size: 4096,
        };
        (
            InodeCrypt::new(&mk, &Context::new(&p, [9; 16]), &params).unwrap(),
            p,
        )
    }

    fn hook_err(r: Result<impl std::fmt::Debug, Error>) -> HookError {
        match r {
            Err(Error::Hook(h)) => h,
            other => panic!("expected a hook error, got {other:?}"),
        }
    }

    #[test]
    fn lookup_and_present_round_trip_with_and_without_the_key() {
        let (d, _) = dir(FileType::Directory);
        for len in [1usize, 15, 16, 17, 100, 149, 150, 200, 255] {
            let name = vec![b'a' + (len % 26) as u8; len];
            let ct = FscryptName::for_create(Some(&d), &name).unwrap();
            let l = FscryptName::for_lookup(Some(&d), &name).unwrap();
            assert_eq!(l.disk_name(), Some(&ct[..]));
            assert!(l.matches(&ct));
            assert_eq!(&*present_entry(Some(&d), &ct, 0, 0).unwrap(), &name[..]);
            let nk = present_entry(None, &ct, 0, 0).unwrap();
            let l = FscryptName::for_lookup(None, &nk).unwrap();
            assert!(l.matches(&ct), "len {len}");
            let mut other = ct.to_vec();
            *other.last_mut().unwrap() ^= 1;
            assert!(!l.matches(&other), "len {len}");
            assert_eq!(l.disk_name().is_some(), ct.len() <= nokey::NOKEY_BYTES);
        }
    }

    #[test]
    fn kernel_refusals() {
        let (d, p) = dir(FileType::Directory);
        assert_eq!(
            hook_err(FscryptName::for_create(None, b"x")),
            HookError::KeyRequired
        );
        for bad in [&b"."[..], b"..", b"!!not base64!!", b"", &[b'A'; 253]] {
            assert_eq!(
                hook_err(FscryptName::for_lookup(None, bad)),
                HookError::NotFound
            );
        }
        assert!(matches!(
            FscryptName::for_lookup(Some(&d), &[b'a'; 256]),
            Err(Error::Name(NameError::TooLong { .. }))
        ));
        assert!(matches!(
            FscryptName::for_create(Some(&d), b"a/b"),
            Err(Error::Name(NameError::InvalidPlaintext))
        ));
        assert_eq!(
            hook_err(prepare_symlink(None, 5, 32, 4096)),
            HookError::KeyRequired
        );
        assert_eq!(prepare_symlink(Some(&d), 5, 32, 4096).unwrap(), 32 + 3);
        assert_eq!(prepare_symlink(Some(&d), 4093, 32, 4096).unwrap(), 4093 + 3);
        assert!(matches!(
            prepare_symlink(Some(&d), 4094, 32, 4096),
            Err(Error::Name(NameError::TooLong { .. }))
        ));

        let mk2 = MasterKey::new(&[0x43; 64]).unwrap();
        let q = Policy::V2(PolicyV2::new_default(mk2.identifier()));
        let file = |policy| LinkInode {
            policy,
            special: false,
        };
        assert!(prepare_link(Some(&p), true, file(Some(&p))).is_ok());
        assert_eq!(
            hook_err(prepare_link(Some(&p), false, file(Some(&p)))),
            HookError::KeyRequired
        );
        assert_eq!(
            hook_err(prepare_link(Some(&p), true, file(Some(&q)))),
            HookError::CrossPolicy
        );
        assert_eq!(
            hook_err(prepare_link(Some(&p), true, file(None))),
            HookError::CrossPolicy
        );
        let fifo = LinkInode {
            policy: None,
            special: true,
        };
        assert!(prepare_link(Some(&p), true, fifo).is_ok());
        assert!(prepare_link(None, false, file(Some(&q))).is_ok());

        let side = |dir, key, inode| RenameSide {
            dir,
            dir_has_key: key,
            inode,
        };
        assert!(
            prepare_rename(
                side(Some(&p), true, Some(file(Some(&p)))),
                side(Some(&p), true, None),
                false,
                false
            )
            .is_ok()
        );
        assert_eq!(
            hook_err(prepare_rename(
                side(Some(&p), true, Some(file(Some(&p)))),
                side(Some(&p), false, None),
                true,
                false
            )),
            HookError::KeyRequired
        );
        assert_eq!(
            hook_err(prepare_rename(
                side(Some(&p), true, Some(file(Some(&p)))),
                side(Some(&q), true, None),
                false,
                false
            )),
            HookError::CrossPolicy
        );
        // Exchange: the other entry must fit the old directory too.
        assert_eq!(
            hook_err(prepare_rename(
                side(None, false, Some(file(None))),
                side(Some(&q), true, Some(file(Some(&q)))),
                false,
                true
            )),
            HookError::CrossPolicy
        );
    }

    #[test]
    fn symlink_targets_with_and_without_the_key() {
        let (l, _) = dir(FileType::Symlink);
        let blob = l.encrypt_symlink(b"/some/target", 4096).unwrap();
        assert_eq!(get_symlink(Some(&l), &blob).unwrap(), b"/some/target");
        let nk = get_symlink(None, &blob).unwrap();
        let ct = &blob[2..blob.len() - 1];
        assert!(NoKeyName::decode(&nk).unwrap().matches(ct));
        assert!(matches!(
            get_symlink(None, &[5, 0, 1]),
            Err(Error::Name(NameError::CorruptSymlink(_)))
        ));
    }
}
