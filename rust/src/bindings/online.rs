//! Bindings of the online predictor: one RLS stream (`OnlinePredictor`) and many
//! independent streams (`OnlinePredictorBank`).
//!
//! The single stream sits in a governor's control loop with a microsecond budget, so its
//! `predict`/`update` keep the GIL (releasing it costs more than the update) and read the
//! features without allocating: a float64 numpy array in place, a list or tuple into a
//! stack buffer. The bank releases the GIL for its batch work.
//!
//! Any other argument goes through numpy (`real_array`): an argument of the wrong shape is
//! a ValueError naming it with the shape expected and the shape given, and complex numbers
//! are a TypeError (a cast to float64 would silently drop their imaginary parts).

use numpy::ndarray::{Array2, Array3, Dimension, Ix1, Ix2};
use numpy::{
    AllowTypeChange, Element, IntoPyArray, PyArray, PyArray1, PyArray2, PyArray3,
    PyArrayDescrMethods, PyArrayLike1, PyArrayLike2, PyArrayLike3, PyArrayMethods, PyReadonlyArray,
    PyUntypedArray, PyUntypedArrayMethods,
};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyComplex, PyDict, PyFloat, PyInt, PyList, PyTuple};

use super::item;
use crate::error::CoreError;
use crate::online::{BankState, Forgetting, Rls, RlsBank, RlsConfig, RlsState};

/// Version of the state dictionaries; `from_state` refuses others.
const STATE_VERSION: u32 = 1;
/// Features up to this count are read into a stack buffer.
const STACK_FEATURES: usize = 16;

fn config(
    forgetting: f64,
    initial_covariance: f64,
    forgetting_mode: &str,
    trace_max: Option<f64>,
    min_excitation: f64,
) -> PyResult<RlsConfig> {
    Ok(RlsConfig {
        lambda: forgetting,
        delta: initial_covariance,
        forgetting: Forgetting::parse(forgetting_mode)?,
        trace_max,
        min_excitation,
    })
}

fn put_config(d: &Bound<'_, PyDict>, c: &RlsConfig) -> PyResult<()> {
    d.set_item("version", STATE_VERSION)?;
    d.set_item("forgetting", c.lambda)?;
    d.set_item("initial_covariance", c.delta)?;
    d.set_item("forgetting_mode", c.forgetting.as_str())?;
    d.set_item("trace_max", c.trace_max)?;
    d.set_item("min_excitation", c.min_excitation)?;
    Ok(())
}

fn take_config(d: &Bound<'_, PyDict>) -> PyResult<RlsConfig> {
    let version: u32 = item(d, "version")?;
    if version != STATE_VERSION {
        return Err(PyValueError::new_err(format!(
            "unknown online predictor state version {version}; this gpudvfs reads version {STATE_VERSION}"
        )));
    }
    config(
        item(d, "forgetting")?,
        item(d, "initial_covariance")?,
        &item::<String>(d, "forgetting_mode")?,
        item(d, "trace_max")?,
        item(d, "min_excitation")?,
    )
}

