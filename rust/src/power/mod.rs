//! Estimation of the DVFS-aware power model of Guerreiro et al. (HPCA 2018, Sec. III):
//! per voltage/frequency domain d (core with L2, memory with DRAM)
//!   P_d = s_d V_d + V_d^2 x_d (i_d + sum_{c in d} w_c U_c),   P = sum_d P_d,
//! with V_d normalized to 1 at the reference configuration and x_d = f_d / f_ref,d (so every
//! coefficient is in watts at the reference clock). Coefficients come from non-negative least
//! squares (`nnls`), voltages from exact constrained 1-D solves (`voltage`), alternated as in the
//! paper's Sec. III-D until both stop changing (`fit`).

mod curve;
pub mod equations;
mod fit;
mod layout;
pub mod nnls;
pub mod voltage;

pub use curve::VoltageCurve;
pub use fit::fit;

use crate::error::{CoreError, CoreResult};
use equations::PowerCoefficients;

/// How the unknown voltages are parametrized.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    /// One (V_core, V_mem) pair per measured (fc, fm) configuration: the paper's formulation.
    PerConfig,
    /// V_core a function of fc alone and V_mem of fm alone, one value per measured clock
    /// (gpmTOOL v2's formulation).
    PerDomain,
    /// Per domain, constant below a break clock and linear above it (Fig. 6 of the paper);
    /// two parameters per domain, defined at unmeasured clocks too.
    Curve,
}

#[derive(Debug, Clone, PartialEq)]
pub struct FitOptions {
    pub variant: Variant,
    /// Cap on the alternations (voltage step + coefficient step).
    pub max_iter: usize,
    /// Converged when no voltage moved more than this in the last iteration ...
    pub tol_voltage: f64,
    /// ... and the objective changed by less than this fraction of itself.
    pub tol_objective: f64,
    /// Bounds on the normalized voltages (the reference is 1).
    pub v_min: f64,
    pub v_max: f64,
    /// Minimize squared relative errors (rows weighted by 1/P^2) instead of squared watts.
    pub relative_weighting: bool,
    /// Ridge on the component weights, relative to each weight column's sum of squares
    /// (0 = none): shrinks weights that the microbenchmarks barely tell apart.
    pub ridge: f64,
}

impl Default for FitOptions {
    fn default() -> Self {
        FitOptions {
            variant: Variant::PerConfig,
            max_iter: 3000,
            tol_voltage: 1e-6,
            tol_objective: 1e-9,
            v_min: 0.5,
            v_max: 1.5,
            relative_weighting: true,
            ridge: 0.01,
        }
    }
}

impl FitOptions {
    /// The paper's / gpmTOOL's formulation: per-configuration voltages, squared watts.
    pub fn paper() -> Self {
        FitOptions {
            variant: Variant::PerConfig,
            relative_weighting: false,
            ridge: 0.0,
            ..Self::default()
        }
    }

    pub(crate) fn validate(&self) -> CoreResult<()> {
        let finite = [
            self.tol_voltage,
            self.tol_objective,
            self.v_min,
            self.v_max,
            self.ridge,
        ];
        if finite.iter().any(|v| !v.is_finite()) {
            return Err(CoreError::Value(format!(
                "fit options must be finite: {self:?}"
            )));
        }
        if !(self.v_min > 0.0 && self.v_min < 1.0 && self.v_max > 1.0) {
            return Err(CoreError::Value(format!(
                "voltage bounds must satisfy 0 < v_min < 1 < v_max, got [{}, {}]",
                self.v_min, self.v_max
            )));
        }
        if self.max_iter == 0
            || self.tol_voltage < 0.0
            || self.tol_objective < 0.0
            || self.ridge < 0.0
        {
            return Err(CoreError::Value(
                "max_iter must be >= 1 and tolerances and ridge >= 0".into(),
            ));
        }
        Ok(())
    }
}

