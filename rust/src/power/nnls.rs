//! Non-negative least squares (Lawson & Hanson's active-set method) in Gram form.
//!
//! The power model has few unknowns (2 per domain + 1 per component, ~12) and many rows
//! (thousands), so the solver works on the n x n normal equations G = A'WA, g = A'Wb that the
//! caller accumulates in one pass over the rows. Columns are scaled to unit diagonal first so
//! that the normal equations stay well conditioned (utilizations in [0,1] and normalized
//! frequencies keep the raw scales within a few orders of magnitude anyway).

use crate::alloc;
use crate::error::{CoreError, CoreResult};

/// Normal equations of a (weighted) least-squares problem: G (row-major n x n, symmetric) and g.
#[derive(Debug, Clone)]
pub struct NormalEq {
    pub n: usize,
    pub gram: Vec<f64>,
    pub rhs: Vec<f64>,
}

impl NormalEq {
    pub fn zeros(n: usize) -> Self {
        NormalEq {
            n,
            gram: vec![0.0; n * n],
            rhs: vec![0.0; n],
        }
    }

    /// `zeros` for an n that comes from the input (the component count): n x n allocated
    /// fallibly, an error instead of an abort.
    pub fn try_zeros(n: usize) -> CoreResult<Self> {
        let what = format!("the normal equations of {n} unknowns");
        Ok(NormalEq {
            n,
            gram: alloc::filled(alloc::product(&[n, n], &what)?, 0.0, &what)?,
            rhs: alloc::filled(n, 0.0, &what)?,
        })
    }

    /// Adds one row `a` with target `b` and weight `w` (upper triangle only; see `symmetrize`).
    #[inline]
    pub fn add_row(&mut self, a: &[f64], b: f64, w: f64) {
        let n = self.n;
        for i in 0..n {
            let wai = w * a[i];
            if wai == 0.0 {
                continue;
            }
            self.rhs[i] += wai * b;
            let row = &mut self.gram[i * n..(i + 1) * n];
            for j in i..n {
                row[j] += wai * a[j];
            }
        }
    }

    /// Copies the accumulated upper triangle into the lower one.
    pub fn symmetrize(&mut self) {
        let n = self.n;
        for i in 0..n {
            for j in 0..i {
                self.gram[i * n + j] = self.gram[j * n + i];
            }
        }
    }
}

/// Cholesky solve of the sub-system G[p,p] z = g[p]; None when the block is not numerically
/// positive definite (a column dependent on the passive ones).
fn solve_passive(gram: &[f64], rhs: &[f64], n: usize, passive: &[usize]) -> Option<Vec<f64>> {
    let k = passive.len();
    let mut l = vec![0.0; k * k];
    for i in 0..k {
        for j in 0..=i {
            let mut s = gram[passive[i] * n + passive[j]];
            for m in 0..j {
                s -= l[i * k + m] * l[j * k + m];
            }
            if i == j {
                // Relative pivot test: the scaled diagonal is 1, so a pivot this small means the
                // column is a combination of the others to ~1e-10 and would blow up the solution.
                if s <= 1e-10 {
                    return None;
                }
                l[i * k + i] = s.sqrt();
            } else {
                l[i * k + j] = s / l[j * k + j];
            }
        }
    }
    let mut y = vec![0.0; k];
    for i in 0..k {
        let mut s = rhs[passive[i]];
        for m in 0..i {
            s -= l[i * k + m] * y[m];
        }
        y[i] = s / l[i * k + i];
    }
    for i in (0..k).rev() {
        let mut s = y[i];
        for m in i + 1..k {
            s -= l[m * k + i] * y[m];
        }
        y[i] = s / l[i * k + i];
    }
    Some(y)
}

