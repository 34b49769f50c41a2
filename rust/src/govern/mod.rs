//! The closed-loop governor's estimates and decisions (`gpudvfs.govern.Governor` is the
//! Python face; its module notes give the method). Per phase, two streams (log time, log
//! watts) each correct the offline prediction with an RLS fit and a correlated residual; a
//! decision minimizes the policy's objective on the estimates and explores an unmeasured
//! pair only where its lower confidence bound beats the best estimate by the hysteresis.
//! Here so that a decision costs microseconds in an embedding loop and the replays that
//! choose the governor's constants run in minutes.

mod settings;
mod stream;

use crate::error::{CoreError, CoreResult};
pub use settings::{Policy, Settings};
use stream::Stream;
pub use stream::{Features, Residual};

/// Log time, log watts and their variances at every pair.
#[derive(Debug, Clone, PartialEq)]
pub struct Estimates {
    pub log_time: Vec<f64>,
    pub log_watts: Vec<f64>,
    pub var_time: Vec<f64>,
    pub var_watts: Vec<f64>,
}

/// A decision: the pair to run next, whether it explores, and the estimated log energy
/// there and at the default clocks (for the decision log).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Decision {
    pub index: usize,
    pub explored: bool,
    pub log_energy: f64,
    pub log_energy_default: f64,
}

#[derive(Debug, Clone)]
struct Phase {
    t: Stream,
    p: Stream,
    /// Pairs the GPU could not hold for this phase.
    excluded: Vec<bool>,
    /// Sum over first visits of the squared innovation over its predicted variance.
    surprise: f64,
    visited: u32,
}

#[derive(Debug, Clone)]
pub struct GovernorCore {
    settings: Settings,
    phi: Vec<Features>,
    phases: Vec<Phase>,
}

impl GovernorCore {
    /// `configs`: the (core, memory) MHz pairs, positive and finite.
    pub fn new(configs: &[[f64; 2]], settings: Settings) -> CoreResult<Self> {
        settings.check()?;
        let d = settings.default_index;
        let Some(base) = configs.get(d) else {
            return Err(CoreError::Value(format!(
                "default_index {d} is not among the {} pairs",
                configs.len()
            )));
        };
        if configs
            .iter()
            .flatten()
            .any(|&f| !(f.is_finite() && f > 0.0))
        {
            return Err(CoreError::Value(
                "clocks must be positive and finite".into(),
            ));
        }
        let phi = configs
            .iter()
            .map(|c| [1.0, (c[0] / base[0]).ln(), (c[1] / base[1]).ln()])
            .collect();
        Ok(GovernorCore {
            settings,
            phi,
            phases: Vec::new(),
        })
    }

    pub fn n_pairs(&self) -> usize {
        self.phi.len()
    }

    /// A new phase from the offline predictions (positive, finite, one per pair); its id.
    pub fn add_phase(&mut self, time_ms: &[f64], watts: &[f64]) -> CoreResult<usize> {
        let k = self.n_pairs();
        let log = |x: &[f64], name: &str| -> CoreResult<Vec<f64>> {
            if x.len() != k {
                return Err(CoreError::Shape(format!(
                    "{name} has {} values, expected {k}",
                    x.len()
                )));
            }
            if x.iter().any(|&v| !(v.is_finite() && v > 0.0)) {
                return Err(CoreError::Value(format!(
                    "{name} must be positive and finite"
                )));
            }
            Ok(x.iter().map(|v| v.ln()).collect())
        };
        let s = &self.settings;
        // RLS covariance is in units of the noise variance: the prior on the correction is prior_sd.
        let cov = (s.prior_sd / s.noise_sd).powi(2);
        self.phases.push(Phase {
            t: Stream::new(log(time_ms, "time_ms")?, cov, s.residual)?,
            p: Stream::new(log(watts, "watts")?, cov, s.residual)?,
            excluded: vec![false; k],
            surprise: 0.0,
            visited: 0,
        });
        Ok(self.phases.len() - 1)
    }

    fn phase(&self, id: usize) -> CoreResult<&Phase> {
        self.phases
            .get(id)
            .ok_or_else(|| CoreError::Value(format!("no phase {id}")))
    }

    fn check_index(&self, index: usize) -> CoreResult<()> {
        if index >= self.n_pairs() {
            return Err(CoreError::Value(format!(
                "pair index {index} is not among the {} pairs",
                self.n_pairs()
            )));
        }
        Ok(())
    }

