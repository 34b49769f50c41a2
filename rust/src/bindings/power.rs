//! Bindings of the power model: the batched equations and the fitted model.

use numpy::ndarray::Array2;
use numpy::{
    IntoPyArray, PyArray1, PyArray2, PyReadonlyArray1, PyReadonlyArray2, PyUntypedArrayMethods,
};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use super::{item, slice};
use crate::error::CoreError;
use crate::power::equations::{power_grid as power_grid_core, PowerCoefficients};
use crate::power::{fit, FitOptions, FittedPower, PowerData, Variant, VoltageCurve};

fn shape_err(msg: String) -> PyErr {
    CoreError::Shape(msg).into()
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
    // Before the sizes are used: domain sizes that overflow are refused here.
    coef.validate()?;
    let nd = coef.n_domains();
    let (n_work, n_comp) = (util.shape()[0], util.shape()[1]);
    if n_comp != coef.n_components() {
        return Err(shape_err(format!(
            "utilization has {n_comp} columns, the coefficients {} components",
            coef.n_components()
        )));
    }
    for (name, a) in [("freq", &freq), ("volt", &volt)] {
        if a.shape()[1] != nd {
            return Err(shape_err(format!(
                "{name} has {} columns, expected {nd} domains",
                a.shape()[1]
            )));
        }
    }
    let n_conf = freq.shape()[0];
    let (u, f, v) = (
        slice("util", &util)?,
        slice("freq", &freq)?,
        slice("volt", &volt)?,
    );
    let out = py.detach(|| power_grid_core(&coef, u, n_work, f, v))?;
    let arr = Array2::from_shape_vec((n_work, n_conf), out)
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    Ok(arr.into_pyarray(py))
}

fn variant_name(v: Variant) -> &'static str {
    match v {
        Variant::PerConfig => "per-config",
        Variant::PerDomain => "per-domain",
        Variant::Curve => "curve",
    }
}

fn parse_variant(name: &str) -> PyResult<Variant> {
    match name {
        "per-config" => Ok(Variant::PerConfig),
        "per-domain" => Ok(Variant::PerDomain),
        "curve" => Ok(Variant::Curve),
        other => Err(PyValueError::new_err(format!(
            "unknown variant {other:?}: expected per-config, per-domain or curve"
        ))),
    }
}

/// A fitted (or loaded) power model: its state, voltages and predictions.
#[pyclass(module = "gpudvfs._core", frozen)]
pub struct PowerFit {
    inner: FittedPower,
}

