//! The cost of the passphrase KDF: Argon2id parameters (RFC 9106), the
//! bounds a config may ask for, the test override and the calibration that
//! `init` runs on this machine.
//!
//! The derivation itself is [`fscrypt_crypto::argon2id`]; what the derived
//! key wraps is in [`crate::wrap`].

use std::time::{Duration, Instant};

use zeroize::Zeroizing;

use crate::protector::{ProtectorError, SALT_SIZE};
use crate::wrap::WRAPPING_KEY_SIZE;

/// Time the passphrase KDF is tuned to take at `init` on this machine.
pub const ARGON2_TARGET: Duration = Duration::from_secs(1);

/// Environment variable that replaces Argon2id tuning by fixed parameters,
/// `m=KIB,t=N,p=N` (e.g. `m=64,t=1,p=1`). Meant for tests, which must stay
/// fast; parameters this weak make a passphrase easy to brute-force.
pub const ARGON2_ENV: &str = "FSCRYPT_RS_INSECURE_ARGON2_PARAMS";

/// Argon2id cost parameters, stored in the vault config.
///
/// Source: RFC 9106 (Argon2), version 0x13.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Argon2Params {
    /// Memory in KiB (RFC 9106 `m`).
    pub m_cost_kib: u32,
    /// Number of passes (RFC 9106 `t`).
    pub t_cost: u32,
    /// Degree of parallelism, lanes (RFC 9106 `p`).
    pub p_cost: u32,
}

impl Argon2Params {
    /// Largest memory cost a config may ask for: 4 GiB. A corrupted or
    /// hostile config must not make `mount` allocate without bound.
    pub const MAX_M_COST_KIB: u32 = 4 * 1024 * 1024;
    /// Largest number of passes a config may ask for.
    pub const MAX_T_COST: u32 = 1000;
    /// Largest number of lanes a config may ask for.
    pub const MAX_P_COST: u32 = 16;
    /// Memory cost chosen by [`Argon2Params::tune`] when one pass over it
    /// takes less than the target: 256 MiB.
    pub const TUNE_M_COST_KIB: u32 = 256 * 1024;
    /// Lower bound for the memory cost while tuning on a slow machine: 32 MiB.
    pub const TUNE_MIN_M_COST_KIB: u32 = 32 * 1024;

    /// Checks the bounds this implementation accepts: `1 <= p <= 16`,
    /// `8*p <= m <= 4 GiB`, `1 <= t <= 1000`.
    ///
    /// # Errors
    /// [`ProtectorError::BadArgon2Params`] naming the violated bound.
    pub fn validate(&self) -> Result<(), ProtectorError> {
        let bad = |reason| ProtectorError::BadArgon2Params {
            m_cost_kib: self.m_cost_kib,
            t_cost: self.t_cost,
            p_cost: self.p_cost,
            reason,
        };
        if self.p_cost == 0 || self.p_cost > Self::MAX_P_COST {
            return Err(bad("p must be 1..=16"));
        }
        if self.t_cost == 0 || self.t_cost > Self::MAX_T_COST {
            return Err(bad("t must be 1..=1000"));
        }
        if self.m_cost_kib < 8 * self.p_cost {
            return Err(bad("m must be at least 8*p KiB"));
        }
        if self.m_cost_kib > Self::MAX_M_COST_KIB {
            return Err(bad("m must be at most 4 GiB"));
        }
        Ok(())
    }

    /// Parses the test override in [`ARGON2_ENV`], if the variable is set.
    ///
    /// # Errors
    /// As [`Argon2Params::parse_override`].
    pub fn from_env() -> Result<Option<Argon2Params>, ProtectorError> {
        match std::env::var_os(ARGON2_ENV) {
            None => Ok(None),
            Some(value) => Self::parse_override(&value.to_string_lossy()).map(Some),
        }
    }

    /// Parses `m=KIB,t=N,p=N` (any order, each exactly once).
    ///
    /// # Errors
    /// [`ProtectorError::BadArgon2Env`] if malformed;
    /// [`ProtectorError::BadArgon2Params`] if out of range.
    pub fn parse_override(text: &str) -> Result<Argon2Params, ProtectorError> {
        let bad = || ProtectorError::BadArgon2Env(text.to_owned());
        let (mut m, mut t, mut p) = (None, None, None);
        for part in text.split(',') {
            let (key, val) = part.split_once('=').ok_or_else(bad)?;
            let val: u32 = val.trim().parse().map_err(|_| bad())?;
            let slot = match key.trim() {
                "m" => &mut m,
                "t" => &mut t,
                "p" => &mut p,
                _ => return Err(bad()),
            };
            if slot.replace(val).is_some() {
                return Err(bad());
            }
        }
        let params = Argon2Params {
            m_cost_kib: m.ok_or_else(bad)?,
            t_cost: t.ok_or_else(bad)?,
            p_cost: p.ok_or_else(bad)?,
        };
        params.validate()?;
        Ok(params)
    }

