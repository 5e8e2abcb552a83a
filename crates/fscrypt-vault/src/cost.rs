//! The cost of the passphrase KDF: Argon2id parameters (RFC 9106), the
//! bounds a config may ask for (in memory and in time, `m × t`), the test
//! override, the calibration that `init` runs on this machine
//! ([`Argon2Params::calibrate`]: medians of whole derivations, the chosen
//! cost measured again and refused outside 0.5–2 × the target) and the
//! estimate of a derivation's time ([`Argon2Params::estimate`]).
//!
//! The derivation itself is [`fscrypt_crypto::argon2id`]; what the derived
//! key wraps is in [`crate::wrap`].

use std::time::{Duration, Instant};

use zeroize::Zeroizing;

pub use crate::keys::ARGON2_ENV;
use crate::keys::{ProtectorError, SALT_SIZE, WRAPPING_KEY_SIZE};

/// Time the passphrase KDF is calibrated to take at `init` on this machine
/// (`init --kdf-time` chooses another).
pub const ARGON2_TARGET: Duration = Duration::from_secs(1);

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
    /// Largest memory cost a config may ask for: 4 GiB
    /// ([`fscrypt_crypto::ARGON2_MAX_M_COST_KIB`], shared with google/fscrypt
    /// metadata). A corrupted or hostile config must not make `mount`
    /// allocate without bound.
    pub const MAX_M_COST_KIB: u32 = fscrypt_crypto::ARGON2_MAX_M_COST_KIB;
    /// Largest number of passes a config may ask for
    /// ([`fscrypt_crypto::ARGON2_MAX_T_COST`]).
    pub const MAX_T_COST: u32 = fscrypt_crypto::ARGON2_MAX_T_COST;
    /// Largest work `m × t` of one derivation a config may ask for, in
    /// KiB-passes: 32 GiB ([`fscrypt_crypto::ARGON2_MAX_WORK_KIB`], which
    /// says why). The same bound applies to all passphrase protectors of a
    /// config together (a wrong passphrase tries each).
    pub const MAX_WORK_KIB: u64 = fscrypt_crypto::ARGON2_MAX_WORK_KIB;
    /// Largest number of lanes a config may ask for.
    pub const MAX_P_COST: u32 = 16;
    /// Memory cost chosen by [`Argon2Params::calibrate`] when one pass over it
    /// takes less than the target: 256 MiB.
    pub const TUNE_M_COST_KIB: u32 = 256 * 1024;
    /// Lower bound for the memory cost while tuning on a slow machine: 32 MiB.
    pub const TUNE_MIN_M_COST_KIB: u32 = 32 * 1024;

    /// Checks the bounds this implementation accepts: `1 <= p <= 16`,
    /// `8*p <= m <= 4 GiB`, `1 <= t <= 1000`, `m*t <= 32 GiB`
    /// ([`Self::MAX_WORK_KIB`]).
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
        if self.work_kib() > Self::MAX_WORK_KIB {
            return Err(bad(
                "m*t must be at most 32 GiB (more would take minutes to unlock)",
            ));
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

    /// Work of one derivation in KiB-passes, `m × t` (the `argon2` crate
    /// computes lanes one after the other, so `p` does not change it).
    pub fn work_kib(&self) -> u64 {
        u64::from(self.m_cost_kib) * u64::from(self.t_cost)
    }

    /// Estimates how long one derivation with these parameters takes on
    /// this machine: a cost no larger than the probe is timed once; a larger
    /// one is [`estimate_work`] of its work ([`Argon2Params::work_kib`]).
    /// Meant for messages ("deriving the key (about N s)...") and `info`; it
    /// is an estimate, not a promise.
    pub fn estimate(&self) -> Duration {
        if self.work_kib() <= u64::from(PROBE_M_COST_KIB) {
            return time_derivation(self).unwrap_or_default();
        }
        estimate_work(self.work_kib())
    }

    /// Calibrates the cost on this machine so that one derivation takes
    /// about `target`, robustly on a busy machine.
    ///
    /// Lanes are 1: the `argon2` crate computes lanes one after the other,
    /// so more lanes would cost us time without costing an attacker more.
    /// Memory is `memory_kib` when given, else [`Self::TUNE_M_COST_KIB`]
    /// (halved, down to [`Self::TUNE_MIN_M_COST_KIB`], while one pass alone
    /// takes longer than `target`; a first single run says how often).
    /// Every measurement is the median of [`CALIBRATION_RUNS`] whole
    /// derivations:
    ///
    /// 1. one pass over the memory gives the passes `t = target / time`
    ///    (rounded, at least 1, within [`Self::MAX_T_COST`] and
    ///    [`Self::MAX_WORK_KIB`]);
    /// 2. the chosen cost is measured again; outside 0.5–2 × `target` the
    ///    passes are corrected once by the ratio and measured again;
    /// 3. a cost still outside 0.5–2 × `target` is refused.
    ///
    /// Returns the parameters and the measured (median) time of one
    /// derivation with them.
    ///
    /// # Errors
    /// [`ProtectorError::Calibration`] if no cost within 0.5–2 × `target`
    /// was found (the target is too small or too large for this machine and
    /// the bounds, or the machine's speed changed too much while
    /// measuring); [`ProtectorError::BadArgon2Params`] for a `memory_kib`
    /// out of range; [`ProtectorError::Kdf`] if the library refuses a run.
    pub fn calibrate(
        target: Duration,
        memory_kib: Option<u32>,
    ) -> Result<(Argon2Params, Duration), ProtectorError> {
        let target_s = target.as_secs_f64();
        if !(MIN_TARGET..=MAX_TARGET).contains(&target) {
            return Err(ProtectorError::Calibration(format!(
                "a derivation time of {target_s} s is out of range: choose {}..={} s",
                MIN_TARGET.as_secs_f64(),
                MAX_TARGET.as_secs_f64()
            )));
        }
        let mut m_cost_kib = memory_kib.unwrap_or(Self::TUNE_M_COST_KIB);
        let one = |m_cost_kib| Argon2Params {
            m_cost_kib,
            t_cost: 1,
            p_cost: 1,
        };
        one(m_cost_kib).validate()?;
        // A first single run; when memory is ours to choose and one pass
        // takes longer than the target, halve it as often as that run says
        // (time scales with memory) before measuring properly.
        let mut first = Some(time_derivation(&one(m_cost_kib))?);
        if memory_kib.is_none() {
            let mut scaled = first.unwrap_or_default();
            while scaled > target && m_cost_kib > Self::TUNE_MIN_M_COST_KIB {
                m_cost_kib /= 2;
                scaled /= 2;
                first = None;
            }
        }
        let one_pass = loop {
            let time = median_time(&one(m_cost_kib), first.take())?;
            if time > target && memory_kib.is_none() && m_cost_kib > Self::TUNE_MIN_M_COST_KIB {
                m_cost_kib /= 2;
                continue;
            }
            break time;
        };
        let max_t = u64::from(Self::MAX_T_COST)
            .min(Self::MAX_WORK_KIB / u64::from(m_cost_kib))
            .max(1);
        let passes_for = |ratio: f64, t: u32| -> u32 {
            let wanted = (f64::from(t) * ratio).round();
            // Cast: clamped to 1..=max_t, which fits u32 (at most MAX_T_COST).
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            let t = (wanted.max(1.0) as u64).min(max_t) as u32;
            t
        };
        let mut params = Argon2Params {
            m_cost_kib,
            t_cost: passes_for(target_s / one_pass.as_secs_f64().max(1e-6), 1),
            p_cost: 1,
        };
        let mut measured = Vec::new();
        for attempt in 0..2 {
            let time = if params.t_cost == 1 && attempt == 0 {
                one_pass
            } else {
                median_time(&params, None)?
            };
            measured.push((params.t_cost, time));
            let ratio = target_s / time.as_secs_f64().max(1e-6);
            if (0.5..=2.0).contains(&ratio) {
                return Ok((params, time));
            }
            let t = passes_for(ratio, params.t_cost);
            if t == params.t_cost {
                break;
            }
            params.t_cost = t;
        }
        let tried: Vec<String> = measured
            .iter()
            .map(|(t, d)| format!("t={t}: {} ms", d.as_millis()))
            .collect();
        let hint = if params.t_cost == 1 {
            "one pass over the memory already takes more than twice that here: choose a larger --kdf-time or a smaller --argon2-memory"
        } else if u64::from(params.t_cost) == max_t {
            "that needs more than the largest cost a vault accepts: choose a smaller --kdf-time"
        } else {
            "the machine's speed changed too much while measuring: try again when it is less busy, or give --argon2-memory and --argon2-passes"
        };
        Err(ProtectorError::Calibration(format!(
            "no Argon2id cost with m={} KiB takes {:.1} s (between half and twice that) on this machine ({}); {hint}",
            m_cost_kib,
            target_s,
            tried.join(", ")
        )))
    }
}