#[pymethods]
impl PowerFit {
    /// Estimate coefficients and voltages from measurements (rows of watts, clocks, utilizations).
    #[staticmethod]
    #[pyo3(signature = (watts, core_mhz, mem_mhz, util, domain_sizes, ref_core_mhz, ref_mem_mhz,
                        variant, max_iter, tol_voltage, tol_objective, v_min, v_max,
                        relative_weighting, ridge))]
    #[allow(clippy::too_many_arguments)]
    fn fit(
        py: Python<'_>,
        watts: PyReadonlyArray1<'_, f64>,
        core_mhz: PyReadonlyArray1<'_, f64>,
        mem_mhz: PyReadonlyArray1<'_, f64>,
        util: PyReadonlyArray2<'_, f64>,
        domain_sizes: Vec<usize>,
        ref_core_mhz: f64,
        ref_mem_mhz: f64,
        variant: &str,
        max_iter: usize,
        tol_voltage: f64,
        tol_objective: f64,
        v_min: f64,
        v_max: f64,
        relative_weighting: bool,
        ridge: f64,
    ) -> PyResult<Self> {
        let opts = FitOptions {
            variant: parse_variant(variant)?,
            max_iter,
            tol_voltage,
            tol_objective,
            v_min,
            v_max,
            relative_weighting,
            ridge,
        };
        let data = PowerData {
            watts: slice("watts", &watts)?,
            core_mhz: slice("core_mhz", &core_mhz)?,
            mem_mhz: slice("mem_mhz", &mem_mhz)?,
            util: slice("util", &util)?,
            n_comp: util.shape()[1],
            domain_sizes: &domain_sizes,
            ref_core_mhz,
            ref_mem_mhz,
        };
        let inner = py.detach(|| fit(&data, &opts))?;
        Ok(PowerFit { inner })
    }

    /// Rebuild a model from `state()` output (as saved in a model file), validated.
    #[staticmethod]
    fn from_state(state: &Bound<'_, PyDict>) -> PyResult<Self> {
        let curves: Option<Vec<[f64; 2]>> = item(state, "curves")?;
        let curves = match curves {
            None => None,
            Some(c) if c.len() == 2 => Some([0, 1].map(|d| VoltageCurve {
                break_norm: c[d][0],
                slope: c[d][1],
            })),
            Some(c) => {
                return Err(shape_err(format!(
                    "curves: expected 2 domains, got {}",
                    c.len()
                )))
            }
        };
        let configs: Vec<[f64; 2]> = item(state, "configs")?;
        let inner = FittedPower {
            variant: parse_variant(&item::<String>(state, "variant")?)?,
            ref_mhz: item(state, "ref_mhz")?,
            coef: PowerCoefficients {
                domain_sizes: item(state, "domain_sizes")?,
                static_coef: item(state, "static_coef")?,
                idle_coef: item(state, "idle_coef")?,
                weights: item(state, "weights")?,
            },
            configs: configs.iter().map(|c| (c[0], c[1])).collect(),
            voltages: item(state, "voltages")?,
            on_bound: item(state, "on_bound")?,
            levels_mhz: item(state, "levels_mhz")?,
            level_voltages: item(state, "level_voltages")?,
            curves,
            folded: item(state, "folded")?,
            iterations: item(state, "iterations")?,
            converged: item(state, "converged")?,
            sse: item(state, "sse")?,
            objective: item(state, "objective")?,
            train_mape: item(state, "train_mape")?,
            notes: item(state, "notes")?,
        };
        inner.validate()?;
        Ok(PowerFit { inner })
    }

    /// Everything the model holds, as plain Python values.
    fn state<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let m = &self.inner;
        let d = PyDict::new(py);
        d.set_item("variant", variant_name(m.variant))?;
        d.set_item("ref_mhz", m.ref_mhz)?;
        d.set_item("domain_sizes", &m.coef.domain_sizes)?;
        d.set_item("static_coef", &m.coef.static_coef)?;
        d.set_item("idle_coef", &m.coef.idle_coef)?;
        d.set_item("weights", &m.coef.weights)?;
        d.set_item(
            "configs",
            m.configs.iter().map(|&(c, f)| [c, f]).collect::<Vec<_>>(),
        )?;
        d.set_item("voltages", &m.voltages)?;
        d.set_item("on_bound", &m.on_bound)?;
        d.set_item("levels_mhz", &m.levels_mhz)?;
        d.set_item("level_voltages", &m.level_voltages)?;
        d.set_item(
            "curves",
            m.curves.map(|c| c.map(|c| [c.break_norm, c.slope])),
        )?;
        d.set_item("folded", m.folded)?;
        d.set_item("iterations", m.iterations)?;
        d.set_item("converged", m.converged)?;
        d.set_item("sse", m.sse)?;
        d.set_item("objective", m.objective)?;
        d.set_item("train_mape", m.train_mape)?;
        d.set_item("notes", &m.notes)?;
        Ok(d)
    }

    /// Normalized voltages [n x 2] (core, memory) at clock pairs.
    fn voltages<'py>(
        &self,
        py: Python<'py>,
        core_mhz: PyReadonlyArray1<'py, f64>,
        mem_mhz: PyReadonlyArray1<'py, f64>,
    ) -> PyResult<Bound<'py, PyArray2<f64>>> {
        let (c, m) = (slice("core_mhz", &core_mhz)?, slice("mem_mhz", &mem_mhz)?);
        if c.len() != m.len() {
            return Err(shape_err(format!(
                "{} core clocks but {} memory clocks",
                c.len(),
                m.len()
            )));
        }
        let mut out = Vec::with_capacity(2 * c.len());
        for (&fc, &fm) in c.iter().zip(m) {
            out.extend(self.inner.voltage_at(fc, fm)?);
        }
        let arr = Array2::from_shape_vec((c.len(), 2), out)
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        Ok(arr.into_pyarray(py))
    }

    /// Power of each row: utilizations [n x n_components] at (core_mhz[i], mem_mhz[i]).
    fn predict<'py>(
        &self,
        py: Python<'py>,
        util: PyReadonlyArray2<'py, f64>,
        core_mhz: PyReadonlyArray1<'py, f64>,
        mem_mhz: PyReadonlyArray1<'py, f64>,
    ) -> PyResult<Bound<'py, PyArray1<f64>>> {
        let (u, c, m) = (
            slice("util", &util)?,
            slice("core_mhz", &core_mhz)?,
            slice("mem_mhz", &mem_mhz)?,
        );
        let out = py.detach(|| self.inner.predict(u, c, m))?;
        Ok(out.into_pyarray(py))
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(power_grid, m)?)?;
    m.add_class::<PowerFit>()?;
    Ok(())
}
