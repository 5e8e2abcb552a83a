//! Option parsing of `fscrypt-rs crypt`, rule for rule as xfstests'
//! `fscrypt-crypt-util` parses its options: GNU `getopt_long` (long options
//! only, unique prefixes accepted, `--opt=VALUE` or `--opt VALUE`, options
//! and operands in any order, `--` ends options), each value checked as it is
//! met with C `strtoul`/`strtol`/hex rules, the last occurrence winning.
//!
//! Exit status, as the reference: a malformed command line (unknown or
//! ambiguous option, missing or unwanted option argument, wrong number of
//! operands) is a usage error, status 2; an option value the tool refuses is
//! status 1, and so is everything after parsing. Which of the two a command
//! line gets depends on which fault comes first, as in the reference.

use std::ffi::OsString;

use fscrypt::crypt_util::Kdf;

/// Longest master key, in bytes (the reference's `MAX_KEY_SIZE`).
const MAX_KEY_SIZE: usize = fscrypt::crypt_util::MAX_KEY_SIZE;

/// The long options: name and whether it takes an argument.
const LONG_OPTIONS: &[(&str, bool)] = &[
    ("data-unit-index", true),
    ("data-unit-size", true),
    ("decrypt", false),
    ("direct-key", false),
    ("dump-key-identifier", false),
    ("enable-hw-kdf", false),
    ("file-nonce", true),
    ("fs-uuid", true),
    ("help", false),
    ("inode-number", true),
    ("iv-ino-lblk-32", false),
    ("iv-ino-lblk-64", false),
    ("kdf", true),
    ("mode-num", true),
    ("padding", true),
    ("use-inlinecrypt-key", false),
];

/// The parsed command line (defaults as in the reference: 0 means "not
/// given" for `inode_number`, `mode_num` and `padding`).
#[derive(Debug, Default)]
pub struct Options {
    /// `--data-unit-index` (default 0).
    pub data_unit_index: u64,
    /// `--data-unit-size` in bytes (default 4096; never 0).
    pub data_unit_size: usize,
    /// `--decrypt`.
    pub decrypt: bool,
    /// `--direct-key`.
    pub direct_key: bool,
    /// `--dump-key-identifier`.
    pub dump_key_identifier: bool,
    /// `--enable-hw-kdf`.
    pub enable_hw_kdf: bool,
    /// `--file-nonce` (16 bytes).
    pub file_nonce: Option<[u8; 16]>,
    /// `--fs-uuid` (16 bytes).
    pub fs_uuid: Option<[u8; 16]>,
    /// `--inode-number` (0 = not given).
    pub inode_number: u64,
    /// `--iv-ino-lblk-32`.
    pub iv_ino_lblk_32: bool,
    /// `--iv-ino-lblk-64`.
    pub iv_ino_lblk_64: bool,
    /// `--kdf` (default none).
    pub kdf: Kdf,
    /// `--mode-num` (0 = not given; else 1..=255).
    pub mode_num: u8,
    /// `--padding` in bytes: a power of two up to `i32::MAX` (0 = not given).
    pub padding: usize,
    /// `--use-inlinecrypt-key`.
    pub use_inlinecrypt_key: bool,
    /// The operands (CIPHER MASTER_KEY, or MASTER_KEY), in order.
    pub operands: Vec<String>,
}

/// How parsing ended, when it did not yield [`Options`].
#[derive(Debug, PartialEq, Eq)]
pub enum Stop {
    /// `--help` was met: print the help to stdout, exit 0.
    Help,
    /// A usage error (exit 2), with getopt's one-line diagnostic.
    Usage(String),
    /// A refused option value (exit 1), with a one-line reason.
    Invalid(String),
}

/// Parses the arguments after `crypt` the way the reference's `main()` does
/// up to its operand count checks (which [`Options::operands`] leaves to the
/// caller). `POSIXLY_CORRECT` in the environment stops option scanning at the
/// first operand, as it does for getopt.
///
/// # Errors
/// [`Stop`] for `--help`, a usage error or a refused value, whichever comes
/// first in the command line.
pub fn parse(argv: &[OsString]) -> Result<Options, Stop> {
    let posixly_correct = std::env::var_os("POSIXLY_CORRECT").is_some();
    let mut o = Options {
        data_unit_size: 4096,
        ..Options::default()
    };
    let mut i = 0;
    while i < argv.len() {
        let arg = argv[i].to_string_lossy().into_owned();
        i += 1;
        if arg == "--" {
            o.operands
                .extend(argv[i..].iter().map(|a| a.to_string_lossy().into_owned()));
            break;
        }
        if let Some(body) = arg.strip_prefix("--") {
            let (name, attached) = match body.split_once('=') {
                Some((n, v)) => (n, Some(v.to_string())),
                None => (body, None),
            };
            let (long, has_arg) = find_long(name)?;
            let value = match (has_arg, attached) {
                (false, Some(_)) => {
                    return Err(Stop::Usage(format!(
                        "option '--{long}' doesn't allow an argument"
                    )));
                }
                (false, None) => None,
                (true, Some(v)) => Some(v),
                (true, None) => match argv.get(i) {
                    Some(v) => {
                        i += 1;
                        Some(v.to_string_lossy().into_owned())
                    }
                    None => {
                        return Err(Stop::Usage(format!(
                            "option '--{long}' requires an argument"
                        )));
                    }
                },
            };
            apply(&mut o, long, value.as_deref().unwrap_or(""))?;
        } else if arg.len() > 1 && arg.starts_with('-') {
            let c = arg[1..].chars().next().unwrap_or('-');
            return Err(Stop::Usage(format!("invalid option -- '{c}'")));
        } else {
            o.operands.push(arg);
            if posixly_correct {
                o.operands
                    .extend(argv[i..].iter().map(|a| a.to_string_lossy().into_owned()));
                break;
            }
        }
    }
    Ok(o)
}