    /// The estimates of phase `id`: the model variances widened by the mean normalized
    /// squared innovation of the pairs measured so far (at least 1).
    pub fn estimates(&self, id: usize) -> CoreResult<Estimates> {
        let ph = self.phase(id)?;
        let inflate = if ph.visited > 0 {
            (ph.surprise / f64::from(ph.visited)).max(1.0)
        } else {
            1.0
        };
        let nv = self.settings.noise_sd * self.settings.noise_sd;
        let (log_time, var_time) = ph.t.estimate(&self.phi, nv, inflate);
        let (log_watts, var_watts) = ph.p.estimate(&self.phi, nv, inflate);
        Ok(Estimates {
            log_time,
            log_watts,
            var_time,
            var_watts,
        })
    }

    /// The pair to run next in phase `id`, the GPU running pair `current`.
    pub fn decide(&self, id: usize, current: usize) -> CoreResult<Decision> {
        self.check_index(current)?;
        let ph = self.phase(id)?;
        let e = self.estimates(id)?;
        let s = &self.settings;
        let (lt, lp) = (&e.log_time, &e.log_watts);
        let d = s.default_index;
        let k = self.n_pairs();
        // Cost: log time plus the log of the watts it is priced at, a blend of the power and
        // max_power_w; `cost_weight` is that log's slope in log watts (for the bound's width).
        // Under the cost policy `max_power_w` is there (`Settings::check`).
        let max_power_w = s.max_power_w.unwrap_or(0.0);
        let priced = |i: usize| s.eta * lp[i].exp() + (1.0 - s.eta) * max_power_w;
        let cost_weight = |i: usize| s.eta * lp[i].exp() / priced(i);
        let score: Vec<f64> = (0..k)
            .map(|i| match s.policy {
                Policy::Edp => lt[i] + lp[i] + lt[i],
                Policy::PowerCap => lt[i],
                Policy::Cost => lt[i] + priced(i).ln(),
                _ => lt[i] + lp[i],
            })
            .collect();
        let bound = lt[d] + s.slowdown.ln_1p();
        let cap = s.power_cap_w.map_or(f64::INFINITY, f64::ln);
        let mut allowed: Vec<bool> = (0..k)
            .map(|i| {
                !ph.excluded[i]
                    && match s.policy {
                        Policy::Deadline => {
                            let margin = if i == d {
                                0.0
                            } else {
                                s.bound_z * (e.var_time[i] + e.var_time[d]).sqrt()
                            };
                            lt[i] + margin <= bound
                        }
                        Policy::PowerCap => lp[i] <= cap,
                        _ => true,
                    }
            })
            .collect();
        if !allowed.contains(&true) {
            // Violate least: fastest for a deadline, least power otherwise, among the pairs
            // the GPU can hold (every pair, where it can hold none).
            let all_excluded = ph.excluded.iter().all(|&x| x);
            let by = if s.policy == Policy::Deadline { lt } else { lp };
            let least = argmin((0..k).map(|i| {
                if all_excluded || !ph.excluded[i] {
                    by[i]
                } else {
                    f64::INFINITY
                }
            }));
            allowed[least] = true;
        }
        let masked: Vec<f64> = (0..k)
            .map(|i| if allowed[i] { score[i] } else { f64::INFINITY })
            .collect();
        let best = argmin(masked.iter().copied());
        // A pair never run is explored on its model's bound (`explore` wide); one run fewer than
        // `recheck_runs` times on its mean's (`recheck_z` wide), so that one noisy run does not
        // rule out the best pair for good (not under a deadline: its pairs already run are
        // confirmed against the bound instead, by `gpudvfs.govern.Governor`); past that a
        // measured mean is taken as it is, since measuring it again to shave its noise would
        // flap between near-equal pairs.
        let recheck = if s.policy == Policy::Deadline {
            0.0
        } else {
            s.recheck_z
        };
        let lcb: Vec<f64> = (0..k)
            .map(|i| {
                let var = match s.policy {
                    Policy::PowerCap => e.var_time[i],
                    Policy::Edp => 4.0 * e.var_time[i] + e.var_watts[i],
                    Policy::Cost => e.var_time[i] + cost_weight(i).powi(2) * e.var_watts[i],
                    _ => e.var_time[i] + e.var_watts[i],
                };
                let width = match ph.p.n[i] {
                    0 => s.explore,
                    n if n < s.recheck_runs => recheck,
                    _ => 0.0,
                };
                masked[i] - width * var.sqrt()
            })
            .collect();
        let mut candidate = argmin(lcb.iter().copied());
        let mut exploring = lcb[candidate] < masked[best] - s.hysteresis;
        if s.policy == Policy::Deadline && ph.p.n[d] < s.default_runs && !ph.excluded[d] {
            // The bound is relative to the default clocks' time: run them first, so it is
            // measured, not predicted (unless the GPU cannot hold them).
            exploring = true;
            candidate = d;
        }
        let mut next = if exploring { candidate } else { best };
        if !exploring && allowed[current] && masked[current] - masked[best] <= s.hysteresis {
            next = current;
        }
        Ok(Decision {
            index: next,
            explored: exploring,
            log_energy: lt[next] + lp[next],
            log_energy_default: lt[d] + lp[d],
        })
    }

