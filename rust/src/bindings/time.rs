//! Bindings of the analytical time model: batched prediction, the two-term baseline's split
//! and the Eq. 4 fits.

use numpy::ndarray::Array2;
use numpy::{
    IntoPyArray, PyArray1, PyArray2, PyReadonlyArray1, PyReadonlyArray2, PyUntypedArrayMethods,
};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use super::{item, slice};
use crate::error::CoreError;
use crate::time::{
    core_shares, fit_dm_del, fit_dm_lat, predict_rows, TimeDevice, TimeMode, N_INPUTS,
};

fn device(d: &Bound<'_, PyDict>) -> PyResult<TimeDevice> {
    Ok(TimeDevice {
        sm_count: item(d, "sm_count")?,
        max_warps_per_sm: item(d, "max_warps_per_sm")?,
        dm_lat_a: item(d, "dm_lat_a")?,
        dm_lat_b: item(d, "dm_lat_b")?,
        dm_del_a: item(d, "dm_del_a")?,
        dm_del_b: item(d, "dm_del_b")?,
        l2_lat: item(d, "l2_lat")?,
        l2_del: item(d, "l2_del")?,
        sh_lat: item(d, "sh_lat")?,
        sh_del: item(d, "sh_del")?,
        inst_cycle: item(d, "inst_cycle")?,
        dp_inst_cycle: item(d, "dp_inst_cycle")?,
        sf_inst_cycle: item(d, "sf_inst_cycle")?,
        imad_inst_cycle: item(d, "imad_inst_cycle")?,
        overlap_p: item(d, "overlap_p")?,
        inst_lat: item(d, "inst_lat")?,
        parallel_queues: item(d, "parallel_queues")?,
        overlapped_rounds: item(d, "overlapped_rounds")?,
    })
}

/// The kernels' rows [n x N_INPUTS], read in place.
fn kernel_rows<'a>(inputs: &'a PyReadonlyArray2<'_, f64>) -> PyResult<&'a [f64]> {
    if inputs.shape()[1] != N_INPUTS {
        return Err(CoreError::Shape(format!(
            "inputs must have {N_INPUTS} columns, got {}",
            inputs.shape()[1]
        ))
        .into());
    }
    slice("inputs", inputs)
}

/// The GTX 980 preset as a dict of device parameters.
#[pyfunction]
fn time_device_gtx980(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let t = TimeDevice::gtx980();
    let d = PyDict::new(py);
    for (k, v) in [
        ("sm_count", t.sm_count),
        ("max_warps_per_sm", t.max_warps_per_sm),
        ("dm_lat_a", t.dm_lat_a),
        ("dm_lat_b", t.dm_lat_b),
        ("dm_del_a", t.dm_del_a),
        ("dm_del_b", t.dm_del_b),
        ("l2_lat", t.l2_lat),
        ("l2_del", t.l2_del),
        ("sh_lat", t.sh_lat),
        ("sh_del", t.sh_del),
        ("inst_cycle", t.inst_cycle),
        ("dp_inst_cycle", t.dp_inst_cycle),
        ("sf_inst_cycle", t.sf_inst_cycle),
        ("imad_inst_cycle", t.imad_inst_cycle),
        ("overlap_p", t.overlap_p),
        ("inst_lat", t.inst_lat),
    ] {
        d.set_item(k, v)?;
    }
    d.set_item("parallel_queues", t.parallel_queues)?;
    d.set_item("overlapped_rounds", t.overlapped_rounds)?;
    Ok(d)
}

/// Predicted times [kernels x configs] and their case labels.
type TimeAndCases<'py> = (Bound<'py, PyArray2<f64>>, Bound<'py, PyArray2<u8>>);

/// Time (ms) and case label of every kernel [n x N_INPUTS] at every clock pair.
#[pyfunction]
#[pyo3(signature = (inputs, core_mhz, mem_mhz, device_params, mode, threads=0))]
fn time_predict<'py>(
    py: Python<'py>,
    inputs: PyReadonlyArray2<'py, f64>,
    core_mhz: PyReadonlyArray1<'py, f64>,
    mem_mhz: PyReadonlyArray1<'py, f64>,
    device_params: &Bound<'py, PyDict>,
    mode: &str,
    threads: usize,
) -> PyResult<TimeAndCases<'py>> {
    let mode = match mode {
        "default" => TimeMode::Default,
        "paper" => TimeMode::Paper,
        other => {
            return Err(PyValueError::new_err(format!(
                "unknown mode {other:?}: expected default or paper"
            )))
        }
    };
    let x = kernel_rows(&inputs)?;
    let dev = device(device_params)?;
    let n = inputs.shape()[0];
    let (c, m) = (slice("core_mhz", &core_mhz)?, slice("mem_mhz", &mem_mhz)?);
    let p = py.detach(|| predict_rows(x, n, c, m, &dev, mode, threads))?;
    let shape = (p.n_kernels, p.n_configs);
    let err = |e: numpy::ndarray::ShapeError| PyValueError::new_err(e.to_string());
    let t = Array2::from_shape_vec(shape, p.time_ms).map_err(err)?;
    let k = Array2::from_shape_vec(shape, p.case).map_err(err)?;
    Ok((t.into_pyarray(py), k.into_pyarray(py)))
}

/// Each kernel's [n x N_INPUTS] core-clock share at memory clock `mem_mhz` (the two-term
/// baseline's split).
#[pyfunction]
fn time_core_share<'py>(
    py: Python<'py>,
    inputs: PyReadonlyArray2<'py, f64>,
    mem_mhz: f64,
    device_params: &Bound<'py, PyDict>,
) -> PyResult<Bound<'py, PyArray1<f64>>> {
    let x = kernel_rows(&inputs)?;
    let dev = device(device_params)?;
    Ok(core_shares(x, &dev, mem_mhz)?.into_pyarray(py))
}

/// Least squares of Eq. 4, cycles = a * fc/fm + b: returns (a, b, r2).
#[pyfunction]
fn time_fit_dm_lat(
    core_mhz: PyReadonlyArray1<'_, f64>,
    mem_mhz: PyReadonlyArray1<'_, f64>,
    cycles: PyReadonlyArray1<'_, f64>,
) -> PyResult<(f64, f64, f64)> {
    let f = fit_dm_lat(
        slice("core_mhz", &core_mhz)?,
        slice("mem_mhz", &mem_mhz)?,
        slice("cycles", &cycles)?,
    )?;
    Ok((f.a, f.b, f.r2))
}

/// Least squares of the queueing-delay law, memory cycles = a / fm + b: returns (a, b, r2).
#[pyfunction]
fn time_fit_dm_del(
    mem_mhz: PyReadonlyArray1<'_, f64>,
    cycles: PyReadonlyArray1<'_, f64>,
) -> PyResult<(f64, f64, f64)> {
    let f = fit_dm_del(slice("mem_mhz", &mem_mhz)?, slice("cycles", &cycles)?)?;
    Ok((f.a, f.b, f.r2))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(time_device_gtx980, m)?)?;
    m.add_function(wrap_pyfunction!(time_predict, m)?)?;
    m.add_function(wrap_pyfunction!(time_core_share, m)?)?;
    m.add_function(wrap_pyfunction!(time_fit_dm_lat, m)?)?;
    m.add_function(wrap_pyfunction!(time_fit_dm_del, m)?)?;
    Ok(())
}