/// getopt_long's long-option lookup: an exact name, else a unique prefix.
fn find_long(name: &str) -> Result<(&'static str, bool), Stop> {
    if let Some(&(n, a)) = LONG_OPTIONS.iter().find(|(n, _)| *n == name) {
        return Ok((n, a));
    }
    let matches: Vec<_> = LONG_OPTIONS
        .iter()
        .filter(|(n, _)| n.starts_with(name))
        .collect();
    match matches.as_slice() {
        [one] => Ok(**one),
        [] => Err(Stop::Usage(format!("unrecognized option '--{name}'"))),
        many => {
            let names: Vec<String> = many.iter().map(|(n, _)| format!("'--{n}'")).collect();
            Err(Stop::Usage(format!(
                "option '--{name}' is ambiguous; possibilities: {}",
                names.join(" ")
            )))
        }
    }
}

/// Applies one option with its value (empty for flags).
fn apply(o: &mut Options, long: &str, v: &str) -> Result<(), Stop> {
    let invalid = |what: &str, hint: &str| Stop::Invalid(format!("Invalid {what}: {v} ({hint})"));
    match long {
        "data-unit-index" => {
            let n = strtou64(v);
            if !n.complete || n.overflow {
                return Err(invalid("data unit index", "a decimal number below 2^64"));
            }
            o.data_unit_index = n.value;
        }
        "data-unit-size" => {
            let n = strtou64(v);
            if n.value == 0 || !n.complete || n.overflow {
                return Err(invalid(
                    "data unit size",
                    "a positive decimal number of bytes",
                ));
            }
            o.data_unit_size = usize::try_from(n.value).unwrap_or(usize::MAX);
        }
        "decrypt" => o.decrypt = true,
        "direct-key" => o.direct_key = true,
        "dump-key-identifier" => o.dump_key_identifier = true,
        "enable-hw-kdf" => o.enable_hw_kdf = true,
        "file-nonce" => {
            o.file_nonce = Some(hex16(v).ok_or_else(|| invalid("file nonce", "32 hex digits"))?)
        }
        "fs-uuid" => {
            o.fs_uuid = Some(hex16(v).ok_or_else(|| invalid("filesystem UUID", "32 hex digits"))?)
        }
        "help" => return Err(Stop::Help),
        "inode-number" => {
            let n = strtou64(v);
            if n.value == 0 || !n.complete || n.overflow {
                return Err(invalid(
                    "inode number",
                    "a positive decimal number below 2^64",
                ));
            }
            o.inode_number = n.value;
        }
        "iv-ino-lblk-32" => o.iv_ino_lblk_32 = true,
        "iv-ino-lblk-64" => o.iv_ino_lblk_64 = true,
        "kdf" => {
            o.kdf = v.parse().map_err(|_| {
                Stop::Invalid(format!(
                    "Unknown KDF: {v} (use none, AES-128-ECB or HKDF-SHA512)"
                ))
            })?
        }
        "mode-num" => {
            // strtol: a sign is allowed, so is overflow (clamped); only
            // 1..=255 with nothing after the digits passes.
            let n = strtou64(v);
            if !n.complete || n.overflow || n.negative || !(1..=255).contains(&n.value) {
                return Err(invalid("mode number", "1 to 255"));
            }
            o.mode_num = n.value as u8;
        }
        "padding" => {
            // No overflow check in the reference: ULONG_MAX is no power of 2.
            let n = strtou64(v);
            if !n.complete || !n.value.is_power_of_two() || n.value > i32::MAX as u64 {
                return Err(Stop::Invalid(format!(
                    "Invalid padding amount: {v} (a power of two up to 2^30)"
                )));
            }
            o.padding = n.value as usize;
        }
        "use-inlinecrypt-key" => o.use_inlinecrypt_key = true,
        _ => unreachable!("every entry of LONG_OPTIONS is handled"),
    }
    Ok(())
}