    /// The GPU did not hold pair `index` for phase `id`: not run there again, nor explored.
    pub fn exclude(&mut self, id: usize, index: usize) -> CoreResult<()> {
        self.check_index(index)?;
        self.phase(id)?;
        self.phases[id].excluded[index] = true;
        Ok(())
    }

    /// One interval at pair `index`: log time per unit of work (None: not measured, the
    /// time stays the prediction) and log watts, finite.
    pub fn observe(
        &mut self,
        id: usize,
        index: usize,
        log_time: Option<f64>,
        log_watts: f64,
    ) -> CoreResult<()> {
        self.check_index(index)?;
        self.phase(id)?;
        if !log_watts.is_finite() || log_time.is_some_and(|v| !v.is_finite()) {
            return Err(CoreError::Value(
                "observed log time and log watts must be finite".into(),
            ));
        }
        let nv = self.settings.noise_sd * self.settings.noise_sd;
        let residual = self.settings.residual;
        let ph = &mut self.phases[id];
        if ph.p.n[index] == 0 {
            let (mp, vp) = ph.p.model(&self.phi);
            let wp = log_watts - mp[index];
            ph.surprise += match log_time {
                None => wp * wp / (vp[index] * nv + nv),
                Some(lt) => {
                    let (mt, vt) = ph.t.model(&self.phi);
                    let w = (lt - mt[index]) + wp;
                    w * w / (vt[index] * nv + vp[index] * nv + 2.0 * nv)
                }
            };
            ph.visited += 1;
        }
        ph.p.update(&self.phi, index, log_watts, residual)?;
        if let Some(lt) = log_time {
            ph.t.update(&self.phi, index, lt, residual)?;
        }
        Ok(())
    }
}

/// The index of the least value, the first of equals (as numpy's argmin).
fn argmin(values: impl Iterator<Item = f64>) -> usize {
    let mut best: Option<(usize, f64)> = None;
    for (i, v) in values.enumerate() {
        if best.is_none_or(|(_, b)| v < b) {
            best = Some((i, v));
        }
    }
    best.map_or(0, |(i, _)| i)
}

#[cfg(test)]
mod tests {
    use super::settings::tests::settings;
    use super::*;

    /// Three core clocks at one memory clock; the default the highest.
    const PAIRS: [[f64; 2]; 3] = [[500.0, 1000.0], [750.0, 1000.0], [1000.0, 1000.0]];

    fn governor(s: Settings, time_ms: &[f64], watts: &[f64]) -> (GovernorCore, usize) {
        let mut g = GovernorCore::new(&PAIRS, s).unwrap();
        let id = g.add_phase(time_ms, watts).unwrap();
        (g, id)
    }

    #[test]
    fn without_exploration_it_takes_the_least_predicted_energy() {
        let s = Settings {
            explore: 0.0,
            ..settings(Policy::Energy)
        };
        // Energies 10 x 30 = 300, 8 x 30 = 240, 6 x 60 = 360.
        let (g, id) = governor(s, &[10.0, 8.0, 6.0], &[30.0, 30.0, 60.0]);
        let d = g.decide(id, 2).unwrap();
        assert_eq!((d.index, d.explored), (1, false));
        assert!((d.log_energy - 240f64.ln()).abs() < 1e-12);
        assert!((d.log_energy_default - 360f64.ln()).abs() < 1e-12);
    }

