//! Many independent RLS streams (one per job/GPU/kernel) in flat contiguous arrays:
//! coefficients S x n, covariances S x n(n+1)/2 (packed upper triangles), so a batch update
//! is one linear sweep through memory that splits cleanly across threads.

use super::kernel::{
    all_finite, check_finite, dot, init_packed, pack_checked, step, unpack, Params, Scratch, Step,
};
use super::RlsConfig;
use crate::alloc;
use crate::error::{CoreError, CoreResult};

/// Below this many streams a batch runs on the calling thread: spawning threads costs more
/// than they save on a smaller batch.
const MIN_STREAMS_PER_THREAD: usize = 4096;

#[derive(Debug, Clone)]
pub struct RlsBank {
    p: Params,
    streams: usize,
    coef: Vec<f64>,
    cov: Vec<f64>,
    updates: Vec<u64>,
    threads: usize,
}

/// What one batch update did, stream by stream counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BankUpdate {
    pub applied: usize,
    /// Negligible excitation: unchanged.
    pub skipped: usize,
    /// Excluded by the mask: unchanged.
    pub masked: usize,
    /// Finite input whose result would overflow or lose definiteness: unchanged.
    pub rejected: usize,
}

impl BankUpdate {
    fn add(&mut self, o: BankUpdate) {
        self.applied += o.applied;
        self.skipped += o.skipped;
        self.masked += o.masked;
        self.rejected += o.rejected;
    }
}

/// Complete bank state as plain data; `covariance` is S x n x n (full matrices, row-major).
#[derive(Debug, Clone, PartialEq)]
pub struct BankState {
    pub n_streams: usize,
    pub n_features: usize,
    pub config: RlsConfig,
    pub coef: Vec<f64>,
    pub covariance: Vec<f64>,
    pub updates: Vec<u64>,
}

impl RlsBank {
    /// `streams` fresh estimators (a = 0, P = delta I). Large batches use every core by
    /// default (see `set_threads`).
    pub fn new(streams: usize, n_features: usize, config: RlsConfig) -> CoreResult<Self> {
        let p = Params::new(n_features, &config)?;
        let m = p.packed_len();
        let what = format!("{streams} streams x {n_features} features");
        // Sizes from the caller: allocated fallibly (a refused allocation is an error, not
        // an abort of the process).
        let total_cov = alloc::product(&[streams, m], &what)?;
        let mut cov = alloc::filled(total_cov, 0.0, &format!("the covariances of {what}"))?;
        for pc in cov.chunks_exact_mut(m) {
            init_packed(n_features, p.delta, pc);
        }
        let coef = alloc::filled(
            streams * n_features,
            0.0,
            &format!("the coefficients of {what}"),
        )?;
        let updates = alloc::filled(streams, 0, &format!("the update counts of {what}"))?;
        Ok(RlsBank {
            p,
            streams,
            coef,
            cov,
            updates,
            threads: 0,
        })
    }

    pub fn n_streams(&self) -> usize {
        self.streams
    }

    pub fn n_features(&self) -> usize {
        self.p.n
    }

    pub fn config(&self) -> RlsConfig {
        self.p.config()
    }

    /// Threads for batch calls; 0 (the default) means one per core, and more than
    /// `parallel::MAX_THREADS` count as that many.
    pub fn set_threads(&mut self, threads: usize) {
        self.threads = threads;
    }

    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Coefficients, S x n row-major.
    pub fn coef(&self) -> &[f64] {
        &self.coef
    }

    /// Applied-update count of every stream.
    pub fn updates(&self) -> &[u64] {
        &self.updates
    }

    fn check_stream(&self, stream: usize) -> CoreResult<()> {
        if stream >= self.streams {
            return Err(CoreError::Value(format!(
                "stream {stream} out of range (bank has {} streams)",
                self.streams
            )));
        }
        Ok(())
    }

