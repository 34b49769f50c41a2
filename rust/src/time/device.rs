//! Device parameters of the time model and the Eq. 4 latency fit.

use crate::error::{CoreError, CoreResult};

/// Microbenchmarked parameters of one GPU. Latencies and delays are in core cycles unless
/// the name says otherwise; `dm_del` is stored as a memory-clock law because Table III was
/// measured at fc = fm, i.e. its cycles are memory cycles.
#[derive(Debug, Clone, PartialEq)]
pub struct TimeDevice {
    /// Number of SMs (#SM in Eq. 6).
    pub sm_count: f64,
    /// Hardware limit of resident warps per SM (occupancy 1.0).
    pub max_warps_per_sm: f64,
    /// Eq. 4: dm_lat = dm_lat_a * fc/fm + dm_lat_b, core cycles.
    pub dm_lat_a: f64,
    pub dm_lat_b: f64,
    /// DRAM service time per transaction in memory cycles = dm_del_a / fm + dm_del_b (fm in MHz);
    /// converted to core cycles by fc/fm (Eq. 5b).
    pub dm_del_a: f64,
    pub dm_del_b: f64,
    /// L2 hit latency and per-transaction service time (core cycles).
    pub l2_lat: f64,
    pub l2_del: f64,
    /// Shared-memory latency and per-transaction (bank-conflict replay) service time per SM.
    pub sh_lat: f64,
    pub sh_del: f64,
    /// Issue cost of one warp instruction on one SM (core cycles).
    pub inst_cycle: f64,
    /// Issue cost of one FP64 warp instruction on one SM: 32 threads over the SM's FP64
    /// units (core cycles).
    pub dp_inst_cycle: f64,
    /// Issue cost of one special-function warp instruction on one SM: 32 threads over the
    /// SM's SFU lanes (core cycles). At or below `inst_cycle` it costs the issue rate alone.
    pub sf_inst_cycle: f64,
    /// Issue cost of one integer multiply-add warp instruction on one SM: 32 threads over the
    /// SM's IMAD lanes (on GA10x and later the FMA-heavy pipe alone, half the FP32 rate). At
    /// or below `inst_cycle` it costs the issue rate alone.
    pub imad_inst_cycle: f64,
    /// Exponent of the soft maximum that overlaps the memory queue with SM work (default mode).
    pub overlap_p: f64,
    /// Latency of a dependent warp instruction: in one warp's own chain an instruction waits
    /// for its operand this long (core cycles; default mode). 0 leaves the chain at the issue
    /// cost, as the paper has it.
    pub inst_lat: f64,
    /// L2 hits and DRAM misses queue in parallel (every transaction passes an L2 slice, a miss
    /// also a DRAM channel), or, as the paper's Eq. 5b has it, one after the other.
    pub parallel_queues: bool,
    /// Consecutive rounds of resident warps overlap (warps retire and others start while they
    /// wait), so a round's exposed latency is paid once per kernel, the pipeline's fill, not
    /// once per round as Eq. 9/11/17 have it.
    pub overlapped_rounds: bool,
}

/// Result of a least-squares fit `y = a * x + b` with its coefficient of determination.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinearFit {
    pub a: f64,
    pub b: f64,
    pub r2: f64,
}

impl TimeDevice {
    /// GTX 980 preset: Eq. 4 for dm_lat; the a/fm + b fit of Table III for dm_del (R^2 0.994);
    /// Sec. IV-B for L2 (222 cycles, 1 cycle); 28-cycle Maxwell shared latency (Mei & Chu, the
    /// paper's ref. 31); 4 warp schedulers -> 0.25 cycle per warp instruction; a dependent
    /// FP32 instruction waits 6 cycles on Maxwell (Mei & Chu; Jia et al.). The settings
    /// (overlap_p = 7, the dependent latency, queues in series, the pipe rates, overlapped
    /// rounds) are the protocol's choice: nested leave-one-application-out over both GTX 980
    /// grids (`gpudvfs time cv`).
    pub fn gtx980() -> Self {
        TimeDevice {
            sm_count: 16.0,
            max_warps_per_sm: 64.0,
            dm_lat_a: 222.78,
            dm_lat_b: 277.32,
            dm_del_a: 726.12693496,
            dm_del_b: 8.28061425,
            l2_lat: 222.0,
            l2_del: 1.0,
            sh_lat: 28.0,
            sh_del: 1.0,
            inst_cycle: 0.25,
            // GM204: 4 FP64 units per SM (1/32 of the FP32 rate), so 32 / 4 cycles.
            dp_inst_cycle: 8.0,
            // GM204: 32 SFU lanes per SM (CUDA C Programming Guide, arithmetic throughput of
            // compute capability 5.x), so 32 / 32 cycles.
            sf_inst_cycle: 1.0,
            // GM204: IMAD at the FP32 rate (128 lanes), so the issue rate.
            imad_inst_cycle: 0.25,
            overlap_p: 7.0,
            inst_lat: 6.0,
            parallel_queues: false,
            overlapped_rounds: true,
        }
    }

