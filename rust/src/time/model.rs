//! The time-model equations and the batched predict over [kernels x configurations].
//! See the module notes (`time/mod.rs`) for what each mode reads from the paper.

use super::device::TimeDevice;
use crate::error::{CoreError, CoreResult};

/// Number of `f64` columns of one kernel row in [`predict_rows`], in the field order of
/// [`KernelInputs`].
pub const N_INPUTS: usize = 12;

/// Model inputs of one kernel, all derived from counters at the reference configuration
/// (per-warp quantities are totals over the kernel divided by the kernel's warp count).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KernelInputs {
    /// #W = #Wpb * #B, total warps launched.
    pub warps_total: f64,
    /// #Aw, warps resident per SM (achieved occupancy * max warps per SM).
    pub active_warps: f64,
    /// #Wpb; used only by the paper mode (Eq. 11, 16b, 19, 20).
    pub warps_per_block: f64,
    /// Global (L2) transactions per warp, loads + stores.
    pub gld_trans: f64,
    /// Transactions per global request (4 = coalesced 32-bit access in 32-byte sectors);
    /// default mode only, for the per-request latency chain.
    pub trans_per_req: f64,
    /// l2_hr, 0..=1.
    pub l2_hit_rate: f64,
    /// comp_inst per warp (issued warp instructions).
    pub comp_inst: f64,
    /// Shared-memory transactions per warp, loads + stores.
    pub shared_trans: f64,
    /// FP64 warp instructions per warp (part of `comp_inst`); they issue at the device's
    /// FP64 rate (default mode only; 0 where the counters do not tell).
    pub dp_inst: f64,
    /// Special-function (SFU) warp instructions per warp (part of `comp_inst`); they issue at
    /// the device's SFU rate (default mode only; 0 where the counters do not tell).
    pub sf_inst: f64,
    /// Latency in one warp's chain that no counter shows (core cycles per warp; default mode):
    /// what a calibration attributes to it, 0 otherwise.
    pub extra_chain: f64,
    /// Warp instructions per warp that only the FMA-heavy pipe runs beyond the FMA-light
    /// pipe's share (integer multiply-adds, GA10x and later; part of `comp_inst`): they issue
    /// at the device's IMAD rate (default mode only; 0 where the counters do not tell).
    pub imad_inst: f64,
}

/// Which regime a prediction fell in; stored as `u8` in [`TimePrediction::case`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum TimeCase {
    /// Eq. 9 / compute issue dominates.
    Compute = 0,
    /// Eq. 11 / the memory queue dominates.
    Memory = 1,
    /// Eq. 13 (paper) / one warp's latency chain dominates (default).
    FewWarps = 2,
    /// Eq. 15, few warps with long compute periods (paper mode only).
    FewWarpsLongCompute = 3,
    /// Eq. 17, shared memory hidden behind global traffic (paper mode only).
    SharedInfrequent = 4,
    /// Eq. 21 (paper) / shared-memory bank time dominates (default).
    SharedIntensive = 5,
}

/// Paper: the equations as printed. Default: the resolved model (see module notes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeMode {
    Paper,
    Default,
}

/// Row-major [n_kernels x n_configs] predictions.
#[derive(Debug, Clone, PartialEq)]
pub struct TimePrediction {
    pub n_kernels: usize,
    pub n_configs: usize,
    pub time_ms: Vec<f64>,
    pub case: Vec<u8>,
}

impl KernelInputs {
    /// Builds one kernel from a row of [`N_INPUTS`] values in field order.
    pub fn from_row(row: &[f64]) -> CoreResult<Self> {
        if row.len() != N_INPUTS {
            return Err(CoreError::Shape(format!(
                "kernel row needs {N_INPUTS} values, got {}",
                row.len()
            )));
        }
        Ok(KernelInputs {
            warps_total: row[0],
            active_warps: row[1],
            warps_per_block: row[2],
            gld_trans: row[3],
            trans_per_req: row[4],
            l2_hit_rate: row[5],
            comp_inst: row[6],
            shared_trans: row[7],
            dp_inst: row[8],
            sf_inst: row[9],
            extra_chain: row[10],
            imad_inst: row[11],
        })
    }

    /// Rejects NaN, infinities, negatives and impossible values for this device.
    pub fn validate(&self, dev: &TimeDevice) -> CoreResult<()> {
        let fields = [
            ("warps_total", self.warps_total),
            ("active_warps", self.active_warps),
            ("warps_per_block", self.warps_per_block),
            ("gld_trans", self.gld_trans),
            ("trans_per_req", self.trans_per_req),
            ("l2_hit_rate", self.l2_hit_rate),
            ("comp_inst", self.comp_inst),
            ("shared_trans", self.shared_trans),
            ("dp_inst", self.dp_inst),
            ("sf_inst", self.sf_inst),
            ("extra_chain", self.extra_chain),
            ("imad_inst", self.imad_inst),
        ];
        for (name, v) in fields {
            if !v.is_finite() || v < 0.0 {
                return Err(CoreError::Value(format!(
                    "{name} must be finite and >= 0, got {v}"
                )));
            }
        }
        if self.warps_total <= 0.0 || self.active_warps <= 0.0 || self.warps_per_block <= 0.0 {
            return Err(CoreError::Value(
                "warps_total, active_warps and warps_per_block must be > 0".into(),
            ));
        }
        if self.trans_per_req <= 0.0 {
            return Err(CoreError::Value("trans_per_req must be > 0".into()));
        }
        if self.l2_hit_rate > 1.0 {
            return Err(CoreError::Value(format!(
                "l2_hit_rate must be <= 1, got {}",
                self.l2_hit_rate
            )));
        }
        if self.active_warps > dev.max_warps_per_sm {
            return Err(CoreError::Value(format!(
                "active_warps {} exceeds the device's max_warps_per_sm {}",
                self.active_warps, dev.max_warps_per_sm
            )));
        }
        Ok(())
    }