/// Whole derivations timed per measurement in [`Argon2Params::calibrate`];
/// the median is used, so one disturbed run does not count.
pub const CALIBRATION_RUNS: usize = 3;

/// Memory of the probe in [`estimate_work`]: 8 MiB.
pub const PROBE_M_COST_KIB: u32 = 8 * 1024;

/// Smallest derivation time [`Argon2Params::calibrate`] aims at.
pub const MIN_TARGET: Duration = Duration::from_millis(50);

/// Largest derivation time [`Argon2Params::calibrate`] aims at.
pub const MAX_TARGET: Duration = Duration::from_secs(60);

/// Estimates the time of `work_kib` KiB-passes of Argon2id on this
/// machine (e.g. the total of several protectors) from a short probe: the
/// median of three one-pass derivations over [`PROBE_M_COST_KIB`] (a few
/// milliseconds each), scaled linearly.
pub fn estimate_work(work_kib: u64) -> Duration {
    let probe = Argon2Params {
        m_cost_kib: PROBE_M_COST_KIB,
        t_cost: 1,
        p_cost: 1,
    };
    let mut runs: Vec<Duration> = (0..3)
        .map(|_| time_derivation(&probe).unwrap_or_default())
        .collect();
    runs.sort();
    // Cast: work is at most a few times 2^35, exact enough as f64.
    #[allow(clippy::cast_precision_loss)]
    let scale = work_kib as f64 / f64::from(PROBE_M_COST_KIB);
    runs[1].mul_f64(scale)
}

