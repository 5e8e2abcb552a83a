//! `fscrypt-rs crypt`: a drop-in for xfstests' `fscrypt-crypt-util`.
//!
//! `fscrypt-rs crypt [OPTIONS] CIPHER MASTER_KEY` en/decrypts stdin to stdout
//! in data units (default 4096 bytes) exactly as the kernel would for the
//! given key-derivation options; `--data-unit-size=255 --padding=N` makes one
//! filename. `fscrypt-rs crypt --dump-key-identifier --kdf=HKDF-SHA512
//! MASTER_KEY` prints the v2 key identifier (32 hex digits, no newline, as
//! the reference tool does).
//!
//! The command line is parsed here, not by clap ([`options`]), so that what is
//! accepted and the exit status match the reference rule for rule: 0 success,
//! 1 a refused value or combination (including what the reference only
//! catches with an assertion, e.g. an XTS unit that is not whole blocks),
//! 2 usage errors (unknown, ambiguous or malformed options, wrong number of
//! operands). Keys, IVs and unit lengths come from `fscrypt::crypt_util`.
//! `scripts/crypt-util-diff.sh` compares us with a built reference.

mod options;

use std::ffi::OsString;
use std::io::{self, Read, Write};
use std::process::ExitCode;

use anyhow::{Context as _, anyhow};
use fscrypt::crypt_util::{self, CryptUtilParams, UnitCrypter};

use options::{Options, Stop};

/// Bytes read per batch (whole data units; at least one unit).
const BATCH_BYTES: usize = 1 << 20;

/// The usage line, shown with usage errors and atop `--help`.
const USAGE: &str = "fscrypt-rs crypt [OPTION]... [CIPHER | --dump-key-identifier] MASTER_KEY";

/// `--help` (stdout, exit 0) and `fscrypt-rs help crypt`.
const HELP: &str = "\
En/decrypt stdin to stdout the way Linux fscrypt does, as xfstests'
src/fscrypt-crypt-util does: same options, output bytes and exit status.

Usage: fscrypt-rs crypt [OPTION]... [CIPHER | --dump-key-identifier] MASTER_KEY

CIPHER: AES-256-XTS, AES-256-CTS-CBC, AES-128-CBC-ESSIV, AES-128-CTS-CBC,
Adiantum or AES-256-HCTR2 (and SM4-XTS, SM4-CTS-CBC: see below). MASTER_KEY:
up to 64 bytes in hex, at least the cipher's key size.

Options (a unique prefix of a name is enough; --opt=VALUE or --opt VALUE):
  --data-unit-index=N    index of the first data unit, for the IVs (default 0)
  --data-unit-size=N     en/decrypt each N bytes independently (default 4096)
  --decrypt              decrypt instead of encrypt
  --direct-key           DIRECT_KEY IVs (they include the file nonce)
  --dump-key-identifier  print the key identifier of MASTER_KEY instead
                         (needs --kdf=HKDF-SHA512)
  --enable-hw-kdf        MASTER_KEY is a raw hardware-wrapped key (32 bytes):
                         derive through the xfstests model of the hardware KDF
  --file-nonce=HEX       the file's nonce, 32 hex digits
  --fs-uuid=HEX          the filesystem UUID, 32 hex digits (IV_INO_LBLK_*)
  --help                 show this help
  --inode-number=N       the file's inode number (IV_INO_LBLK_*)
  --iv-ino-lblk-32       IV_INO_LBLK_32 IVs (needs --kdf=HKDF-SHA512)
  --iv-ino-lblk-64       IV_INO_LBLK_64 IVs (inode number and unit index)
  --kdf=KDF              none (default), AES-128-ECB or HKDF-SHA512
  --mode-num=N           the encryption mode number (1-255) for HKDF infos
  --padding=N            zero-pad a partial last unit to a multiple of N
                         (a power of two; default: the data unit size)
  --use-inlinecrypt-key  with --enable-hw-kdf: use the inline encryption key

Exit status: 0 done; 1 a refused value or combination (also where the
reference stops on an internal assertion, e.g. an XTS or CBC-ESSIV unit that
is not whole 16-byte blocks); 2 a usage error.

Differences from the reference: SM4-XTS and SM4-CTS-CBC are accepted (the
reference says \"Unknown cipher\"); the wording of messages on stderr and of
this help differs.
";

/// Arguments of `fscrypt-rs crypt`: everything after `crypt`, parsed by this
/// command itself with the reference's getopt_long rules (see [`HELP`]).
#[derive(clap::Args, Debug)]
#[command(
    disable_help_flag = true,
    override_usage = USAGE,
    override_help = HELP,
    after_long_help = HELP
)]
pub struct Args {
    /// OPTIONS, CIPHER and MASTER_KEY, in any order (`fscrypt-rs crypt
    /// --help`).
    #[arg(
        value_name = "ARGS",
        num_args = 0..,
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    pub argv: Vec<OsString>,
}

/// A usage error: getopt's diagnostic (if any) and the usage line on
/// stderr, status 2.
fn usage_error(msg: Option<&str>) -> ExitCode {
    if let Some(m) = msg {
        eprintln!("fscrypt-rs crypt: {m}");
    }
    eprintln!("Usage: {USAGE}\nTry 'fscrypt-rs crypt --help' for more information.");
    ExitCode::from(2)
}