    /// One warp's issue time (core cycles): every instruction at the issue rate, FP64,
    /// special-function and FMA-heavy-only ones at their pipe's rate (resolution 12).
    pub fn issue_cycles(&self, dev: &TimeDevice) -> f64 {
        self.comp_inst * dev.inst_cycle
            + self.dp_inst * (dev.dp_inst_cycle - dev.inst_cycle).max(0.0)
            + self.sf_inst * (dev.sf_inst_cycle - dev.inst_cycle).max(0.0)
            + self.imad_inst * (dev.imad_inst_cycle - dev.inst_cycle).max(0.0)
    }

    /// The share of one warp's core-clock work (issue, shared-memory banks, L2 hits at
    /// `l2_del`) in that plus its DRAM misses' delay at memory clock `mem_mhz` (memory
    /// cycles): the split `s` of the two-term baseline T = T_ref (s fc_ref/fc + (1-s) fm_ref/fm)
    /// that the model is measured against. 1 for a kernel with no work at all.
    pub fn core_share(&self, dev: &TimeDevice, mem_mhz: f64) -> f64 {
        let hits = self.gld_trans * self.l2_hit_rate;
        let core = self.issue_cycles(dev) + self.shared_trans * dev.sh_del + hits * dev.l2_del;
        let dram = (self.gld_trans - hits) * (dev.dm_del_a / mem_mhz + dev.dm_del_b);
        let total = core + dram;
        if total == 0.0 {
            1.0
        } else {
            core / total
        }
    }
}

/// [`KernelInputs::validate`], the message naming the kernel's index `i`.
fn validate_nth(i: usize, k: &KernelInputs, dev: &TimeDevice) -> CoreResult<()> {
    k.validate(dev).map_err(|e| match e {
        CoreError::Value(m) => CoreError::Value(format!("kernel {i}: {m}")),
        other => other,
    })
}

/// [`KernelInputs::core_share`] of each kernel of a row-major [n_kernels x N_INPUTS] matrix
/// at the reference memory clock `mem_mhz`.
pub fn core_shares(inputs: &[f64], dev: &TimeDevice, mem_mhz: f64) -> CoreResult<Vec<f64>> {
    dev.validate()?;
    if !(mem_mhz.is_finite() && mem_mhz > 0.0) {
        return Err(CoreError::Value(format!(
            "mem_mhz must be finite and > 0, got {mem_mhz}"
        )));
    }
    if inputs.len() % N_INPUTS != 0 {
        return Err(CoreError::Shape(format!(
            "inputs has {} values, not a multiple of {N_INPUTS}",
            inputs.len()
        )));
    }
    inputs
        .chunks(N_INPUTS)
        .enumerate()
        .map(|(i, row)| {
            let k = KernelInputs::from_row(row)?;
            validate_nth(i, &k, dev)?;
            Ok(k.core_share(dev, mem_mhz))
        })
        .collect()
}

/// Clock-dependent quantities of one configuration, shared by every kernel.
#[derive(Clone, Copy)]
struct Clock {
    r: f64,
    dm_lat: f64,
    dm_del: f64,
    fc_khz: f64,
    /// 1 / fc_khz: a multiply instead of a divide in the hot loop.
    inv_fc_khz: f64,
}

fn clocks(dev: &TimeDevice, core_mhz: &[f64], mem_mhz: &[f64]) -> CoreResult<Vec<Clock>> {
    if core_mhz.len() != mem_mhz.len() {
        return Err(CoreError::Shape(format!(
            "core_mhz has {} entries but mem_mhz has {}",
            core_mhz.len(),
            mem_mhz.len()
        )));
    }
    core_mhz
        .iter()
        .zip(mem_mhz)
        .enumerate()
        .map(|(j, (&fc, &fm))| {
            if !(fc.is_finite() && fc > 0.0 && fm.is_finite() && fm > 0.0) {
                return Err(CoreError::Value(format!(
                    "configuration {j}: core_mhz and mem_mhz must be finite and > 0, got ({fc}, {fm})"
                )));
            }
            let r = fc / fm;
            Ok(Clock {
                r,
                dm_lat: dev.dm_lat_a * r + dev.dm_lat_b,
                dm_del: (dev.dm_del_a / fm + dev.dm_del_b) * r,
                fc_khz: fc * 1e3,
                inv_fc_khz: 1.0 / (fc * 1e3),
            })
        })
        .collect()
}

