//! The budget at scale. Every group starts at its cheapest option; the steps along the
//! groups' lower hulls are taken in order of value saved per watt while they fit (the
//! Lagrangian relaxation's greedy, whose fractional step gives the LP bound). Then repair:
//! each group moves to the best option (hull or not) the leftover budget pays for. Then the
//! core (as in Pisinger's algorithms for knapsack problems): the groups whose hull steps lie
//! nearest the critical rate are solved exactly among their best options at that rate,
//! the others fixed; last, exchanges among a wider core, one group giving up watts so
//! another can take a better hull point, while the total improves.

use super::exact::{pareto_dp, Incumbent};
use super::hull::{frontier, Point};
use super::{Instance, Solution};
use crate::error::CoreResult;
use crate::parallel::map_range;

/// Groups nearest the critical rate solved exactly together, with their best options at that rate.
const CORE_GROUPS: usize = 24;
const CORE_OPTIONS: usize = 12;
/// The core's Pareto front is abandoned (the exchanges still run) past this many states.
const CORE_STATES: usize = 1 << 14;
/// Groups nearest the critical rate searched for exchanges, each over the hull points this
/// many steps either side of its position.
const EXCHANGE_GROUPS: usize = 48;
const EXCHANGE_STEPS: usize = 8;
/// Halvings of the rate interval: enough to reach adjacent floats (where selection's
/// bracket is not taken).
const BISECTIONS: usize = 200;

pub fn solve(inst: &Instance) -> CoreResult<Solution> {
    inst.validate_shape()?;
    let (fronts, hulls): (Vec<_>, Vec<_>) =
        map_range(inst.n_groups, inst.n_groups * inst.n_options, |i| {
            frontier(inst, i)
        })
        .into_iter()
        .collect::<CoreResult<Vec<_>>>()?
        .into_iter()
        .map(|f| (f.front, f.hull))
        .unzip();
    let least: f64 = hulls.iter().map(|h| h[0].cost).sum();
    inst.validate_least(least)?;
    let rates: Vec<Vec<f64>> = hulls
        .iter()
        .map(|h| {
            h.windows(2)
                .map(|w| (w[0].value - w[1].value) / (w[1].cost - w[0].cost))
                .collect()
        })
        .collect();
    // Position on each hull taking every step saving more than `rate` per watt (rates fall along a hull).
    let at_rate = |rate: f64| -> Vec<usize> {
        rates
            .iter()
            .map(|r| r.partition_point(|&x| x > rate))
            .collect()
    };
    let spend = |at: &[usize]| -> f64 { at.iter().zip(&hulls).map(|(&k, h)| h[k].cost).sum() };
    // Bisection for the critical rate: every step above `hi` fits (taking them gives `at`), not
    // every step above `lo` (`at_lo`). Selection finds the rate directly; the bisection is left
    // with nothing to narrow unless the sums' rounding disagrees with the selection's.
    let bracket = critical_rate(&rates, &hulls, inst.budget - least).and_then(|r| {
        // The float just below r (> 0: a hull step saves value); f64::next_down is newer than the MSRV.
        let below = f64::from_bits(r.to_bits() - 1);
        let (at_r, at_below) = (at_rate(r), at_rate(below));
        (spend(&at_r) <= inst.budget && spend(&at_below) > inst.budget)
            .then_some((below, r, at_below, at_r))
    });
    let (mut lo, mut hi, mut at_lo, mut at) = bracket.unwrap_or_else(|| {
        let top = rates
            .iter()
            .filter_map(|r| r.first().copied())
            .fold(0.0, f64::max);
        (0.0, top, at_rate(0.0), at_rate(top))
    });
    if spend(&at_lo) <= inst.budget {
        at = at_lo.clone(); // every step fits
    } else {
        for _ in 0..BISECTIONS {
            let mid = 0.5 * (lo + hi);
            if !(lo < mid && mid < hi) {
                break; // adjacent floats
            }
            let trial = at_rate(mid);
            if spend(&trial) <= inst.budget {
                (hi, at) = (mid, trial);
            } else {
                (lo, at_lo) = (mid, trial);
            }
        }
    }
    // The steps between the two rates, in order, as the greedy over all steps would take them.
    let upper = at_lo;
    let mut band: Vec<(f64, usize)> = (0..inst.n_groups)
        .flat_map(|i| {
            (at[i]..upper[i])
                .map(|k| (rates[i][k], i))
                .collect::<Vec<_>>()
        })
        .collect();
    band.sort_by(|a, b| b.0.total_cmp(&a.0));
    let mut cost = spend(&at);
    let mut value: f64 = at.iter().zip(&hulls).map(|(&k, h)| h[k].value).sum();
    let mut bound = None;
    let mut critical = f64::INFINITY;
    for &(rate, i) in &band {
        let (a, b) = (hulls[i][at[i]], hulls[i][at[i] + 1]);
        if cost + (b.cost - a.cost) <= inst.budget {
            cost += b.cost - a.cost;
            value += b.value - a.value;
            at[i] += 1;
        } else {
            // The first step that does not fit: the LP takes the fraction of it that does.
            bound = Some(value - rate * (inst.budget - cost));
            critical = rate;
            break;
        }
    }
    let bound = bound.unwrap_or(value);
    let mut choice: Vec<usize> = at.iter().zip(&hulls).map(|(&k, h)| h[k].option).collect();
    fill(inst, &fronts, &mut choice);
    if critical.is_finite() {
        let near = nearest_critical(&rates, critical);
        solve_core(
            inst,
            &mut choice,
            critical,
            &near[..near.len().min(CORE_GROUPS)],
        );
        fill(inst, &fronts, &mut choice);
        exchange(
            inst,
            &hulls,
            &mut choice,
            &near[..near.len().min(EXCHANGE_GROUPS)],
        );
    }
    let (cost, value) = inst.evaluate(&choice);
    Ok(Solution {
        choice,
        cost,
        value,
        bound: bound.min(value),
    })
}

