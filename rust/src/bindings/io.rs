//! Bindings of the readers' fast path: the columns of a chunk of CSV lines.

use numpy::ndarray::Array2;
use numpy::{IntoPyArray, PyArray1, PyArray2};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::pybacked::{PyBackedBytes, PyBackedStr};

use crate::csv_columns::split_columns;

/// Numeric columns (float64) and text columns (UCS-4 code points, [lines x width]: a `U<width>`
/// array's buffer), each kind in field order.
type ChunkColumns<'py> = (
    Vec<Bound<'py, PyArray1<f64>>>,
    Vec<Bound<'py, PyArray2<u32>>>,
);

/// Lines as str, or as the bytes of a file (UTF-8, else they need the csv module's reader).
#[derive(FromPyObject)]
enum Text {
    Str(PyBackedStr),
    Bytes(PyBackedBytes),
}

/// The columns of ``text`` (lines joined by "\n", str or UTF-8 bytes), ``numeric[j]`` saying whether field j is a
/// number, ``limit`` the csv module's field size limit; None where the lines need the csv
/// module (see `csv_columns.rs`).
#[pyfunction]
fn csv_columns<'py>(
    py: Python<'py>,
    text: Text,
    numeric: Vec<bool>,
    limit: usize,
) -> PyResult<Option<ChunkColumns<'py>>> {
    let read = py.detach(|| match &text {
        Text::Str(s) => split_columns(s, &numeric, limit),
        Text::Bytes(b) => {
            std::str::from_utf8(b).map_or(Ok(None), |s| split_columns(s, &numeric, limit))
        }
    });
    let Some(cols) = read? else {
        return Ok(None);
    };
    let numbers = cols
        .numbers
        .into_iter()
        .map(|v| v.into_pyarray(py))
        .collect();
    let texts = cols
        .texts
        .into_iter()
        .map(|t| {
            let rows = t.chars.len() / t.width;
            Array2::from_shape_vec((rows, t.width), t.chars)
                .map(|a| a.into_pyarray(py))
                .map_err(|e| PyValueError::new_err(e.to_string()))
        })
        .collect::<PyResult<_>>()?;
    Ok(Some((numbers, texts)))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(csv_columns, m)?)
}