/// Predicts kernel time (ms) and case for every kernel x configuration pair.
/// `threads` = 0 picks by problem size (`crate::parallel`), more than
/// `parallel::MAX_THREADS` counts as that many; work is split by kernels.
pub fn predict(
    kernels: &[KernelInputs],
    core_mhz: &[f64],
    mem_mhz: &[f64],
    dev: &TimeDevice,
    mode: TimeMode,
    threads: usize,
) -> CoreResult<TimePrediction> {
    dev.validate()?;
    for (i, k) in kernels.iter().enumerate() {
        validate_nth(i, k, dev)?;
    }
    let clk = clocks(dev, core_mhz, mem_mhz)?;
    let (nk, nc) = (kernels.len(), clk.len());
    // Sizes from the caller: allocated fallibly (an error, not an abort of the process).
    let what = format!("the predictions of {nk} kernels x {nc} clock pairs");
    let cells = crate::alloc::product(&[nk, nc], &what)?;
    let mut time_ms = crate::alloc::filled(cells, 0.0, &what)?;
    let mut case = crate::alloc::filled(cells, 0u8, &what)?;
    if nk == 0 || nc == 0 {
        return Ok(TimePrediction {
            n_kernels: nk,
            n_configs: nc,
            time_ms,
            case,
        });
    }
    let threads = if threads == 0 {
        crate::parallel::threads_for(cells)
    } else {
        threads.min(crate::parallel::MAX_THREADS)
    };
    let per = nk.div_ceil(threads.min(nk));
    let parts = kernels
        .chunks(per)
        .zip(time_ms.chunks_mut(per * nc))
        .zip(case.chunks_mut(per * nc));
    crate::parallel::for_each_part(parts, |((ks, ts), cs)| {
        for ((k, trow), crow) in ks.iter().zip(ts.chunks_mut(nc)).zip(cs.chunks_mut(nc)) {
            match mode {
                TimeMode::Default => default_row(k, dev, &clk, trow, crow),
                TimeMode::Paper => paper_row(k, dev, &clk, trow, crow),
            }
        }
    });
    Ok(TimePrediction {
        n_kernels: nk,
        n_configs: nc,
        time_ms,
        case,
    })
}

/// [`predict`] on a row-major [n_kernels x N_INPUTS] matrix (the layout the bindings pass).
pub fn predict_rows(
    inputs: &[f64],
    n_kernels: usize,
    core_mhz: &[f64],
    mem_mhz: &[f64],
    dev: &TimeDevice,
    mode: TimeMode,
    threads: usize,
) -> CoreResult<TimePrediction> {
    if n_kernels.checked_mul(N_INPUTS) != Some(inputs.len()) {
        return Err(CoreError::Shape(format!(
            "inputs has {} values, expected n_kernels * {N_INPUTS} = {n_kernels} * {N_INPUTS}",
            inputs.len(),
        )));
    }
    let kernels = inputs
        .chunks(N_INPUTS)
        .map(KernelInputs::from_row)
        .collect::<CoreResult<Vec<_>>>()?;
    predict(&kernels, core_mhz, mem_mhz, dev, mode, threads)
}

/// x^n by squaring, inlined: `powi` is a library call per element on x86-64.
#[inline(always)]
fn ipow(mut x: f64, mut n: u32) -> f64 {
    let mut acc = 1.0;
    while n > 0 {
        if n & 1 == 1 {
            acc *= x;
        }
        x *= x;
        n >>= 1;
    }
    acc
}

/// How the soft maximum of the default mode raises to its exponent p and takes the p-th
/// root: integer exponents (the preset's 7) as a compile-time constant, so the row loop has
/// no calls and no branches and vectorizes; other exponents through powf.
trait Overlap: Copy {
    fn pow(self, x: f64) -> f64;
    /// s^(1/p) for s in [1, 4] (the largest of four normalized terms is exactly 1).
    fn root(self, s: f64) -> f64;
}

#[derive(Clone, Copy)]
struct IntExponent<const N: u32>;

impl<const N: u32> Overlap for IntExponent<N> {
    #[inline(always)]
    fn pow(self, x: f64) -> f64 {
        ipow(x, N)
    }

    /// A Pade start 1 + u / (n + (n-1) u / 2) (relative error < 8e-2 on [1, 4] for n <= 8) and three
    /// Halley steps for y^n = s, y <- y ((n-1) y^n + (n+1) s) / ((n+1) y^n + (n-1) s),
    /// which cube the error (< 1e-15 after three): no exp/ln in the loop.
    #[inline(always)]
    fn root(self, s: f64) -> f64 {
        let n = N as f64;
        let u = s - 1.0;
        let mut y = 1.0 + u / (n + (n - 1.0) * 0.5 * u);
        for _ in 0..3 {
            let yn = ipow(y, N);
            y *= ((n - 1.0) * yn + (n + 1.0) * s) / ((n + 1.0) * yn + (n - 1.0) * s);
        }
        y
    }
}

#[derive(Clone, Copy)]
struct RealExponent {
    p: f64,
    inv_p: f64,
}

impl Overlap for RealExponent {
    #[inline(always)]
    fn pow(self, x: f64) -> f64 {
        x.powf(self.p)
    }

