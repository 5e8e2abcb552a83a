//! Hardware-wrapped key ioctls on block devices (`BLKCRYPTOIMPORTKEY`,
//! `BLKCRYPTOGENERATEKEY`, `BLKCRYPTOPREPAREKEY`; Linux 6.15+, spec §4.6;
//! kernel: block/blk-crypto.c).
//!
//! Without inline-encryption hardware that supports wrapped keys, the kernel
//! refuses these (`EOPNOTSUPP`), which comes back as
//! [`Error::HwWrappedNotSupported`].

use std::path::Path;

use zeroize::Zeroizing;

use crate::error::{ErrnoContext, Error, Operation};
use crate::ioctl;
use crate::keyring::open_for_ioctl;
use crate::uapi::BLK_CRYPTO_MAX_HW_WRAPPED_KEY_SIZE;

fn map(op: Operation, dev: &Path) -> impl Fn(rustix::io::Errno) -> Error + '_ {
    move |e| Error::from_errno(op, dev, e, &ErrnoContext::default())
}

/// Import a raw key (its length is checked by the hardware driver)
/// and return it in long-term wrapped form.
///
/// # Errors
/// [`Error::HwWrappedNotSupported`], [`Error::InvalidArgument`], …
pub fn import_key(device: &Path, raw_key: &[u8]) -> Result<Vec<u8>, Error> {
    let f = open_for_ioctl(device)?;
    let mut lt = vec![0u8; BLK_CRYPTO_MAX_HW_WRAPPED_KEY_SIZE];
    let n = ioctl::blk_crypto_import_key(&f, raw_key, &mut lt)
        .map_err(map(Operation::BlkImportKey, device))?;
    lt.truncate(n);
    Ok(lt)
}

/// Have the hardware generate a key; returns its long-term wrapped form.
///
/// # Errors
/// [`Error::HwWrappedNotSupported`], …
pub fn generate_key(device: &Path) -> Result<Vec<u8>, Error> {
    let f = open_for_ioctl(device)?;
    let mut lt = vec![0u8; BLK_CRYPTO_MAX_HW_WRAPPED_KEY_SIZE];
    let n = ioctl::blk_crypto_generate_key(&f, &mut lt)
        .map_err(map(Operation::BlkGenerateKey, device))?;
    lt.truncate(n);
    Ok(lt)
}

/// Convert a long-term wrapped key into the ephemerally-wrapped form that
/// `add-key --hw-wrapped` takes.
///
/// # Errors
/// [`Error::HwWrappedNotSupported`], [`Error::BadWrappedKey`], …
pub fn prepare_key(device: &Path, lt_key: &[u8]) -> Result<Zeroizing<Vec<u8>>, Error> {
    let f = open_for_ioctl(device)?;
    let mut eph = Zeroizing::new(vec![0u8; BLK_CRYPTO_MAX_HW_WRAPPED_KEY_SIZE]);
    let n = ioctl::blk_crypto_prepare_key(&f, lt_key, &mut eph)
        .map_err(map(Operation::BlkPrepareKey, device))?;
    eph.truncate(n);
    Ok(eph)
}
