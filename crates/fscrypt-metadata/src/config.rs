//! The global config file google/fscrypt reads (`/etc/fscrypt.conf`, or the
//! file `FSCRYPT_CONF` names): protobuf JSON of its `Config` message with
//! proto field names, enum names, int64 values as strings, tab indentation,
//! every field present; unknown fields are ignored on reading.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::proto::{EncryptionOptions, HashingCosts, MAX_PARALLELISM, Mode, SourceType};
use crate::{Error, store};

/// The default location of the config file.
pub const DEFAULT_PATH: &str = "/etc/fscrypt.conf";
/// The environment variable that overrides [`DEFAULT_PATH`].
pub const ENV_CONF: &str = "FSCRYPT_CONF";
/// The environment variable naming the root mount (where login protectors
/// live); `/` when unset.
pub const ENV_ROOT_MNT: &str = "FSCRYPT_ROOT_MNT";
/// The config file's mode.
pub const CONFIG_MODE: u32 = 0o644;
/// Largest config file read.
const MAX_CONFIG_LEN: u64 = 64 * 1024;

/// The config file's path: `$FSCRYPT_CONF`, else [`DEFAULT_PATH`].
pub fn path() -> PathBuf {
    std::env::var_os(ENV_CONF)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(DEFAULT_PATH))
}

/// The root mount: `$FSCRYPT_ROOT_MNT`, else `/`.
pub fn root_mount() -> PathBuf {
    std::env::var_os(ENV_ROOT_MNT)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/"))
}

/// The global config.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// Default protector source.
    pub source: SourceType,
    /// Argon2id costs for new passphrase protectors.
    pub hash_costs: HashingCosts,
    /// Options of new policies.
    pub options: EncryptionOptions,
    /// v1 policies' keys go to the filesystem keyring, not the session keyring.
    pub use_fs_keyring_for_v1_policies: bool,
    /// Non-root users may read metadata owned by other users.
    pub allow_cross_user_metadata: bool,
}

fn de_i64<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum N {
        S(String),
        I(i64),
    }
    match N::deserialize(d)? {
        N::I(i) => Ok(i),
        N::S(s) => s.parse().map_err(serde::de::Error::custom),
    }
}

fn ser_i64<S: Serializer>(v: &i64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&v.to_string())
}

#[derive(Serialize, Deserialize, Default)]
struct JsonCosts {
    #[serde(default, deserialize_with = "de_i64", serialize_with = "ser_i64")]
    time: i64,
    #[serde(default, deserialize_with = "de_i64", serialize_with = "ser_i64")]
    memory: i64,
    #[serde(default, deserialize_with = "de_i64", serialize_with = "ser_i64")]
    parallelism: i64,
    // google/fscrypt 0.3.3 has no such field; later releases write it.
    #[serde(default, skip_serializing_if = "is_false")]
    truncation_fixed: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

#[derive(Serialize, Deserialize, Default)]
struct JsonOptions {
    #[serde(default, deserialize_with = "de_i64", serialize_with = "ser_i64")]
    padding: i64,
    #[serde(default)]
    contents: Option<String>,
    #[serde(default)]
    filenames: Option<String>,
    #[serde(default, deserialize_with = "de_i64", serialize_with = "ser_i64")]
    policy_version: i64,
}

#[derive(Serialize, Deserialize)]
struct JsonConfig {
    #[serde(default)]
    source: Option<String>,
    #[serde(default)]
    hash_costs: Option<JsonCosts>,
    #[serde(default)]
    options: Option<JsonOptions>,
    #[serde(default)]
    use_fs_keyring_for_v1_policies: bool,
    #[serde(default)]
    allow_cross_user_metadata: bool,
}

impl Config {
    /// A config with google/fscrypt's defaults and the given costs.
    pub fn new(hash_costs: HashingCosts, policy_version: i64) -> Config {
        Config {
            source: SourceType::CustomPassphrase,
            hash_costs,
            options: EncryptionOptions::defaults(policy_version),
            use_fs_keyring_for_v1_policies: false,
            allow_cross_user_metadata: false,
        }
    }

    /// Parses the JSON text, filling unset fields with google/fscrypt's
    /// fallbacks (custom_passphrase, padding 32, AES-256-XTS/CTS, v1).
    ///
    /// # Errors
    /// A one-line reason.
    pub fn parse(text: &str) -> Result<Config, String> {
        let j: JsonConfig = serde_json::from_str(text).map_err(|e| e.to_string())?;
        let source = match j.source.as_deref() {
            None | Some("default") => SourceType::CustomPassphrase,
            Some(s) => SourceType::from_name(s).ok_or_else(|| format!("unknown source {s:?}"))?,
        };
        let c = j.hash_costs.unwrap_or_default();
        let hash_costs = HashingCosts {
            time: c.time,
            memory: c.memory,
            parallelism: c.parallelism,
            truncation_fixed: c.truncation_fixed,
        };
        let o = j.options.unwrap_or_default();
        let mode = |m: Option<String>, def: Mode| -> Result<i32, String> {
            match m.as_deref() {
                None | Some("default") => Ok(def as i32),
                Some(s) => Mode::from_name(s)
                    .map(|m| m as i32)
                    .ok_or_else(|| format!("unknown encryption mode {s:?}")),
            }
        };
        let options = EncryptionOptions {
            padding: if o.padding == 0 { 32 } else { o.padding },
            contents: mode(o.contents, Mode::Aes256Xts)?,
            filenames: mode(o.filenames, Mode::Aes256Cts)?,
            policy_version: if o.policy_version == 0 {
                1
            } else {
                o.policy_version
            },
        };
        options.check().map_err(|e| e.to_string())?;
        if matches!(
            source,
            SourceType::CustomPassphrase | SourceType::PamPassphrase
        ) {
            hash_costs.check().map_err(|e| e.to_string())?;
        }
        Ok(Config {
            source,
            hash_costs,
            options,
            use_fs_keyring_for_v1_policies: j.use_fs_keyring_for_v1_policies,
            allow_cross_user_metadata: j.allow_cross_user_metadata,
        })
    }