    #[inline(always)]
    fn root(self, s: f64) -> f64 {
        s.powf(self.inv_p)
    }
}

/// Soft maximum sum(x_i^p)^(1/p), scaled by the largest term so no power overflows.
#[inline(always)]
fn soft_max4<O: Overlap>(a: f64, b: f64, c: f64, d: f64, o: O) -> f64 {
    let top = a.max(b).max(c).max(d);
    let inv = 1.0 / top;
    let r = top * o.root(o.pow(a * inv) + o.pow(b * inv) + o.pow(c * inv) + o.pow(d * inv));
    if top > 0.0 {
        r
    } else {
        0.0
    }
}

fn default_row(k: &KernelInputs, dev: &TimeDevice, clk: &[Clock], t: &mut [f64], c: &mut [u8]) {
    let p = dev.overlap_p;
    // Monomorphized rows for the integer exponents worth a constant; powf for the rest.
    match p {
        1.0 => default_row_with(k, dev, clk, t, c, IntExponent::<1>),
        2.0 => default_row_with(k, dev, clk, t, c, IntExponent::<2>),
        3.0 => default_row_with(k, dev, clk, t, c, IntExponent::<3>),
        4.0 => default_row_with(k, dev, clk, t, c, IntExponent::<4>),
        5.0 => default_row_with(k, dev, clk, t, c, IntExponent::<5>),
        6.0 => default_row_with(k, dev, clk, t, c, IntExponent::<6>),
        7.0 => default_row_with(k, dev, clk, t, c, IntExponent::<7>),
        8.0 => default_row_with(k, dev, clk, t, c, IntExponent::<8>),
        _ => default_row_with(k, dev, clk, t, c, RealExponent { p, inv_p: 1.0 / p }),
    }
}

fn default_row_with<O: Overlap>(
    k: &KernelInputs,
    dev: &TimeDevice,
    clk: &[Clock],
    t: &mut [f64],
    c: &mut [u8],
    o: O,
) {
    let hr = k.l2_hit_rate;
    let miss = 1.0 - hr;
    let aw_ng = k.active_warps * k.gld_trans;
    let issue = k.issue_cycles(dev);
    let comp = k.active_warps * issue;
    let shm = k.active_warps * k.shared_trans * dev.sh_del;
    let cs = comp + shm;
    let nreq = k.gld_trans / k.trans_per_req;
    let chain_sh = k.shared_trans / k.trans_per_req * dev.sh_lat;
    // A warp's own instructions: each waits for the one before it (inst_lat), at least issues.
    let chain_ci = issue + k.comp_inst * (dev.inst_lat - dev.inst_cycle).max(0.0) + k.extra_chain;
    let rounds = k.warps_total / (k.active_warps * dev.sm_count);
    let l2_lat = hr * dev.l2_lat;
    // In parallel, L2 slices and DRAM channels are separate queues: every transaction passes
    // the L2 (l2_del), only misses the DRAM (resolution 13). In series (Eq. 5b) one queue
    // serves hits at the L2 delay and misses at the DRAM delay.
    let (l2_queue, hits_in_series) = if dev.parallel_queues {
        (aw_ng * dev.l2_del, 0.0)
    } else {
        (0.0, aw_ng * hr * dev.l2_del)
    };
    let dram_ng = aw_ng * miss;
    let sm_case = if shm > comp {
        TimeCase::SharedIntensive
    } else {
        TimeCase::Compute
    } as u8;
    for ((cl, tj), cj) in clk.iter().zip(t.iter_mut()).zip(c.iter_mut()) {
        let lat = l2_lat + miss * cl.dm_lat;
        let dram = dram_ng * cl.dm_del + hits_in_series;
        let mem = l2_queue.max(dram);
        let chain = nreq * lat + chain_sh + chain_ci;
        let soft = soft_max4(l2_queue, dram, cs, chain, o);
        // Overlapped rounds (resolution 17): warps retire and others start while the rest
        // wait, so only the kernel's first round leaves its latency bare.
        let exposed = if dev.overlapped_rounds {
            lat
        } else {
            lat * rounds
        };
        *tj = (soft * rounds + exposed) * cl.inv_fc_khz;
        // Selects, not branches: the label follows the largest term.
        let mem_or_sm = if mem >= cs {
            TimeCase::Memory as u8
        } else {
            sm_case
        };
        *cj = if chain >= mem.max(cs) {
            TimeCase::FewWarps as u8
        } else {
            mem_or_sm
        };
    }
}

