//! The covariance-form RLS update shared by `Rls` and `RlsBank`.
//!
//! Model: y_k = h_k^T a + e_k. Gupta et al. Eq. 8-10 with a forgetting factor lambda:
//!   s = h^T P h,  g = P h / (lambda + s),  a += g (y - h^T a),
//!   exponential forgetting: P = (P - P h h^T P / (lambda + s)) / lambda
//!   directional forgetting: P = P - P h h^T P * (s + lambda - 1) / (s (lambda + s))
//! No matrix is inverted; the only division is by the scalar lambda + s.
//!
//! Storage: P is kept as its packed upper triangle (row by row, n(n+1)/2 values), so it is
//! symmetric by construction (no drift between P_ij and P_ji, the classic cause of RLS
//! divergence) and a bank of streams moves 40% fewer bytes for n = 4.
//!
//! Guards against covariance wind-up (textbook exponential forgetting divides P by lambda
//! on every step, so with lambda < 1 and no excitation P grows as lambda^-k):
//!
//! 1. Dead zone: a step whose prior predictive variance s = h^T P h is <= `min_excitation`
//!    (a zero feature vector in particular: nothing changed, no information) changes nothing,
//!    neither P nor a. The estimate is then held instead of being forgotten while idle.
//! 2. Directional forgetting (the default): forget only along the direction that the new
//!    sample informs (Kulhavy & Karny 1984). In information form the new R is
//!    R - (1-lambda) h h^T / s plus h h^T, which is >= lambda R, so P stays positive
//!    definite and directions the data never excite
//!    (collinear features) keep their covariance instead of growing without bound.
//! 3. Trace bound: if trace(P) would exceed `trace_max` (default trace(P0) = n * delta: never
//!    more uncertain than the prior), P is scaled down to it. This catches what 1 and 2 leave:
//!    excitation that is nonzero but vanishing, and exponential forgetting with collinear
//!    features. Scaling by a positive number keeps P symmetric positive definite.
//!
//! A step whose result would not be finite, or whose covariance would lose a positive
//! diagonal (numerical breakdown), is rejected and the state is left untouched.

use crate::error::{CoreError, CoreResult};

/// Largest feature count with a stack-allocated, fully unrolled kernel.
pub(crate) const MAX_FIXED: usize = 8;
const MAX_FIXED_PACKED: usize = MAX_FIXED * (MAX_FIXED + 1) / 2;
/// Feature counts above this are refused: the covariance is O(n^2) per stream and the model
/// is meant for a handful of Lasso-selected features.
pub const MAX_FEATURES: usize = 4096;

/// How past information is discounted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Forgetting {
    /// Textbook RLS: all of P is divided by lambda on every informative step.
    Exponential,
    /// Forget only along the direction of the new sample (no wind-up in unexcited directions).
    Directional,
}

impl Forgetting {
    pub fn as_str(&self) -> &'static str {
        match self {
            Forgetting::Exponential => "exponential",
            Forgetting::Directional => "directional",
        }
    }

    pub fn parse(s: &str) -> CoreResult<Self> {
        match s {
            "exponential" => Ok(Forgetting::Exponential),
            "directional" => Ok(Forgetting::Directional),
            _ => Err(CoreError::Value(format!(
                "forgetting must be \"exponential\" or \"directional\", got {s:?}"
            ))),
        }
    }
}

/// Hyper-parameters of an estimator (the same for every stream of a bank).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RlsConfig {
    /// Forgetting factor in (0, 1]; 1 means no forgetting.
    pub lambda: f64,
    /// Initial covariance P0 = delta * I (> 0); large means weak prior towards a = 0.
    pub delta: f64,
    pub forgetting: Forgetting,
    /// Upper bound on trace(P); `None` means n * delta.
    pub trace_max: Option<f64>,
    /// Steps with h^T P h at or below this are skipped (>= 0).
    pub min_excitation: f64,
}

