//! One recursive-least-squares estimator (one workload stream).

use super::kernel::{
    check_finite, dot, init_packed, is_positive_definite, pack_checked, packed_len, step, unpack,
    Params, Scratch, Step,
};
use super::RlsConfig;
use crate::error::{CoreError, CoreResult};

/// Covariance-form RLS for y = h^T a; see `kernel` for the update and its guards.
#[derive(Debug, Clone)]
pub struct Rls {
    p: Params,
    coef: Vec<f64>,
    /// Packed upper triangle of P.
    cov: Vec<f64>,
    updates: u64,
    skipped: u64,
    scratch: Scratch,
}

/// The complete state as plain data (for saving, pickling, JSON). `covariance` is the full
/// n x n matrix, row-major.
#[derive(Debug, Clone, PartialEq)]
pub struct RlsState {
    pub n_features: usize,
    pub config: RlsConfig,
    pub coef: Vec<f64>,
    pub covariance: Vec<f64>,
    /// Updates applied / skipped for lack of excitation since construction.
    pub updates: u64,
    pub skipped: u64,
}

impl Rls {
    /// A fresh estimator: a = 0, P = delta * I.
    pub fn new(n_features: usize, config: RlsConfig) -> CoreResult<Self> {
        let p = Params::new(n_features, &config)?;
        let mut cov = vec![0.0; packed_len(n_features)];
        init_packed(n_features, p.delta, &mut cov);
        Ok(Rls {
            p,
            coef: vec![0.0; n_features],
            cov,
            updates: 0,
            skipped: 0,
            scratch: Scratch::default(),
        })
    }

    pub fn n_features(&self) -> usize {
        self.p.n
    }

    /// The configuration with `trace_max` resolved.
    pub fn config(&self) -> RlsConfig {
        self.p.config()
    }

    pub fn coef(&self) -> &[f64] {
        &self.coef
    }

    /// Full n x n covariance, row-major.
    pub fn covariance(&self) -> Vec<f64> {
        let n = self.p.n;
        let mut full = vec![0.0; n * n];
        unpack(n, &self.cov, &mut full);
        full
    }

    pub fn updates(&self) -> u64 {
        self.updates
    }

    pub fn skipped(&self) -> u64 {
        self.skipped
    }

    fn check_x(&self, x: &[f64]) -> CoreResult<()> {
        if x.len() != self.p.n {
            return Err(CoreError::Shape(format!(
                "x has {} values, expected {}",
                x.len(),
                self.p.n
            )));
        }
        check_finite(x, "x")
    }

    /// h^T a. Finite features whose prediction overflows (to an infinity, or NaN from
    /// infinities of both signs) are an error, as `update` rejects such features.
    pub fn predict(&self, x: &[f64]) -> CoreResult<f64> {
        self.check_x(x)?;
        let y = dot(&self.coef, x, self.p.n);
        if !y.is_finite() {
            return Err(CoreError::Value(format!(
                "the prediction is {y}: x . coef overflows (features far too large)"
            )));
        }
        Ok(y)
    }

    /// Learns from one sample. Returns Ok(true) if applied, Ok(false) if skipped for
    /// negligible excitation (state unchanged). Non-finite input, or a result that would be
    /// non-finite or indefinite, is an error and leaves the state unchanged.
    pub fn update(&mut self, x: &[f64], y: f64) -> CoreResult<bool> {
        self.check_x(x)?;
        if !y.is_finite() {
            return Err(CoreError::Value(format!(
                "y is {y}, expected a finite number"
            )));
        }
        match step(
            &self.p,
            &mut self.coef,
            &mut self.cov,
            x,
            y,
            &mut self.scratch,
        ) {
            Step::Applied => {
                self.updates += 1;
                Ok(true)
            }
            Step::Skipped => {
                self.skipped += 1;
                Ok(false)
            }
            Step::Rejected => Err(CoreError::Value(
                "update rejected: the result would overflow or lose positive definiteness \
                 (features far too large, or delta too large for them); state unchanged"
                    .into(),
            )),
        }
    }

