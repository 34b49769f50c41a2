//! Batched evaluation of the DVFS-aware power equations (Guerreiro et al., Eq. 6-7):
//! for every voltage/frequency domain d,
//!   P_d = s_d * V_d + V_d^2 * f_d * (i_d + sum_{c in d} w_c * U_c)
//! and P = sum_d P_d, over a [workloads x components] utilization matrix and a list of
//! configurations, each with one frequency and one normalized voltage per domain.

use crate::alloc;
use crate::error::{CoreError, CoreResult};

/// Coefficients of the power equations. Components are grouped by domain in order:
/// the first `domain_sizes[0]` columns of the utilization matrix belong to domain 0, ...
#[derive(Debug, Clone, PartialEq)]
pub struct PowerCoefficients {
    pub domain_sizes: Vec<usize>,
    /// s_d: static power per unit of normalized voltage.
    pub static_coef: Vec<f64>,
    /// i_d: utilization-independent (idle) dynamic term of the V-F level.
    pub idle_coef: Vec<f64>,
    /// w_c: dynamic weight of each component.
    pub weights: Vec<f64>,
}

impl PowerCoefficients {
    pub fn n_domains(&self) -> usize {
        self.domain_sizes.len()
    }

    /// The number of components, sum of the domain sizes (saturating: sizes from a damaged
    /// file may overflow; `validate` refuses them).
    pub fn n_components(&self) -> usize {
        self.domain_sizes
            .iter()
            .fold(0usize, |a, &s| a.saturating_add(s))
    }

    pub fn validate(&self) -> CoreResult<()> {
        let d = self.n_domains();
        if d == 0 {
            return Err(CoreError::Shape("at least one domain is required".into()));
        }
        if self
            .domain_sizes
            .iter()
            .try_fold(0usize, |a, &s| a.checked_add(s))
            .is_none()
        {
            return Err(CoreError::Shape(format!(
                "domain sizes {:?} add up to more components than can exist",
                self.domain_sizes
            )));
        }
        if self.static_coef.len() != d || self.idle_coef.len() != d {
            return Err(CoreError::Shape(format!(
                "{d} domains but {} static and {} idle coefficients",
                self.static_coef.len(),
                self.idle_coef.len()
            )));
        }
        if self.weights.len() != self.n_components() {
            return Err(CoreError::Shape(format!(
                "domain sizes add up to {} components but {} weights were given",
                self.n_components(),
                self.weights.len()
            )));
        }
        let all = self
            .static_coef
            .iter()
            .chain(&self.idle_coef)
            .chain(&self.weights);
        if let Some(v) = all.into_iter().find(|v| !v.is_finite()) {
            return Err(CoreError::Value(format!("coefficient {v} is not finite")));
        }
        Ok(())
    }

    /// Power of one workload at one configuration: normalized frequency `x` and voltage `v`
    /// per domain.
    pub fn power_at(&self, util_row: &[f64], x: &[f64], v: &[f64]) -> f64 {
        let mut activity = vec![0.0; self.n_domains()];
        self.domain_activity(util_row, &mut activity);
        (0..self.n_domains())
            .map(|d| {
                self.static_coef[d] * v[d] + v[d] * v[d] * x[d] * (self.idle_coef[d] + activity[d])
            })
            .sum()
    }

    /// Per-domain weighted utilization sum_{c in d} w_c U_c of one workload.
    fn domain_activity(&self, util_row: &[f64], out: &mut [f64]) {
        let mut c = 0;
        for (d, &size) in self.domain_sizes.iter().enumerate() {
            out[d] = (c..c + size).map(|j| self.weights[j] * util_row[j]).sum();
            c += size;
        }
    }
}

fn check_finite(name: &str, xs: &[f64]) -> CoreResult<()> {
    match xs.iter().position(|v| !v.is_finite()) {
        Some(i) => Err(CoreError::Value(format!(
            "{name}[{i}] = {} is not finite",
            xs[i]
        ))),
        None => Ok(()),
    }
}

