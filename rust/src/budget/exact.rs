//! The exact optimum of a small budget, the oracle of the tests and the `gap_max` figure: a
//! dynamic program over the Pareto front of (cost, value) of the groups chosen so far, each
//! state remembering its option and predecessor. Exact for any float costs; the front can
//! grow with the product of the option counts, so this is for small instances only.

use super::{Instance, Solution};
use crate::error::{CoreError, CoreResult};

/// States kept per stage before the instance counts as too large for the exact solver.
const MAX_STATES: usize = 1 << 20;

#[derive(Clone, Copy)]
struct State {
    cost: f64,
    value: f64,
    option: usize,
    parent: usize,
}

pub fn solve_exact(inst: &Instance) -> CoreResult<Solution> {
    inst.validate()?;
    pareto_dp(inst, MAX_STATES).ok_or_else(|| {
        CoreError::Value(format!(
            "the exact solver's Pareto front passed {MAX_STATES} states: too large an instance"
        ))
    })
}

/// The optimum of a feasible instance, or None once a stage's front passes `max_states`.
pub(super) fn pareto_dp(inst: &Instance, max_states: usize) -> Option<Solution> {
    let mut stages: Vec<Vec<State>> = Vec::with_capacity(inst.n_groups);
    let mut front = vec![State {
        cost: 0.0,
        value: 0.0,
        option: 0,
        parent: 0,
    }];
    for i in 0..inst.n_groups {
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
            .filter(|st| st.cost <= inst.budget)
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