    /// Rejects parameters the equations cannot use (checked once per batch, not per element).
    pub fn validate(&self) -> CoreResult<()> {
        let fields = [
            ("sm_count", self.sm_count),
            ("max_warps_per_sm", self.max_warps_per_sm),
            ("dm_lat_a", self.dm_lat_a),
            ("dm_lat_b", self.dm_lat_b),
            ("dm_del_a", self.dm_del_a),
            ("dm_del_b", self.dm_del_b),
            ("l2_lat", self.l2_lat),
            ("l2_del", self.l2_del),
            ("sh_lat", self.sh_lat),
            ("sh_del", self.sh_del),
            ("inst_cycle", self.inst_cycle),
            ("dp_inst_cycle", self.dp_inst_cycle),
            ("sf_inst_cycle", self.sf_inst_cycle),
            ("imad_inst_cycle", self.imad_inst_cycle),
            ("overlap_p", self.overlap_p),
            ("inst_lat", self.inst_lat),
        ];
        for (name, v) in fields {
            if !v.is_finite() || v < 0.0 {
                return Err(CoreError::Value(format!(
                    "device.{name} must be finite and >= 0, got {v}"
                )));
            }
        }
        if self.sm_count < 1.0 || self.max_warps_per_sm < 1.0 {
            return Err(CoreError::Value(
                "device.sm_count and max_warps_per_sm must be >= 1".into(),
            ));
        }
        if self.overlap_p < 1.0 {
            // Below 1 the soft maximum would exceed the sum of the parts: more than serial.
            return Err(CoreError::Value(format!(
                "device.overlap_p must be >= 1, got {}",
                self.overlap_p
            )));
        }
        Ok(())
    }
}

/// Least-squares fit of Eq. 4's form `cycles = a * fc/fm + b` from measured points.
///
/// Table II of the paper lists fc = fm in every row, which would make fc/fm constant; its
/// cycles match Eq. 4 only with the core clock fixed at 400 MHz (e.g. 222.78*400/1000+277.32
/// = 366.4), so that is how the table must be read (see the module notes).
pub fn fit_dm_lat(core_mhz: &[f64], mem_mhz: &[f64], cycles: &[f64]) -> CoreResult<LinearFit> {
    check_points(core_mhz, mem_mhz, cycles)?;
    let x: Vec<f64> = core_mhz.iter().zip(mem_mhz).map(|(c, m)| c / m).collect();
    linear_fit(&x, cycles)
}

/// Least-squares fit of the DRAM delay law `cycles_mem = a / fm + b` (Table III, fc = fm, so
/// the measured cycles are memory cycles). `cycles` must be in memory cycles.
pub fn fit_dm_del(mem_mhz: &[f64], cycles: &[f64]) -> CoreResult<LinearFit> {
    check_points(mem_mhz, mem_mhz, cycles)?;
    let x: Vec<f64> = mem_mhz.iter().map(|m| 1.0 / m).collect();
    linear_fit(&x, cycles)
}

fn check_points(a: &[f64], b: &[f64], y: &[f64]) -> CoreResult<()> {
    if a.len() != b.len() || a.len() != y.len() {
        return Err(CoreError::Shape(format!(
            "fit inputs must have equal lengths, got {}, {}, {}",
            a.len(),
            b.len(),
            y.len()
        )));
    }
    if a.len() < 2 {
        return Err(CoreError::Shape(format!(
            "fit needs at least 2 points, got {}",
            a.len()
        )));
    }
    for (i, ((&p, &q), &v)) in a.iter().zip(b).zip(y).enumerate() {
        if !(p.is_finite() && p > 0.0 && q.is_finite() && q > 0.0) {
            return Err(CoreError::Value(format!(
                "point {i}: frequencies must be finite and > 0"
            )));
        }
        if !v.is_finite() {
            return Err(CoreError::Value(format!(
                "point {i}: cycles must be finite, got {v}"
            )));
        }
    }
    Ok(())
}

