//! The Python module `gpudvfs._core`: thin PyO3 wrappers over the pure-Rust core.
//! Arrays arrive as contiguous float64 numpy arrays (the Python layer converts), batch work
//! runs with the GIL released, and every core error becomes a Python ValueError.

use numpy::{IntoPyArray, PyArray2, PyReadonlyArray1, PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::error::CoreError;
use crate::power_eq::{power_grid as power_grid_core, PowerCoefficients};

impl From<CoreError> for PyErr {
    fn from(e: CoreError) -> PyErr {
        PyValueError::new_err(e.to_string())
    }
}

fn slice<'a, T: numpy::Element, D: numpy::ndarray::Dimension>(
    name: &str,
    a: &'a numpy::PyReadonlyArray<'_, T, D>,
) -> PyResult<&'a [T]> {
    a.as_slice()
        .map_err(|_| PyValueError::new_err(format!("{name} must be a C-contiguous array")))
}

/// Power [n_workloads x n_configs] from the equations of the power model.
#[pyfunction]
#[pyo3(signature = (util, domain_sizes, static_coef, idle_coef, weights, freq, volt))]
#[allow(clippy::too_many_arguments)]
fn power_grid<'py>(
    py: Python<'py>,
    util: PyReadonlyArray2<'py, f64>,
    domain_sizes: Vec<usize>,
    static_coef: PyReadonlyArray1<'py, f64>,
    idle_coef: PyReadonlyArray1<'py, f64>,
    weights: PyReadonlyArray1<'py, f64>,
    freq: PyReadonlyArray2<'py, f64>,
    volt: PyReadonlyArray2<'py, f64>,
) -> PyResult<Bound<'py, PyArray2<f64>>> {
    let coef = PowerCoefficients {
        domain_sizes,
        static_coef: slice("static_coef", &static_coef)?.to_vec(),
        idle_coef: slice("idle_coef", &idle_coef)?.to_vec(),
        weights: slice("weights", &weights)?.to_vec(),
    };
    let nd = coef.n_domains();
    let (n_work, n_comp) = (util.shape()[0], util.shape()[1]);
    if n_comp != coef.n_components() {
        return Err(CoreError::Shape(format!(
            "utilization has {n_comp} columns, the coefficients {} components",
            coef.n_components()
        ))
        .into());
    }
    for (name, a) in [("freq", &freq), ("volt", &volt)] {
        if a.shape()[1] != nd {
            return Err(CoreError::Shape(format!("{name} has {} columns, expected {nd} domains", a.shape()[1])).into());
        }
    }
    let n_conf = freq.shape()[0];
    let (u, f, v) = (slice("util", &util)?, slice("freq", &freq)?, slice("volt", &volt)?);
    let out = py.detach(|| power_grid_core(&coef, u, f, v))?;
    let arr = numpy::ndarray::Array2::from_shape_vec((n_work, n_conf), out)
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    Ok(arr.into_pyarray(py))
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(power_grid, m)?)?;
    Ok(())
}
