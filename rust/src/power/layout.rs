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

/// Index of the configuration at `levels` in `configs` (sorted by mem then core level).
fn config_of(configs: &[[usize; N_DOMAINS]], levels: [usize; N_DOMAINS]) -> Option<usize> {
    configs
        .binary_search_by_key(&(levels[1], levels[0]), |c| (c[1], c[0]))
        .ok()
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
        // The distinct (core, mem) level pairs, sorted by mem then core level, by sorting the
        // rows' pairs: a dense table over all level pairs would take levels^2 memory, which
        // rows at clocks all different (read from telemetry) make more than exists.
        let row_level: Vec<[usize; N_DOMAINS]> = (0..n)
            .map(|r| {
                [
                    level_of(&levels[0], data.core_mhz[r]).expect("level of own clock"),
                    level_of(&levels[1], data.mem_mhz[r]).expect("level of own clock"),
                ]
            })
            .collect();
        let mut configs = row_level.clone();
        configs.sort_unstable_by_key(|c| (c[1], c[0]));
        configs.dedup();
        if configs.len() < 2 {
            return Err(CoreError::Value(
                "all rows are at a single frequency configuration: voltages and the \
                 frequency-dependent terms cannot be separated"
                    .into(),
            ));
        }
        let ref_config = config_of(&configs, ref_level).ok_or_else(|| {
            CoreError::Value(format!(
                "no row at the reference configuration ({} MHz, {} MHz)",
                refs[0], refs[1]
            ))
        })?;
        let row_config = row_level
            .iter()
            .map(|&l| config_of(&configs, l).expect("config of own levels"))
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
            folded: [levels[0].len() == 1, levels[1].len() == 1],
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
                // One pass into a chain per level of the other domain (not a scan of every
                // configuration per level: levels x configurations).
                let o = 1 - d;
                let mut by_other = vec![Vec::new(); self.levels[o].len()];
                for (k, c) in self.configs.iter().enumerate() {
                    by_other[c[o]].push(k);
                }
                by_other
                    .into_iter()
                    .filter(|ks| !ks.is_empty())
                    .map(|mut ks| {
                        ks.sort_by_key(|&k| self.configs[k][d]);
                        let anchor = ks.iter().position(|&k| k == self.ref_config);
                        Chain { params: ks, anchor }
                    })
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
                if let Some(k) = config_of(&self.configs, want) {
                    out.push(k);
                    break;
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The layout of rows at these clocks (one core-domain component, constant power).
    fn layout_of(core: &[f64], mem: &[f64], reference: (f64, f64)) -> Layout {
        let (util, watts) = (vec![0.5; core.len()], vec![100.0; core.len()]);
        Layout::new(&PowerData {
            watts: &watts,
            core_mhz: core,
            mem_mhz: mem,
            util: &util,
            n_comp: 1,
            domain_sizes: &[1, 0],
            ref_core_mhz: reference.0,
            ref_mem_mhz: reference.1,
        })
        .unwrap()
    }

    /// Rows at clocks all different (as telemetry reads them): 2^17 levels per domain. The
    /// dense table over every pair of levels took 2^34 entries (128 GiB) and aborted the
    /// process; the configurations are the rows' distinct pairs, in the same order.
    #[test]
    fn many_distinct_clocks_need_no_table_of_every_pair() {
        let n = 1usize << 17;
        let core: Vec<f64> = (0..n).map(|i| 500.0 + 0.01 * i as f64).collect();
        let mem: Vec<f64> = (0..n).map(|i| 800.0 + 0.01 * (n - i) as f64).collect();
        let lay = layout_of(&core, &mem, (core[7], mem[7]));
        assert_eq!(lay.configs.len(), n);
        // Sorted by memory clock, which falls as the row index rises.
        assert_eq!(lay.row_config[0], n - 1);
        assert_eq!(lay.row_config[n - 1], 0);
        assert_eq!(lay.ref_config, n - 1 - 7);
        assert_eq!(lay.configs[lay.ref_config], [7, n - 1 - 7]);
        // Per configuration, every chain holds one configuration (no two share a clock).
        let chains = lay.chains(Variant::PerConfig, 0);
        assert_eq!(chains.len(), n);
        assert!(chains.iter().all(|c| c.params.len() == 1));
        // No other configuration shares a clock with the reference: step 1 uses it alone.
        assert_eq!(lay.initial_configs(), vec![lay.ref_config]);
    }

    /// The configurations, chains and initial configurations of a small grid with a
    /// missing pair, as the dense table gave them.
    #[test]
    fn configurations_of_a_grid_with_a_gap() {
        // (core, mem) rows; (900, 3000) is missing, (700, 800) measured twice.
        let rows = [
            (700.0, 800.0),
            (900.0, 800.0),
            (700.0, 3000.0),
            (700.0, 800.0),
            (1100.0, 3000.0),
            (1100.0, 800.0),
        ];
        let core: Vec<f64> = rows.iter().map(|r| r.0).collect();
        let mem: Vec<f64> = rows.iter().map(|r| r.1).collect();
        let lay = layout_of(&core, &mem, (700.0, 3000.0));
        assert_eq!(lay.configs, vec![[0, 0], [1, 0], [2, 0], [0, 1], [2, 1]]);
        assert_eq!(lay.row_config, vec![0, 1, 3, 0, 4, 2]);
        assert_eq!(lay.ref_config, 3);
        // The next higher core clock at the reference memory clock is missing: 1100 MHz.
        assert_eq!(lay.initial_configs(), vec![3, 4, 0]);
        let core_chains: Vec<Vec<usize>> = lay
            .chains(Variant::PerConfig, 0)
            .into_iter()
            .map(|c| c.params)
            .collect();
        assert_eq!(core_chains, vec![vec![0, 1, 2], vec![3, 4]]);
        let mem_chains = lay.chains(Variant::PerConfig, 1);
        let anchors: Vec<Option<usize>> = mem_chains.iter().map(|c| c.anchor).collect();
        assert_eq!(
            mem_chains
                .iter()
                .map(|c| c.params.clone())
                .collect::<Vec<_>>(),
            vec![vec![0, 3], vec![1], vec![2, 4]]
        );
        assert_eq!(anchors, vec![Some(1), None, None]);
    }
}
