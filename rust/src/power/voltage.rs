//! Exact 1-D voltage solves.
//!
//! With the coefficients fixed, the model residual of one row as a function of one domain's
//! voltage V is e(V) = a V^2 + b V + c (a = f_d * activity, b = static coefficient,
//! c = other domains' power - measured power). The (weighted) squared error over any set of rows
//! is therefore a quartic in V whose five coefficients are sums over the rows, so pooling rows
//! (per-domain voltages, isotonic blocks) is just adding polynomials. Its minimum on an interval
//! is found exactly: the stationary points are the real roots of a cubic, which we isolate
//! between the roots of its (quadratic) derivative and polish by safeguarded Newton.

/// q(V) = c[0] V^4 + c[1] V^3 + c[2] V^2 + c[3] V + c[4].
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Quartic(pub [f64; 5]);

impl Quartic {
    /// Adds w * (a V^2 + b V + c)^2.
    #[inline]
    pub fn add_residual(&mut self, a: f64, b: f64, c: f64, w: f64) {
        let q = &mut self.0;
        q[0] += w * a * a;
        q[1] += w * 2.0 * a * b;
        q[2] += w * (b * b + 2.0 * a * c);
        q[3] += w * 2.0 * b * c;
        q[4] += w * c * c;
    }

    pub fn add(&mut self, other: &Quartic) {
        for i in 0..5 {
            self.0[i] += other.0[i];
        }
    }

    pub fn eval(&self, v: f64) -> f64 {
        self.0.iter().fold(0.0, |acc, c| acc * v + c)
    }

    /// The polynomial of s after substituting V = 1 + g s (used by the voltage curve).
    pub fn substitute_affine(&self, g: f64) -> Quartic {
        // Expand each power (1 + g s)^k with binomial coefficients.
        let q = &self.0; // q[0] is the V^4 coefficient
        let by_power = [q[4], q[3], q[2], q[1], q[0]]; // index = power of V
        let binom = [
            [1.0, 0.0, 0.0, 0.0, 0.0],
            [1.0, 1.0, 0.0, 0.0, 0.0],
            [1.0, 2.0, 1.0, 0.0, 0.0],
            [1.0, 3.0, 3.0, 1.0, 0.0],
            [1.0, 4.0, 6.0, 4.0, 1.0],
        ];
        let mut out = [0.0; 5]; // index = power of s
        for k in 0..5 {
            let mut gp = 1.0;
            for j in 0..=k {
                out[j] += by_power[k] * binom[k][j] * gp;
                gp *= g;
            }
        }
        Quartic([out[4], out[3], out[2], out[1], out[0]])
    }

    fn derivative(&self, v: f64) -> f64 {
        let q = &self.0;
        ((4.0 * q[0] * v + 3.0 * q[1]) * v + 2.0 * q[2]) * v + q[3]
    }

    fn second_derivative(&self, v: f64) -> f64 {
        let q = &self.0;
        (12.0 * q[0] * v + 6.0 * q[1]) * v + 2.0 * q[2]
    }

    /// Global minimizer on [lo, hi] (lo <= hi). `fallback` is returned when q is flat there
    /// (no row depends on this voltage), so an unidentifiable voltage keeps its value.
    pub fn argmin(&self, lo: f64, hi: f64, fallback: f64) -> f64 {
        if hi <= lo {
            return lo;
        }
        let scale = self.0[..4].iter().fold(0.0f64, |m, c| m.max(c.abs()));
        if scale == 0.0 || scale <= 1e-14 * self.0[4].abs() {
            return fallback.clamp(lo, hi);
        }
        // Split [lo, hi] where q'' = 0 so q' is monotone on each piece; every sign change of q'
        // on a piece is then exactly one stationary point.
        let q = &self.0;
        let mut cuts = vec![lo];
        for r in quadratic_roots(12.0 * q[0], 6.0 * q[1], 2.0 * q[2]) {
            if r > lo && r < hi {
                cuts.push(r);
            }
        }
        cuts.push(hi);
        cuts.sort_by(f64::total_cmp);
        let mut best = (self.eval(lo), lo);
        let hv = self.eval(hi);
        if hv < best.0 {
            best = (hv, hi);
        }
        for w in cuts.windows(2) {
            if let Some(r) = self.derivative_root(w[0], w[1]) {
                let val = self.eval(r);
                if val < best.0 {
                    best = (val, r);
                }
            }
        }
        best.1
    }