    /// Back to a fresh estimator, a = 0, P = delta * I, counts zero (e.g. a new workload).
    pub fn reset(&mut self) {
        self.coef.iter_mut().for_each(|v| *v = 0.0);
        init_packed(self.p.n, self.p.delta, &mut self.cov);
        self.updates = 0;
        self.skipped = 0;
    }

    pub fn state(&self) -> RlsState {
        RlsState {
            n_features: self.p.n,
            config: self.p.config(),
            coef: self.coef.clone(),
            covariance: self.covariance(),
            updates: self.updates,
            skipped: self.skipped,
        }
    }

    /// Rebuilds an estimator from saved state, checking shapes, finiteness, symmetry,
    /// positive definiteness and the trace bound.
    pub fn from_state(state: &RlsState) -> CoreResult<Self> {
        let p = Params::new(state.n_features, &state.config)?;
        if state.coef.len() != p.n {
            return Err(CoreError::Shape(format!(
                "state: coef has {} values, expected {}",
                state.coef.len(),
                p.n
            )));
        }
        check_finite(&state.coef, "state.coef")?;
        let cov = pack_checked(&p, &state.covariance, "state")?;
        Ok(Rls {
            p,
            coef: state.coef.clone(),
            cov,
            updates: state.updates,
            skipped: state.skipped,
            scratch: Scratch::default(),
        })
    }

    /// Cholesky check of the current covariance (O(n^3); for tests and diagnostics).
    pub fn covariance_is_positive_definite(&self) -> bool {
        is_positive_definite(self.p.n, &self.cov)
    }
}

#[cfg(test)]
mod tests {
    use super::super::Forgetting;
    use super::*;

    /// Small deterministic generator (xorshift64*), so tests need no crate.
    pub(crate) struct Rng(u64);
    impl Rng {
        pub fn new(seed: u64) -> Self {
            Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
        }
        pub fn next_u64(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
        }
        /// Uniform in [-1, 1).
        pub fn unif(&mut self) -> f64 {
            (self.next_u64() >> 11) as f64 / (1u64 << 52) as f64 - 1.0
        }
    }

    fn all_forgetting() -> [Forgetting; 2] {
        [Forgetting::Exponential, Forgetting::Directional]
    }

    #[test]
    fn converges_to_fixed_linear_model_noiseless() {
        let truth = [2.0, -1.5, 0.25, 7.0, -3.0, 0.0];
        for forgetting in all_forgetting() {
            for lambda in [1.0, 0.99, 0.9] {
                let n = truth.len();
                let mut r = Rls::new(
                    n,
                    RlsConfig {
                        forgetting,
                        ..RlsConfig::new(lambda, 1e6)
                    },
                )
                .unwrap();
                let mut rng = Rng::new(7);
                for _ in 0..500 {
                    let x: Vec<f64> = (0..n).map(|_| rng.unif()).collect();
                    let y = dot(&truth, &x, n);
                    r.update(&x, y).unwrap();
                }
                for (c, t) in r.coef().iter().zip(truth) {
                    assert!((c - t).abs() < 1e-6, "{forgetting:?} {lambda}: {c} vs {t}");
                }
                let x = [0.3, -0.2, 1.0, 0.5, 0.1, 9.0];
                assert!((r.predict(&x).unwrap() - dot(&truth, &x, n)).abs() < 1e-5);
            }
        }
    }

    #[test]
    fn lambda_one_matches_batch_least_squares() {
        // With lambda = 1 and a huge delta, RLS equals ordinary least squares on noisy data.
        let n = 3;
        let mut r = Rls::new(n, RlsConfig::new(1.0, 1e8)).unwrap();
        let mut rng = Rng::new(3);
        let (mut xtx, mut xty) = ([0.0; 9], [0.0; 3]);
        for _ in 0..200 {
            let x = [rng.unif(), rng.unif(), 1.0];
            let y = 1.0 + 2.0 * x[0] - x[1] + 0.1 * rng.unif();
            r.update(&x, y).unwrap();
            for i in 0..3 {
                xty[i] += x[i] * y;
                for j in 0..3 {
                    xtx[i * 3 + j] += x[i] * x[j];
                }
            }
        }
        // Solve the 3x3 normal equations by Cramer's rule.
        let det3 = |m: &[f64; 9]| {
            m[0] * (m[4] * m[8] - m[5] * m[7]) - m[1] * (m[3] * m[8] - m[5] * m[6])
                + m[2] * (m[3] * m[7] - m[4] * m[6])
        };
        let d = det3(&xtx);
        for k in 0..3 {
            let mut m = xtx;
            for i in 0..3 {
                m[i * 3 + k] = xty[i];
            }
            let ols = det3(&m) / d;
            assert!(
                (r.coef()[k] - ols).abs() < 1e-5,
                "{k}: {} vs {ols}",
                r.coef()[k]
            );
        }
    }

