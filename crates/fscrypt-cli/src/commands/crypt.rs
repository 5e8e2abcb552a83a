//! `fscrypt-rs crypt`: a drop-in for xfstests' `fscrypt-crypt-util`.
//!
//! `fscrypt-rs crypt [OPTIONS] CIPHER MASTER_KEY` en/decrypts stdin to stdout
//! in data units (default 4096 bytes) exactly as the kernel would for the
//! given key-derivation options; `--data-unit-size=255 --padding=N` makes one
//! filename. `fscrypt-rs crypt --dump-key-identifier --kdf=HKDF-SHA512
//! MASTER_KEY` prints the v2 key identifier (32 hex digits, no newline, as
//! the reference tool does).
//!
//! This file parses options and moves bytes; keys, IVs and unit lengths come
//! from `fscrypt::crypt_util`. Exit status: 0 success, 1 a failed
//! precondition (same conditions and wording as the reference tool), 2 usage
//! errors (unknown/malformed options, wrong number of arguments).

use std::io::{self, Read, Write};
use std::process::ExitCode;

use anyhow::{Context as _, bail};
use fscrypt::crypt_util::{self, CryptUtilParams, Kdf, UnitCrypter};
use zeroize::Zeroizing;

/// Bytes processed per read/write batch (whole data units).
const BATCH_BYTES: usize = 1 << 20;
/// Largest data unit size accepted (the buffer holds at least one unit).
const MAX_DATA_UNIT_SIZE: usize = 1 << 30;

/// Arguments of `fscrypt-rs crypt` (option spellings of xfstests'
/// `fscrypt-crypt-util`).
#[derive(clap::Args, Debug)]
#[command(
    override_usage = "fscrypt-rs crypt [OPTIONS] [CIPHER | --dump-key-identifier] MASTER_KEY"
)]
pub struct Args {
    /// Index of the first data unit (for IV generation).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub data_unit_index: u64,
    /// Encrypt each N bytes independently; 255 with --padding = one filename.
    #[arg(long, value_name = "N", default_value_t = 4096, value_parser = parse_positive)]
    pub data_unit_size: usize,
    /// Decrypt instead of encrypt.
    #[arg(long)]
    pub decrypt: bool,
    /// IVs include the file nonce; one key per mode (DIRECT_KEY).
    #[arg(long)]
    pub direct_key: bool,
    /// Print the key identifier of MASTER_KEY instead (needs --kdf=HKDF-SHA512).
    #[arg(long)]
    pub dump_key_identifier: bool,
    /// The file's nonce, 32 hex digits.
    #[arg(long, value_name = "HEX", value_parser = parse_hex16)]
    pub file_nonce: Option<[u8; 16]>,
    /// The filesystem UUID, 32 hex digits (IV_INO_LBLK_64/32).
    #[arg(long, value_name = "HEX", value_parser = parse_hex16)]
    pub fs_uuid: Option<[u8; 16]>,
    /// The file's inode number (IV_INO_LBLK_64/32).
    #[arg(long, value_name = "N", value_parser = parse_positive_u64)]
    pub inode_number: Option<u64>,
    /// IV_INO_LBLK_32 format (hashed inode number + index).
    #[arg(long)]
    pub iv_ino_lblk_32: bool,
    /// IV_INO_LBLK_64 format (inode number and index in the IV).
    #[arg(long)]
    pub iv_ino_lblk_64: bool,
    /// Key derivation: none, AES-128-ECB or HKDF-SHA512.
    #[arg(long, value_name = "KDF", default_value = "none", value_parser = parse_kdf)]
    pub kdf: Kdf,
    /// The encryption mode number (for HKDF infos).
    #[arg(long, value_name = "N", value_parser = parse_mode_num)]
    pub mode_num: Option<u8>,
    /// If the last unit is partial, zero-pad it to the next N-byte boundary
    /// (power of two). Default: the data unit size.
    #[arg(long, value_name = "N", value_parser = parse_padding)]
    pub padding: Option<usize>,
    /// Apply the xfstests model of the hardware KDF (hardware-wrapped keys).
    #[arg(long)]
    pub enable_hw_kdf: bool,
    /// With --enable-hw-kdf: en/decrypt with the modelled inline encryption key.
    #[arg(long)]
    pub use_inlinecrypt_key: bool,
    /// CIPHER (AES-256-XTS, AES-256-CTS-CBC, AES-128-CBC-ESSIV, AES-128-CTS-CBC,
    /// Adiantum, AES-256-HCTR2, SM4-XTS, SM4-CTS-CBC) and MASTER_KEY (hex).
    #[arg(value_name = "ARGS", required = true, num_args = 1..=2)]
    pub args: Vec<String>,
}

fn parse_positive(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!("invalid size {s:?}: expected a positive integer")),
    }
}

fn parse_positive_u64(s: &str) -> Result<u64, String> {
    match s.parse::<u64>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!(
            "invalid inode number {s:?}: expected a positive integer"
        )),
    }
}

fn parse_padding(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if n.is_power_of_two() && n <= i32::MAX as usize => Ok(n),
        _ => Err(format!(
            "invalid padding amount {s:?}: expected a power of two"
        )),
    }
}