/// A shape as Python writes it: (4,), (5, 4), ().
fn py_shape(shape: &[usize]) -> String {
    match shape {
        [one] => format!("({one},)"),
        _ => format!(
            "({})",
            shape
                .iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

fn shape_error(name: &str, expected: &[usize], got: &[usize]) -> PyErr {
    CoreError::Shape(format!(
        "{name} must have shape {}, got {}",
        py_shape(expected),
        py_shape(got)
    ))
    .into()
}

/// `obj` as an array of `T` (float64, or bool for a mask) of shape `expected`: a numpy
/// array of that dtype as it is, anything else (lists, scalars, other dtypes) through
/// `numpy.asarray` and a cast. Errors name the argument: a ValueError saying which shape was
/// expected and which came, a TypeError for complex numbers (a cast would drop their
/// imaginary parts).
fn real_array<'py, T: Element, D: Dimension>(
    obj: &Bound<'py, PyAny>,
    name: &str,
    expected: &[usize],
) -> PyResult<PyReadonlyArray<'py, T, D>> {
    let py = obj.py();
    let arr = match obj.cast::<PyUntypedArray>() {
        Ok(a) => a.clone(),
        Err(_) => {
            static ASARRAY: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
            ASARRAY
                .import(py, "numpy", "asarray")?
                .call1((obj,))
                .map_err(|e| named(py, e, name))?
                .cast_into::<PyUntypedArray>()?
        }
    };
    if arr.shape() != expected {
        return Err(shape_error(name, expected, arr.shape()));
    }
    let dtype = arr.dtype();
    if dtype.kind() == b'c' {
        return Err(PyTypeError::new_err(format!(
            "{name} must be real numbers, got complex values (dtype {dtype})"
        )));
    }
    let want = numpy::dtype::<T>(py);
    let arr = if dtype.is_equiv_to(&want) {
        arr.into_any()
    } else {
        arr.call_method1("astype", (want,))
            .map_err(|e| named(py, e, name))?
    };
    arr.cast_into::<PyArray<T, D>>()?
        .try_readonly()
        .map_err(|e| PyValueError::new_err(format!("{name}: {e}")))
}

/// `e` with the argument's name in front of its message, of the same exception type.
fn named(py: Python<'_>, e: PyErr, name: &str) -> PyErr {
    PyErr::from_type(e.get_type(py), format!("{name}: {}", e.value(py)))
}

/// A Python float (numpy's float64 too) or int as f64: the way that needs no checks; None
/// for anything else. An int too large for a float is an OverflowError naming the argument.
#[inline]
fn plain_number(obj: &Bound<'_, PyAny>, name: &str) -> PyResult<Option<f64>> {
    if let Ok(f) = obj.cast::<PyFloat>() {
        return Ok(Some(f.value()));
    }
    if obj.is_instance_of::<PyInt>() {
        return obj
            .extract::<f64>()
            .map(Some)
            .map_err(|e| named(obj.py(), e, name));
    }
    Ok(None)
}

/// A real number: a float (or int) as it is; complex numbers, Python's or numpy's, are a
/// TypeError rather than their real part.
fn real(obj: &Bound<'_, PyAny>, name: &str) -> PyResult<f64> {
    if let Some(x) = plain_number(obj, name)? {
        return Ok(x);
    }
    let complex_dtype = || -> PyResult<bool> {
        Ok(obj.hasattr("dtype")? && obj.getattr("dtype")?.getattr("kind")?.eq("c")?)
    };
    if obj.is_instance_of::<PyComplex>() || complex_dtype().unwrap_or(false) {
        return Err(PyTypeError::new_err(format!(
            "{name} must be a real number, got {}",
            obj.repr()?
        )));
    }
    obj.extract::<f64>().map_err(|e| named(obj.py(), e, name))
}

/// Calls `f` with the numbers of a feature vector of `n` features: a float64 numpy array is
/// read in place, a list or tuple of up to STACK_FEATURES floats or ints through a stack
/// buffer, anything else (other dtypes, other sequences, other numbers) through `real_array`.
/// A vector of another length, or of another shape, is a ValueError that says so.
fn with_features<R>(
    obj: &Bound<'_, PyAny>,
    n: usize,
    f: impl FnOnce(&[f64]) -> PyResult<R>,
) -> PyResult<R> {
    const NAME: &str = "features";
    if let Ok(a) = obj.cast::<PyArray1<f64>>() {
        let r = a
            .try_readonly()
            .map_err(|e| PyValueError::new_err(format!("{NAME}: {e}")))?;
        if r.len() != n {
            return Err(shape_error(NAME, &[n], r.shape()));
        }
        return match r.as_slice() {
            Ok(s) => f(s),
            Err(_) => f(&r.as_array().to_vec()),
        };
    }
    let mut buf = [0.0f64; STACK_FEATURES];
    let read = if n > STACK_FEATURES {
        false
    } else if let Ok(l) = obj.cast::<PyList>() {
        l.len() == n && fill(&mut buf, l.iter())?
    } else if let Ok(t) = obj.cast::<PyTuple>() {
        t.len() == n && fill(&mut buf, t.iter())?
    } else {
        false
    };
    if read {
        return f(&buf[..n]);
    }
    let a = real_array::<f64, Ix1>(obj, NAME, &[n])?;
    let v = a.as_array().to_vec();
    f(&v)
}

/// The items as numbers into `buf`: true when every one is a float (numpy's float64 too) or
/// an int; false at the first that is not (complex numbers, numpy's other scalars, nested
/// lists), which then take the checked way through numpy.
fn fill<'py>(buf: &mut [f64], items: impl Iterator<Item = Bound<'py, PyAny>>) -> PyResult<bool> {
    for (b, v) in buf.iter_mut().zip(items) {
        match plain_number(&v, "features")? {
            Some(x) => *b = x,
            None => return Ok(false),
        }
    }
    Ok(true)
}