/// Training measurements. Rows are (benchmark, configuration) pairs in any order; a benchmark
/// need not be measured at every configuration (rows are independent in the least squares).
#[derive(Debug, Clone, Copy)]
pub struct PowerData<'a> {
    pub watts: &'a [f64],
    pub core_mhz: &'a [f64],
    pub mem_mhz: &'a [f64],
    /// n_rows x n_comp, row-major; core-domain components first.
    pub util: &'a [f64],
    pub n_comp: usize,
    /// Components per domain: [core, memory].
    pub domain_sizes: &'a [usize],
    pub ref_core_mhz: f64,
    pub ref_mem_mhz: f64,
}

/// The fitted model. Frequencies enter the equations as x = f / ref_mhz[d].
#[derive(Debug, Clone, PartialEq)]
pub struct FittedPower {
    pub variant: Variant,
    /// Reference clocks [core, mem] in MHz: the frequency normalization and V = 1 point.
    pub ref_mhz: [f64; 2],
    /// Per domain [core, mem]: s_d in W per unit normalized voltage and i_d in W at the
    /// reference clock and voltage; per component: w_c in W at full utilization there.
    pub coef: PowerCoefficients,
    /// Measured configurations (core MHz, mem MHz), sorted by mem then core clock.
    pub configs: Vec<(f64, f64)>,
    /// n_configs x 2 (core, mem), row-major.
    pub voltages: Vec<f64>,
    /// n_configs x 2: the voltage sits on v_min or v_max.
    pub on_bound: Vec<bool>,
    /// Measured clocks per domain, and the voltage of each (per-domain and curve variants;
    /// empty for per-configuration).
    pub levels_mhz: [Vec<f64>; 2],
    pub level_voltages: [Vec<f64>; 2],
    /// Curve variant: the curve of each domain.
    pub curves: Option<[VoltageCurve; 2]>,
    /// Domains with one measured clock: voltage fixed at 1 and idle term folded into static.
    pub folded: [bool; 2],
    pub iterations: usize,
    pub converged: bool,
    /// Sum of squared errors in W^2 over the training rows (unweighted).
    pub sse: f64,
    /// The minimized objective (weighted when relative_weighting).
    pub objective: f64,
    /// Mean absolute percentage error over the training rows, in %.
    pub train_mape: f64,
    pub notes: Vec<String>,
}

impl FittedPower {
    /// Consistency of a model rebuilt from saved state (the fit itself produces valid ones).
    pub fn validate(&self) -> CoreResult<()> {
        self.coef.validate()?;
        let bad = |m: String| Err(CoreError::Value(m));
        if self.coef.n_domains() != 2 {
            return bad(format!(
                "the power model has 2 domains, not {}",
                self.coef.n_domains()
            ));
        }
        if self.ref_mhz.iter().any(|f| !f.is_finite() || *f <= 0.0) {
            return bad(format!(
                "reference clocks must be finite and > 0, got {:?}",
                self.ref_mhz
            ));
        }
        // The fit's least squares are non-negative: a negative term is a damaged file.
        let coefs = [
            &self.coef.static_coef,
            &self.coef.idle_coef,
            &self.coef.weights,
        ];
        if let Some(v) = coefs.iter().flat_map(|c| c.iter()).find(|v| **v < 0.0) {
            return bad(format!("coefficients must be >= 0, found {v}"));
        }
        let k = self.configs.len();
        if k == 0 || self.voltages.len() != 2 * k || self.on_bound.len() != 2 * k {
            return Err(CoreError::Shape(format!(
                "{k} configurations need {} voltages and bound flags, got {} and {}",
                2 * k,
                self.voltages.len(),
                self.on_bound.len()
            )));
        }
        let positive = |xs: &[f64]| xs.iter().all(|v| v.is_finite() && *v > 0.0);
        if !positive(&self.voltages) || self.configs.iter().any(|&(c, m)| !positive(&[c, m])) {
            return bad("voltages and configuration clocks must be finite and > 0".into());
        }
        match self.variant {
            Variant::PerConfig => {}
            Variant::PerDomain => {
                for d in 0..2 {
                    let (l, v) = (&self.levels_mhz[d], &self.level_voltages[d]);
                    if l.is_empty() || l.len() != v.len() || !positive(l) || !positive(v) {
                        return bad(format!(
                            "per-domain model: bad clock levels or voltages of domain {d}"
                        ));
                    }
                    // Levels are looked up by binary search: unsorted ones would find no
                    // level, or the wrong voltage.
                    if l.windows(2).any(|w| w[0] >= w[1]) {
                        return bad(format!(
                            "per-domain model: the clock levels of domain {d} must rise \
                             strictly, got {l:?}"
                        ));
                    }
                }
            }
            Variant::Curve => match &self.curves {
                Some(c)
                    if c.iter().all(|c| {
                        !c.break_norm.is_nan() && c.slope.is_finite() && c.slope >= 0.0
                    }) => {}
                _ => return bad("curve model: missing or invalid voltage curves".into()),
            },
        }
        Ok(())
    }

