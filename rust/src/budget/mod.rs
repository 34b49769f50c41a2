//! Cluster power budgets: one clock pair per GPU so that the predicted power of all GPUs
//! stays within a budget while the total of a value (time, or energy) is least. A
//! multiple-choice knapsack: `lagrange` solves it at scale (the LP relaxation by the
//! Lagrangian greedy, then repair and exchanges, with the LP bound as a certificate),
//! `exact` by a Pareto dynamic program for small instances (the tests' oracle).

mod exact;
mod hull;
mod lagrange;

pub use exact::solve_exact;
pub use lagrange::solve;

use crate::error::{CoreError, CoreResult};

/// N groups (GPUs) of K options (clock pairs), row-major: `cost[i * k + j]` is the power of
/// GPU i at option j and `value[i * k + j]` what it adds to the objective. A NaN value marks
/// an option a GPU may not take (e.g. over its slowdown bound).
pub struct Instance<'a> {
    pub cost: &'a [f64],
    pub value: &'a [f64],
    pub n_groups: usize,
    pub n_options: usize,
    pub budget: f64,
}

/// A choice of one option per group.
#[derive(Debug, Clone, PartialEq)]
pub struct Solution {
    pub choice: Vec<usize>,
    pub cost: f64,
    pub value: f64,
    /// A lower bound on the optimal value (the LP relaxation's optimum): `value / bound - 1`
    /// bounds the optimality gap. The exact solver's bound is its value.
    pub bound: f64,
}

/// A row's first pass: its cheapest allowed option as (cost, value), the least value among
/// equal costs, and its option of least value as (value, cost), the cheapest among equals.
pub(super) struct RowScan {
    pub cheapest: (f64, f64),
    pub best: (f64, f64),
}

impl Instance<'_> {
    pub fn validate(&self) -> CoreResult<()> {
        self.validate_shape()?;
        let least = (0..self.n_groups)
            .map(|i| self.scan_row(i).map(|r| r.cheapest.0))
            .sum::<CoreResult<f64>>()?;
        self.validate_least(least)
    }

    /// The sizes and the budget: what is checked before any row is read.
    fn validate_shape(&self) -> CoreResult<()> {
        let size = self.n_groups * self.n_options;
        if self.n_groups == 0 || self.n_options == 0 {
            return Err(CoreError::Shape(
                "a budget needs at least one GPU and one option".into(),
            ));
        }
        if self.cost.len() != size || self.value.len() != size {
            return Err(CoreError::Shape(format!(
                "cost and value need {} x {} = {size} entries, got {} and {}",
                self.n_groups,
                self.n_options,
                self.cost.len(),
                self.value.len()
            )));
        }
        if !(self.budget.is_finite() && self.budget >= 0.0) {
            return Err(CoreError::Value(format!(
                "budget must be finite and >= 0, got {}",
                self.budget
            )));
        }
        Ok(())
    }

    /// Row i's numbers checked, in the same pass that finds its extreme options (the solver
    /// at scale reads each row once here, while building its hull).
    fn scan_row(&self, i: usize) -> CoreResult<RowScan> {
        let (cost, value) = self.row(i);
        // Branch-free first pass (this runs over every option of every GPU): whether all
        // numbers are valid, the least allowed cost and the least value (`min` passes over
        // the NaN of a forbidden option).
        let (mut valid, mut least_c, mut least_v) = (true, f64::INFINITY, f64::INFINITY);
        for (&c, &v) in cost.iter().zip(value) {
            valid &= c.is_finite() & (c >= 0.0) & !v.is_infinite();
            least_c = least_c.min(if v.is_nan() { f64::INFINITY } else { c });
            least_v = least_v.min(v);
        }
        if !valid {
            return Err(self.row_error(i));
        }
        if least_v == f64::INFINITY {
            return Err(CoreError::Value(format!(
                "GPU {i} has no allowed option (every value is NaN)"
            )));
        }
        // Ties: the least value at the least cost, the least cost at the least value.
        let (mut at_c, mut at_v) = (f64::INFINITY, f64::INFINITY);
        for (&c, &v) in cost.iter().zip(value) {
            if c == least_c {
                at_c = at_c.min(v);
            }
            if v == least_v {
                at_v = at_v.min(c);
            }
        }
        Ok(RowScan {
            cheapest: (least_c, at_c),
            best: (least_v, at_v),
        })
    }

    /// What is wrong with row i, which the first pass found invalid.
    fn row_error(&self, i: usize) -> CoreError {
        let (cost, value) = self.row(i);
        if let Some(c) = cost.iter().find(|c| !(c.is_finite() && **c >= 0.0)) {
            return CoreError::Value(format!("costs must be finite and >= 0, found {c}"));
        }
        let v = value
            .iter()
            .find(|v| v.is_infinite())
            .expect("an invalid row has a bad number");
        CoreError::Value(format!(
            "values must be finite (NaN marks a forbidden option), found {v}"
        ))
    }

    /// `least`: the total cost of every group at its cheapest allowed option.
    fn validate_least(&self, least: f64) -> CoreResult<()> {
        if least > self.budget {
            // Rounded up to 0.1 W, so that the figure printed is never one the budget meets.
            return Err(CoreError::Value(format!(
                "the budget {} W is below the {} W of every GPU at its lowest-power allowed option",
                self.budget,
                (least * 10.0).ceil() / 10.0
            )));
        }
        Ok(())
    }

    /// Group i's costs and values.
    fn row(&self, i: usize) -> (&[f64], &[f64]) {
        let r = i * self.n_options..(i + 1) * self.n_options;
        (&self.cost[r.clone()], &self.value[r])
    }

    fn cost(&self, i: usize, j: usize) -> f64 {
        self.cost[i * self.n_options + j]
    }

    fn value(&self, i: usize, j: usize) -> f64 {
        self.value[i * self.n_options + j]
    }

    /// The allowed options of group i.
    fn options(&self, i: usize) -> impl Iterator<Item = usize> + Clone + '_ {
        (0..self.n_options).filter(move |&j| !self.value(i, j).is_nan())
    }

    fn evaluate(&self, choice: &[usize]) -> (f64, f64) {
        choice
            .iter()
            .enumerate()
            .fold((0.0, 0.0), |(c, v), (i, &j)| {
                (c + self.cost(i, j), v + self.value(i, j))
            })
    }
}

#[cfg(test)]
mod tests;