/// One online time predictor: covariance-form recursive least squares (Gupta et al.
/// Eq. 8-10) with a forgetting factor, guarded against covariance wind-up.
#[pyclass(module = "gpudvfs._core")]
pub struct OnlinePredictor {
    inner: Rls,
}

#[pymethods]
impl OnlinePredictor {
    #[new]
    #[pyo3(signature = (n_features, forgetting=1.0, initial_covariance=100.0, *,
                        forgetting_mode="directional", trace_max=None, min_excitation=1e-10))]
    fn new(
        n_features: usize,
        forgetting: f64,
        initial_covariance: f64,
        forgetting_mode: &str,
        trace_max: Option<f64>,
        min_excitation: f64,
    ) -> PyResult<Self> {
        let c = config(
            forgetting,
            initial_covariance,
            forgetting_mode,
            trace_max,
            min_excitation,
        )?;
        Ok(OnlinePredictor {
            inner: Rls::new(n_features, c)?,
        })
    }

    /// The predicted target for a feature vector: features . coef.
    /// A prediction that overflows (finite features far too large) is a ValueError, as
    /// their update is.
    fn predict(&self, features: &Bound<'_, PyAny>) -> PyResult<f64> {
        with_features(features, self.inner.n_features(), |x| {
            Ok(self.inner.predict(x)?)
        })
    }

    /// Learn from one observation. A NaN or infinite value is a ValueError and changes
    /// nothing; a feature vector without excitation (all zero) changes nothing either.
    fn update(&mut self, features: &Bound<'_, PyAny>, observed: &Bound<'_, PyAny>) -> PyResult<()> {
        let observed = real(observed, "observed")?;
        let inner = &mut self.inner;
        with_features(features, inner.n_features(), |x| {
            inner.update(x, observed)?;
            Ok(())
        })
    }

    /// Back to a fresh estimator (coef 0, covariance initial_covariance * I, counts 0).
    fn reset(&mut self) {
        self.inner.reset();
    }

    #[getter]
    fn coef<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<f64>> {
        self.inner.coef().to_vec().into_pyarray(py)
    }

    /// The covariance matrix P, n_features x n_features.
    #[getter]
    fn covariance<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray2<f64>>> {
        let n = self.inner.n_features();
        let p = Array2::from_shape_vec((n, n), self.inner.covariance())
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        Ok(p.into_pyarray(py))
    }

    #[getter]
    fn n_features(&self) -> usize {
        self.inner.n_features()
    }

    #[getter]
    fn forgetting(&self) -> f64 {
        self.inner.config().lambda
    }

    #[getter]
    fn initial_covariance(&self) -> f64 {
        self.inner.config().delta
    }

    #[getter]
    fn forgetting_mode(&self) -> &'static str {
        self.inner.config().forgetting.as_str()
    }

    /// Upper bound on the covariance trace (n_features * initial_covariance unless set).
    #[getter]
    fn trace_max(&self) -> Option<f64> {
        self.inner.config().trace_max
    }

    /// Updates applied since construction or reset.
    #[getter]
    fn updates(&self) -> u64 {
        self.inner.updates()
    }

    /// Updates skipped for lack of excitation since construction or reset.
    #[getter]
    fn skipped(&self) -> u64 {
        self.inner.skipped()
    }

    /// Everything the predictor holds, as plain Python values (JSON-ready).
    fn state<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.inner.state();
        let d = PyDict::new(py);
        put_config(&d, &s.config)?;
        d.set_item("n_features", s.n_features)?;
        d.set_item("coef", &s.coef)?;
        let rows: Vec<&[f64]> = s.covariance.chunks(s.n_features).collect();
        d.set_item("covariance", rows)?;
        d.set_item("updates", s.updates)?;
        d.set_item("skipped", s.skipped)?;
        Ok(d)
    }

    /// A predictor rebuilt from `state()` output, checked (shapes, finite values, a
    /// symmetric positive definite covariance within the trace bound).
    #[staticmethod]
    fn from_state(state: &Bound<'_, PyDict>) -> PyResult<Self> {
        let n: usize = item(state, "n_features")?;
        let cov: PyArrayLike2<'_, f64, AllowTypeChange> = item(state, "covariance")?;
        if cov.shape() != [n, n] {
            return Err(CoreError::Shape(format!(
                "state: covariance has shape {:?}, expected ({n}, {n})",
                cov.shape()
            ))
            .into());
        }
        let s = RlsState {
            n_features: n,
            config: take_config(state)?,
            coef: item(state, "coef")?,
            covariance: cov.as_array().iter().copied().collect(),
            updates: item(state, "updates")?,
            skipped: item(state, "skipped")?,
        };
        Ok(OnlinePredictor {
            inner: Rls::from_state(&s)?,
        })
    }

    fn __reduce__<'py>(
        slf: &Bound<'py, Self>,
    ) -> PyResult<(Bound<'py, PyAny>, (Bound<'py, PyDict>,))> {
        let state = slf.borrow().state(slf.py())?;
        Ok((slf.get_type().getattr("from_state")?, (state,)))
    }

    fn __repr__(&self) -> String {
        let c = self.inner.config();
        format!(
            "OnlinePredictor(n_features={}, forgetting={}, initial_covariance={}, forgetting_mode={:?}, updates={})",
            self.inner.n_features(),
            c.lambda,
            c.delta,
            c.forgetting.as_str(),
            self.inner.updates()
        )
    }
}

