//! Bindings of the cluster power budget: one clock pair per GPU under a total power.

use numpy::{IntoPyArray, PyArray1, PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use super::slice;
use crate::budget::{solve, solve_exact, Instance, Solution};

/// (choice per GPU, total cost, total value, LP lower bound) for `cost` and `value` of shape
/// [GPUs x options]; `exact` runs the Pareto program (small instances only).
#[pyfunction]
#[pyo3(signature = (cost, value, budget, exact=false))]
fn budget_solve<'py>(
    py: Python<'py>,
    cost: PyReadonlyArray2<'py, f64>,
    value: PyReadonlyArray2<'py, f64>,
    budget: f64,
    exact: bool,
) -> PyResult<(Bound<'py, PyArray1<usize>>, f64, f64, f64)> {
    if cost.shape() != value.shape() {
        return Err(PyValueError::new_err(format!(
            "cost {:?} and value {:?} must have one shape [GPUs x options]",
            cost.shape(),
            value.shape()
        )));
    }
    let [n_groups, n_options] = [cost.shape()[0], cost.shape()[1]];
    let (c, v) = (slice("cost", &cost)?, slice("value", &value)?);
    let inst = Instance {
        cost: c,
        value: v,
        n_groups,
        n_options,
        budget,
    };
    let Solution {
        choice,
        cost,
        value,
        bound,
    } = py.detach(|| {
        if exact {
            solve_exact(&inst)
        } else {
            solve(&inst)
        }
    })?;
    Ok((choice.into_pyarray(py), cost, value, bound))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(budget_solve, m)?)?;
    Ok(())
}
