//! The parametric voltage curve of one domain: constant up to a break clock, then linear,
//! pinned at V = 1 at the reference clock (the shape the paper measured on Maxwell/Pascal,
//! Fig. 6):  V(f) = 1 + s * (max(0, x - xb) - max(0, x_ref - xb)),  x = f / f_ref, s >= 0.
//! It has two parameters per domain instead of one per clock, and it gives a voltage at
//! clocks that were never measured.

use super::voltage::Quartic;

/// Candidate break positions tried inside each interval between two measured clocks.
const BREAKS_PER_INTERVAL: usize = 24;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VoltageCurve {
    /// Normalized clock (f / f_ref) where the linear part starts.
    pub break_norm: f64,
    /// Slope dV/dx above the break (x normalized clock), >= 0.
    pub slope: f64,
}

impl VoltageCurve {
    pub const FLAT: VoltageCurve = VoltageCurve {
        break_norm: f64::INFINITY,
        slope: 0.0,
    };

    /// Voltage at normalized clock x (reference at x = 1).
    pub fn at(&self, x: f64) -> f64 {
        if self.slope == 0.0 {
            return 1.0;
        }
        1.0 + self.slope * ((x - self.break_norm).max(0.0) - (1.0 - self.break_norm).max(0.0))
    }
}

fn shape(x: f64, xb: f64) -> f64 {
    (x - xb).max(0.0) - (1.0 - xb).max(0.0)
}

/// Best curve for per-level objectives `objs` (quartics in V, pooled over the rows at each
/// clock) at normalized clocks `xs` (sorted ascending), with V kept in [v_min, v_max].
/// The slope is solved exactly (the objective is a quartic in s); the break is searched on a
/// grid of `BREAKS_PER_INTERVAL` points per interval between measured clocks, plus "flat".
pub fn fit_curve(objs: &[Quartic], xs: &[f64], v_min: f64, v_max: f64) -> VoltageCurve {
    let flat_cost: f64 = objs.iter().map(|q| q.eval(1.0)).sum();
    let mut best = (flat_cost, VoltageCurve::FLAT);
    let mut try_break = |xb: f64| {
        let mut poly = Quartic::default();
        let mut s_max = f64::INFINITY;
        for (q, &x) in objs.iter().zip(xs) {
            let g = shape(x, xb);
            poly.add(&q.substitute_affine(g));
            if g > 0.0 {
                s_max = s_max.min((v_max - 1.0) / g);
            } else if g < 0.0 {
                s_max = s_max.min((1.0 - v_min) / -g);
            }
        }
        if !s_max.is_finite() || s_max <= 0.0 {
            return; // every clock on the flat part: same as FLAT
        }
        let s = poly.argmin(0.0, s_max, 0.0);
        let cost = poly.eval(s);
        if cost < best.0 {
            best = (
                cost,
                VoltageCurve {
                    break_norm: xb,
                    slope: s,
                },
            );
        }
    };
    // A break at or below the lowest clock makes the curve linear over the whole range.
    try_break(xs[0]);
    for w in xs.windows(2) {
        for i in 1..BREAKS_PER_INTERVAL {
            try_break(w[0] + (w[1] - w[0]) * i as f64 / BREAKS_PER_INTERVAL as f64);
        }
        try_break(w[1]);
    }
    best.1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recovers_a_noise_free_curve() {
        let truth = VoltageCurve {
            break_norm: 0.9,
            slope: 0.8,
        };
        let xs: Vec<f64> = (0..16).map(|i| 0.6 + 0.04 * i as f64).collect();
        // Per-level objective: 10 * (V - V_true)^2, i.e. one well-determined voltage per clock.
        let objs: Vec<Quartic> = xs
            .iter()
            .map(|&x| {
                let m = truth.at(x);
                Quartic([0.0, 0.0, 10.0, -20.0 * m, 10.0 * m * m])
            })
            .collect();
        let c = fit_curve(&objs, &xs, 0.5, 1.5);
        for &x in &xs {
            assert!((c.at(x) - truth.at(x)).abs() < 0.01, "{c:?} at {x}");
        }
        assert!((c.at(1.0) - 1.0).abs() < 1e-15);
    }

    #[test]
    fn flat_data_gives_flat_curve_and_bounds_hold() {
        let xs = [0.5, 0.75, 1.0, 1.25];
        let objs: Vec<Quartic> = xs
            .iter()
            .map(|_| Quartic([0.0, 0.0, 1.0, -2.0, 1.0]))
            .collect();
        let c = fit_curve(&objs, &xs, 0.5, 1.5);
        assert!(xs.iter().all(|&x| (c.at(x) - 1.0).abs() < 1e-12));
        // Wants V = 3 at the top clock: the slope stops at the upper bound.
        let mut objs2 = objs.clone();
        objs2[3] = Quartic([0.0, 0.0, 100.0, -600.0, 900.0]);
        let c = fit_curve(&objs2, &xs, 0.5, 1.5);
        assert!(xs
            .iter()
            .all(|&x| c.at(x) <= 1.5 + 1e-12 && c.at(x) >= 0.5 - 1e-12));
    }
}
