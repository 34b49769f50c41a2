//! The governor's settings: its policy and constants, as `gpudvfs._core.GovernorSettings`
//! carries them across the bridge.

use std::fmt;

use super::Residual;
use crate::error::{CoreError, CoreResult};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    Energy,
    Edp,
    Deadline,
    PowerCap,
    /// Zeus's cost: `eta * energy + (1 - eta) * max_power_w * time`.
    Cost,
}

impl Policy {
    pub const ALL: [Policy; 5] = [
        Policy::Energy,
        Policy::Edp,
        Policy::Deadline,
        Policy::PowerCap,
        Policy::Cost,
    ];

    /// The policy's name in gpudvfs (`gpudvfs.policy.POLICIES`).
    pub fn name(self) -> &'static str {
        match self {
            Policy::Energy => "energy",
            Policy::Edp => "edp",
            Policy::Deadline => "deadline",
            Policy::PowerCap => "power-cap",
            Policy::Cost => "cost",
        }
    }

    pub fn parse(name: &str) -> CoreResult<Self> {
        Policy::ALL
            .into_iter()
            .find(|p| p.name() == name)
            .ok_or_else(|| {
                CoreError::Value(format!(
                    "unknown policy {name:?}; expected energy, edp, deadline, power-cap or cost"
                ))
            })
    }
}

/// The governor's constants (`check` says what they must be; the Python layer checks their
/// types and ranges first, with messages of its own).
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    pub policy: Policy,
    pub default_index: usize,
    /// Deadline: at most this slower than the default clocks.
    pub slowdown: f64,
    /// Deadline: the default clocks run this many times first (the bound is relative to their
    /// time, so its noise is theirs over the square root of this).
    pub default_runs: u32,
    /// Deadline: a pair is allowed where its time plus this many standard deviations of its
    /// difference from the default's stays within the bound.
    pub bound_z: f64,
    /// Power cap in watts (the power-cap policy's; None: no cap).
    pub power_cap_w: Option<f64>,
    /// Cost: the weight of energy against time, in [0, 1].
    pub eta: f64,
    /// Cost: the watts that price a second (Zeus's MAXPOWER); the cost policy needs it.
    pub max_power_w: Option<f64>,
    pub prior_sd: f64,
    pub noise_sd: f64,
    pub explore: f64,
    pub hysteresis: f64,
    /// A pair measured fewer than `recheck_runs` times is explored again where its mean less
    /// this many of its standard deviations beats the best by the hysteresis (0: never; not
    /// under a deadline).
    pub recheck_z: f64,
    pub recheck_runs: u32,
    pub residual: Residual,
}

impl Settings {
    /// An error naming the first setting out of its range, or a policy without its bound.
    pub fn check(&self) -> CoreResult<()> {
        match self.policy {
            Policy::PowerCap if self.power_cap_w.is_none() => {
                return Err(CoreError::Value(
                    "the power-cap policy needs power_cap_w".into(),
                ))
            }
            Policy::Cost if self.max_power_w.is_none() => {
                return Err(CoreError::Value("the cost policy needs max_power_w".into()))
            }
            _ => {}
        }
        let r = &self.residual;
        type Range = (fn(f64) -> bool, &'static str);
        let nonnegative: Range = (|v| v.is_finite() && v >= 0.0, ">= 0 and finite");
        let positive: Range = (|v| v.is_finite() && v > 0.0, "> 0 and finite");
        let fraction: Range = (|v| (0.0..=1.0).contains(&v), "in [0, 1]");
        let values = [
            ("slowdown", Some(self.slowdown), nonnegative),
            ("bound_z", Some(self.bound_z), nonnegative),
            ("explore", Some(self.explore), nonnegative),
            ("hysteresis", Some(self.hysteresis), nonnegative),
            ("recheck_z", Some(self.recheck_z), nonnegative),
            ("residual_sd", Some(r.sd), nonnegative),
            ("power_cap_w", self.power_cap_w, positive),
            ("max_power_w", self.max_power_w, positive),
            ("prior_sd", Some(self.prior_sd), positive),
            ("noise_sd", Some(self.noise_sd), positive),
            ("residual_scale", Some(r.scale), positive),
            ("eta", Some(self.eta), fraction),
        ];
        for (name, value, (ok, want)) in values {
            if let Some(v) = value.filter(|&v| !ok(v)) {
                return Err(CoreError::Value(format!("{name} must be {want}, got {v}")));
            }
        }
        Ok(())
    }
}

/// The keyword arguments of `gpudvfs._core.GovernorSettings` that make these settings (its
/// repr): each name as the constructor spells it, None for an absent bound.
impl fmt::Display for Settings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let opt = |v: Option<f64>| v.map_or("None".to_string(), |w| format!("{w:?}"));
        write!(
            f,
            "default_index={}, policy='{}', slowdown={:?}, power_cap_w={}, prior_sd={:?}, \
             noise_sd={:?}, explore={:?}, hysteresis={:?}, residual_sd={:?}, residual_scale={:?}, \
             eta={:?}, max_power_w={}, default_runs={}, bound_z={:?}, recheck_z={:?}, \
             recheck_runs={}",
            self.default_index,
            self.policy.name(),
            self.slowdown,
            opt(self.power_cap_w),
            self.prior_sd,
            self.noise_sd,
            self.explore,
            self.hysteresis,
            self.residual.sd,
            self.residual.scale,
            self.eta,
            opt(self.max_power_w),
            self.default_runs,
            self.bound_z,
            self.recheck_z,
            self.recheck_runs
        )
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// The settings of the governor's tests: the default clocks the third pair.
    pub fn settings(policy: Policy) -> Settings {
        Settings {
            policy,
            default_index: 2,
            slowdown: 0.1,
            default_runs: 1,
            bound_z: 0.0,
            power_cap_w: None,
            eta: 0.5,
            max_power_w: Some(250.0),
            prior_sd: 0.05,
            noise_sd: 0.01,
            explore: 4.0,
            hysteresis: 0.005,
            recheck_z: 0.0,
            recheck_runs: 1,
            residual: Residual {
                sd: 0.03,
                scale: 0.4,
            },
        }
    }

