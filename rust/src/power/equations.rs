//! Batched evaluation of the DVFS-aware power equations (Guerreiro et al., Eq. 6-7):
//! for every voltage/frequency domain d,
//!   P_d = s_d * V_d + V_d^2 * f_d * (i_d + sum_{c in d} w_c * U_c)
//! and P = sum_d P_d, over a [workloads x components] utilization matrix and a list of
//! configurations, each with one frequency and one normalized voltage per domain.

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

    pub fn n_components(&self) -> usize {
        self.domain_sizes.iter().sum()
    }

    pub fn validate(&self) -> CoreResult<()> {
        let d = self.n_domains();
        if d == 0 {
            return Err(CoreError::Shape("at least one domain is required".into()));
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
/// domain activity, so the inner loop is n_domains multiply-adds per output.
pub fn power_grid(
    coef: &PowerCoefficients,
    util: &[f64],
    freq: &[f64],
    volt: &[f64],
) -> CoreResult<Vec<f64>> {
    coef.validate()?;
    let nd = coef.n_domains();
    let nc = coef.n_components();
    if util.len() % nc != 0 {
        return Err(CoreError::Shape(format!(
            "utilization has {} values, not a multiple of {nc} components",
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
    let n_work = util.len() / nc;
    let n_conf = freq.len() / nd;

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
    let mut out = vec![0.0; n_work * n_conf];
    let threads = crate::parallel::threads_for(n_work * n_conf);
    let rows_per_chunk = n_work.div_ceil(threads).max(1);
    std::thread::scope(|scope| {
        for (chunk_idx, chunk) in out.chunks_mut(rows_per_chunk * n_conf.max(1)).enumerate() {
            let (a, b) = (&a, &b);
            scope.spawn(move || {
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
        let p = power_grid(&coef, &util, &[fc, fm], &[vc, vm]).unwrap();
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
        let p = power_grid(&coef, &util, &freq, &volt).unwrap();
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
            power_grid(&coef, &[0.1, 0.2], &[1.0, 1.0], &[1.0, 1.0]),
            Err(CoreError::Shape(_))
        ));
        assert!(matches!(
            power_grid(&coef, &[0.1; 3], &[1.0, 1.0], &[1.0]),
            Err(CoreError::Shape(_))
        ));
        assert!(matches!(
            power_grid(&coef, &[0.1, f64::NAN, 0.1], &[1.0, 1.0], &[1.0, 1.0]),
            Err(CoreError::Value(_))
        ));
        let mut bad = two_domain();
        bad.weights.pop();
        assert!(matches!(bad.validate(), Err(CoreError::Shape(_))));
    }
}