    /// The JSON text as google/fscrypt writes it (tabs, all fields, final
    /// newline).
    pub fn to_json(&self) -> String {
        let mode = |m: i32| {
            Mode::try_from(m)
                .map(|m| m.name().to_string())
                .unwrap_or_else(|_| m.to_string())
        };
        let j = JsonConfig {
            source: Some(self.source.name().to_string()),
            hash_costs: Some(JsonCosts {
                time: self.hash_costs.time,
                memory: self.hash_costs.memory,
                parallelism: self.hash_costs.parallelism,
                truncation_fixed: self.hash_costs.truncation_fixed,
            }),
            options: Some(JsonOptions {
                padding: self.options.padding,
                contents: Some(mode(self.options.contents)),
                filenames: Some(mode(self.options.filenames)),
                policy_version: self.options.policy_version,
            }),
            use_fs_keyring_for_v1_policies: self.use_fs_keyring_for_v1_policies,
            allow_cross_user_metadata: self.allow_cross_user_metadata,
        };
        let mut out = Vec::new();
        let fmt = serde_json::ser::PrettyFormatter::with_indent(b"\t");
        let mut ser = serde_json::Serializer::with_formatter(&mut out, fmt);
        j.serialize(&mut ser).expect("JSON of plain data");
        let mut s = String::from_utf8(out).expect("serde_json writes UTF-8");
        s.push('\n');
        s
    }

    /// Reads the config at [`path`].
    ///
    /// # Errors
    /// [`Error::Config`] if it is missing, unreadable or invalid.
    pub fn load() -> Result<Config, Error> {
        Config::load_from(&path())
    }

    /// Reads the config at `p` (the PAM module names its own, never
    /// `$FSCRYPT_CONF`).
    ///
    /// # Errors
    /// As [`Config::load`].
    pub fn load_from(p: &std::path::Path) -> Result<Config, Error> {
        let p = p.to_path_buf();
        let bytes = store::read_limited(&p, MAX_CONFIG_LEN).map_err(|e| Error::Config {
            path: p.clone(),
            reason: match e {
                Error::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
                    "it does not exist (run `fscrypt-rs setup`)".to_string()
                }
                other => other.to_string(),
            },
        })?;
        let text = String::from_utf8(bytes).map_err(|_| Error::Config {
            path: p.clone(),
            reason: "not UTF-8".into(),
        })?;
        Config::parse(&text).map_err(|reason| Error::Config { path: p, reason })
    }

    /// Writes the config to [`path`] atomically, mode 0644.
    ///
    /// # Errors
    /// [`Error::Io`].
    pub fn save(&self) -> Result<(), Error> {
        store::write_atomic(&path(), self.to_json().as_bytes(), CONFIG_MODE)
    }
}

/// Argon2id costs that take about `target` on this machine, found as
/// google/fscrypt does: parallelism = the CPUs (at most 255), time 1 and
/// memory 8·p KiB, then memory doubled up to `max_memory_kib`, then time
/// doubled, until one hash takes `target` or one more step would leave
/// the bounds of [`HashingCosts::check`].
///
/// # Errors
/// [`Error::Crypto`] if Argon2 fails.
pub fn calibrate_costs(target: Duration, max_memory_kib: i64) -> Result<HashingCosts, Error> {
    let p = std::thread::available_parallelism()
        .map(|n| n.get() as i64)
        .unwrap_or(1)
        .clamp(1, MAX_PARALLELISM);
    let mut costs = HashingCosts {
        time: 1,
        memory: 8 * p,
        parallelism: p,
        truncation_fixed: true,
    };
    let salt = [0u8; 16];
    loop {
        let start = Instant::now();
        crate::keys::passphrase_hash(b"calibration", &salt, &costs)?;
        if start.elapsed() >= target {
            return Ok(costs);
        }
        let mut next = costs.clone();
        if costs.memory < max_memory_kib {
            next.memory = (costs.memory * 2).min(max_memory_kib);
        } else {
            next.time *= 2;
        }
        // Never beyond what a protector may ask for (HashingCosts::check).
        if next.check().is_err() {
            return Ok(costs);
        }
        costs = next;
    }
}