    /// Root of q' in [a, b] when q' changes sign there (q' monotone on [a, b]).
    fn derivative_root(&self, a: f64, b: f64) -> Option<f64> {
        let (fa, fb) = (self.derivative(a), self.derivative(b));
        if fa == 0.0 {
            return Some(a);
        }
        if fb == 0.0 {
            return Some(b);
        }
        if fa.signum() == fb.signum() {
            return None;
        }
        let (mut lo, mut hi) = if fa < 0.0 { (a, b) } else { (b, a) }; // q'(lo) < 0 < q'(hi)
        let mut x = 0.5 * (a + b);
        for _ in 0..100 {
            let f = self.derivative(x);
            if f == 0.0 {
                return Some(x);
            }
            if f < 0.0 {
                lo = x
            } else {
                hi = x
            }
            let d = self.second_derivative(x);
            let newton = x - f / d;
            let inside = (newton - lo) * (newton - hi) < 0.0;
            let next = if d != 0.0 && inside {
                newton
            } else {
                0.5 * (lo + hi)
            };
            if (next - x).abs() <= 4.0 * f64::EPSILON * x.abs().max(1.0) {
                return Some(next);
            }
            x = next;
        }
        Some(x)
    }
}

/// Real roots of a x^2 + b x + c (degenerate leading coefficients handled).
fn quadratic_roots(a: f64, b: f64, c: f64) -> Vec<f64> {
    let big = a.abs().max(b.abs()).max(c.abs());
    if big == 0.0 {
        return vec![];
    }
    if a.abs() <= 1e-15 * big {
        return if b != 0.0 { vec![-c / b] } else { vec![] };
    }
    let disc = b * b - 4.0 * a * c;
    if disc < 0.0 {
        return vec![];
    }
    // Numerically stable form (no cancellation between -b and sqrt(disc)).
    let t = -0.5 * (b + b.signum() * disc.sqrt());
    if t == 0.0 {
        return vec![0.0];
    }
    vec![t / a, c / t]
}