    #[test]
    fn zero_excitation_is_a_no_op() {
        let mut r = Rls::new(4, RlsConfig::new(0.5, 10.0)).unwrap();
        r.update(&[1.0, 0.0, 0.0, 0.0], 3.0).unwrap();
        let before = r.state();
        for _ in 0..1000 {
            assert!(!r.update(&[0.0; 4], 123.0).unwrap());
        }
        let after = r.state();
        assert_eq!(before.coef, after.coef);
        assert_eq!(before.covariance, after.covariance);
        assert_eq!(after.skipped, 1000);
    }

    #[test]
    fn bad_input_is_an_error_and_leaves_state_untouched() {
        let mut r = Rls::new(3, RlsConfig::default()).unwrap();
        r.update(&[1.0, 2.0, 3.0], 1.0).unwrap();
        let before = r.state();
        assert!(matches!(
            r.update(&[1.0, f64::NAN, 0.0], 1.0),
            Err(CoreError::Value(_))
        ));
        assert!(matches!(
            r.update(&[1.0, 0.0, 0.0], f64::INFINITY),
            Err(CoreError::Value(_))
        ));
        assert!(matches!(
            r.update(&[1.0, 0.0], 1.0),
            Err(CoreError::Shape(_))
        ));
        // Finite but overflowing: s = x^T P x = inf.
        assert!(matches!(
            r.update(&[1e200, 1e200, 0.0], 1.0),
            Err(CoreError::Value(_))
        ));
        assert!(r.predict(&[f64::NEG_INFINITY, 0.0, 0.0]).is_err());
        assert_eq!(r.state(), before);
    }

    /// Finite features whose prediction overflows are an error, as their update is.
    #[test]
    fn overflowing_prediction_is_an_error() {
        let mut r = Rls::new(4, RlsConfig::default()).unwrap();
        r.update(&[1.0, 1.0, 1.0, -1.0], 4.0).unwrap();
        assert!(r.predict(&[1.0; 4]).unwrap().is_finite());
        let big = [1e308; 4];
        assert!(r.update(&big, 1.0).is_err());
        match r.predict(&big) {
            Err(CoreError::Value(m)) => assert!(m.contains("overflows"), "{m}"),
            other => panic!("{other:?}"),
        }
        // Overflow on the way, though the last term would pull the sum back.
        assert!(r.predict(&[1e308, 1e308, 0.0, 1e308]).is_err());
        // The state is untouched by all of it.
        assert!(r.predict(&[1.0; 4]).unwrap().is_finite());
    }

    #[test]
    fn state_roundtrip_and_validation() {
        let mut r = Rls::new(3, RlsConfig::new(0.9, 5.0)).unwrap();
        let mut rng = Rng::new(11);
        for _ in 0..50 {
            let x = [rng.unif(), rng.unif(), rng.unif()];
            r.update(&x, x[0] - x[2]).unwrap();
        }
        let s = r.state();
        let mut r2 = Rls::from_state(&s).unwrap();
        assert_eq!(r2.state(), s);
        // Both continue identically.
        let x = [0.1, 0.7, -0.4];
        r.update(&x, 0.3).unwrap();
        r2.update(&x, 0.3).unwrap();
        assert_eq!(r.state(), r2.state());

        let mut bad = s.clone();
        bad.covariance[1] += 1.0; // asymmetric
        assert!(Rls::from_state(&bad).is_err());
        let mut bad = s.clone();
        bad.covariance[0] = f64::NAN;
        assert!(Rls::from_state(&bad).is_err());
        let mut bad = s.clone();
        bad.covariance = vec![0.0; 9]; // not PD
        assert!(Rls::from_state(&bad).is_err());
        let mut bad = s.clone();
        bad.coef.pop();
        assert!(matches!(Rls::from_state(&bad), Err(CoreError::Shape(_))));
        let mut bad = s.clone();
        bad.config.lambda = 0.0;
        assert!(Rls::from_state(&bad).is_err());
    }