    #[test]
    fn cost_moves_from_least_energy_to_least_time_as_eta_falls() {
        // Energies 300, 240, 360 J; times 10, 8, 6 ms. Pair 1 has the least energy; pair 2
        // the least time; at eta 0.5 and 250 W, pair 1 costs 8 x (15 + 125) = 1120 against
        // 10 x 140 = 1400 and 6 x (30 + 125) = 930.
        let (t, w) = ([10.0, 8.0, 6.0], [30.0, 30.0, 60.0]);
        for (eta, want, cost) in [(1.0, 1, 240.0), (0.5, 2, 930.0), (0.0, 2, 1500.0)] {
            let s = Settings {
                explore: 0.0,
                eta,
                ..settings(Policy::Cost)
            };
            let (g, id) = governor(s, &t, &w);
            let d = g.decide(id, 0).unwrap();
            assert_eq!((d.index, d.explored), (want, false), "eta {eta}");
            let e = g.estimates(id).unwrap();
            let priced = eta * e.log_watts[want].exp() + (1.0 - eta) * 250.0;
            assert!((e.log_time[want].exp() * priced - cost).abs() < 1e-9);
        }
    }

    #[test]
    fn a_measured_pair_is_known_by_its_mean_and_corrects_its_neighbours() {
        let (mut g, id) = governor(
            settings(Policy::Energy),
            &[10.0, 8.0, 6.0],
            &[30.0, 30.0, 60.0],
        );
        g.observe(id, 2, Some(7.0f64.ln()), 50f64.ln()).unwrap();
        g.observe(id, 2, Some(9.0f64.ln()), 70f64.ln()).unwrap();
        let e = g.estimates(id).unwrap();
        assert!((e.log_time[2] - (7.0f64.ln() + 9.0f64.ln()) / 2.0).abs() < 1e-12);
        assert!((e.var_time[2] - 1e-4 / 2.0).abs() < 1e-18);
        // Measured 1.33 x the prediction in time: the RLS fit and the residual move the
        // unmeasured pairs' time up too, and leave their variance above the measured pair's.
        assert!(e.log_time[1] > 8.0f64.ln() && e.var_time[1] > e.var_time[2]);
    }

    #[test]
    fn a_deadline_runs_the_default_clocks_first() {
        let (mut g, id) = governor(
            settings(Policy::Deadline),
            &[10.0, 8.0, 6.0],
            &[30.0, 30.0, 60.0],
        );
        let d = g.decide(id, 0).unwrap();
        assert_eq!((d.index, d.explored), (2, true));
        g.observe(id, 2, Some(6f64.ln()), 60f64.ln()).unwrap();
        // 8 ms is 33% over the default's 6: outside a 10% slowdown, as is 10 ms.
        assert_eq!(g.decide(id, 2).unwrap().index, 2);
    }

    #[test]
    fn a_deadline_runs_the_default_as_often_as_asked_and_keeps_a_margin() {
        // 6.5 ms at 30 W is 8.3% slower than the default's 6 ms and saves energy: inside a
        // 10% slowdown on the point estimate alone.
        let (t, w) = ([10.0, 6.5, 6.0], [30.0, 30.0, 60.0]);
        let s = Settings {
            default_runs: 3,
            explore: 0.0,
            ..settings(Policy::Deadline)
        };
        let (mut g, id) = governor(s, &t, &w);
        for _ in 0..3 {
            assert_eq!(g.decide(id, 2).unwrap().index, 2);
            g.observe(id, 2, Some(6f64.ln()), 60f64.ln()).unwrap();
        }
        assert_eq!(g.decide(id, 2).unwrap().index, 1);
        // A margin of 2 standard deviations of the unmeasured pair's time (the prior's 5%,
        // widened by the residual) puts 6.5 ms past the bound: the default stays.
        let s = Settings {
            bound_z: 2.0,
            explore: 0.0,
            ..settings(Policy::Deadline)
        };
        let (mut g, id) = governor(s, &t, &w);
        g.observe(id, 2, Some(6f64.ln()), 60f64.ln()).unwrap();
        assert_eq!(g.decide(id, 2).unwrap().index, 2);
    }