    /// Full n x n covariance of one stream.
    pub fn covariance(&self, stream: usize) -> CoreResult<Vec<f64>> {
        self.check_stream(stream)?;
        let (n, m) = (self.p.n, self.p.packed_len());
        let mut full = vec![0.0; n * n];
        unpack(n, &self.cov[stream * m..(stream + 1) * m], &mut full);
        Ok(full)
    }

    fn check_batch(&self, x: &[f64], y: Option<&[f64]>, mask: Option<&[bool]>) -> CoreResult<()> {
        let (s, n) = (self.streams, self.p.n);
        if x.len() != s * n {
            return Err(CoreError::Shape(format!(
                "x has {} values, expected n_streams x n_features = {s} x {n}",
                x.len()
            )));
        }
        if let Some(y) = y {
            if y.len() != s {
                return Err(CoreError::Shape(format!(
                    "y has {} values, expected n_streams = {s}",
                    y.len()
                )));
            }
        }
        if let Some(m) = mask {
            if m.len() != s {
                return Err(CoreError::Shape(format!(
                    "mask has {} values, expected n_streams = {s}",
                    m.len()
                )));
            }
        }
        // Every value is checked (masked streams too) before anything changes, so an error
        // leaves the whole bank untouched.
        if !all_finite(x) {
            let i = x.iter().position(|v| !v.is_finite()).unwrap_or(0);
            return Err(CoreError::Value(format!(
                "x[{}, {}] is {}, expected a finite number",
                i / n,
                i % n,
                x[i]
            )));
        }
        if let Some(y) = y {
            check_finite(y, "y")?;
        }
        Ok(())
    }

    /// Updates every stream s with (x[s, :], y[s]) where mask[s] is true (all if None).
    /// Input is validated in full first: a shape error or a non-finite value changes nothing.
    pub fn update_many(
        &mut self,
        x: &[f64],
        y: &[f64],
        mask: Option<&[bool]>,
    ) -> CoreResult<BankUpdate> {
        self.check_batch(x, Some(y), mask)?;
        let (n, m, s) = (self.p.n, self.p.packed_len(), self.streams);
        let p = self.p;
        let wanted = match self.threads {
            0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
            t => t.min(crate::parallel::MAX_THREADS),
        };
        let threads = wanted.min((s / MIN_STREAMS_PER_THREAD).max(1));
        if threads <= 1 {
            return Ok(update_range(
                &p,
                &mut self.coef,
                &mut self.cov,
                &mut self.updates,
                x,
                y,
                mask,
            ));
        }
        let chunk = s.div_ceil(threads);
        let mut total = BankUpdate::default();
        std::thread::scope(|scope| {
            let mut handles = Vec::with_capacity(threads);
            let mut coef = &mut self.coef[..];
            let mut cov = &mut self.cov[..];
            let mut upd = &mut self.updates[..];
            let mut start = 0;
            while start < s {
                let len = chunk.min(s - start);
                let (c, rest_c) = coef.split_at_mut(len * n);
                let (p_, rest_p) = cov.split_at_mut(len * m);
                let (u, rest_u) = upd.split_at_mut(len);
                coef = rest_c;
                cov = rest_p;
                upd = rest_u;
                let xs = &x[start * n..(start + len) * n];
                let ys = &y[start..start + len];
                let ms = mask.map(|mk| &mk[start..start + len]);
                let pr = &p;
                handles.push(scope.spawn(move || update_range(pr, c, p_, u, xs, ys, ms)));
                start += len;
            }
            for h in handles {
                // A panic inside the kernel would be a bug; surface it rather than hide it.
                total.add(h.join().expect("RLS bank worker panicked"));
            }
        });
        Ok(total)
    }

    /// Predictions h^T a for every stream into `out` (length S).
    pub fn predict_many_into(&self, x: &[f64], out: &mut [f64]) -> CoreResult<()> {
        self.check_batch(x, None, None)?;
        if out.len() != self.streams {
            return Err(CoreError::Shape(format!(
                "output has {} values, expected n_streams = {}",
                out.len(),
                self.streams
            )));
        }
        let n = self.p.n;
        for (s, o) in out.iter_mut().enumerate() {
            *o = dot(&self.coef[s * n..(s + 1) * n], &x[s * n..(s + 1) * n], n);
        }
        // As `Rls::predict`: finite features whose prediction overflows are an error (the
        // update of such a stream is rejected too), not an infinite prediction.
        if !all_finite(out) {
            let s = out.iter().position(|v| !v.is_finite()).unwrap_or(0);
            return Err(CoreError::Value(format!(
                "the prediction of stream {s} is {}: x[{s}] . coef overflows",
                out[s]
            )));
        }
        Ok(())
    }