fn parse_mode_num(s: &str) -> Result<u8, String> {
    match s.parse::<u8>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!("invalid mode number {s:?}: expected 1..=255")),
    }
}

fn parse_hex16(s: &str) -> Result<[u8; 16], String> {
    let v = hex::decode(s).map_err(|e| format!("invalid hex {s:?}: {e}"))?;
    v.try_into()
        .map_err(|v: Vec<u8>| format!("expected 16 bytes (32 hex digits), got {} bytes", v.len()))
}

fn parse_kdf(s: &str) -> Result<Kdf, String> {
    s.parse::<Kdf>().map_err(|e| e.to_string())
}

fn usage_error(msg: &str) -> ExitCode {
    eprintln!(
        "error: {msg}\n\nUsage: fscrypt-rs crypt [OPTIONS] [CIPHER | --dump-key-identifier] MASTER_KEY\n\n\
         For more information, try 'fscrypt-rs crypt --help'."
    );
    ExitCode::from(2)
}

fn parse_master_key(hex_key: &str) -> anyhow::Result<Zeroizing<Vec<u8>>> {
    let key =
        Zeroizing::new(hex::decode(hex_key).map_err(|_| {
            anyhow::anyhow!("Invalid master_key: not an even number of hex digits")
        })?);
    if key.len() > crypt_util::MAX_KEY_SIZE {
        bail!(
            "Invalid master_key: {} bytes, at most {}",
            key.len(),
            crypt_util::MAX_KEY_SIZE
        );
    }
    Ok(key)
}

/// Reads until `buf` is full or EOF; returns the number of bytes read.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// Runs `fscrypt-rs crypt`.
pub fn exec(args: Args) -> anyhow::Result<ExitCode> {
    let params = CryptUtilParams {
        kdf: args.kdf,
        mode_num: args.mode_num.unwrap_or(0),
        file_nonce: args.file_nonce,
        direct_key: args.direct_key,
        iv_ino_lblk_64: args.iv_ino_lblk_64,
        iv_ino_lblk_32: args.iv_ino_lblk_32,
        inode_number: args.inode_number.unwrap_or(0),
        fs_uuid: args.fs_uuid,
        data_unit_index: args.data_unit_index,
        enable_hw_kdf: args.enable_hw_kdf,
        use_inlinecrypt_key: args.use_inlinecrypt_key,
    };

    if args.dump_key_identifier {
        // Reference usage: `--dump-key-identifier MASTER_KEY`; a leading
        // CIPHER is tolerated and ignored.
        let key_hex = match args.args.as_slice() {
            [key] => key,
            [cipher, key] => {
                if crypt_util::cipher_by_name(cipher).is_none() {
                    bail!("Unknown cipher: {cipher}");
                }
                key
            }
            _ => return Ok(usage_error("expected MASTER_KEY")),
        };
        let key = parse_master_key(key_hex)?;
        let id = crypt_util::key_identifier(&key, &params)?;
        let mut out = io::stdout().lock();
        write!(out, "{id}")?;
        out.flush()?;
        return Ok(ExitCode::SUCCESS);
    }

    let [cipher_name, key_hex] = args.args.as_slice() else {
        return Ok(usage_error("expected CIPHER and MASTER_KEY"));
    };
    let Some(cipher) = crypt_util::cipher_by_name(cipher_name) else {
        bail!(
            "Unknown cipher: {cipher_name} (use AES-256-XTS, AES-256-CTS-CBC, AES-128-CBC-ESSIV, \
             AES-128-CTS-CBC, Adiantum, AES-256-HCTR2, SM4-XTS or SM4-CTS-CBC)"
        );
    };
    let du = args.data_unit_size;
    if du < crypt_util::min_input_size(cipher) {
        return Err(crypt_util::CryptUtilError::DataUnitTooSmall {
            size: du,
            cipher: cipher.cipher_name,
        }
        .into());
    }
    if du > MAX_DATA_UNIT_SIZE {
        bail!("Data unit size of {du} bytes is larger than the supported {MAX_DATA_UNIT_SIZE}");
    }
    let key = parse_master_key(key_hex)?;
    let mut crypter = UnitCrypter::new(cipher, &key, &params)?;
    drop(key);

    let units_per_batch = (BATCH_BYTES / du).max(1);
    let mut buf = vec![0u8; units_per_batch * du];
    let mut input = io::stdin().lock();
    let mut output = io::stdout().lock();
    loop {
        let filled = read_full(&mut input, &mut buf).context("read error")?;
        if filled == 0 {
            break;
        }
        let mut out_len = 0;
        let mut off = 0;
        while off < filled {
            let read = (filled - off).min(du);
            let unit = &mut buf[off..off + du];
            out_len = off + crypter.crypt_unit(unit, read, args.padding, args.decrypt)?;
            off += du;
        }
        output.write_all(&buf[..out_len]).context("write error")?;
        if filled < buf.len() {
            break;
        }
    }
    output.flush().context("write error")?;
    Ok(ExitCode::SUCCESS)
}