impl Default for RlsConfig {
    /// No forgetting, a weak prior (delta 100 on features scaled to unit spread), and
    /// directional forgetting once a factor below 1 is set. The replay's settings
    /// (lambda 0.95) are chosen in python/gpudvfs/online/replay.py.
    fn default() -> Self {
        RlsConfig {
            lambda: 1.0,
            delta: 100.0,
            forgetting: Forgetting::Directional,
            trace_max: None,
            min_excitation: 1e-10,
        }
    }
}

impl RlsConfig {
    pub fn new(lambda: f64, delta: f64) -> Self {
        RlsConfig {
            lambda,
            delta,
            ..Default::default()
        }
    }
}

/// Validated parameters with the trace bound resolved for a given n.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Params {
    pub n: usize,
    pub lambda: f64,
    pub inv_lambda: f64,
    pub delta: f64,
    pub forgetting: Forgetting,
    pub trace_max: f64,
    pub min_excitation: f64,
}

impl Params {
    pub fn new(n: usize, c: &RlsConfig) -> CoreResult<Self> {
        if n == 0 || n > MAX_FEATURES {
            return Err(CoreError::Value(format!(
                "number of features must be in 1..={MAX_FEATURES}, got {n}"
            )));
        }
        if !(c.lambda > 0.0 && c.lambda <= 1.0) {
            return Err(CoreError::Value(format!(
                "lambda must be in (0, 1], got {}",
                c.lambda
            )));
        }
        if !(c.delta > 0.0 && c.delta.is_finite()) {
            return Err(CoreError::Value(format!(
                "delta must be positive and finite, got {}",
                c.delta
            )));
        }
        let trace_max = c.trace_max.unwrap_or(n as f64 * c.delta);
        if !(trace_max > 0.0 && trace_max.is_finite()) {
            return Err(CoreError::Value(format!(
                "trace_max must be positive and finite, got {trace_max}"
            )));
        }
        if trace_max < n as f64 * c.delta * (1.0 - 1e-12) {
            return Err(CoreError::Value(format!(
                "trace_max ({trace_max}) must be at least trace(P0) = n * delta = {}",
                n as f64 * c.delta
            )));
        }
        if !(c.min_excitation >= 0.0 && c.min_excitation.is_finite()) {
            return Err(CoreError::Value(format!(
                "min_excitation must be >= 0 and finite, got {}",
                c.min_excitation
            )));
        }
        Ok(Params {
            n,
            lambda: c.lambda,
            inv_lambda: 1.0 / c.lambda,
            delta: c.delta,
            forgetting: c.forgetting,
            trace_max,
            min_excitation: c.min_excitation,
        })
    }

    pub fn config(&self) -> RlsConfig {
        RlsConfig {
            lambda: self.lambda,
            delta: self.delta,
            forgetting: self.forgetting,
            trace_max: Some(self.trace_max),
            min_excitation: self.min_excitation,
        }
    }

    pub fn packed_len(&self) -> usize {
        packed_len(self.n)
    }
}

pub(crate) fn packed_len(n: usize) -> usize {
    n * (n + 1) / 2
}

/// Outcome of one update.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    Applied,
    /// Negligible excitation: nothing changed.
    Skipped,
    /// The result would be non-finite or lose positive diagonal: nothing changed.
    Rejected,
}

/// P0 = delta * I, packed.
pub(crate) fn init_packed(n: usize, delta: f64, out: &mut [f64]) {
    let mut idx = 0;
    for i in 0..n {
        for j in i..n {
            out[idx] = if i == j { delta } else { 0.0 };
            idx += 1;
        }
    }
}

pub(crate) fn unpack(n: usize, packed: &[f64], full: &mut [f64]) {
    let mut idx = 0;
    for i in 0..n {
        for j in i..n {
            full[i * n + j] = packed[idx];
            full[j * n + i] = packed[idx];
            idx += 1;
        }
    }
}