fn linear_fit(x: &[f64], y: &[f64]) -> CoreResult<LinearFit> {
    let n = x.len() as f64;
    let mx = x.iter().sum::<f64>() / n;
    let my = y.iter().sum::<f64>() / n;
    // Centred sums avoid the cancellation of the textbook normal equations.
    let sxx: f64 = x.iter().map(|v| (v - mx) * (v - mx)).sum();
    let sxy: f64 = x.iter().zip(y).map(|(a, b)| (a - mx) * (b - my)).sum();
    let syy: f64 = y.iter().map(|v| (v - my) * (v - my)).sum();
    if sxx <= f64::EPSILON * mx.abs().max(1.0) * n {
        return Err(CoreError::Value(
            "fit needs at least two distinct frequency ratios (all x equal)".into(),
        ));
    }
    let a = sxy / sxx;
    let b = my - a * mx;
    let sse: f64 = x
        .iter()
        .zip(y)
        .map(|(xi, yi)| (yi - a * xi - b).powi(2))
        .sum();
    let r2 = if syy > 0.0 { 1.0 - sse / syy } else { 1.0 };
    Ok(LinearFit { a, b, r2 })
}

#[cfg(test)]
mod tests {
    use super::*;

    const FM: [f64; 7] = [400.0, 500.0, 600.0, 700.0, 800.0, 900.0, 1000.0];

    #[test]
    fn table2_read_with_core_at_400_gives_eq4() {
        let cycles = [500.0, 455.5, 425.8, 404.6, 388.7, 376.3, 366.4];
        let fit = fit_dm_lat(&[400.0; 7], &FM, &cycles).unwrap();
        assert!((fit.a - 222.78).abs() < 0.5, "a = {}", fit.a);
        assert!((fit.b - 277.32).abs() < 0.5, "b = {}", fit.b);
        assert!(fit.r2 > 0.9999);
    }

    #[test]
    fn table2_as_labelled_is_degenerate() {
        // fc = fm in every row: one ratio only, Eq. 4 cannot be identified.
        let cycles = [500.0, 455.5, 425.8, 404.6, 388.7, 376.3, 366.4];
        assert!(matches!(
            fit_dm_lat(&FM, &FM, &cycles),
            Err(CoreError::Value(_))
        ));
    }

    #[test]
    fn recovers_known_coefficients() {
        let fc = [400.0, 1000.0, 700.0, 500.0, 900.0];
        let fm = [1000.0, 400.0, 700.0, 800.0, 600.0];
        let y: Vec<f64> = fc
            .iter()
            .zip(&fm)
            .map(|(c, m)| 123.4 * c / m + 56.7)
            .collect();
        let fit = fit_dm_lat(&fc, &fm, &y).unwrap();
        assert!((fit.a - 123.4).abs() < 1e-9 && (fit.b - 56.7).abs() < 1e-9);
        assert!((fit.r2 - 1.0).abs() < 1e-12);
    }

    #[test]
    fn table3_delay_law() {
        let cycles = [10.06, 9.76, 9.54, 9.31, 9.19, 9.06, 9.0];
        let fit = fit_dm_del(&FM, &cycles).unwrap();
        let d = TimeDevice::gtx980();
        assert!((fit.a - d.dm_del_a).abs() < 1e-6 && (fit.b - d.dm_del_b).abs() < 1e-6);
        assert!(fit.r2 > 0.99);
    }

    #[test]
    fn fit_rejects_bad_input() {
        assert!(matches!(
            fit_dm_lat(&[1.0], &[1.0, 2.0], &[1.0]),
            Err(CoreError::Shape(_))
        ));
        assert!(matches!(
            fit_dm_lat(&[1.0], &[1.0], &[1.0]),
            Err(CoreError::Shape(_))
        ));
        assert!(matches!(
            fit_dm_lat(&[400.0, f64::NAN], &[400.0, 500.0], &[1.0, 2.0]),
            Err(CoreError::Value(_))
        ));
        assert!(matches!(
            fit_dm_lat(&[400.0, 500.0], &[-400.0, 500.0], &[1.0, 2.0]),
            Err(CoreError::Value(_))
        ));
        assert!(matches!(
            fit_dm_del(&[400.0, 500.0], &[1.0, f64::INFINITY]),
            Err(CoreError::Value(_))
        ));
    }

    #[test]
    fn device_validation() {
        assert!(TimeDevice::gtx980().validate().is_ok());
        let mut d = TimeDevice::gtx980();
        d.l2_lat = f64::NAN;
        assert!(d.validate().is_err());
        let mut d = TimeDevice::gtx980();
        d.overlap_p = 0.5;
        assert!(d.validate().is_err());
        let mut d = TimeDevice::gtx980();
        d.sm_count = 0.0;
        assert!(d.validate().is_err());
    }
}