    /// Without a guard, exponential forgetting with unexcited directions grows P as
    /// lambda^-k; here the trace bound must hold it.
    #[test]
    fn exponential_forgetting_with_partial_excitation_is_bounded() {
        let cfg = RlsConfig {
            forgetting: Forgetting::Exponential,
            ..RlsConfig::new(0.9, 1.0)
        };
        let mut r = Rls::new(3, cfg).unwrap();
        for k in 0..10_000 {
            // Only the first feature is ever excited.
            r.update(&[1.0 + (k % 3) as f64, 0.0, 0.0], 2.0).unwrap();
        }
        let c = r.covariance();
        assert!(c.iter().all(|v| v.is_finite()));
        assert!(c[0] + c[4] + c[8] <= 3.0 * (1.0 + 1e-12));
        assert!(r.covariance_is_positive_definite());
    }

    fn check_cov(r: &Rls, step: u64) {
        let n = r.n_features();
        let c = r.covariance();
        assert!(
            c.iter().all(|v| v.is_finite()),
            "non-finite P at step {step}"
        );
        for i in 0..n {
            for j in 0..n {
                assert_eq!(c[i * n + j], c[j * n + i], "asymmetric P at step {step}");
            }
        }
        assert!(
            r.covariance_is_positive_definite(),
            "P not PD at step {step}: {c:?}"
        );
        let tr: f64 = (0..n).map(|i| c[i * n + i]).sum();
        assert!(
            tr <= r.config().trace_max.unwrap() * (1.0 + 1e-12),
            "trace {tr} at step {step}"
        );
    }

    /// 10 million updates per forgetting mode (the workspace runs tests optimized) with lambda = 0.95, long stretches of
    /// zero excitation, collinear features and bursts of tiny features; P must stay
    /// symmetric, positive definite, finite and bounded throughout (checked every 1e5 steps),
    /// for both forgetting modes, and the model must still track a coefficient change at
    /// the end.
    #[test]
    fn ten_million_updates_stay_well_conditioned() {
        let total: u64 = 10_000_000;
        for forgetting in all_forgetting() {
            let n = 4;
            let mut r = Rls::new(
                n,
                RlsConfig {
                    forgetting,
                    ..RlsConfig::new(0.95, 100.0)
                },
            )
            .unwrap();
            let mut rng = Rng::new(42);
            let mut truth = [1.0, -2.0, 0.5, 3.0];
            for k in 0..total {
                // Phases of 50_000 steps cycle through: zero excitation; features 2 and 3
                // exact copies of 0 and 1 (collinear); full excitation; tiny features.
                let phase = (k / 50_000) % 4;
                let u = rng.unif();
                let v = rng.unif();
                let x = match phase {
                    0 => [0.0; 4],
                    1 => [u, v, u, 2.0 * v],
                    2 => [u, v, rng.unif(), rng.unif()],
                    _ => [1e-9 * u, 1e-9 * v, 0.0, 0.0],
                };
                if k == total / 2 {
                    truth = [-1.0, 2.0, 1.5, -3.0];
                }
                let y = dot(&truth, &x, n) + 1e-3 * rng.unif();
                r.update(&x, y).unwrap();
                if k % 100_000 == 0 {
                    check_cov(&r, k);
                }
            }
            check_cov(&r, total);
            // Tracking is intact: after a change and 2000 exciting steps the estimate is
            // close to the new truth (noise 1e-3).
            truth = [0.5, 0.5, -0.5, 4.0];
            for _ in 0..2000 {
                let x = [rng.unif(), rng.unif(), rng.unif(), rng.unif()];
                r.update(&x, dot(&truth, &x, n) + 1e-3 * rng.unif())
                    .unwrap();
            }
            for (c, t) in r.coef().iter().zip(truth) {
                assert!((c - t).abs() < 0.01, "{forgetting:?}: {c} vs {t}");
            }
        }
    }
}
