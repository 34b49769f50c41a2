//! The exact optimum of a small budget, the oracle of the tests and the `gap_max` figure: a
//! dynamic program over the Pareto front of (cost, value) of the groups chosen so far, each
//! state remembering its option and predecessor. Exact for any float costs; the front can
//! grow with the product of the option counts, so this is for small instances only.

use super::{Instance, Solution};
use crate::error::{CoreError, CoreResult};

/// States kept per stage before the instance counts as too large for the exact solver.
const MAX_STATES: usize = 1 << 20;
/// Candidate states of one stage (the front times the group's allowed options) before the
/// instance counts as too large: they are built before the front is pruned, so without a cap
/// a few groups of many options would ask for more memory than exists and abort the process.
/// 2^25 candidates of 32 bytes: 1 GiB at most.
const MAX_CANDIDATES: usize = 1 << 25;

#[derive(Clone, Copy)]
struct State {
    cost: f64,
    value: f64,
    option: usize,
    parent: usize,
}

pub fn solve_exact(inst: &Instance) -> CoreResult<Solution> {
    inst.validate()?;
    pareto_dp(inst, MAX_STATES, None).ok_or_else(|| {
        CoreError::Value(format!(
            "too large an instance for the exact solver: its Pareto front passed \
             {MAX_STATES} states, or a stage {MAX_CANDIDATES} candidates"
        ))
    })
}

/// A known solution's value, and a rate of value per watt for the Lagrangian bound that
/// tells which states cannot lead to a better one.
pub(super) struct Incumbent {
    pub value: f64,
    pub rate: f64,
}

/// The optimum of a feasible instance, or None once a stage's front passes `max_states`
/// (or, given an incumbent, when nothing beats it). A state goes as soon as the cheapest
/// options of the groups left overrun the budget, or when even the Lagrangian bound at the
/// incumbent's rate on its completions (each group left at its least value + rate x cost,
/// less rate x the budget) reaches the incumbent's value: the front then stays narrow.
pub(super) fn pareto_dp(
    inst: &Instance,
    max_states: usize,
    incumbent: Option<Incumbent>,
) -> Option<Solution> {
    let n = inst.n_groups;
    let (best, rate) = incumbent.map_or((f64::INFINITY, 0.0), |b| (b.value, b.rate));
    let (mut rest_cost, mut rest_bound) = (vec![0.0; n + 1], vec![0.0; n + 1]);
    for i in (0..n).rev() {
        let least = |f: &dyn Fn(usize) -> f64| inst.options(i).map(f).fold(f64::INFINITY, f64::min);
        rest_cost[i] = rest_cost[i + 1] + least(&|j| inst.cost(i, j));
        rest_bound[i] = rest_bound[i + 1] + least(&|j| inst.value(i, j) + rate * inst.cost(i, j));
    }
    let mut stages: Vec<Vec<State>> = Vec::with_capacity(inst.n_groups);
    let mut front = vec![State {
        cost: 0.0,
        value: 0.0,
        option: 0,
        parent: 0,
    }];
    for i in 0..n {
        let candidates = front.len().checked_mul(inst.options(i).count());
        if candidates.is_none_or(|c| c > MAX_CANDIDATES) {
            return None;
        }
        let mut next: Vec<State> = front
            .iter()
            .enumerate()
            .flat_map(|(s, st)| {
                inst.options(i).map(move |j| State {
                    cost: st.cost + inst.cost(i, j),
                    value: st.value + inst.value(i, j),
                    option: j,
                    parent: s,
                })
            })
            .filter(|st| {
                st.cost + rest_cost[i + 1] <= inst.budget
                    && st.value + rest_bound[i + 1] - rate * (inst.budget - st.cost) < best
            })
            .collect();
        next.sort_by(|a, b| a.cost.total_cmp(&b.cost).then(a.value.total_cmp(&b.value)));
        let mut kept: Vec<State> = Vec::with_capacity(next.len());
        for st in next {
            if kept.last().is_none_or(|l| st.value < l.value) {
                kept.push(st);
            }
        }
        if kept.is_empty() || kept.len() > max_states {
            return None;
        }
        stages.push(std::mem::replace(&mut front, kept));
    }
    // The last state of the front has the least value (values fall as cost rises).
    let mut s = front.len() - 1;
    let mut choice = vec![0; inst.n_groups];
    for i in (0..inst.n_groups).rev() {
        let st = if i + 1 == inst.n_groups {
            front[s]
        } else {
            stages[i + 1][s]
        };
        choice[i] = st.option;
        s = st.parent;
    }
    let (cost, value) = inst.evaluate(&choice);
    Some(Solution {
        choice,
        cost,
        value,
        bound: value,
    })
}
