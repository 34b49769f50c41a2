//! The Python module `gpudvfs._core`: thin PyO3 wrappers over the pure-Rust core, one file
//! per model. Arrays arrive as contiguous float64 numpy arrays (the Python layer converts),
//! batch work runs with the GIL released, and every core error becomes a Python ValueError
//! (a refused allocation a MemoryError).

mod budget;
mod govern;
mod io;
mod online;
mod power;
mod time;

use numpy::{PyReadonlyArray, PyUntypedArrayMethods};
use pyo3::exceptions::{PyMemoryError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::error::CoreError;

impl From<CoreError> for PyErr {
    fn from(e: CoreError) -> PyErr {
        match e {
            CoreError::Memory(_) => PyMemoryError::new_err(e.to_string()),
            _ => PyValueError::new_err(e.to_string()),
        }
    }
}

/// The data of an array argument, in row-major order. `as_slice` alone also takes a
/// Fortran-ordered array, whose rows it would hand over as columns.
fn slice<'a, T: numpy::Element, D: numpy::ndarray::Dimension>(
    name: &str,
    a: &'a PyReadonlyArray<'_, T, D>,
) -> PyResult<&'a [T]> {
    let err = || PyValueError::new_err(format!("{name} must be a C-contiguous array"));
    if !a.is_c_contiguous() {
        return Err(err());
    }
    a.as_slice().map_err(|_| err())
}

/// A required entry of a state dictionary, converted.
fn item<'py, T: for<'a> FromPyObject<'a, 'py>>(d: &Bound<'py, PyDict>, key: &str) -> PyResult<T> {
    d.get_item(key)?
        .ok_or_else(|| PyValueError::new_err(format!("state lacks {key:?}")))?
        .extract::<T>()
        .map_err(|e| {
            let e: PyErr = e.into();
            PyValueError::new_err(format!("state entry {key:?}: {e}"))
        })
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    budget::register(m)?;
    govern::register(m)?;
    io::register(m)?;
    online::register(m)?;
    power::register(m)?;
    time::register(m)?;
    Ok(())
}