/// The result of C `strtoull(s, &end, 10)`.
#[derive(Debug, PartialEq, Eq)]
struct CNumber {
    /// The value, negated modulo 2^64 after a `-`, `u64::MAX` on overflow.
    value: u64,
    /// `*end == '\0'`: nothing follows the number (or `s` is empty).
    complete: bool,
    /// `errno == ERANGE`: the magnitude exceeds `u64::MAX`.
    overflow: bool,
    /// A `-` sign with a non-zero magnitude.
    negative: bool,
}

/// C `strtoull(s, &end, 10)`: leading white space, an optional sign, decimal
/// digits. Without digits the value is 0 and `end` is `s` itself.
fn strtou64(s: &str) -> CNumber {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() && matches!(b[i], b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r') {
        i += 1;
    }
    let mut neg = false;
    if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
        neg = b[i] == b'-';
        i += 1;
    }
    let start = i;
    let mut mag: u64 = 0;
    let mut overflow = false;
    while i < b.len() && b[i].is_ascii_digit() {
        match mag
            .checked_mul(10)
            .and_then(|m| m.checked_add(u64::from(b[i] - b'0')))
        {
            Some(m) => mag = m,
            None => overflow = true,
        }
        i += 1;
    }
    if i == start {
        return CNumber {
            value: 0,
            complete: b.is_empty(),
            overflow: false,
            negative: false,
        };
    }
    let value = if overflow {
        u64::MAX
    } else if neg {
        mag.wrapping_neg()
    } else {
        mag
    };
    CNumber {
        value,
        complete: i == b.len(),
        overflow,
        negative: neg && mag != 0,
    }
}

/// The reference's `hex2bin`: an even number of hex digits (either case), at
/// most `max` bytes; `None` otherwise.
pub fn hex2bin(s: &str, max: usize) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) || s.len() / 2 > max {
        return None;
    }
    hex::decode(s).ok()
}

/// Exactly 16 bytes of hex (the nonce and UUID options).
fn hex16(s: &str) -> Option<[u8; 16]> {
    hex2bin(s, 16)?.try_into().ok()
}

/// The master key operand: at most 64 bytes of hex.
///
/// # Errors
/// A one-line reason if it is not an even number of hex digits or too long.
pub fn master_key(s: &str) -> Result<zeroize::Zeroizing<Vec<u8>>, String> {
    hex2bin(s, MAX_KEY_SIZE)
        .map(zeroize::Zeroizing::new)
        .ok_or_else(|| {
            format!(
                "Invalid master_key: expected an even number of hex digits, at most {}",
                2 * MAX_KEY_SIZE
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<OsString> {
        a.iter().map(OsString::from).collect()
    }

    #[test]
    fn strtoull_rules() {
        let n = |s| {
            let c = strtou64(s);
            (c.value, c.complete, c.overflow)
        };
        assert_eq!(n(""), (0, true, false));
        assert_eq!(n(" "), (0, false, false));
        assert_eq!(n("+"), (0, false, false));
        assert_eq!(n(" +12"), (12, true, false));
        assert_eq!(n("12 "), (12, false, false));
        assert_eq!(n("-1"), (u64::MAX, true, false));
        assert_eq!(n("18446744073709551616"), (u64::MAX, true, true));
        assert_eq!(n("-18446744073709551615"), (1, true, false));
        assert_eq!(n("0x10"), (0, false, false));
    }

    #[test]
    fn getopt_rules() {
        let o = parse(&args(&["A", "--dec", "--kdf", "none", "K", "--pad=16"])).unwrap();
        assert!(o.decrypt);
        assert_eq!(o.padding, 16);
        assert_eq!(o.operands, ["A", "K"]);
        let o = parse(&args(&["--", "--kdf=x", "-y"])).unwrap();
        assert_eq!(o.operands, ["--kdf=x", "-y"]);
        let o = parse(&args(&["--file-nonce", &"0".repeat(32), "-"])).unwrap();
        assert_eq!(o.operands, ["-"]);
        assert!(matches!(parse(&args(&["--d"])), Err(Stop::Usage(_))));
        assert!(matches!(
            parse(&args(&["--decrypt=1"])),
            Err(Stop::Usage(_))
        ));
        assert!(matches!(parse(&args(&["--padding"])), Err(Stop::Usage(_))));
        assert!(matches!(parse(&args(&["-h"])), Err(Stop::Usage(_))));
        // First fault wins.
        assert!(matches!(
            parse(&args(&["--padding=3", "--x"])),
            Err(Stop::Invalid(_))
        ));
        assert!(matches!(
            parse(&args(&["--x", "--padding=3"])),
            Err(Stop::Usage(_))
        ));
        assert_eq!(
            parse(&args(&["--padding=3", "--help"])).unwrap_err(),
            Stop::Invalid("Invalid padding amount: 3 (a power of two up to 2^30)".into())
        );
        assert_eq!(
            parse(&args(&["--help", "--padding=3"])).unwrap_err(),
            Stop::Help
        );
    }
}