/// The arguments after `crypt` as given: clap drops a `--` that comes
/// first (it ends clap's own options), but for getopt it is an argument like
/// any other (`crypt -- --help` has one operand, `--help`). Everything clap
/// captured is the tail of the process's arguments, so the element before
/// that tail tells.
fn with_leading_dashdash(captured: Vec<OsString>) -> Vec<OsString> {
    let raw: Vec<OsString> = std::env::args_os().collect();
    let before = raw.len().checked_sub(captured.len() + 1);
    let tail_matches = raw.ends_with(&captured);
    match before.map(|i| &raw[i]) {
        Some(dd) if tail_matches && dd == "--" => {
            let mut v = Vec::with_capacity(captured.len() + 1);
            v.push(OsString::from("--"));
            v.extend(captured);
            v
        }
        _ => captured,
    }
}

/// Runs `fscrypt-rs crypt`.
///
/// # Errors
/// A refused value or combination, or an I/O failure (status 1, one line).
pub fn exec(args: Args) -> anyhow::Result<ExitCode> {
    let o = match options::parse(&with_leading_dashdash(args.argv)) {
        Ok(o) => o,
        Err(Stop::Help) => {
            print!("{HELP}");
            io::stdout().flush()?;
            return Ok(ExitCode::SUCCESS);
        }
        Err(Stop::Usage(m)) => return Ok(usage_error(Some(&m))),
        Err(Stop::Invalid(m)) => return Err(anyhow!(m)),
    };
    let params = CryptUtilParams {
        kdf: o.kdf,
        mode_num: o.mode_num,
        file_nonce: o.file_nonce,
        direct_key: o.direct_key,
        iv_ino_lblk_64: o.iv_ino_lblk_64,
        iv_ino_lblk_32: o.iv_ino_lblk_32,
        inode_number: o.inode_number,
        fs_uuid: o.fs_uuid,
        data_unit_index: o.data_unit_index,
        enable_hw_kdf: o.enable_hw_kdf,
        use_inlinecrypt_key: o.use_inlinecrypt_key,
    };

    if o.dump_key_identifier {
        let [key_hex] = o.operands.as_slice() else {
            return Ok(usage_error(Some(
                "--dump-key-identifier takes one operand, MASTER_KEY",
            )));
        };
        let key = options::master_key(key_hex).map_err(|m| anyhow!(m))?;
        let id = crypt_util::key_identifier(&key, &params)?;
        let mut out = io::stdout().lock();
        write!(out, "{id}")?;
        out.flush()?;
        return Ok(ExitCode::SUCCESS);
    }

    let [cipher_name, key_hex] = o.operands.as_slice() else {
        return Ok(usage_error(Some(
            "expected two operands, CIPHER and MASTER_KEY",
        )));
    };
    let Some(cipher) = crypt_util::cipher_by_name(cipher_name) else {
        return Err(anyhow!(
            "Unknown cipher: {cipher_name} (use AES-256-XTS, AES-256-CTS-CBC, AES-128-CBC-ESSIV, \
             AES-128-CTS-CBC, Adiantum, AES-256-HCTR2, SM4-XTS or SM4-CTS-CBC)"
        ));
    };
    let du = o.data_unit_size;
    if du < crypt_util::min_input_size(cipher) {
        return Err(crypt_util::CryptUtilError::DataUnitTooSmall {
            size: du,
            cipher: cipher.cipher_name,
        }
        .into());
    }
    let key = options::master_key(key_hex).map_err(|m| anyhow!(m))?;
    let mut crypter = UnitCrypter::new(cipher, &key, &params)?;
    drop(key);
    crypt_stream(
        &mut crypter,
        &o,
        &mut io::stdin().lock(),
        &mut io::stdout().lock(),
    )
    .map(|()| ExitCode::SUCCESS)
}

/// En/decrypts `input` to `output` unit by unit, as the reference's
/// `crypt_loop()`: every full unit whole, a partial last unit zero-padded to
/// [`crypt_util::crypt_len`]. A unit the cipher refuses stops the run after
/// the units before it were written.
fn crypt_stream(
    crypter: &mut UnitCrypter,
    o: &Options,
    input: &mut impl Read,
    output: &mut impl Write,
) -> anyhow::Result<()> {
    let du = o.data_unit_size;
    let padding = (o.padding > 0).then_some(o.padding);
    let min_input = crypt_util::min_input_size(crypter.cipher());
    let cap = (BATCH_BYTES / du).max(1) * du;
    // Reserved, not touched: a huge data unit costs only what is read, and
    // one that cannot be allocated is refused (the reference's xmalloc).
    let mut buf: Vec<u8> = Vec::new();
    buf.try_reserve_exact(cap).map_err(|_| {
        anyhow!(
            "cannot allocate a {du}-byte data unit: out of memory (use a smaller --data-unit-size)"
        )
    })?;
    loop {
        buf.clear();
        let filled = input
            .take(cap as u64)
            .read_to_end(&mut buf)
            .context("read error")?;
        if filled == 0 {
            break;
        }
        let mut off = 0;
        while off < filled {
            let read = (filled - off).min(du);
            let len = crypt_util::crypt_len(read, du, padding, min_input);
            if buf.len() < off + len {
                buf.resize(off + len, 0);
            }
            if let Err(e) = crypter.crypt_exact(&mut buf[off..off + len], o.decrypt) {
                output.write_all(&buf[..off]).context("write error")?;
                output.flush().context("write error")?;
                return Err(e.into());
            }
            off += len;
        }
        output.write_all(&buf[..off]).context("write error")?;
        if filled < cap {
            break;
        }
    }
    output.flush().context("write error")?;
    Ok(())
}