/// The rate of the first hull step, by falling rate, that no longer fits in `room` watts
/// once every step of a higher rate is taken (None: they all fit). Weighted selection: the
/// median rate splits the steps, and only the side holding the answer is searched further,
/// so the work is linear in the number of steps.
fn critical_rate(rates: &[Vec<f64>], hulls: &[Vec<Point>], mut room: f64) -> Option<f64> {
    let mut steps: Vec<(f64, f64)> = rates
        .iter()
        .zip(hulls)
        .flat_map(|(r, h)| {
            r.iter()
                .zip(h.windows(2))
                .map(|(&x, w)| (x, w[1].cost - w[0].cost))
        })
        .collect();
    while !steps.is_empty() {
        let mid = steps.len() / 2;
        let pivot = steps
            .select_nth_unstable_by(mid, |a, b| a.0.total_cmp(&b.0))
            .1
             .0;
        let (mut higher, mut equal) = (0.0, 0.0);
        for &(r, c) in &steps {
            if r > pivot {
                higher += c;
            } else if r == pivot {
                equal += c;
            }
        }
        if higher > room {
            steps.retain(|s| s.0 > pivot);
        } else if higher + equal > room {
            return Some(pivot);
        } else {
            room -= higher + equal;
            steps.retain(|s| s.0 < pivot);
        }
    }
    None
}

/// Repair: each group in turn takes the option of least value that the leftover budget
/// pays for: on its Pareto front (by rising cost, falling value), the last point within
/// its current cost plus the leftover. The leftover only shrinks while no group moves to a
/// cheaper option, and then a group passed over has nothing new it can afford: another pass
/// is needed only after a move freed watts.
fn fill(inst: &Instance, fronts: &[Vec<Point>], choice: &mut [usize]) {
    let mut left = inst.budget - inst.evaluate(choice).0;
    loop {
        let mut freed = false;
        for ((i, c), front) in choice.iter_mut().enumerate().zip(fronts) {
            let (now_c, now_v) = (inst.cost(i, *c), inst.value(i, *c));
            let within = front.partition_point(|p| p.cost - now_c <= left);
            if let Some(best) = front[..within].last().filter(|p| p.value < now_v) {
                left -= best.cost - now_c;
                freed |= best.cost < now_c;
                *c = best.option;
            }
        }
        if !freed {
            return;
        }
    }
}