/// Many independent online predictors (one per job, GPU or kernel) updated together.
#[pyclass(module = "gpudvfs._core")]
pub struct OnlinePredictorBank {
    inner: RlsBank,
}

#[pymethods]
impl OnlinePredictorBank {
    #[new]
    #[pyo3(signature = (n_streams, n_features, forgetting=1.0, initial_covariance=100.0, *,
                        forgetting_mode="directional", trace_max=None, min_excitation=1e-10, threads=0))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        n_streams: usize,
        n_features: usize,
        forgetting: f64,
        initial_covariance: f64,
        forgetting_mode: &str,
        trace_max: Option<f64>,
        min_excitation: f64,
        threads: usize,
    ) -> PyResult<Self> {
        let c = config(
            forgetting,
            initial_covariance,
            forgetting_mode,
            trace_max,
            min_excitation,
        )?;
        let mut inner = RlsBank::new(n_streams, n_features, c)?;
        inner.set_threads(threads);
        Ok(OnlinePredictorBank { inner })
    }

    /// Predictions of every stream, features [n_streams x n_features] -> [n_streams].
    fn predict<'py>(
        &self,
        py: Python<'py>,
        features: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyArray1<f64>>> {
        let (s, n) = (self.inner.n_streams(), self.inner.n_features());
        let features = real_array::<f64, Ix2>(features, "features", &[s, n])?;
        let x = features.as_array();
        let x = x.as_standard_layout();
        let xs = x
            .as_slice()
            .ok_or_else(|| PyValueError::new_err("features: not contiguous"))?;
        let bank = &self.inner;
        let out = py.detach(|| bank.predict_many(xs))?;
        Ok(out.into_pyarray(py))
    }

    /// Update stream s with (features[s], observed[s]) wherever mask[s] is true (every
    /// stream without a mask). The whole batch is checked first: a shape error or a NaN or
    /// infinite value anywhere is a ValueError and changes nothing. Returns the counts of
    /// streams applied, skipped (no excitation), masked and rejected (a finite update that
    /// would overflow; that stream is left unchanged).
    #[pyo3(signature = (features, observed, mask=None))]
    fn update<'py>(
        &mut self,
        py: Python<'py>,
        features: &Bound<'py, PyAny>,
        observed: &Bound<'py, PyAny>,
        mask: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let (s, n) = (self.inner.n_streams(), self.inner.n_features());
        let features = real_array::<f64, Ix2>(features, "features", &[s, n])?;
        let observed = real_array::<f64, Ix1>(observed, "observed", &[s])?;
        let mask = mask
            .map(|m| real_array::<bool, Ix1>(m, "mask", &[s]))
            .transpose()?;
        let x = features.as_array();
        let x = x.as_standard_layout();
        let y = observed.as_array();
        let y = y.as_standard_layout();
        let m = mask.as_ref().map(|m| m.as_array());
        let m = m.as_ref().map(|m| m.as_standard_layout());
        let xs = x
            .as_slice()
            .ok_or_else(|| PyValueError::new_err("features: not contiguous"))?;
        let ys = y
            .as_slice()
            .ok_or_else(|| PyValueError::new_err("observed: not contiguous"))?;
        let ms = match &m {
            Some(m) => Some(
                m.as_slice()
                    .ok_or_else(|| PyValueError::new_err("mask: not contiguous"))?,
            ),
            None => None,
        };
        let bank = &mut self.inner;
        let r = py.detach(|| bank.update_many(xs, ys, ms))?;
        let d = PyDict::new(py);
        d.set_item("applied", r.applied)?;
        d.set_item("skipped", r.skipped)?;
        d.set_item("masked", r.masked)?;
        d.set_item("rejected", r.rejected)?;
        Ok(d)
    }

    /// Coefficients, [n_streams x n_features] (a copy).
    #[getter]
    fn coef<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray2<f64>>> {
        let a = Array2::from_shape_vec(
            (self.inner.n_streams(), self.inner.n_features()),
            self.inner.coef().to_vec(),
        )
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
        Ok(a.into_pyarray(py))
    }

    /// Covariance of one stream, [n_features x n_features].
    fn covariance<'py>(
        &self,
        py: Python<'py>,
        stream: usize,
    ) -> PyResult<Bound<'py, PyArray2<f64>>> {
        let n = self.inner.n_features();
        let a = Array2::from_shape_vec((n, n), self.inner.covariance(stream)?)
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        Ok(a.into_pyarray(py))
    }

    /// Updates applied to each stream, [n_streams].
    #[getter]
    fn updates<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<u64>> {
        self.inner.updates().to_vec().into_pyarray(py)
    }

    /// Back to a fresh estimator for one stream (e.g. a new job on that GPU).
    fn reset_stream(&mut self, stream: usize) -> PyResult<()> {
        Ok(self.inner.reset_stream(stream)?)
    }

    #[getter]
    fn n_streams(&self) -> usize {
        self.inner.n_streams()
    }

    #[getter]
    fn n_features(&self) -> usize {
        self.inner.n_features()
    }

    #[getter]
    fn forgetting(&self) -> f64 {
        self.inner.config().lambda
    }

    #[getter]
    fn initial_covariance(&self) -> f64 {
        self.inner.config().delta
    }

    #[getter]
    fn forgetting_mode(&self) -> &'static str {
        self.inner.config().forgetting.as_str()
    }

    #[getter]
    fn trace_max(&self) -> Option<f64> {
        self.inner.config().trace_max
    }

    /// Threads of a batch call; 0 means one per core (small banks stay on one thread).
    #[getter]
    fn threads(&self) -> usize {
        self.inner.threads()
    }

    #[setter]
    fn set_threads(&mut self, threads: usize) {
        self.inner.set_threads(threads);
    }

    /// The whole bank: configuration as plain values, coef [S x n], covariance [S x n x n]
    /// and updates [S] as numpy arrays (`.tolist()` them for JSON).
    fn state<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.inner.state()?;
        let (ns, n) = (s.n_streams, s.n_features);
        let err = |e: numpy::ndarray::ShapeError| PyValueError::new_err(e.to_string());
        let d = PyDict::new(py);
        put_config(&d, &s.config)?;
        d.set_item("n_streams", ns)?;
        d.set_item("n_features", n)?;
        d.set_item(
            "coef",
            Array2::from_shape_vec((ns, n), s.coef)
                .map_err(err)?
                .into_pyarray(py),
        )?;
        let cov: Bound<'py, PyArray3<f64>> = Array3::from_shape_vec((ns, n, n), s.covariance)
            .map_err(err)?
            .into_pyarray(py);
        d.set_item("covariance", cov)?;
        d.set_item("updates", s.updates.into_pyarray(py))?;
        Ok(d)
    }

    /// A bank rebuilt from `state()` output (arrays or nested lists), every stream checked.
    #[staticmethod]
    fn from_state(py: Python<'_>, state: &Bound<'_, PyDict>) -> PyResult<Self> {
        let (ns, n): (usize, usize) = (item(state, "n_streams")?, item(state, "n_features")?);
        let coef: PyArrayLike2<'_, f64, AllowTypeChange> = item(state, "coef")?;
        let cov: PyArrayLike3<'_, f64, AllowTypeChange> = item(state, "covariance")?;
        let upd: PyArrayLike1<'_, u64, AllowTypeChange> = item(state, "updates")?;
        if coef.shape() != [ns, n] || cov.shape() != [ns, n, n] || upd.shape() != [ns] {
            return Err(CoreError::Shape(format!(
                "state: coef {:?}, covariance {:?}, updates {:?} do not fit n_streams {ns}, n_features {n}",
                coef.shape(),
                cov.shape(),
                upd.shape()
            ))
            .into());
        }
        let s = BankState {
            n_streams: ns,
            n_features: n,
            config: take_config(state)?,
            coef: coef.as_array().iter().copied().collect(),
            covariance: cov.as_array().iter().copied().collect(),
            updates: upd.as_array().iter().copied().collect(),
        };
        let inner = py.detach(|| RlsBank::from_state(&s))?;
        Ok(OnlinePredictorBank { inner })
    }

    fn __reduce__<'py>(
        slf: &Bound<'py, Self>,
    ) -> PyResult<(Bound<'py, PyAny>, (Bound<'py, PyDict>,))> {
        let state = slf.borrow().state(slf.py())?;
        Ok((slf.get_type().getattr("from_state")?, (state,)))
    }

    fn __repr__(&self) -> String {
        let c = self.inner.config();
        format!(
            "OnlinePredictorBank(n_streams={}, n_features={}, forgetting={}, initial_covariance={}, forgetting_mode={:?})",
            self.inner.n_streams(),
            self.inner.n_features(),
            c.lambda,
            c.delta,
            c.forgetting.as_str()
        )
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<OnlinePredictor>()?;
    m.add_class::<OnlinePredictorBank>()?;
    Ok(())
}