/// Power of every workload at every configuration, row-major [n_workloads x n_configs].
///
/// `util` is [n_workloads x n_components]; `freq` and `volt` are [n_configs x n_domains].
/// Each configuration reduces to P = a_k + sum_d b_dk * A_d(w) with A_d the workload's
/// domain activity, so the inner loop is n_domains multiply-adds per output. The workload
/// count is given, not inferred from `util`: a model without utilization components (every
/// domain size 0: static and idle power only) has an empty `util` for any number of them.
pub fn power_grid(
    coef: &PowerCoefficients,
    util: &[f64],
    n_work: usize,
    freq: &[f64],
    volt: &[f64],
) -> CoreResult<Vec<f64>> {
    coef.validate()?;
    let nd = coef.n_domains();
    let nc = coef.n_components();
    if n_work.checked_mul(nc) != Some(util.len()) {
        return Err(CoreError::Shape(format!(
            "utilization has {} values, expected {n_work} workloads x {nc} components",
            util.len()
        )));
    }
    if freq.len() != volt.len() || freq.len() % nd != 0 {
        return Err(CoreError::Shape(format!(
            "frequencies ({}) and voltages ({}) must both be [n_configs x {nd}]",
            freq.len(),
            volt.len()
        )));
    }
    check_finite("utilization", util)?;
    check_finite("frequency", freq)?;
    check_finite("voltage", volt)?;
    let n_conf = freq.len() / nd;
    // The output's size comes from the caller: allocated fallibly (an error, not an abort).
    let what = format!("the power of {n_work} workloads x {n_conf} configurations");
    let mut out = alloc::filled(alloc::product(&[n_work, n_conf], &what)?, 0.0, &what)?;

    // Per configuration: constant part a_k and per-domain slope b_dk = V^2 f.
    let mut a = vec![0.0; n_conf];
    let mut b = vec![0.0; n_conf * nd];
    for k in 0..n_conf {
        for d in 0..nd {
            let (f, v) = (freq[k * nd + d], volt[k * nd + d]);
            let v2f = v * v * f;
            a[k] += coef.static_coef[d] * v + v2f * coef.idle_coef[d];
            b[k * nd + d] = v2f;
        }
    }

    // Workload rows are independent: split them across threads for large grids.
    let threads = crate::parallel::threads_for(n_work * n_conf);
    let rows_per_chunk = n_work.div_ceil(threads).max(1);
    let parts = out.chunks_mut(rows_per_chunk * n_conf.max(1)).enumerate();
    crate::parallel::for_each_part(parts, |(chunk_idx, chunk)| {
        let mut activity = vec![0.0; nd];
        for (r, row) in chunk.chunks_mut(n_conf.max(1)).enumerate() {
            let w = chunk_idx * rows_per_chunk + r;
            coef.domain_activity(&util[w * nc..(w + 1) * nc], &mut activity);
            for (k, p) in row.iter_mut().enumerate() {
                let bk = &b[k * nd..(k + 1) * nd];
                *p = a[k] + bk.iter().zip(&activity).map(|(x, y)| x * y).sum::<f64>();
            }
        }
    });
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two_domain() -> PowerCoefficients {
        PowerCoefficients {
            domain_sizes: vec![2, 1],
            static_coef: vec![30.0, 10.0],
            idle_coef: vec![20.0, 5.0],
            weights: vec![40.0, 25.0, 60.0],
        }
    }

    #[test]
    fn matches_the_equations_term_by_term() {
        let coef = two_domain();
        let util = [0.5, 0.2, 0.8];
        let (fc, fm, vc, vm) = (0.8, 0.5, 0.9, 1.0);
        let p = power_grid(&coef, &util, 1, &[fc, fm], &[vc, vm]).unwrap();
        let core = 30.0 * vc + vc * vc * fc * (20.0 + 40.0 * 0.5 + 25.0 * 0.2);
        let mem = 10.0 * vm + vm * vm * fm * (5.0 + 60.0 * 0.8);
        assert!((p[0] - (core + mem)).abs() < 1e-12);
    }

    #[test]
    fn output_is_workloads_by_configs() {
        let coef = two_domain();
        let util = [0.0, 0.0, 0.0, 1.0, 1.0, 1.0];
        let freq = [1.0, 1.0, 0.5, 1.0, 0.5, 0.5];
        let volt = [1.0; 6];
        let p = power_grid(&coef, &util, 2, &freq, &volt).unwrap();
        assert_eq!(p.len(), 6);
        // Idle workload at the reference: s + i per domain.
        assert!((p[0] - (30.0 + 20.0 + 10.0 + 5.0)).abs() < 1e-12);
        // Busier workloads draw more at every configuration.
        for k in 0..3 {
            assert!(p[3 + k] > p[k]);
        }
    }

    #[test]
    fn rejects_bad_shapes_and_values() {
        let coef = two_domain();
        assert!(matches!(
            power_grid(&coef, &[0.1, 0.2], 1, &[1.0, 1.0], &[1.0, 1.0]),
            Err(CoreError::Shape(_))
        ));
        assert!(matches!(
            power_grid(&coef, &[0.1; 3], 1, &[1.0, 1.0], &[1.0]),
            Err(CoreError::Shape(_))
        ));
        assert!(matches!(
            power_grid(&coef, &[0.1, f64::NAN, 0.1], 1, &[1.0, 1.0], &[1.0, 1.0]),
            Err(CoreError::Value(_))
        ));
        let mut bad = two_domain();
        bad.weights.pop();
        assert!(matches!(bad.validate(), Err(CoreError::Shape(_))));
        // The utilization must hold exactly the workloads it is said to.
        assert!(matches!(
            power_grid(&coef, &[0.1; 6], 1, &[1.0, 1.0], &[1.0, 1.0]),
            Err(CoreError::Shape(_))
        ));
    }

    /// Every domain size 0: no utilization component, static and idle power only, for any
    /// number of workloads (their utilization rows are empty). This divided by zero.
    #[test]
    fn a_model_without_components_is_static_and_idle_power() {
        let coef = PowerCoefficients {
            domain_sizes: vec![0, 0],
            static_coef: vec![30.0, 10.0],
            idle_coef: vec![20.0, 5.0],
            weights: vec![],
        };
        let (freq, volt) = ([1.0, 0.5, 0.8, 1.0], [1.0, 0.9, 0.95, 1.0]);
        let p = power_grid(&coef, &[], 3, &freq, &volt).unwrap();
        let at = |f: &[f64], v: &[f64]| {
            30.0 * v[0] + v[0] * v[0] * f[0] * 20.0 + 10.0 * v[1] + v[1] * v[1] * f[1] * 5.0
        };
        let want = [at(&freq[..2], &volt[..2]), at(&freq[2..], &volt[2..])];
        assert_eq!(p.len(), 6);
        for (i, row) in p.chunks(2).enumerate() {
            for (k, got) in row.iter().enumerate() {
                assert!(
                    (got - want[k]).abs() < 1e-12,
                    "workload {i}, configuration {k}"
                );
            }
        }
        assert!(power_grid(&coef, &[], 0, &freq, &volt).unwrap().is_empty());
        assert!(matches!(
            power_grid(&coef, &[0.5], 1, &freq, &volt),
            Err(CoreError::Shape(_))
        ));
    }

    /// Domain sizes whose sum overflows (from a damaged file, or the extension called
    /// directly) are refused; wrapping to a small sum indexed past the weights.
    #[test]
    fn overflowing_domain_sizes_are_refused() {
        let coef = PowerCoefficients {
            domain_sizes: vec![usize::MAX, 1],
            static_coef: vec![1.0, 1.0],
            idle_coef: vec![1.0, 1.0],
            weights: vec![],
        };
        assert!(matches!(coef.validate(), Err(CoreError::Shape(_))));
        assert!(power_grid(&coef, &[], 1, &[1.0, 1.0], &[1.0, 1.0]).is_err());
        let half = 1usize << (usize::BITS - 1);
        let wraps = PowerCoefficients {
            domain_sizes: vec![half, half],
            ..coef
        };
        assert!(matches!(wraps.validate(), Err(CoreError::Shape(_))));
    }

    /// An output too large to allocate is an error (it aborted the process).
    #[test]
    fn an_output_too_large_is_an_error_not_an_abort() {
        let coef = PowerCoefficients {
            domain_sizes: vec![0],
            static_coef: vec![1.0],
            idle_coef: vec![1.0],
            weights: vec![],
        };
        let (freq, volt) = (vec![1.0; 1 << 14], vec![1.0; 1 << 14]);
        // 2^43 x 2^14 values: 2^60 bytes.
        assert!(matches!(
            power_grid(&coef, &[], 1 << 43, &freq, &volt),
            Err(CoreError::Memory(_))
        ));
        // 2^60 x 2^14 values: the count overflows.
        assert!(matches!(
            power_grid(&coef, &[], 1 << 60, &freq, &volt),
            Err(CoreError::Value(_))
        ));
    }
}