/// Non-decreasing voltages for a chain of parameters ordered by frequency, each with its own
/// quartic objective, all within [lo, hi]: pool-adjacent-violators where a pooled block's value
/// is the exact minimizer of the summed quartics. `previous` gives the fallback for flat blocks.
///
/// PAV is exact for convex separable objectives; these quartics are convex near their minimum
/// in practice (a V^2 term dominates), and the result is always monotone and within bounds.
pub fn isotonic_quartic(objs: &[Quartic], lo: f64, hi: f64, previous: &[f64]) -> Vec<f64> {
    struct Block {
        q: Quartic,
        start: usize,
        v: f64,
    }
    let mut blocks: Vec<Block> = Vec::with_capacity(objs.len());
    for (i, q) in objs.iter().enumerate() {
        let v = q.argmin(lo, hi, previous[i]);
        blocks.push(Block { q: *q, start: i, v });
        while blocks.len() >= 2 && blocks[blocks.len() - 2].v > blocks[blocks.len() - 1].v {
            let last = blocks.pop().expect("two blocks");
            let prev = blocks.last_mut().expect("two blocks");
            prev.q.add(&last.q);
            prev.v = prev.q.argmin(lo, hi, 0.5 * (prev.v + last.v));
        }
    }
    let mut out = vec![0.0; objs.len()];
    for (k, b) in blocks.iter().enumerate() {
        let end = blocks.get(k + 1).map_or(objs.len(), |n| n.start);
        for o in &mut out[b.start..end] {
            *o = b.v;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::test_util::uniform as lcg;

    fn brute_min(q: &Quartic, lo: f64, hi: f64) -> (f64, f64) {
        let n = 200_000;
        (0..=n)
            .map(|i| lo + (hi - lo) * i as f64 / n as f64)
            .map(|v| (q.eval(v), v))
            .min_by(|a, b| a.0.total_cmp(&b.0))
            .unwrap()
    }

    #[test]
    fn exact_argmin_matches_brute_force() {
        let mut s = 42u64;
        for _ in 0..300 {
            let mut q = Quartic::default();
            for _ in 0..(1 + (lcg(&mut s) * 5.0) as usize) {
                // Rows like the model's: a >= 0, any b >= 0, c of either sign.
                q.add_residual(
                    lcg(&mut s) * 3.0,
                    lcg(&mut s),
                    (lcg(&mut s) - 0.6) * 4.0,
                    1.0,
                );
            }
            let (lo, hi) = (0.5, 1.5);
            let v = q.argmin(lo, hi, 1.0);
            let (bv, bx) = brute_min(&q, lo, hi);
            assert!(v >= lo && v <= hi);
            assert!(
                q.eval(v) <= bv + 1e-9 * bv.abs().max(1.0),
                "argmin {v} vs brute {bx}"
            );
        }
    }

    #[test]
    fn double_well_picks_the_global_minimum() {
        // (V^2 - 1)^2 + 0.1 V has minima near -1 and +1; the one at -1 is lower.
        let q = Quartic([1.0, 0.0, -2.0, 0.1, 1.0]);
        let v = q.argmin(-2.0, 2.0, 0.0);
        assert!((v + 1.0).abs() < 0.05, "{v}");
        let v = q.argmin(0.0, 2.0, 0.0); // restricted: the right well
        assert!((v - 1.0).abs() < 0.05, "{v}");
    }

    #[test]
    fn flat_objective_keeps_fallback() {
        let q = Quartic([0.0, 0.0, 0.0, 0.0, 3.0]);
        assert_eq!(q.argmin(0.5, 1.5, 0.9), 0.9);
        assert_eq!(q.argmin(0.5, 1.5, 7.0), 1.5);
    }

    #[test]
    fn affine_substitution_matches_evaluation() {
        let q = Quartic([0.3, -1.0, 2.0, 0.5, -4.0]);
        let g = 0.7;
        let p = q.substitute_affine(g);
        for s in [-1.0, 0.0, 0.3, 2.0] {
            assert!((p.eval(s) - q.eval(1.0 + g * s)).abs() < 1e-12);
        }
    }

    #[test]
    fn isotonic_pools_violators() {
        // Unconstrained minima 1.2, 1.0, 1.3 (quadratics (V - m)^2): PAV pools the first two.
        let quad = |m: f64| Quartic([0.0, 0.0, 1.0, -2.0 * m, m * m]);
        let v = isotonic_quartic(&[quad(1.2), quad(1.0), quad(1.3)], 0.5, 1.5, &[1.0; 3]);
        assert!((v[0] - 1.1).abs() < 1e-12 && (v[1] - 1.1).abs() < 1e-12);
        assert!((v[2] - 1.3).abs() < 1e-12);
        // Bounds apply to pooled blocks as well.
        let v = isotonic_quartic(&[quad(2.0), quad(1.9)], 0.5, 1.5, &[1.0; 2]);
        assert_eq!(v, vec![1.5, 1.5]);
    }

    #[test]
    fn isotonic_output_is_monotone_on_random_input() {
        let mut s = 5u64;
        for _ in 0..100 {
            let objs: Vec<Quartic> = (0..12)
                .map(|_| {
                    let mut q = Quartic::default();
                    q.add_residual(lcg(&mut s) + 0.1, lcg(&mut s), -1.0 - lcg(&mut s), 1.0);
                    q
                })
                .collect();
            let v = isotonic_quartic(&objs, 0.5, 1.5, &[1.0; 12]);
            assert!(v.windows(2).all(|w| w[0] <= w[1]), "{v:?}");
            assert!(v.iter().all(|x| (0.5..=1.5).contains(x)));
        }
    }
}