    /// Normalized voltages [core, mem] at a clock pair. Per-configuration voltages exist only at
    /// measured pairs, per-domain ones at measured clocks; the curve is defined everywhere
    /// (clamped to the fit's bounds is not applied: it is monotone and pinned at 1).
    pub fn voltage_at(&self, core_mhz: f64, mem_mhz: f64) -> CoreResult<[f64; 2]> {
        let clocks = [core_mhz, mem_mhz];
        if clocks.iter().any(|f| !f.is_finite() || *f <= 0.0) {
            return Err(CoreError::Value(format!(
                "clocks must be finite and > 0: {clocks:?}"
            )));
        }
        for d in 0..2 {
            if self.folded[d] && clocks[d] != self.ref_mhz[d] {
                return Err(CoreError::Value(format!(
                    "the model was fitted at a single {} clock ({} MHz) and cannot predict {} MHz",
                    ["core", "memory"][d],
                    self.ref_mhz[d],
                    clocks[d]
                )));
            }
        }
        match self.variant {
            Variant::PerConfig => {
                let k = self
                    .configs
                    .iter()
                    .position(|c| *c == (core_mhz, mem_mhz))
                    .ok_or_else(|| {
                        CoreError::Value(format!(
                            "({core_mhz}, {mem_mhz}) MHz was not a training configuration; \
                         per-configuration voltages exist only there"
                        ))
                    })?;
                Ok([self.voltages[2 * k], self.voltages[2 * k + 1]])
            }
            Variant::PerDomain => {
                let mut v = [1.0; 2];
                for d in 0..2 {
                    let l = layout::level_of(&self.levels_mhz[d], clocks[d]).ok_or_else(|| {
                        CoreError::Value(format!(
                            "{} clock {} MHz was not measured in training",
                            ["core", "memory"][d],
                            clocks[d]
                        ))
                    })?;
                    v[d] = self.level_voltages[d][l];
                }
                Ok(v)
            }
            Variant::Curve => {
                let c = self.curves.as_ref().ok_or_else(|| {
                    CoreError::Value("a curve-variant model without its voltage curves".into())
                })?;
                Ok([
                    c[0].at(core_mhz / self.ref_mhz[0]),
                    c[1].at(mem_mhz / self.ref_mhz[1]),
                ])
            }
        }
    }

    /// Predicted power of each row (util n x n_comp, one clock pair per row).
    pub fn predict(&self, util: &[f64], core_mhz: &[f64], mem_mhz: &[f64]) -> CoreResult<Vec<f64>> {
        let nc = self.coef.n_components();
        let n = core_mhz.len();
        if mem_mhz.len() != n || n.checked_mul(nc) != Some(util.len()) {
            return Err(CoreError::Shape(format!(
                "predict: {n} core clocks, {} mem clocks, {} utilizations for {nc} components",
                mem_mhz.len(),
                util.len()
            )));
        }
        if let Some(u) = util.iter().find(|u| !u.is_finite()) {
            return Err(CoreError::Value(format!("utilization {u} is not finite")));
        }
        let mut out = Vec::with_capacity(n);
        for r in 0..n {
            let v = self.voltage_at(core_mhz[r], mem_mhz[r])?;
            let x = [core_mhz[r] / self.ref_mhz[0], mem_mhz[r] / self.ref_mhz[1]];
            out.push(self.coef.power_at(&util[r * nc..(r + 1) * nc], &x, &v));
        }
        Ok(out)
    }
}