fn paper_row(k: &KernelInputs, dev: &TimeDevice, clk: &[Clock], t: &mut [f64], c: &mut [u8]) {
    let (hr, aw, wpb) = (k.l2_hit_rate, k.active_warps, k.warps_per_block);
    let (ng, ni, ns) = (k.gld_trans, k.comp_inst, k.shared_trans);
    let (ic, shl) = (dev.inst_cycle, dev.sh_lat);
    let rounds = k.warps_total / (aw * dev.sm_count);
    let avr = if ng > 0.0 { ic * ni / ng } else { 0.0 };
    let half = ng / 2.0;
    for ((cl, tj), cj) in clk.iter().zip(t.iter_mut()).zip(c.iter_mut()) {
        let lat = hr * dev.l2_lat + (1.0 - hr) * cl.dm_lat * cl.r;
        let dl = hr * dev.l2_del + (1.0 - hr) * cl.dm_del;
        let t9 = ic * ni * aw + lat;
        let (ta, case) = if ng == 0.0 {
            // Eq. 7a undefined: avr_comp -> infinity satisfies Eq. 8a/8b.
            (t9, TimeCase::Compute)
        } else if ns > 0.0 {
            if avr <= dl && avr + shl <= dl * (aw - wpb) {
                (avr + lat + dl * aw * ng, TimeCase::SharedInfrequent)
            } else {
                let t1 = 2.0 * avr + dl * half * aw + lat + shl;
                let t2 = avr * (wpb - 1.0) + (avr + shl) * ns;
                let t3 = 2.0 * avr + dl * half * wpb + lat + shl;
                (t1 + t2 + t3, TimeCase::SharedIntensive)
            }
        } else if avr >= dl && avr * (aw - 1.0) >= lat {
            (t9, TimeCase::Compute)
        } else if avr <= dl && avr + lat >= dl * (aw - 1.0) {
            (lat + avr + dl * wpb * ng, TimeCase::Memory)
        } else if avr <= dl {
            (
                dl * aw + lat + avr + (avr + lat) * (ng - 1.0),
                TimeCase::FewWarps,
            )
        } else {
            (
                avr * (aw - 1.0) + (avr + lat) * ng,
                TimeCase::FewWarpsLongCompute,
            )
        };
        *tj = ta * rounds / cl.fc_khz;
        *cj = case as u8;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn va() -> KernelInputs {
        // vectorAdd's 700/700 counters mapped as in the module notes.
        KernelInputs {
            warps_total: 32768.0,
            active_warps: 0.960582 * 64.0,
            warps_per_block: 8.0,
            gld_trans: 12.14,
            trans_per_req: 4.0,
            l2_hit_rate: 0.028,
            comp_inst: 21.05,
            shared_trans: 0.0,
            dp_inst: 0.0,
            sf_inst: 0.0,
            extra_chain: 0.0,
            imad_inst: 0.0,
        }
    }

    /// Deterministic pseudo-random kernels covering all regimes (xorshift, no crates).
    fn kernels(n: usize) -> Vec<KernelInputs> {
        let mut s: u64 = 0x9E3779B97F4A7C15;
        let mut u = move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 11) as f64 / (1u64 << 53) as f64
        };
        (0..n)
            .map(|_| KernelInputs {
                warps_total: 100.0 + 1e5 * u(),
                active_warps: 1.0 + 63.0 * u(),
                warps_per_block: 1.0 + 31.0 * u(),
                gld_trans: if u() < 0.05 {
                    0.0
                } else {
                    10f64.powf(4.0 * u() - 0.5)
                },
                trans_per_req: 1.0 + 31.0 * u(),
                l2_hit_rate: u(),
                comp_inst: 10f64.powf(5.0 * u()),
                shared_trans: if u() < 0.5 {
                    0.0
                } else {
                    10f64.powf(4.0 * u())
                },
                dp_inst: if u() < 0.7 {
                    0.0
                } else {
                    10f64.powf(3.0 * u())
                },
                sf_inst: if u() < 0.7 {
                    0.0
                } else {
                    10f64.powf(3.0 * u())
                },
                extra_chain: if u() < 0.7 {
                    0.0
                } else {
                    10f64.powf(5.0 * u())
                },
                // Not drawn: the sequence of the other inputs stays the one the tests were
                // written against (the IMAD term has its own test).
                imad_inst: 0.0,
            })
            .collect()
    }

    fn grid() -> (Vec<f64>, Vec<f64>) {
        let f: Vec<f64> = (4..=10).map(|i| 100.0 * i as f64).collect();
        let mut c = vec![];
        let mut m = vec![];
        for &a in &f {
            for &b in &f {
                c.push(a);
                m.push(b);
            }
        }
        (c, m)
    }

    #[test]
    fn positive_and_finite() {
        let (c, m) = grid();
        for mode in [TimeMode::Default, TimeMode::Paper] {
            let p = predict(&kernels(300), &c, &m, &TimeDevice::gtx980(), mode, 2).unwrap();
            assert!(
                p.time_ms.iter().all(|t| t.is_finite() && *t > 0.0),
                "{mode:?}"
            );
            assert!(p.case.iter().all(|&k| k <= 5));
        }
    }

    #[test]
    fn default_never_slower_at_higher_clocks() {
        // Every term is non-increasing in each clock once divided by fc (module notes), so the
        // default mode is monotone; checked on a fine grid for many kernels.
        let f: Vec<f64> = (0..=60).map(|i| 400.0 + 10.0 * i as f64).collect();
        let dev = TimeDevice::gtx980();
        for k in kernels(200) {
            for &fixed in &[400.0, 700.0, 1000.0] {
                let core =
                    predict(&[k], &f, &vec![fixed; f.len()], &dev, TimeMode::Default, 1).unwrap();
                let mem =
                    predict(&[k], &vec![fixed; f.len()], &f, &dev, TimeMode::Default, 1).unwrap();
                for w in core.time_ms.windows(2).chain(mem.time_ms.windows(2)) {
                    assert!(w[1] <= w[0] * (1.0 + 1e-12), "{k:?} {w:?}");
                }
            }
        }
    }

    #[test]
    fn paper_mode_exception_is_the_double_ratio() {
        // Eq. 5a as printed applies fc/fm to dm_lat twice, so a latency-bound kernel gets
        // slower when only the core clock rises (documented exception of the paper mode).
        let k = KernelInputs {
            active_warps: 2.0,
            comp_inst: 1.0,
            ..va()
        };
        let dev = TimeDevice::gtx980();
        let p = predict(
            &[k],
            &[700.0, 1000.0],
            &[400.0, 400.0],
            &dev,
            TimeMode::Paper,
            1,
        )
        .unwrap();
        assert_eq!(p.case[0], TimeCase::Memory as u8);
        assert!(p.time_ms[1] > p.time_ms[0]);
        let d = predict(
            &[k],
            &[700.0, 1000.0],
            &[400.0, 400.0],
            &dev,
            TimeMode::Default,
            1,
        )
        .unwrap();
        assert!(d.time_ms[1] <= d.time_ms[0]);
    }

    #[test]
    fn blocks_add_time_per_round() {
        // Rounds one after another (and Paper mode): three times the blocks, three times the
        // time. Overlapped (the preset): the exposed latency is paid once, so the time is
        // affine in the blocks, each added batch costing the same.
        let (c, m) = grid();
        let serial = TimeDevice {
            overlapped_rounds: false,
            ..TimeDevice::gtx980()
        };
        let ks = kernels(50);
        let times = |n: f64, dev: &TimeDevice, mode: TimeMode| {
            let scaled: Vec<KernelInputs> = ks
                .iter()
                .map(|k| KernelInputs {
                    warps_total: n * k.warps_total,
                    ..*k
                })
                .collect();
            predict(&scaled, &c, &m, dev, mode, 2).unwrap().time_ms
        };
        for (dev, mode) in [
            (&serial, TimeMode::Default),
            (&TimeDevice::gtx980(), TimeMode::Paper),
        ] {
            for (x, y) in times(1.0, dev, mode).iter().zip(&times(3.0, dev, mode)) {
                assert!((y / x - 3.0).abs() < 1e-12);
            }
        }
        let dev = TimeDevice::gtx980();
        assert!(dev.overlapped_rounds);
        let (t1, t3, t5) = (
            times(1.0, &dev, TimeMode::Default),
            times(3.0, &dev, TimeMode::Default),
            times(5.0, &dev, TimeMode::Default),
        );
        for ((a, b), c) in t1.iter().zip(&t3).zip(&t5) {
            assert!(b / a < 3.0);
            assert!(((c - b) / (b - a) - 1.0).abs() < 1e-9);
        }
    }

    #[test]
    fn memory_bound_kernel_follows_table3() {
        // vectorAdd is memory-bound: time ratio 400 vs 700 MHz memory ~ (10.1/400)/(9.32/700).
        let dev = TimeDevice::gtx980();
        let p = predict(
            &[va()],
            &[700.0, 700.0],
            &[700.0, 400.0],
            &dev,
            TimeMode::Default,
            1,
        )
        .unwrap();
        assert_eq!(p.case[0], TimeCase::Memory as u8);
        let ratio = p.time_ms[1] / p.time_ms[0];
        assert!((ratio - 1.87).abs() < 0.05, "ratio {ratio}");
        // Absolute level: measured 0.33318 ms at 700/700.
        assert!(
            (p.time_ms[0] / 0.33318 - 1.0).abs() < 0.1,
            "{}",
            p.time_ms[0]
        );
    }

    #[test]
    fn l2_hits_queue_beside_dram_misses_or_before_them() {
        // Doubling the traffic as L2 hits (same DRAM misses): in parallel queues the L2 time
        // drains beside the DRAM time, which barely moves; in series (Eq. 5b) it adds.
        let hits = KernelInputs {
            gld_trans: 2.0 * va().gld_trans,
            l2_hit_rate: 0.5 + 0.5 * va().l2_hit_rate,
            ..va()
        };
        let run = |parallel_queues: bool| {
            let dev = TimeDevice {
                parallel_queues,
                ..TimeDevice::gtx980()
            };
            let p = predict(
                &[va(), hits],
                &[700.0],
                &[700.0],
                &dev,
                TimeMode::Default,
                1,
            )
            .unwrap();
            assert_eq!(p.case, [TimeCase::Memory as u8; 2]);
            p.time_ms[1] / p.time_ms[0]
        };
        // One after the other, the L2 time (1 cycle per transaction) would add a fifth to the
        // DRAM time (9.3 cycles per miss at 700/700).
        let dev = TimeDevice::gtx980();
        let serial =
            1.0 + hits.gld_trans * dev.l2_del / (va().gld_trans * (1.0 - va().l2_hit_rate) * 9.32);
        assert!(serial > 1.2);
        assert!((run(true) - 1.0).abs() < 0.03, "{}", run(true));
        assert!(run(false) > 1.05, "{}", run(false));
    }

    #[test]
    fn a_warps_own_chain_scales_with_the_core_clock() {
        // Few warps with long dependent instruction streams: the chain (comp_inst x inst_lat,
        // plus any extra chain) dominates and is in core cycles, so time goes as 1/fc; with
        // the dependent latency off, the same kernel is issue-bound and much faster.
        let k = KernelInputs {
            active_warps: 2.0,
            comp_inst: 5000.0,
            ..va()
        };
        let dev = TimeDevice::gtx980();
        let run = |k: KernelInputs, dev: &TimeDevice| {
            predict(
                &[k],
                &[500.0, 1000.0],
                &[700.0, 700.0],
                dev,
                TimeMode::Default,
                1,
            )
            .unwrap()
        };
        let p = run(k, &dev);
        assert_eq!(p.case, [TimeCase::FewWarps as u8; 2]);
        // Nearly 2: the DRAM part of the per-request latency is in memory cycles.
        assert!(
            (p.time_ms[0] / p.time_ms[1] - 2.0).abs() < 0.05,
            "{:?}",
            p.time_ms
        );
        let off = TimeDevice {
            inst_lat: 0.0,
            ..dev.clone()
        };
        assert!(run(k, &off).time_ms[0] < 0.2 * p.time_ms[0]);
        let extra = run(
            KernelInputs {
                extra_chain: 5000.0 * 6.0,
                ..k
            },
            &dev,
        );
        let ratio = extra.time_ms[0] / p.time_ms[0];
        assert!(ratio > 1.9 && ratio < 2.0, "{ratio}"); // the chain's request latencies stay
    }

    /// Times at three equal (core, memory) pairs of 500, 700 and 1000 MHz.
    fn times_at_three_pairs(k: KernelInputs, d: &TimeDevice) -> Vec<f64> {
        let clocks = [500.0, 700.0, 1000.0];
        predict(&[k], &clocks, &clocks, d, TimeMode::Default, 1)
            .unwrap()
            .time_ms
    }

    #[test]
    fn pipe_limited_instructions_cost_their_pipe_rate() {
        // n SFU instructions at sf_inst_cycle cost what n FP64 ones do at that FP64 rate, and n
        // FMA-heavy-only ones at imad_inst_cycle what n SFU ones do at that rate; at the issue
        // rate (the GTX 980's IMAD runs as fast as FP32) they cost nothing more.
        let run = times_at_three_pairs;
        let dev = TimeDevice::gtx980();
        let as_dp = TimeDevice {
            dp_inst_cycle: dev.sf_inst_cycle,
            ..dev.clone()
        };
        let sf_at_issue = TimeDevice {
            sf_inst_cycle: dev.inst_cycle,
            ..dev.clone()
        };
        let imad_half_rate = TimeDevice {
            imad_inst_cycle: 2.0 * dev.inst_cycle,
            ..dev.clone()
        };
        let sf_as_imad = TimeDevice {
            sf_inst_cycle: imad_half_rate.imad_inst_cycle,
            ..dev.clone()
        };
        for k in kernels(40) {
            let plain = KernelInputs {
                dp_inst: 0.0,
                sf_inst: 0.0,
                ..k
            };
            let with = |f: fn(&mut KernelInputs)| {
                let mut k = plain;
                f(&mut k);
                k
            };
            let sf7 = with(|k| k.sf_inst = 7.0);
            let dp7 = with(|k| k.dp_inst = 7.0);
            let imad7 = with(|k| k.imad_inst = 7.0);
            let sf = run(sf7, &dev);
            assert_eq!(sf, run(dp7, &as_dp));
            assert_eq!(run(sf7, &sf_at_issue), run(plain, &dev));
            assert!(sf.iter().zip(run(plain, &dev)).all(|(a, b)| *a >= b));
            assert_eq!(run(imad7, &imad_half_rate), run(sf7, &sf_as_imad));
            assert_eq!(run(imad7, &dev), run(plain, &dev));
        }
    }

    #[test]
    fn integer_root_matches_powf() {
        fn check<const N: u32>() {
            for i in 0..=1000 {
                let s = 1.0 + 3.0 * i as f64 / 1000.0;
                let want = s.powf(1.0 / N as f64);
                let got = IntExponent::<N>.root(s);
                assert!(
                    (got - want).abs() <= 4.0 * f64::EPSILON * want,
                    "n {N} s {s}: {got} vs {want}"
                );
            }
        }
        check::<1>();
        check::<2>();
        check::<3>();
        check::<4>();
        check::<5>();
        check::<6>();
        check::<7>();
        check::<8>();
    }

    #[test]
    fn threads_do_not_change_results() {
        let (c, m) = grid();
        let dev = TimeDevice::gtx980();
        let ks = kernels(37);
        let a = predict(&ks, &c, &m, &dev, TimeMode::Default, 1).unwrap();
        let b = predict(&ks, &c, &m, &dev, TimeMode::Default, 5).unwrap();
        assert_eq!(a, b);
        let z = predict(&[], &c, &m, &dev, TimeMode::Default, 0).unwrap();
        assert!(z.time_ms.is_empty());
    }

    #[test]
    fn bad_input_is_an_error() {
        let dev = TimeDevice::gtx980();
        let ok = va();
        let run = |k: KernelInputs| predict(&[k], &[700.0], &[700.0], &dev, TimeMode::Default, 1);
        assert!(run(ok).is_ok());
        for bad in [
            KernelInputs {
                warps_total: f64::NAN,
                ..ok
            },
            KernelInputs {
                gld_trans: -1.0,
                ..ok
            },
            KernelInputs {
                comp_inst: f64::INFINITY,
                ..ok
            },
            KernelInputs {
                l2_hit_rate: 1.5,
                ..ok
            },
            KernelInputs {
                active_warps: 0.0,
                ..ok
            },
            KernelInputs {
                active_warps: 65.0,
                ..ok
            },
            KernelInputs {
                trans_per_req: 0.0,
                ..ok
            },
            KernelInputs {
                extra_chain: -1.0,
                ..ok
            },
            KernelInputs {
                sf_inst: f64::NAN,
                ..ok
            },
            KernelInputs {
                imad_inst: -1.0,
                ..ok
            },
        ] {
            assert!(matches!(run(bad), Err(CoreError::Value(_))), "{bad:?}");
        }
        assert!(matches!(
            predict(&[ok], &[700.0, 800.0], &[700.0], &dev, TimeMode::Default, 1),
            Err(CoreError::Shape(_))
        ));
        assert!(matches!(
            predict(&[ok], &[f64::NAN], &[700.0], &dev, TimeMode::Paper, 1),
            Err(CoreError::Value(_))
        ));
        assert!(matches!(
            predict(&[ok], &[700.0], &[-700.0], &dev, TimeMode::Paper, 1),
            Err(CoreError::Value(_))
        ));
        assert!(matches!(
            predict_rows(&[1.0; 8], 1, &[700.0], &[700.0], &dev, TimeMode::Default, 1),
            Err(CoreError::Shape(_))
        ));
        let row = [
            32768.0, 61.0, 8.0, 12.0, 4.0, 0.03, 21.0, 0.0, 0.0, 0.0, 0.0, 0.0,
        ];
        assert!(predict_rows(&row, 1, &[700.0], &[700.0], &dev, TimeMode::Default, 1).is_ok());
    }

    #[test]
    fn core_share_splits_core_work_from_dram_delay() {
        // vectorAdd by hand: issue 21.05 x 0.25 and 2.8% L2 hits at l2_del against the misses'
        // delay law at 700 MHz; all hits or no transactions leave the core alone.
        let dev = TimeDevice::gtx980();
        let k = va();
        let hits = k.gld_trans * k.l2_hit_rate;
        let core = k.comp_inst * dev.inst_cycle + hits * dev.l2_del;
        let dram = (k.gld_trans - hits) * (dev.dm_del_a / 700.0 + dev.dm_del_b);
        assert!((k.core_share(&dev, 700.0) - core / (core + dram)).abs() < 1e-15);
        let all_hits = KernelInputs {
            l2_hit_rate: 1.0,
            ..k
        };
        assert_eq!(all_hits.core_share(&dev, 700.0), 1.0);
        let idle = KernelInputs {
            gld_trans: 0.0,
            comp_inst: 0.0,
            ..k
        };
        assert_eq!(idle.core_share(&dev, 700.0), 1.0);
        // In [0, 1] for every kernel; a faster memory clock shortens each miss's delay in
        // memory cycles (the efficiency rise of the delay law), so the core's share grows.
        for k in kernels(200) {
            let (lo, hi) = (k.core_share(&dev, 500.0), k.core_share(&dev, 1000.0));
            assert!((0.0..=1.0).contains(&lo) && lo <= hi && hi <= 1.0, "{k:?}");
        }
    }

    #[test]
    fn core_shares_read_rows_and_refuse_bad_input() {
        let dev = TimeDevice::gtx980();
        let row = [
            32768.0, 61.0, 8.0, 12.0, 4.0, 0.03, 21.0, 0.0, 0.0, 0.0, 0.0, 0.0,
        ];
        let both: Vec<f64> = row.iter().chain(row.iter()).copied().collect();
        let s = core_shares(&both, &dev, 700.0).unwrap();
        let k = KernelInputs::from_row(&row).unwrap();
        assert_eq!(s, vec![k.core_share(&dev, 700.0); 2]);
        assert!(core_shares(&[], &dev, 700.0).unwrap().is_empty());
        assert!(matches!(
            core_shares(&row[..8], &dev, 700.0),
            Err(CoreError::Shape(_))
        ));
        for mem in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(matches!(
                core_shares(&row, &dev, mem),
                Err(CoreError::Value(_))
            ));
        }
        let mut bad = both.clone();
        bad[N_INPUTS + 5] = 1.5; // the second kernel's L2 hit rate
        match core_shares(&bad, &dev, 700.0) {
            Err(CoreError::Value(m)) => assert!(m.starts_with("kernel 1: l2_hit_rate"), "{m}"),
            other => panic!("{other:?}"),
        }
    }
}
