use super::*;
use crate::test_util::uniform;

/// A random instance shaped like clock pairs: power rises and time falls with the clock,
/// with noise, some options forbidden; the budget between the cheapest and dearest totals.
fn random(seed: u64, n: usize, k: usize, tight: f64) -> (Vec<f64>, Vec<f64>, f64) {
    let mut s = seed;
    let (mut cost, mut value) = (Vec::with_capacity(n * k), Vec::with_capacity(n * k));
    let (mut lo, mut hi) = (0.0, 0.0);
    for _ in 0..n {
        let (p0, p1, t0, share) = (
            50.0 + 100.0 * uniform(&mut s),
            100.0 + 200.0 * uniform(&mut s),
            1.0 + 9.0 * uniform(&mut s),
            uniform(&mut s),
        );
        let (mut cmin, mut cmax) = (f64::INFINITY, 0.0f64);
        for j in 0..k {
            let f = 0.3 + 0.7 * (j as f64 + uniform(&mut s)) / k as f64;
            let c = p0 + p1 * f.powf(2.0 + uniform(&mut s)) * (0.9 + 0.2 * uniform(&mut s));
            let v = t0 * (1.0 - share + share / f) * (0.97 + 0.06 * uniform(&mut s));
            let forbidden = j > 0 && uniform(&mut s) < 0.1;
            cost.push(c);
            value.push(if forbidden { f64::NAN } else { v });
            if !forbidden {
                cmin = cmin.min(c);
                cmax = cmax.max(c);
            }
        }
        lo += cmin;
        hi += cmax;
    }
    (cost, value, lo + tight * (hi - lo))
}

fn instance<'a>(
    cost: &'a [f64],
    value: &'a [f64],
    n: usize,
    k: usize,
    budget: f64,
) -> Instance<'a> {
    Instance {
        cost,
        value,
        n_groups: n,
        n_options: k,
        budget,
    }
}

fn brute(inst: &Instance) -> f64 {
    let mut best = f64::INFINITY;
    let total = inst.n_options.pow(inst.n_groups as u32);
    for code in 0..total {
        let mut c = code;
        let choice: Vec<usize> = (0..inst.n_groups)
            .map(|_| {
                let j = c % inst.n_options;
                c /= inst.n_options;
                j
            })
            .collect();
        let (cost, value) = inst.evaluate(&choice);
        if !value.is_nan() && cost <= inst.budget {
            best = best.min(value);
        }
    }
    best
}

#[test]
fn exact_matches_enumeration() {
    for seed in 0..60 {
        let (n, k) = (1 + seed as usize % 4, 2 + seed as usize % 5);
        let (cost, value, budget) = random(seed, n, k, 0.1 + 0.8 * (seed % 7) as f64 / 7.0);
        let inst = instance(&cost, &value, n, k, budget);
        let exact = solve_exact(&inst).unwrap();
        assert!((exact.value - brute(&inst)).abs() < 1e-9, "seed {seed}");
        assert!(exact.cost <= budget);
    }
}

#[test]
fn heuristic_is_feasible_bounded_and_near_the_optimum() {
    let mut worst: f64 = 0.0;
    for seed in 0..300 {
        let (n, k) = (2 + seed as usize % 35, 2 + (seed as usize * 7) % 15);
        let (cost, value, budget) =
            random(seed, n, k, 0.05 + 0.9 * ((seed * 13) % 17) as f64 / 17.0);
        let inst = instance(&cost, &value, n, k, budget);
        let exact = solve_exact(&inst).unwrap();
        let h = solve(&inst).unwrap();
        assert!(h.cost <= budget + 1e-9, "seed {seed}: over budget");
        assert!(
            h.choice
                .iter()
                .enumerate()
                .all(|(i, &j)| !value[i * k + j].is_nan()),
            "seed {seed}: forbidden"
        );
        assert!(
            h.value >= exact.value - 1e-9 && h.bound <= exact.value + 1e-9,
            "seed {seed}"
        );
        worst = worst.max(h.value / exact.value - 1.0);
    }
    assert!(worst <= 0.005, "worst gap {worst}");
}

#[test]
fn generous_budget_gives_every_gpu_its_best_option() {
    let (cost, value, _) = random(7, 20, 30, 1.0);
    let inst = instance(&cost, &value, 20, 30, 1e9);
    let h = solve(&inst).unwrap();
    for i in 0..20 {
        let best = (0..30)
            .filter(|&j| !value[i * 30 + j].is_nan())
            .map(|j| value[i * 30 + j])
            .fold(f64::INFINITY, f64::min);
        assert_eq!(value[i * 30 + h.choice[i]], best);
    }
    assert_eq!(h.bound, h.value);
}

#[test]
fn bad_instances_are_refused() {
    let (c, v) = (vec![1.0, 2.0], vec![2.0, 1.0]);
    let ok = |budget| instance(&c, &v, 1, 2, budget);
    assert!(solve(&ok(0.5)).unwrap_err().to_string().contains("below"));
    // The least cost is printed rounded up to 0.1 W, not to the float's last digit.
    let least = vec![176.30362710634301, 200.0];
    let msg = solve(&instance(&least, &v, 1, 2, 176.0))
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("the budget 176 W is below the 176.4 W"),
        "{msg}"
    );
    assert!(solve(&ok(f64::NAN)).is_err());
    assert!(solve(&instance(&c, &v, 2, 2, 9.0)).is_err());
    let nan = vec![f64::NAN, f64::NAN];
    assert!(solve(&instance(&c, &nan, 1, 2, 9.0))
        .unwrap_err()
        .to_string()
        .contains("no allowed option"));
    let neg = vec![-1.0, 2.0];
    assert!(solve_exact(&instance(&neg, &v, 1, 2, 9.0)).is_err());
}

/// Two GPUs of 65,536 options each, every option on the Pareto front: the exact solver's
/// second stage has 2^32 candidate states (128 GiB), which it built before pruning and so
/// aborted the process. It is refused as too large at once.
#[test]
fn exact_refuses_an_instance_whose_candidates_do_not_fit() {
    let k = 1 << 16;
    let cost: Vec<f64> = (0..2 * k).map(|j| (j % k) as f64).collect();
    let value: Vec<f64> = (0..2 * k).map(|j| (k - j % k) as f64).collect();
    let inst = instance(&cost, &value, 2, k, 1e12);
    let e = solve_exact(&inst).unwrap_err();
    assert!(matches!(e, CoreError::Value(_)), "{e}");
    assert!(e.to_string().contains("too large"), "{e}");
    // The heuristic solves it: both GPUs at their option of least value.
    let h = solve(&inst).unwrap();
    assert_eq!(h.choice, vec![k - 1, k - 1]);
}