/// Validates a full n x n covariance from saved state and packs it. Accepts asymmetry only
/// at rounding level; requires positive definiteness (Cholesky) and trace <= trace_max.
pub(crate) fn pack_checked(p: &Params, full: &[f64], what: &str) -> CoreResult<Vec<f64>> {
    let n = p.n;
    if full.len() != n * n {
        return Err(CoreError::Shape(format!(
            "{what}: covariance has {} values, expected {n} x {n} = {}",
            full.len(),
            n * n
        )));
    }
    if let Some(i) = full.iter().position(|v| !v.is_finite()) {
        return Err(CoreError::Value(format!(
            "{what}: covariance[{i}] is not finite"
        )));
    }
    let scale = full.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let mut packed = vec![0.0; packed_len(n)];
    let mut idx = 0;
    let mut trace = 0.0;
    for i in 0..n {
        for j in i..n {
            let (a, b) = (full[i * n + j], full[j * n + i]);
            if (a - b).abs() > 1e-12 * scale {
                return Err(CoreError::Value(format!(
                    "{what}: covariance is not symmetric at ({i}, {j}): {a} vs {b}"
                )));
            }
            packed[idx] = 0.5 * (a + b);
            if i == j {
                trace += packed[idx];
            }
            idx += 1;
        }
    }
    if trace > p.trace_max * (1.0 + 1e-9) {
        return Err(CoreError::Value(format!(
            "{what}: covariance trace {trace} exceeds trace_max {}",
            p.trace_max
        )));
    }
    if !is_positive_definite(n, &packed) {
        return Err(CoreError::Value(format!(
            "{what}: covariance is not positive definite"
        )));
    }
    Ok(packed)
}

/// Cholesky factorisation of a packed symmetric matrix; true if it succeeds with positive
/// pivots. O(n^3), used for validation and tests only.
pub(crate) fn is_positive_definite(n: usize, packed: &[f64]) -> bool {
    // Row i of the packed upper triangle starts at sum_{r<i} (n - r) = i (2n - i + 1) / 2.
    let at = |i: usize, j: usize| {
        let (i, j) = if i <= j { (i, j) } else { (j, i) };
        packed[i * (2 * n - i + 1) / 2 + (j - i)]
    };
    let mut l = vec![0.0f64; n * n];
    for j in 0..n {
        let mut d = at(j, j);
        for k in 0..j {
            d -= l[j * n + k] * l[j * n + k];
        }
        if d.is_nan() || d <= 0.0 || d.is_infinite() {
            return false;
        }
        let djj = d.sqrt();
        l[j * n + j] = djj;
        for i in (j + 1)..n {
            let mut v = at(j, i);
            for k in 0..j {
                v -= l[i * n + k] * l[j * n + k];
            }
            l[i * n + j] = v / djj;
        }
    }
    true
}

/// Checks a feature vector and target; names the argument on failure.
pub(crate) fn check_finite(x: &[f64], name: &str) -> CoreResult<()> {
    if all_finite(x) {
        return Ok(());
    }
    match x.iter().position(|v| !v.is_finite()) {
        None => Ok(()),
        Some(i) => Err(CoreError::Value(format!(
            "{name}[{i}] is {}, expected a finite number",
            x[i]
        ))),
    }
}

/// Branch-free scan (v * 0 is NaN exactly for NaN and infinities), so it vectorises; large
/// batches are validated in full before any state changes.
pub(crate) fn all_finite(x: &[f64]) -> bool {
    let mut acc = [0.0f64; 4];
    let mut chunks = x.chunks_exact(4);
    for c in &mut chunks {
        for i in 0..4 {
            acc[i] += c[i] * 0.0;
        }
    }
    let tail: f64 = chunks.remainder().iter().map(|v| v * 0.0).sum();
    (acc[0] + acc[1] + acc[2] + acc[3] + tail).is_finite()
}

#[inline(always)]
pub(crate) fn dot(a: &[f64], b: &[f64], n: usize) -> f64 {
    let mut acc = 0.0;
    for i in 0..n {
        acc += a[i] * b[i];
    }
    acc
}