    #[test]
    fn a_pair_run_once_is_run_again_while_its_mean_may_beat_the_best() {
        // Energies 300, 240, 360 J: pair 1 is the best, but its one run measured 1.5% over
        // pair 0's 300 J, measured 50 times.
        let runs = |g: &mut GovernorCore, id: usize| {
            for (pair, t, w, times) in [(0, 10.0, 30.0, 50), (2, 6.0, 60.0, 1), (1, 10.15, 30.0, 1)]
            {
                for _ in 0..times {
                    g.observe(id, pair, Some(f64::ln(t)), f64::ln(w)).unwrap();
                }
            }
        };
        let (t, w) = ([10.0, 8.0, 6.0], [30.0, 30.0, 60.0]);
        let (mut g, id) = governor(settings(Policy::Energy), &t, &w);
        runs(&mut g, id);
        // Without a recheck its one run stands: pair 0 stays.
        let d = g.decide(id, 0).unwrap();
        assert_eq!((d.index, d.explored), (0, false));
        let s = Settings {
            recheck_z: 2.0,
            recheck_runs: 3,
            ..settings(Policy::Energy)
        };
        let (mut g, id) = governor(s, &t, &w);
        runs(&mut g, id);
        // Its mean less 2 standard deviations (2 x 1.4%) beats pair 0's by more than 0.5%.
        let d = g.decide(id, 0).unwrap();
        assert_eq!((d.index, d.explored), (1, true));
        for _ in 0..2 {
            g.observe(id, 1, Some(8f64.ln()), 30f64.ln()).unwrap();
        }
        // Run three times, its mean is taken as it is: now the best, chosen, not explored.
        let d = g.decide(id, 0).unwrap();
        assert_eq!((d.index, d.explored), (1, false));
    }

    #[test]
    fn a_cap_no_pair_meets_falls_back_to_the_least_power_pair_the_gpu_holds() {
        let s = Settings {
            power_cap_w: Some(10.0),
            ..settings(Policy::PowerCap)
        };
        let (mut g, id) = governor(s, &[10.0, 8.0, 6.0], &[30.0, 40.0, 60.0]);
        assert_eq!(g.decide(id, 2).unwrap().index, 0);
        g.exclude(id, 0).unwrap();
        assert_eq!(g.decide(id, 2).unwrap().index, 1);
    }

    #[test]
    fn hysteresis_keeps_the_current_pair_on_a_near_tie() {
        let s = Settings {
            explore: 0.0,
            hysteresis: 0.01,
            ..settings(Policy::Energy)
        };
        // Energies 300 and 298.5: 0.5% apart, inside the 1% hysteresis.
        let (g, id) = governor(s, &[10.0, 9.95, 6.0], &[30.0, 30.0, 60.0]);
        assert_eq!(g.decide(id, 0).unwrap().index, 0);
        assert_eq!(g.decide(id, 2).unwrap().index, 1);
    }

    #[test]
    fn bad_input_is_an_error_and_changes_nothing() {
        assert!(GovernorCore::new(
            &PAIRS,
            Settings {
                default_index: 3,
                ..settings(Policy::Energy)
            }
        )
        .is_err());
        assert!(GovernorCore::new(
            &[[0.0, 1000.0]],
            Settings {
                default_index: 0,
                ..settings(Policy::Energy)
            }
        )
        .is_err());
        assert!(GovernorCore::new(&PAIRS, settings(Policy::PowerCap)).is_err());
        let (mut g, id) = governor(
            settings(Policy::Energy),
            &[10.0, 8.0, 6.0],
            &[30.0, 30.0, 60.0],
        );
        assert!(g.add_phase(&[1.0, 2.0], &[1.0, 2.0]).is_err());
        assert!(g
            .add_phase(&[1.0, f64::NAN, 2.0], &[1.0, 2.0, 3.0])
            .is_err());
        assert!(g.add_phase(&[1.0, 0.0, 2.0], &[1.0, 2.0, 3.0]).is_err());
        let before = g.estimates(id).unwrap();
        assert!(g.observe(id, 3, None, 1.0).is_err());
        assert!(g.observe(id, 0, Some(f64::INFINITY), 1.0).is_err());
        assert!(g.observe(id, 0, None, f64::NAN).is_err());
        assert!(g.observe(id + 1, 0, None, 1.0).is_err());
        assert!(
            g.exclude(id, 3).is_err() && g.decide(id, 3).is_err() && g.estimates(id + 1).is_err()
        );
        assert_eq!(g.estimates(id).unwrap(), before);
    }
}