    #[test]
    fn a_policy_is_parsed_from_its_name() {
        for p in Policy::ALL {
            assert_eq!(Policy::parse(p.name()).unwrap(), p);
        }
        assert!(Policy::parse("power_cap").is_err());
    }

    #[test]
    fn settings_out_of_range_are_refused_naming_the_setting() {
        let error = |s: Settings| s.check().unwrap_err().to_string();
        let base = settings(Policy::Energy);
        assert!(base.check().is_ok());
        for (s, name) in [
            (
                Settings {
                    noise_sd: 0.0,
                    ..base
                },
                "noise_sd must be > 0",
            ),
            (
                Settings {
                    prior_sd: f64::NAN,
                    ..base
                },
                "prior_sd must be > 0",
            ),
            (
                Settings {
                    slowdown: -0.1,
                    ..base
                },
                "slowdown must be >= 0",
            ),
            (
                Settings {
                    explore: f64::INFINITY,
                    ..base
                },
                "explore must be >= 0",
            ),
            (Settings { eta: 1.5, ..base }, "eta must be in [0, 1]"),
            (
                Settings {
                    recheck_z: -1.0,
                    ..base
                },
                "recheck_z must be >= 0",
            ),
            (
                Settings {
                    power_cap_w: Some(0.0),
                    ..base
                },
                "power_cap_w must be > 0",
            ),
            (
                Settings {
                    residual: Residual {
                        sd: 0.0,
                        scale: 0.0,
                    },
                    ..base
                },
                "residual_scale must be > 0",
            ),
            (
                settings(Policy::PowerCap),
                "the power-cap policy needs power_cap_w",
            ),
            (
                Settings {
                    max_power_w: None,
                    ..settings(Policy::Cost)
                },
                "the cost policy needs max_power_w",
            ),
        ] {
            assert!(error(s).contains(name), "{} lacks {name:?}", error(s));
        }
        // The bounds the policy does not use may be absent; a residual of 0 is none.
        let none = Settings {
            max_power_w: None,
            residual: Residual {
                sd: 0.0,
                scale: 0.4,
            },
            ..base
        };
        assert!(none.check().is_ok());
    }

    #[test]
    fn settings_display_as_the_keywords_that_make_them() {
        let s = Settings {
            power_cap_w: Some(250.0),
            max_power_w: None,
            ..settings(Policy::PowerCap)
        };
        assert_eq!(
            s.to_string(),
            "default_index=2, policy='power-cap', slowdown=0.1, power_cap_w=250.0, prior_sd=0.05, \
             noise_sd=0.01, explore=4.0, hysteresis=0.005, residual_sd=0.03, residual_scale=0.4, \
             eta=0.5, max_power_w=None, default_runs=1, bound_z=0.0, recheck_z=0.0, \
             recheck_runs=1"
        );
    }
}
