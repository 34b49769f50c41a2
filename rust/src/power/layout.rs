//! Input validation and the indexing the fit works on: clock levels per domain, frequency
//! configurations, which voltage parameter each row uses, and the ordered chains along which
//! voltages must be non-decreasing.

use super::{PowerData, Variant};
use crate::error::{CoreError, CoreResult};

/// Utilizations below this are rejected: counters are ratios in [0, 1]; values like -1e-11 are
/// rounding noise in real tool output and are accepted as they are.
const MIN_UTIL: f64 = -1e-6;
/// A component whose |U| never exceeds this is "zero in every row".
const ZERO_UTIL: f64 = 1e-9;

pub(crate) const N_DOMAINS: usize = 2;

/// A run of voltage parameters ordered by increasing frequency of their domain; `anchor` is the
/// position of the parameter pinned at V = 1 (the reference configuration), if the chain has it.
#[derive(Debug, Clone)]
pub(crate) struct Chain {
    pub params: Vec<usize>,
    pub anchor: Option<usize>,
}

#[derive(Debug, Clone)]
pub(crate) struct Layout {
    pub n_rows: usize,
    pub n_comp: usize,
    /// Domain of every component (core-domain components first).
    pub comp_domain: Vec<usize>,
    pub ref_mhz: [f64; N_DOMAINS],
    /// Sorted distinct clocks of each domain, MHz.
    pub levels: [Vec<f64>; N_DOMAINS],
    pub ref_level: [usize; N_DOMAINS],
    /// Distinct (core, mem) configurations, sorted by mem then core clock.
    pub configs: Vec<[usize; N_DOMAINS]>,
    pub ref_config: usize,
    pub row_config: Vec<usize>,
    /// A domain with a single clock level: its voltage is pinned at 1 and its idle term folded
    /// into its static term (see `fit`).
    pub folded: [bool; N_DOMAINS],
}

fn check_finite(name: &str, xs: &[f64], width: usize) -> CoreResult<()> {
    match xs.iter().position(|v| !v.is_finite()) {
        None => Ok(()),
        Some(i) if width > 1 => Err(CoreError::Value(format!(
            "{name}[row {}, column {}] = {} is not finite",
            i / width,
            i % width,
            xs[i]
        ))),
        Some(i) => Err(CoreError::Value(format!(
            "{name}[{i}] = {} is not finite",
            xs[i]
        ))),
    }
}

/// Index of `x` in the sorted `levels` (exact match: clocks are read from the same files).
pub(crate) fn level_of(levels: &[f64], x: f64) -> Option<usize> {
    levels.binary_search_by(|l| l.total_cmp(&x)).ok()
}