    /// Measures this machine and picks parameters whose derivation takes
    /// about `target` (the vault uses [`ARGON2_TARGET`], 1 s).
    ///
    /// Lanes are 1: the `argon2` crate computes lanes one after the other,
    /// so more lanes would cost us time without costing an attacker more.
    /// Memory is [`Self::TUNE_M_COST_KIB`] (halved, down to
    /// [`Self::TUNE_MIN_M_COST_KIB`], while one pass alone exceeds the
    /// target). The number of passes comes from two timed runs after a
    /// warm-up, with 1 and 3 passes: their difference is the cost of a
    /// pass, the rest a fixed cost (allocating and touching the memory).
    ///
    /// Returns the parameters and the measured time of one pass.
    ///
    /// # Errors
    /// [`ProtectorError::Kdf`] if the library refuses a trial run.
    pub fn tune(target: Duration) -> Result<(Argon2Params, Duration), ProtectorError> {
        let salt = [0u8; SALT_SIZE];
        let password = b"fscrypt-rs argon2 tuning";
        let time = |params: &Argon2Params| -> Result<Duration, ProtectorError> {
            let start = Instant::now();
            argon2id(params, password, &salt)?;
            Ok(start.elapsed())
        };
        let mut m_cost_kib = Self::TUNE_M_COST_KIB;
        loop {
            let one = Argon2Params {
                m_cost_kib,
                t_cost: 1,
                p_cost: 1,
            };
            let warm_up = time(&one)?;
            if warm_up > target && m_cost_kib > Self::TUNE_MIN_M_COST_KIB {
                m_cost_kib /= 2;
                continue;
            }
            let t1 = time(&one)?;
            let t3 = time(&Argon2Params { t_cost: 3, ..one })?;
            let per_pass = (t3.saturating_sub(t1) / 2).max(Duration::from_micros(100));
            let fixed = t1.saturating_sub(per_pass);
            let budget = target.saturating_sub(fixed);
            let ratio = budget.as_secs_f64() / per_pass.as_secs_f64();
            // Cast: ratio is finite and non-negative; clamped to 1..=MAX_T_COST.
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            let t_cost = (ratio.ceil() as u64).clamp(1, u64::from(Self::MAX_T_COST)) as u32;
            return Ok((
                Argon2Params {
                    m_cost_kib,
                    t_cost,
                    p_cost: 1,
                },
                per_pass,
            ));
        }
    }
}

/// Argon2id v1.3 of `passphrase` and `salt` with `params` (checked against
/// [`Argon2Params::validate`] first), giving a 32-byte wrapping key.
///
/// # Errors
/// [`ProtectorError::BadArgon2Params`], [`ProtectorError::Kdf`] if the
/// library refuses.
pub(crate) fn argon2id(
    params: &Argon2Params,
    passphrase: &[u8],
    salt: &[u8; SALT_SIZE],
) -> Result<Zeroizing<[u8; WRAPPING_KEY_SIZE]>, ProtectorError> {
    params.validate()?;
    let mut out = Zeroizing::new([0u8; WRAPPING_KEY_SIZE]);
    fscrypt_crypto::argon2id(
        passphrase,
        salt,
        params.m_cost_kib,
        params.t_cost,
        params.p_cost,
        out.as_mut(),
    )
    .map_err(ProtectorError::Kdf)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHEAP: Argon2Params = Argon2Params {
        m_cost_kib: 64,
        t_cost: 1,
        p_cost: 1,
    };

    #[test]
    fn argon2_params_bounds() {
        assert!(CHEAP.validate().is_ok());
        for bad in [
            Argon2Params {
                m_cost_kib: 64,
                t_cost: 0,
                p_cost: 1,
            },
            Argon2Params {
                m_cost_kib: 64,
                t_cost: 1,
                p_cost: 0,
            },
            Argon2Params {
                m_cost_kib: 7,
                t_cost: 1,
                p_cost: 1,
            },
            Argon2Params {
                m_cost_kib: u32::MAX,
                t_cost: 1,
                p_cost: 1,
            },
            Argon2Params {
                m_cost_kib: 64,
                t_cost: 1001,
                p_cost: 1,
            },
            Argon2Params {
                m_cost_kib: 1024,
                t_cost: 1,
                p_cost: 17,
            },
        ] {
            assert!(
                matches!(bad.validate(), Err(ProtectorError::BadArgon2Params { .. })),
                "{bad:?}"
            );
            assert!(
                matches!(
                    argon2id(&bad, b"x", &[0; SALT_SIZE]),
                    Err(ProtectorError::BadArgon2Params { .. })
                ),
                "derivation with {bad:?}"
            );
        }
    }

    #[test]
    fn argon2_override_syntax() {
        assert_eq!(Argon2Params::parse_override("m=64,t=1,p=1").unwrap(), CHEAP);
        assert_eq!(
            Argon2Params::parse_override("p=1, t=1, m=64").unwrap(),
            CHEAP
        );
        for bad in [
            "",
            "m=64",
            "m=64,t=1,p=1,q=2",
            "m=64,t=1,p=x",
            "m=64,m=64,t=1",
            "m64,t=1,p=1",
        ] {
            assert!(
                matches!(
                    Argon2Params::parse_override(bad),
                    Err(ProtectorError::BadArgon2Env(_))
                ),
                "{bad:?}"
            );
        }
        assert!(matches!(
            Argon2Params::parse_override("m=4,t=1,p=1"),
            Err(ProtectorError::BadArgon2Params { .. })
        ));
    }
}
