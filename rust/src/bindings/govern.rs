//! Bindings of the governor's estimates and decisions; `gpudvfs.govern.Governor` checks the
//! arguments and keeps the phase keys, the current pair and the decision log.

use numpy::{IntoPyArray, PyArray1, PyReadonlyArray1, PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use super::slice;
use crate::govern::{GovernorCore as Core, Policy, Residual, Settings};

type Arrays<'py> = (
    Bound<'py, PyArray1<f64>>,
    Bound<'py, PyArray1<f64>>,
    Bound<'py, PyArray1<f64>>,
    Bound<'py, PyArray1<f64>>,
);

/// The governor's constants, one typed record (`gpudvfs.govern.Governor` documents them);
/// built with keywords alone, checked on construction, read-only.
#[pyclass(module = "gpudvfs._core", frozen)]
pub struct GovernorSettings {
    inner: Settings,
}

#[pymethods]
impl GovernorSettings {
    #[new]
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (*, default_index, policy, slowdown, power_cap_w, prior_sd, noise_sd, explore,
                        hysteresis, residual_sd, residual_scale, eta, max_power_w, default_runs, bound_z,
                        recheck_z, recheck_runs))]
    fn new(
        default_index: usize,
        policy: &str,
        slowdown: f64,
        power_cap_w: Option<f64>,
        prior_sd: f64,
        noise_sd: f64,
        explore: f64,
        hysteresis: f64,
        residual_sd: f64,
        residual_scale: f64,
        eta: f64,
        max_power_w: Option<f64>,
        default_runs: u32,
        bound_z: f64,
        recheck_z: f64,
        recheck_runs: u32,
    ) -> PyResult<Self> {
        let inner = Settings {
            policy: Policy::parse(policy)?,
            default_index,
            slowdown,
            default_runs,
            bound_z,
            power_cap_w,
            eta,
            max_power_w,
            prior_sd,
            noise_sd,
            explore,
            hysteresis,
            recheck_z,
            recheck_runs,
            residual: Residual {
                sd: residual_sd,
                scale: residual_scale,
            },
        };
        inner.check()?;
        Ok(GovernorSettings { inner })
    }

    #[getter]
    fn default_index(&self) -> usize {
        self.inner.default_index
    }
    #[getter]
    fn policy(&self) -> &'static str {
        self.inner.policy.name()
    }
    #[getter]
    fn slowdown(&self) -> f64 {
        self.inner.slowdown
    }
    #[getter]
    fn power_cap_w(&self) -> Option<f64> {
        self.inner.power_cap_w
    }
    #[getter]
    fn prior_sd(&self) -> f64 {
        self.inner.prior_sd
    }
    #[getter]
    fn noise_sd(&self) -> f64 {
        self.inner.noise_sd
    }
    #[getter]
    fn explore(&self) -> f64 {
        self.inner.explore
    }
    #[getter]
    fn hysteresis(&self) -> f64 {
        self.inner.hysteresis
    }
    #[getter]
    fn residual_sd(&self) -> f64 {
        self.inner.residual.sd
    }
    #[getter]
    fn residual_scale(&self) -> f64 {
        self.inner.residual.scale
    }
    #[getter]
    fn eta(&self) -> f64 {
        self.inner.eta
    }
    #[getter]
    fn max_power_w(&self) -> Option<f64> {
        self.inner.max_power_w
    }
    #[getter]
    fn default_runs(&self) -> u32 {
        self.inner.default_runs
    }
    #[getter]
    fn bound_z(&self) -> f64 {
        self.inner.bound_z
    }
    #[getter]
    fn recheck_z(&self) -> f64 {
        self.inner.recheck_z
    }
    #[getter]
    fn recheck_runs(&self) -> u32 {
        self.inner.recheck_runs
    }

    fn __repr__(&self) -> String {
        format!("GovernorSettings({})", self.inner)
    }
}

/// Per phase (by the id `add_phase` returns) the corrected predictions of log time and log
/// watts at every pair, and the decision among them.
#[pyclass(module = "gpudvfs._core")]
pub struct GovernorCore {
    inner: Core,
}

#[pymethods]
impl GovernorCore {
    #[new]
    fn new(configs: PyReadonlyArray2<'_, f64>, settings: &GovernorSettings) -> PyResult<Self> {
        if configs.shape()[1] != 2 {
            return Err(PyValueError::new_err(format!(
                "configs must be [K x 2], got shape {:?}",
                configs.shape()
            )));
        }
        let pairs: Vec<[f64; 2]> = slice("configs", &configs)?
            .chunks_exact(2)
            .map(|c| [c[0], c[1]])
            .collect();
        Ok(GovernorCore {
            inner: Core::new(&pairs, settings.inner)?,
        })
    }

    /// A new phase from the offline predictions [K]; its id.
    fn add_phase(
        &mut self,
        time_ms: PyReadonlyArray1<'_, f64>,
        watts: PyReadonlyArray1<'_, f64>,
    ) -> PyResult<usize> {
        Ok(self
            .inner
            .add_phase(slice("time_ms", &time_ms)?, slice("watts", &watts)?)?)
    }

    /// (log time, log watts, and their variances) at every pair of phase ``id``.
    fn estimates<'py>(&self, py: Python<'py>, id: usize) -> PyResult<Arrays<'py>> {
        let e = self.inner.estimates(id)?;
        Ok((
            e.log_time.into_pyarray(py),
            e.log_watts.into_pyarray(py),
            e.var_time.into_pyarray(py),
            e.var_watts.into_pyarray(py),
        ))
    }

    /// (next pair, explored, log energy there, log energy at the default clocks).
    fn decide(&self, id: usize, current: usize) -> PyResult<(usize, bool, f64, f64)> {
        let d = self.inner.decide(id, current)?;
        Ok((d.index, d.explored, d.log_energy, d.log_energy_default))
    }

    fn exclude(&mut self, id: usize, index: usize) -> PyResult<()> {
        Ok(self.inner.exclude(id, index)?)
    }

    /// One interval at pair ``index``: log time (None: not measured) and log watts.
    #[pyo3(signature = (id, index, log_time, log_watts))]
    fn observe(
        &mut self,
        id: usize,
        index: usize,
        log_time: Option<f64>,
        log_watts: f64,
    ) -> PyResult<()> {
        Ok(self.inner.observe(id, index, log_time, log_watts)?)
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<GovernorSettings>()?;
    m.add_class::<GovernorCore>()
}