/// Groups by how near one of their hull steps' rates lies to the critical rate (as a ratio).
fn nearest_critical(rates: &[Vec<f64>], critical: f64) -> Vec<usize> {
    let mut near: Vec<(f64, usize)> = rates
        .iter()
        .enumerate()
        .filter_map(|(i, r)| {
            r.iter()
                .map(|&rate| (rate / critical).ln().abs())
                .reduce(f64::min)
                .map(|d| (d, i))
        })
        .collect();
    near.sort_by(|a, b| a.0.total_cmp(&b.0));
    near.into_iter().map(|(_, i)| i).collect()
}

/// The core groups re-chosen together by the exact Pareto program, each among its
/// CORE_OPTIONS options of least value + rate x cost (and its current one), the other
/// groups' costs fixed.
fn solve_core(inst: &Instance, choice: &mut [usize], rate: f64, core: &[usize]) {
    let m = CORE_OPTIONS;
    let (mut cost, mut value, mut option) = (
        vec![0.0; core.len() * m],
        vec![f64::NAN; core.len() * m],
        vec![0; core.len() * m],
    );
    for (g, &i) in core.iter().enumerate() {
        let mut opts: Vec<usize> = inst.options(i).collect();
        opts.sort_by(|&a, &b| {
            (inst.value(i, a) + rate * inst.cost(i, a))
                .total_cmp(&(inst.value(i, b) + rate * inst.cost(i, b)))
        });
        opts.truncate(m);
        if !opts.contains(&choice[i]) {
            *opts.last_mut().expect("a group has an option") = choice[i];
        }
        for (slot, &j) in opts.iter().enumerate() {
            (
                cost[g * m + slot],
                value[g * m + slot],
                option[g * m + slot],
            ) = (inst.cost(i, j), inst.value(i, j), j);
        }
    }
    let fixed: f64 = (0..inst.n_groups)
        .filter(|i| !core.contains(i))
        .map(|i| inst.cost(i, choice[i]))
        .sum();
    let sub = Instance {
        cost: &cost,
        value: &value,
        n_groups: core.len(),
        n_options: m,
        budget: inst.budget - fixed,
    };
    let now: f64 = core.iter().map(|&i| inst.value(i, choice[i])).sum();
    let incumbent = Incumbent { value: now, rate };
    if let Some(best) = pareto_dp(&sub, CORE_STATES, Some(incumbent)) {
        if best.value < now {
            for (g, &i) in core.iter().enumerate() {
                choice[i] = option[g * m + best.choice[g]];
            }
        }
    }
}

/// Exchanges among the core groups: group a moves to another hull point and group b to
/// another, where the pair fits the leftover budget and lowers the total; the best such
/// pair is taken until none helps.
fn exchange(inst: &Instance, hulls: &[Vec<Point>], choice: &mut [usize], core: &[usize]) {
    let (spent, total) = inst.evaluate(choice);
    let mut left = inst.budget - spent;
    // Gains below rounding noise would let the search wander among equal totals.
    let least_gain = 1e-12 * total.abs().max(f64::MIN_POSITIVE);
    loop {
        let mut best = (least_gain, None);
        for &a in core {
            let (ac, av) = (inst.cost(a, choice[a]), inst.value(a, choice[a]));
            for pa in window(&hulls[a], ac) {
                let freed = ac - pa.cost;
                for &b in core {
                    if b == a {
                        continue;
                    }
                    let (bc, bv) = (inst.cost(b, choice[b]), inst.value(b, choice[b]));
                    for pb in window(&hulls[b], bc) {
                        let gain = (av - pa.value) + (bv - pb.value);
                        if gain > best.0 && pb.cost - bc <= left + freed {
                            best = (gain, Some((a, pa.option, b, pb.option)));
                        }
                    }
                }
            }
        }
        let Some((a, ja, b, jb)) = best.1 else { return };
        left +=
            inst.cost(a, choice[a]) - inst.cost(a, ja) + inst.cost(b, choice[b]) - inst.cost(b, jb);
        choice[a] = ja;
        choice[b] = jb;
    }
}

/// The hull points within EXCHANGE_STEPS of where `cost` falls on the hull.
fn window(hull: &[Point], cost: f64) -> &[Point] {
    let k = hull.partition_point(|p| p.cost < cost);
    &hull[k.saturating_sub(EXCHANGE_STEPS)..(k + EXCHANGE_STEPS).min(hull.len())]
}