impl Layout {
    pub fn new(data: &PowerData) -> CoreResult<Layout> {
        let n = data.watts.len();
        if data.domain_sizes.len() != N_DOMAINS {
            return Err(CoreError::Shape(format!(
                "domain_sizes must give the component counts of the core and memory domains \
                 (2 values), got {}",
                data.domain_sizes.len()
            )));
        }
        let n_comp: usize = data.domain_sizes.iter().sum();
        if n_comp == 0 || n_comp != data.n_comp {
            return Err(CoreError::Shape(format!(
                "domain_sizes add up to {n_comp} components but n_comp is {}",
                data.n_comp
            )));
        }
        if data.core_mhz.len() != n || data.mem_mhz.len() != n {
            return Err(CoreError::Shape(format!(
                "watts has {n} rows but core_mhz has {} and mem_mhz {}",
                data.core_mhz.len(),
                data.mem_mhz.len()
            )));
        }
        if data.util.len() != n * n_comp {
            return Err(CoreError::Shape(format!(
                "util has {} values, expected {n} rows x {n_comp} components",
                data.util.len()
            )));
        }
        if n == 0 {
            return Err(CoreError::Shape("no measurement rows".into()));
        }
        check_finite("watts", data.watts, 1)?;
        check_finite("core_mhz", data.core_mhz, 1)?;
        check_finite("mem_mhz", data.mem_mhz, 1)?;
        check_finite("util", data.util, n_comp)?;
        if let Some(i) = data.watts.iter().position(|p| *p <= 0.0) {
            return Err(CoreError::Value(format!(
                "watts[{i}] = {} must be > 0",
                data.watts[i]
            )));
        }
        for (name, xs) in [("core_mhz", data.core_mhz), ("mem_mhz", data.mem_mhz)] {
            if let Some(i) = xs.iter().position(|f| *f <= 0.0) {
                return Err(CoreError::Value(format!(
                    "{name}[{i}] = {} must be > 0",
                    xs[i]
                )));
            }
        }
        if let Some(i) = data.util.iter().position(|u| *u < MIN_UTIL) {
            return Err(CoreError::Value(format!(
                "util[row {}, column {}] = {} is negative (utilizations are ratios in [0, 1])",
                i / n_comp,
                i % n_comp,
                data.util[i]
            )));
        }
        for c in 0..n_comp {
            if (0..n).all(|r| data.util[r * n_comp + c].abs() <= ZERO_UTIL) {
                return Err(CoreError::Value(format!(
                    "component {c} is zero in every row: its weight cannot be estimated \
                     (drop the column)"
                )));
            }
        }
        let refs = [data.ref_core_mhz, data.ref_mem_mhz];
        if refs.iter().any(|f| !f.is_finite() || *f <= 0.0) {
            return Err(CoreError::Value(format!(
                "reference clocks must be finite and > 0, got core {} MHz, mem {} MHz",
                refs[0], refs[1]
            )));
        }

        let clocks = [data.core_mhz, data.mem_mhz];
        let levels: [Vec<f64>; N_DOMAINS] = std::array::from_fn(|d| {
            let mut v = clocks[d].to_vec();
            v.sort_by(f64::total_cmp);
            v.dedup();
            v
        });
        let mut ref_level = [0; N_DOMAINS];
        for d in 0..N_DOMAINS {
            ref_level[d] = level_of(&levels[d], refs[d]).ok_or_else(|| {
                CoreError::Value(format!(
                    "no row at the reference {} clock {} MHz (the reference configuration \
                     anchors the normalized voltage at 1)",
                    ["core", "memory"][d],
                    refs[d]
                ))
            })?;
        }
        let n_lev = [levels[0].len(), levels[1].len()];
        let mut config_id = vec![usize::MAX; n_lev[0] * n_lev[1]];
        let mut row_level = Vec::with_capacity(n);
        for r in 0..n {
            let l0 = level_of(&levels[0], data.core_mhz[r]).expect("level of own clock");
            let l1 = level_of(&levels[1], data.mem_mhz[r]).expect("level of own clock");
            config_id[l1 * n_lev[0] + l0] = 0;
            row_level.push([l0, l1]);
        }
        let mut configs = Vec::new();
        for l1 in 0..n_lev[1] {
            for l0 in 0..n_lev[0] {
                if config_id[l1 * n_lev[0] + l0] == 0 {
                    config_id[l1 * n_lev[0] + l0] = configs.len();
                    configs.push([l0, l1]);
                }
            }
        }
        if configs.len() < 2 {
            return Err(CoreError::Value(
                "all rows are at a single frequency configuration: voltages and the \
                 frequency-dependent terms cannot be separated"
                    .into(),
            ));
        }
        let ref_config = config_id[ref_level[1] * n_lev[0] + ref_level[0]];
        if ref_config == usize::MAX {
            return Err(CoreError::Value(format!(
                "no row at the reference configuration ({} MHz, {} MHz)",
                refs[0], refs[1]
            )));
        }
        let row_config = row_level
            .iter()
            .map(|l| config_id[l[1] * n_lev[0] + l[0]])
            .collect();
        let mut comp_domain = Vec::with_capacity(n_comp);
        for (d, &size) in data.domain_sizes.iter().enumerate() {
            comp_domain.extend(std::iter::repeat_n(d, size));
        }
        Ok(Layout {
            n_rows: n,
            n_comp,
            comp_domain,
            ref_mhz: refs,
            folded: [n_lev[0] == 1, n_lev[1] == 1],
            levels,
            ref_level,
            configs,
            ref_config,
            row_config,
        })
    }

    /// Number of voltage parameters of domain `d` under `variant`.
    pub fn n_params(&self, variant: Variant, d: usize) -> usize {
        match variant {
            Variant::PerConfig => self.configs.len(),
            Variant::PerDomain | Variant::Curve => self.levels[d].len(),
        }
    }

    /// The voltage parameter of domain `d` that configuration `k` uses.
    pub fn param_of_config(&self, variant: Variant, d: usize, k: usize) -> usize {
        match variant {
            Variant::PerConfig => k,
            Variant::PerDomain | Variant::Curve => self.configs[k][d],
        }
    }

    /// Monotonicity chains of domain `d`: per configuration, one chain per clock of the other
    /// domain (a higher own clock never gets a lower voltage at the same other clock); per
    /// domain, the single chain of its levels.
    pub fn chains(&self, variant: Variant, d: usize) -> Vec<Chain> {
        match variant {
            Variant::PerConfig => {
                let o = 1 - d;
                (0..self.levels[o].len())
                    .map(|lo| {
                        let mut ks: Vec<usize> = (0..self.configs.len())
                            .filter(|&k| self.configs[k][o] == lo)
                            .collect();
                        ks.sort_by_key(|&k| self.configs[k][d]);
                        let anchor = ks.iter().position(|&k| k == self.ref_config);
                        Chain { params: ks, anchor }
                    })
                    .filter(|c| !c.params.is_empty())
                    .collect()
            }
            Variant::PerDomain | Variant::Curve => vec![Chain {
                params: (0..self.levels[d].len()).collect(),
                anchor: Some(self.ref_level[d]),
            }],
        }
    }

    /// Configurations for the paper's initial fit (step 1): the reference and, per domain with
    /// more than one clock, the nearest configuration that differs from it in that clock only
    /// (the next higher clock when present, as in the paper's example, else the next lower).
    pub fn initial_configs(&self) -> Vec<usize> {
        let mut out = vec![self.ref_config];
        for d in 0..N_DOMAINS {
            let n = self.levels[d].len();
            let r = self.ref_level[d];
            let order = (r + 1..n).chain((0..r).rev());
            for l in order {
                let mut want = self.configs[self.ref_config];
                want[d] = l;
                if let Some(k) = self.configs.iter().position(|c| *c == want) {
                    out.push(k);
                    break;
                }
            }
        }
        out
    }
}