    pub fn predict_many(&self, x: &[f64]) -> CoreResult<Vec<f64>> {
        let mut out = alloc::filled(self.streams, 0.0, "the predictions")?;
        self.predict_many_into(x, &mut out)?;
        Ok(out)
    }

    /// Back to a = 0, P = delta I for one stream (e.g. a new job on that GPU).
    pub fn reset_stream(&mut self, stream: usize) -> CoreResult<()> {
        self.check_stream(stream)?;
        let (n, m) = (self.p.n, self.p.packed_len());
        self.coef[stream * n..(stream + 1) * n]
            .iter_mut()
            .for_each(|v| *v = 0.0);
        init_packed(n, self.p.delta, &mut self.cov[stream * m..(stream + 1) * m]);
        self.updates[stream] = 0;
        Ok(())
    }

    /// The whole state; its full covariances take about twice the memory of the packed
    /// ones, so a bank that fits may still fail here (a `Memory` error).
    pub fn state(&self) -> CoreResult<BankState> {
        let (n, m) = (self.p.n, self.p.packed_len());
        let what = format!("the state of {} streams x {n} features", self.streams);
        let mut full = alloc::filled(alloc::product(&[self.streams, n, n], &what)?, 0.0, &what)?;
        for (pc, fc) in self.cov.chunks_exact(m).zip(full.chunks_exact_mut(n * n)) {
            unpack(n, pc, fc);
        }
        Ok(BankState {
            n_streams: self.streams,
            n_features: n,
            config: self.p.config(),
            coef: alloc::copied(&self.coef, &what)?,
            covariance: full,
            updates: alloc::copied(&self.updates, &what)?,
        })
    }

    /// Rebuilds a bank from saved state; every stream's covariance is checked (symmetric,
    /// positive definite, trace bound), O(S n^3).
    pub fn from_state(state: &BankState) -> CoreResult<Self> {
        let p = Params::new(state.n_features, &state.config)?;
        let (s, n, m) = (state.n_streams, p.n, p.packed_len());
        // Checked: the sizes come from saved data (the lengths below are real, so a product
        // that overflows cannot match them).
        let what = "state";
        let (sn, snn) = (
            alloc::product(&[s, n], what)?,
            alloc::product(&[s, n, n], what)?,
        );
        if state.coef.len() != sn {
            return Err(CoreError::Shape(format!(
                "state: coef has {} values, expected {s} x {n}",
                state.coef.len()
            )));
        }
        if state.covariance.len() != snn {
            return Err(CoreError::Shape(format!(
                "state: covariance has {} values, expected {s} x {n} x {n}",
                state.covariance.len()
            )));
        }
        if state.updates.len() != s {
            return Err(CoreError::Shape(format!(
                "state: updates has {} values, expected {s}",
                state.updates.len()
            )));
        }
        check_finite(&state.coef, "state.coef")?;
        let mut cov = alloc::filled(s * m, 0.0, "the covariances of the state")?;
        for k in 0..s {
            let packed = pack_checked(
                &p,
                &state.covariance[k * n * n..(k + 1) * n * n],
                &format!("state stream {k}"),
            )?;
            cov[k * m..(k + 1) * m].copy_from_slice(&packed);
        }
        Ok(RlsBank {
            p,
            streams: s,
            coef: state.coef.clone(),
            cov,
            updates: state.updates.clone(),
            threads: 0,
        })
    }
}