/// Minimizes ||Ax - b||_W^2 subject to x >= 0, given the normal equations of the problem.
///
/// Columns that are exactly dependent on already-active ones are left at zero (their optimal
/// share is not identifiable); columns with a zero diagonal (never excited) stay at zero.
pub fn nnls(eq: &NormalEq) -> CoreResult<Vec<f64>> {
    let n = eq.n;
    if eq.gram.len() != n * n || eq.rhs.len() != n {
        return Err(CoreError::Shape(format!(
            "normal equations: gram has {} values and rhs {}, expected {} and {n}",
            eq.gram.len(),
            eq.rhs.len(),
            n * n
        )));
    }
    if let Some(v) = eq.gram.iter().chain(&eq.rhs).find(|v| !v.is_finite()) {
        return Err(CoreError::Value(format!("normal equations contain {v}")));
    }
    // Jacobi scaling: x = D y with D = diag(1/sqrt(G_jj)).
    let scale: Vec<f64> = (0..n)
        .map(|j| {
            let d = eq.gram[j * n + j];
            if d > 0.0 {
                1.0 / d.sqrt()
            } else {
                0.0
            }
        })
        .collect();
    let mut gram = alloc::filled(n * n, 0.0, "the scaled normal equations")?;
    for i in 0..n {
        for j in 0..n {
            gram[i * n + j] = eq.gram[i * n + j] * scale[i] * scale[j];
        }
    }
    let rhs: Vec<f64> = (0..n).map(|i| eq.rhs[i] * scale[i]).collect();
    let gnorm = rhs.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let tol = 1e-12 * gnorm.max(f64::MIN_POSITIVE);

    let mut x = vec![0.0; n];
    let mut passive: Vec<usize> = Vec::new();
    let mut excluded = vec![false; n];
    for (j, s) in scale.iter().enumerate() {
        excluded[j] = *s == 0.0;
    }
    let gradient = |x: &[f64]| -> Vec<f64> {
        (0..n)
            .map(|i| rhs[i] - (0..n).map(|j| gram[i * n + j] * x[j]).sum::<f64>())
            .collect()
    };
    // Each outer step adds a column; 3n is Lawson-Hanson's customary safety cap.
    for _ in 0..3 * n + 3 {
        let w = gradient(&x);
        let cand = (0..n)
            .filter(|j| !excluded[*j] && !passive.contains(j))
            .max_by(|a, b| w[*a].total_cmp(&w[*b]));
        let j = match cand {
            Some(j) if w[j] > tol => j,
            _ => break,
        };
        passive.push(j);
        loop {
            let z = match solve_passive(&gram, &rhs, n, &passive) {
                Some(z) => z,
                None => {
                    // The newest column is dependent on the passive set: drop it for good.
                    let last = passive.pop().unwrap_or(j);
                    excluded[last] = true;
                    x[last] = 0.0;
                    break;
                }
            };
            if z.iter().all(|v| *v > 0.0) {
                for (k, &p) in passive.iter().enumerate() {
                    x[p] = z[k];
                }
                break;
            }
            // Step from x towards z until the first passive variable hits zero.
            let mut alpha = f64::INFINITY;
            for (k, &p) in passive.iter().enumerate() {
                if z[k] <= 0.0 {
                    let a = x[p] / (x[p] - z[k]);
                    alpha = alpha.min(a);
                }
            }
            for (k, &p) in passive.iter().enumerate() {
                x[p] += alpha * (z[k] - x[p]);
            }
            passive.retain(|&p| x[p] > 1e-14);
            for (p, xp) in x.iter_mut().enumerate() {
                if !passive.contains(&p) {
                    *xp = 0.0;
                }
            }
            if passive.is_empty() {
                break;
            }
        }
    }
    Ok((0..n).map(|j| x[j] * scale[j]).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn normal_eq(a: &[Vec<f64>], b: &[f64]) -> NormalEq {
        let mut eq = NormalEq::zeros(a[0].len());
        for (row, &t) in a.iter().zip(b) {
            eq.add_row(row, t, 1.0);
        }
        eq.symmetrize();
        eq
    }

    /// Deterministic pseudo-random numbers in [0,1) (tests need no external crate).
    use crate::test_util::uniform as lcg;

    #[test]
    fn recovers_positive_solution_exactly() {
        let mut s = 7u64;
        let truth = [2.0, 0.5, 3.0, 1.25];
        let a: Vec<Vec<f64>> = (0..50)
            .map(|_| (0..4).map(|_| lcg(&mut s)).collect())
            .collect();
        let b: Vec<f64> = a
            .iter()
            .map(|r| r.iter().zip(&truth).map(|(x, y)| x * y).sum())
            .collect();
        let x = nnls(&normal_eq(&a, &b)).unwrap();
        for (xi, ti) in x.iter().zip(&truth) {
            assert!((xi - ti).abs() < 1e-9, "{x:?}");
        }
    }

    #[test]
    fn clamps_negative_coefficient_and_satisfies_kkt() {
        let mut s = 11u64;
        let truth = [2.0, -1.0, 3.0];
        let a: Vec<Vec<f64>> = (0..60)
            .map(|_| (0..3).map(|_| lcg(&mut s)).collect())
            .collect();
        let b: Vec<f64> = a
            .iter()
            .map(|r| r.iter().zip(&truth).map(|(x, y)| x * y).sum())
            .collect();
        let eq = normal_eq(&a, &b);
        let x = nnls(&eq).unwrap();
        assert!(x.iter().all(|v| *v >= 0.0));
        assert_eq!(x[1], 0.0);
        // KKT: gradient zero on the positive set, non-positive on the zero set.
        for i in 0..3 {
            let w: f64 = eq.rhs[i] - (0..3).map(|j| eq.gram[i * 3 + j] * x[j]).sum::<f64>();
            if x[i] > 0.0 {
                assert!(w.abs() < 1e-8, "w[{i}] = {w}");
            } else {
                assert!(w <= 1e-8, "w[{i}] = {w}");
            }
        }
    }

    #[test]
    fn duplicate_and_zero_columns_do_not_break_it() {
        let mut s = 3u64;
        let a: Vec<Vec<f64>> = (0..40)
            .map(|_| {
                let u = lcg(&mut s);
                vec![1.0, 1.0, u, 0.0]
            })
            .collect();
        let b: Vec<f64> = a.iter().map(|r| 5.0 + 2.0 * r[2]).collect();
        let x = nnls(&normal_eq(&a, &b)).unwrap();
        assert!((x[0] + x[1] - 5.0).abs() < 1e-9, "{x:?}");
        assert!((x[2] - 2.0).abs() < 1e-9);
        assert_eq!(x[3], 0.0);
    }

    #[test]
    fn rejects_nan_and_bad_shape() {
        let mut eq = NormalEq::zeros(2);
        eq.gram[0] = f64::NAN;
        assert!(matches!(nnls(&eq), Err(CoreError::Value(_))));
        let bad = NormalEq {
            n: 2,
            gram: vec![0.0; 3],
            rhs: vec![0.0; 2],
        };
        assert!(matches!(nnls(&bad), Err(CoreError::Shape(_))));
    }
}