/// One update of one stream. `coef` (n) and `cov` (packed) are modified only on `Applied`.
/// `ph` (n) and `newcov` (packed) are scratch. Inputs must already be checked finite.
/// Inlined into callers that pass a constant `n`, so the loops unroll for small n.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn step_core(
    p: &Params,
    n: usize,
    coef: &mut [f64],
    cov: &mut [f64],
    x: &[f64],
    y: f64,
    ph: &mut [f64],
    newcov: &mut [f64],
) -> Step {
    let m = n * (n + 1) / 2;
    let (coef, cov, x, ph, newcov) = (
        &mut coef[..n],
        &mut cov[..m],
        &x[..n],
        &mut ph[..n],
        &mut newcov[..m],
    );
    // ph = P x from the upper triangle.
    for v in ph.iter_mut() {
        *v = 0.0;
    }
    let mut idx = 0;
    for i in 0..n {
        let xi = x[i];
        let mut acc = ph[i] + cov[idx] * xi;
        idx += 1;
        for j in (i + 1)..n {
            let pij = cov[idx];
            acc += pij * x[j];
            ph[j] += pij * xi;
            idx += 1;
        }
        ph[i] = acc;
    }
    let s = dot(x, ph, n);
    if !s.is_finite() {
        return Step::Rejected;
    }
    if s <= p.min_excitation {
        return Step::Skipped;
    }
    let lambda = p.lambda;
    let denom = lambda + s;
    let err = y - dot(coef, x, n);
    // One division per step (divisions dominate the latency chain for small n).
    let (gamma, mu, k) = match p.forgetting {
        Forgetting::Exponential => {
            let inv = 1.0 / denom;
            (inv, p.inv_lambda, err * inv)
        }
        Forgetting::Directional => {
            let r = 1.0 / (s * denom);
            ((s + lambda - 1.0) * r, 1.0, err * s * r)
        }
    };
    // New covariance into scratch; `bad` turns NaN if any value is non-finite, `mind` tracks
    // the smallest diagonal (a non-positive one means rounding broke definiteness).
    let mut bad = 0.0f64;
    let mut trace = 0.0;
    let mut mind = f64::INFINITY;
    let mut idx = 0;
    for i in 0..n {
        let gi = gamma * ph[i];
        let d = (cov[idx] - gi * ph[i]) * mu;
        newcov[idx] = d;
        bad += d * 0.0;
        trace += d;
        mind = mind.min(d);
        idx += 1;
        for &phj in &ph[(i + 1)..n] {
            let v = (cov[idx] - gi * phj) * mu;
            newcov[idx] = v;
            bad += v * 0.0;
            idx += 1;
        }
    }
    for i in 0..n {
        bad += (coef[i] + ph[i] * k) * 0.0;
    }
    if !bad.is_finite() || mind.is_nan() || mind <= 0.0 || !trace.is_finite() {
        return Step::Rejected;
    }
    let scale = if trace > p.trace_max {
        p.trace_max / trace
    } else {
        1.0
    };
    for i in 0..m {
        cov[i] = newcov[i] * scale;
    }
    for i in 0..n {
        coef[i] += ph[i] * k;
    }
    Step::Applied
}

#[inline(always)]
fn step_fixed<const N: usize>(
    p: &Params,
    coef: &mut [f64],
    cov: &mut [f64],
    x: &[f64],
    y: f64,
) -> Step {
    let mut ph = [0.0f64; MAX_FIXED];
    let mut newcov = [0.0f64; MAX_FIXED_PACKED];
    step_core(p, N, coef, cov, x, y, &mut ph, &mut newcov)
}

/// Scratch for feature counts above `MAX_FIXED`.
#[derive(Debug, Clone, Default)]
pub(crate) struct Scratch {
    ph: Vec<f64>,
    newcov: Vec<f64>,
}