/// Sequential sweep over a contiguous range of streams.
fn update_range(
    p: &Params,
    coef: &mut [f64],
    cov: &mut [f64],
    updates: &mut [u64],
    x: &[f64],
    y: &[f64],
    mask: Option<&[bool]>,
) -> BankUpdate {
    let (n, m) = (p.n, p.packed_len());
    let mut out = BankUpdate::default();
    let mut scratch = Scratch::default();
    for (s, ((c, pc), (xs, &ys))) in coef
        .chunks_exact_mut(n)
        .zip(cov.chunks_exact_mut(m))
        .zip(x.chunks_exact(n).zip(y.iter()))
        .enumerate()
    {
        if let Some(mk) = mask {
            if !mk[s] {
                out.masked += 1;
                continue;
            }
        }
        match step(p, c, pc, xs, ys, &mut scratch) {
            Step::Applied => {
                out.applied += 1;
                updates[s] += 1;
            }
            Step::Skipped => out.skipped += 1,
            Step::Rejected => out.rejected += 1,
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::{Forgetting, Rls};
    use super::*;

    /// A uniform draw in [-1, 1).
    fn lcg(seed: &mut u64) -> f64 {
        crate::test_util::uniform(seed) * 2.0 - 1.0
    }

    /// Each stream of a bank evolves exactly like a standalone `Rls` fed the same data,
    /// whatever the thread split, with masks and zero rows.
    #[test]
    fn bank_matches_independent_estimators() {
        for (n, streams, threads) in [(4, 10_000, 2), (3, 7, 1), (10, 9000, 3)] {
            for forgetting in [Forgetting::Exponential, Forgetting::Directional] {
                let cfg = RlsConfig {
                    forgetting,
                    ..RlsConfig::new(0.9, 50.0)
                };
                let mut bank = RlsBank::new(streams, n, cfg).unwrap();
                bank.set_threads(threads);
                let watch = [0, streams / 2, streams - 1];
                let mut singles: Vec<Rls> =
                    watch.iter().map(|_| Rls::new(n, cfg).unwrap()).collect();
                let mut seed = 5u64;
                for step in 0..30 {
                    let mut x: Vec<f64> = (0..streams * n).map(|_| lcg(&mut seed)).collect();
                    // Zero rows for a third of the streams on odd steps.
                    if step % 2 == 1 {
                        for s in (0..streams).step_by(3) {
                            x[s * n..(s + 1) * n].iter_mut().for_each(|v| *v = 0.0);
                        }
                    }
                    let y: Vec<f64> = (0..streams).map(|_| lcg(&mut seed)).collect();
                    let mask: Vec<bool> = (0..streams).map(|s| (s + step) % 5 != 0).collect();
                    let pred = bank.predict_many(&x).unwrap();
                    bank.update_many(&x, &y, Some(&mask)).unwrap();
                    for (w, r) in watch.iter().zip(singles.iter_mut()) {
                        let xs = &x[w * n..(w + 1) * n];
                        assert_eq!(pred[*w], r.predict(xs).unwrap());
                        if mask[*w] {
                            r.update(xs, y[*w]).unwrap();
                        }
                    }
                }
                for (w, r) in watch.iter().zip(singles.iter()) {
                    assert_eq!(&bank.coef()[w * n..(w + 1) * n], r.coef());
                    assert_eq!(bank.covariance(*w).unwrap(), r.covariance());
                }
            }
        }
    }

    #[test]
    fn bad_batch_changes_nothing() {
        let mut bank = RlsBank::new(5, 2, RlsConfig::default()).unwrap();
        let x = vec![0.5; 10];
        bank.update_many(&x, &[1.0; 5], None).unwrap();
        let before = bank.state().unwrap();
        let mut xb = x.clone();
        xb[9] = f64::NAN;
        assert!(matches!(
            bank.update_many(&xb, &[1.0; 5], None),
            Err(CoreError::Value(_))
        ));
        assert!(matches!(
            bank.update_many(&x, &[1.0, 1.0, 1.0, 1.0, f64::INFINITY], None),
            Err(CoreError::Value(_))
        ));
        assert!(matches!(
            bank.update_many(&x[..8], &[1.0; 5], None),
            Err(CoreError::Shape(_))
        ));
        assert!(matches!(
            bank.update_many(&x, &[1.0; 4], None),
            Err(CoreError::Shape(_))
        ));
        assert!(matches!(
            bank.update_many(&x, &[1.0; 5], Some(&[true; 3])),
            Err(CoreError::Shape(_))
        ));
        assert!(bank.covariance(5).is_err());
        assert!(bank.reset_stream(5).is_err());
        assert!(bank.predict_many(&xb).is_err());
        assert_eq!(bank.state().unwrap(), before);
        // An overflowing stream is rejected alone; the others are updated.
        let mut xo = x.clone();
        xo[0] = 1e200;
        let r = bank.update_many(&xo, &[1.0; 5], None).unwrap();
        assert_eq!((r.applied, r.rejected), (4, 1));
        assert_eq!(&bank.state().unwrap().coef[..2], &before.coef[..2]);
    }

    /// Sizes the memory cannot hold are errors (`vec!` aborted the process): a refused
    /// allocation is `Memory`, a byte count that overflows `Value`.
    #[test]
    fn a_bank_too_large_is_an_error_not_an_abort() {
        let cfg = RlsConfig::default();
        // 2^54 streams x 10 packed values x 8 bytes: 2^60.3 bytes, more than any address space.
        match RlsBank::new(1 << 54, 4, cfg) {
            Err(CoreError::Memory(m)) => {
                assert!(m.contains("18014398509481984 streams x 4 features"), "{m}")
            }
            other => panic!("{:?}", other.map(|b| b.n_streams())),
        }
        // 2^40 streams x 4096 features: 2^63 packed values, whose bytes overflow.
        assert!(matches!(
            RlsBank::new(1 << 40, 4096, cfg),
            Err(CoreError::Value(_))
        ));
        assert!(matches!(
            RlsBank::new(1 << 62, 4, cfg),
            Err(CoreError::Value(_))
        ));
    }

    /// Finite features whose prediction overflows are an error naming the stream, as
    /// `Rls::predict`; the update of that stream is rejected.
    #[test]
    fn overflowing_prediction_is_an_error() {
        let mut bank = RlsBank::new(3, 2, RlsConfig::default()).unwrap();
        bank.update_many(&[1.0, 1.0, 1.0, -1.0, 0.5, 0.5], &[2.0, 4.0, 1.0], None)
            .unwrap();
        let mut x = vec![1.0; 6];
        assert!(bank.predict_many(&x).unwrap().iter().all(|v| v.is_finite()));
        x[2] = 1e308;
        x[3] = -1e308;
        match bank.predict_many(&x) {
            Err(CoreError::Value(m)) => assert!(m.contains("stream 1"), "{m}"),
            other => panic!("{other:?}"),
        }
        let r = bank.update_many(&x, &[1.0; 3], None).unwrap();
        assert_eq!((r.applied, r.rejected), (2, 1));
    }

    #[test]
    fn state_roundtrip() {
        let mut bank = RlsBank::new(3, 2, RlsConfig::new(0.8, 2.0)).unwrap();
        bank.update_many(&[1.0, 2.0, 0.0, 1.0, -1.0, 0.5], &[1.0, 2.0, 3.0], None)
            .unwrap();
        let s = bank.state().unwrap();
        let b2 = RlsBank::from_state(&s).unwrap();
        assert_eq!(b2.state().unwrap(), s);
        let mut bad = s.clone();
        bad.covariance[4 + 1] = 7.0; // asymmetric in stream 1
        assert!(RlsBank::from_state(&bad).is_err());
        let mut bad = s.clone();
        bad.updates.pop();
        assert!(matches!(
            RlsBank::from_state(&bad),
            Err(CoreError::Shape(_))
        ));
        let mut b3 = RlsBank::from_state(&s).unwrap();
        b3.reset_stream(1).unwrap();
        assert_eq!(b3.covariance(1).unwrap(), vec![2.0, 0.0, 0.0, 2.0]);
        assert_eq!(&b3.coef()[2..4], &[0.0, 0.0]);
    }
}