/// Time of one derivation with `params` (an arbitrary passphrase and salt).
fn time_derivation(params: &Argon2Params) -> Result<Duration, ProtectorError> {
    let start = Instant::now();
    argon2id(params, b"fscrypt-rs argon2 calibration", &[0u8; SALT_SIZE])?;
    Ok(start.elapsed())
}

/// Median of [`CALIBRATION_RUNS`] timed derivations with `params`, one of
/// which may already have been run (`first`).
fn median_time(params: &Argon2Params, first: Option<Duration>) -> Result<Duration, ProtectorError> {
    let mut runs: Vec<Duration> = first.into_iter().collect();
    while runs.len() < CALIBRATION_RUNS {
        runs.push(time_derivation(params)?);
    }
    runs.sort();
    Ok(runs[CALIBRATION_RUNS / 2])
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
            // The bound in time: 4 GiB x 9 passes, 256 MiB x 1000 passes.
            Argon2Params {
                m_cost_kib: Argon2Params::MAX_M_COST_KIB,
                t_cost: 9,
                p_cost: 1,
            },
            Argon2Params {
                m_cost_kib: 256 * 1024,
                t_cost: 1000,
                p_cost: 1,
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
    fn largest_accepted_costs() {
        for ok in [
            Argon2Params {
                m_cost_kib: Argon2Params::MAX_M_COST_KIB,
                t_cost: 8,
                p_cost: 1,
            },
            Argon2Params {
                m_cost_kib: 256 * 1024,
                t_cost: 128,
                p_cost: 4,
            },
            Argon2Params {
                m_cost_kib: 8,
                t_cost: Argon2Params::MAX_T_COST,
                p_cost: 1,
            },
        ] {
            assert!(ok.validate().is_ok(), "{ok:?}");
        }
        let err = Argon2Params {
            m_cost_kib: 256 * 1024,
            t_cost: 1000,
            p_cost: 1,
        }
        .validate()
        .unwrap_err()
        .to_string();
        assert!(err.contains("m*t must be at most 32 GiB"), "{err}");
    }

    #[test]
    fn calibration_refuses_targets_out_of_range_and_estimates_cheap_costs() {
        for target in [Duration::from_millis(1), Duration::from_secs(61)] {
            assert!(matches!(
                Argon2Params::calibrate(target, None),
                Err(ProtectorError::Calibration(_))
            ));
        }
        assert!(CHEAP.estimate() < Duration::from_secs(1));
        // One pass over 512 MiB takes more than 100 ms (twice the smallest
        // target) on any machine this runs on: refused with the reason.
        let err = Argon2Params::calibrate(MIN_TARGET, Some(512 * 1024))
            .unwrap_err()
            .to_string();
        assert!(err.contains("smaller --argon2-memory"), "{err}");
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