/// Dispatches to a kernel specialised for n (1..=8) or the general one.
/// Slices must have lengths n (coef, x) and n(n+1)/2 (cov); callers guarantee it.
#[inline]
pub(crate) fn step(
    p: &Params,
    coef: &mut [f64],
    cov: &mut [f64],
    x: &[f64],
    y: f64,
    scratch: &mut Scratch,
) -> Step {
    match p.n {
        1 => step_fixed::<1>(p, coef, cov, x, y),
        2 => step_fixed::<2>(p, coef, cov, x, y),
        3 => step_fixed::<3>(p, coef, cov, x, y),
        4 => step_fixed::<4>(p, coef, cov, x, y),
        5 => step_fixed::<5>(p, coef, cov, x, y),
        6 => step_fixed::<6>(p, coef, cov, x, y),
        7 => step_fixed::<7>(p, coef, cov, x, y),
        8 => step_fixed::<8>(p, coef, cov, x, y),
        n => {
            let m = packed_len(n);
            scratch.ph.resize(n, 0.0);
            scratch.newcov.resize(m, 0.0);
            step_core(p, n, coef, cov, x, y, &mut scratch.ph, &mut scratch.newcov)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_roundtrip_and_pd() {
        let n = 3;
        let full = [4.0, 1.0, 0.5, 1.0, 3.0, 0.2, 0.5, 0.2, 2.0];
        let p = Params::new(
            n,
            &RlsConfig {
                trace_max: Some(100.0),
                ..RlsConfig::new(1.0, 1.0)
            },
        )
        .unwrap();
        let packed = pack_checked(&p, &full, "t").unwrap();
        assert_eq!(packed, vec![4.0, 1.0, 0.5, 3.0, 0.2, 2.0]);
        let mut back = [0.0; 9];
        unpack(n, &packed, &mut back);
        assert_eq!(back, full);
        // Indefinite matrix is refused.
        let bad = [1.0, 2.0, 0.0, 2.0, 1.0, 0.0, 0.0, 0.0, 1.0];
        assert!(pack_checked(&p, &bad, "t").is_err());
    }

    #[test]
    fn params_validation() {
        for (l, d) in [
            (0.0, 1.0),
            (1.1, 1.0),
            (f64::NAN, 1.0),
            (0.9, 0.0),
            (0.9, f64::INFINITY),
        ] {
            assert!(Params::new(2, &RlsConfig::new(l, d)).is_err(), "{l} {d}");
        }
        assert!(Params::new(0, &RlsConfig::default()).is_err());
        assert!(Params::new(
            2,
            &RlsConfig {
                trace_max: Some(1.0),
                ..RlsConfig::new(0.9, 10.0)
            }
        )
        .is_err());
        assert!(Params::new(
            2,
            &RlsConfig {
                min_excitation: -1.0,
                ..Default::default()
            }
        )
        .is_err());
        assert_eq!(
            Forgetting::parse("directional").unwrap(),
            Forgetting::Directional
        );
        assert!(Forgetting::parse("exp").is_err());
    }

    /// The specialised and the general kernel compute the same thing.
    #[test]
    fn fixed_and_general_kernels_agree() {
        let n = 5;
        let p = Params::new(n, &RlsConfig::new(0.97, 10.0)).unwrap();
        let mut c1 = vec![0.0; n];
        let mut c2 = vec![0.0; n];
        let mut p1 = vec![0.0; packed_len(n)];
        init_packed(n, p.delta, &mut p1);
        let mut p2 = p1.clone();
        let mut sc = Scratch::default();
        for k in 0..200 {
            let x: Vec<f64> = (0..n)
                .map(|i| ((k * 7 + i * 3) % 11) as f64 - 5.0)
                .collect();
            let y = x.iter().enumerate().map(|(i, v)| v * i as f64).sum::<f64>();
            let a = step_fixed::<5>(&p, &mut c1, &mut p1, &x, y);
            let b = {
                sc.ph.resize(n, 0.0);
                sc.newcov.resize(packed_len(n), 0.0);
                step_core(&p, n, &mut c2, &mut p2, &x, y, &mut sc.ph, &mut sc.newcov)
            };
            assert_eq!(a, b);
        }
        assert_eq!(c1, c2);
        assert_eq!(p1, p2);
    }
}
