"""The DVFS-aware power model of Guerreiro et al. (HPCA'18): fit, predict, voltages, breakdown.

Per V-F domain d (core with its components and L2, memory with DRAM), with normalized
voltage V_d and normalized frequency x_d = f_d / f_ref,d:
``P_d = s_d V_d + V_d^2 x_d (i_d + sum_{c in d} w_c U_c)``; every coefficient is in watts
at the reference clocks. Estimation (Rust core, `rust/src/power/`): coefficients by
non-negative least squares, voltages by exact per-configuration constrained least squares
(bounds, monotone in each clock, 1 at the reference), alternated until no voltage moves
more than ``tol_voltage`` and the objective changes by less than ``tol_objective`` of
itself ("converged"), or ``max_iter`` iterations.

Variants:

| variant      | voltages                                                  | predicts at      |
|--------------|-----------------------------------------------------------|------------------|
| `per-config` | one (V_core, V_mem) per measured (fc, fm) pair: the paper | measured pairs   |
| `per-domain` | V_core a function of fc alone, V_mem of fm alone          | measured clocks  |
| `curve`      | per domain flat up to a break clock, then linear          | any clocks       |
| `default`    | `per-config`, squared relative errors, no ridge           | measured pairs   |

`default` is the setting the protocol of :mod:`gpudvfs.evaluation.power_cv` chooses: grouped
cross-validation over the microbenchmarks of five GPUs, no application having a say (the
docs/accuracy.md gives the figures). It replaced a ridge of 0.01 that had been chosen partly on the
applications of `titanx_real_dev.csv`, the file its figure was reported on.

A domain measured at a single clock (K40c and Titan V files: one memory clock) cannot
separate its static from its idle term: that domain's voltage is fixed at 1 and its idle
term folded into its static one (stated in ``notes_``), instead of iterating along a flat
valley.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from gpudvfs import _core
from gpudvfs.catalog import DeviceSpec, lookup
from gpudvfs.data.counters import COMPONENTS
from gpudvfs.data.datasets import PowerDataset
from gpudvfs.data.jsonfile import read_versioned, write_json_atomic
from gpudvfs.data.source import UTIL_TOLERANCE
from gpudvfs.errors import GpudvfsWarning, InputError
from gpudvfs.limits import check_watts, clock_array, is_count, is_finite_number
from gpudvfs.power.equations import power_grid
from gpudvfs.power.gpmtool import read_gpmtool_model, write_gpmtool_model
from gpudvfs.power.prior import prior_state, rule_document
from gpudvfs.power.prior_curve import shipped_curves
from gpudvfs.power.prior_pipes import with_pipe_weights

VARIANTS = ("default", "per-config", "per-domain", "curve")
UNUSED = ("error", "zero")
#: Where a model comes from: fitted on measurements, the catalog prior, or the prior refined by
#: passive observation (`gpudvfs power observe`).
SOURCES = ("fitted", "prior", "observed")
MODEL_VERSION = 1
# (variant, relative_error, ridge) of each name
_SETTINGS = {
    "default": ("per-config", True, 0.0),
    "per-config": ("per-config", False, 0.0),
    "per-domain": ("per-domain", False, 0.0),
    "curve": ("curve", False, 0.0),
}


def _utilization(u: ArrayLike, n_comp: int) -> np.ndarray:
    a = np.asarray(u, dtype=np.float64)
    if a.ndim == 0 or a.shape[-1] != n_comp:
        raise InputError(f"utilizations must end in a dimension of {n_comp} components, got shape {a.shape}")
    if not np.all(np.isfinite(a)):
        raise InputError("utilizations contain NaN or infinite values")
    if np.any(a < -UTIL_TOLERANCE) or np.any(a > 1 + UTIL_TOLERANCE):
        raise InputError("utilizations must lie in [0, 1]")
    return a


def _require_dataset(dataset: object, what: str) -> None:
    if not isinstance(dataset, PowerDataset):
        raise InputError(f"{what} needs a PowerDataset (gpudvfs.read_power_dataset), got {type(dataset).__name__}")


class PowerModel:
    """Power of a GPU at any (core, memory) clock pair from component utilizations.

    ``PowerModel(variant).fit(dataset)`` estimates coefficients and voltages from a
    :class:`~gpudvfs.PowerDataset` (microbenchmarks measured over a frequency grid);
    :meth:`prior` makes one from the catalog alone.

    ``variant`` is one of :data:`VARIANTS` (see the module's table); ``relative_error`` (squared
    relative errors, else squared watts) and ``ridge`` (on the coefficients) are the variant's by
    default; the fit has converged when no voltage moves more than ``tol_voltage`` and the
    objective changes by less than ``tol_objective`` of itself (else it stops after ``max_iter``
    alternations); ``v_min`` and ``v_max`` bound the normalized voltages. An unknown variant, a
    ``relative_error`` neither bool nor None or ``max_iter`` < 1 is an `InputError`.

    Attributes
    ----------
    components_ : tuple of str
        The components, in the order of a utilization vector.
    static_w_, idle_w_ : numpy.ndarray
        Per domain, the static and idle power (W at the reference clocks).
    weights_ : dict of str to float
        Per component, its dynamic power at full utilization (W at the reference clocks).
    configs_, voltages_ : numpy.ndarray
        [K x 2] the configurations the model is laid out on, and their normalized voltages.
    untrained_ : tuple of str
        Components zero in every training row, given weight 0 by ``fit(..., unused="zero")``.
    device_ : str or None
        The catalog key of the GPU it was fitted on, where the fitter knew it: its weights and
        clocks are that GPU's.
    energy_error_ : numpy.ndarray or None
        Relative error of an energy predicted with this model and the time model at each of
        ``configs_``, from applications held out of the power fit (set by `select fit-power`).
    interval_ : float or None
        Half-width q of a 90% interval on each predicted power in log space (P in [P e^-q,
        P e^q]): a prior's (its rule's error on GPUs it was not fitted on), or refined by
        `gpudvfs power observe`. None: not stated.
    source_ : str
        One of :data:`SOURCES`: fitted, a catalog prior (no measurement of this GPU) or refined.
    fallback_ : str or None
        The variant fitted in place of this one's, which did not converge.
    notes_ : list of str
        What the fit says about itself (bounds hit, folded domains, fallbacks).

    Examples
    --------
    A prior from the catalog, then the power of a workload using half of every unit, at two core
    clocks and the H100's memory clock:

    >>> import numpy as np
    >>> from gpudvfs import PowerModel
    >>> model = PowerModel.prior("H100")
    >>> model.components_
    ('SP', 'INT', 'DP', 'SFU', 'L2', 'Shared', 'DRAM')
    >>> watts = model.predict(np.full(7, 0.5), [1000, 1980], 2619)
    >>> bool(watts[0] < watts[1]), model.source_
    (True, 'prior')
    """

    def __init__(self, variant: str = "default", *, relative_error: bool | None = None,
                 ridge: float | None = None, max_iter: int = 3000, tol_voltage: float = 1e-6,
                 tol_objective: float = 1e-9, v_min: float = 0.5, v_max: float = 1.5) -> None:
        if variant not in VARIANTS:
            raise InputError(f"unknown variant {variant!r}; expected one of {VARIANTS}")
        base, rel, rid = _SETTINGS[variant]
        if not isinstance(relative_error, (bool, type(None))):
            raise InputError(f"relative_error must be True, False or None, got {relative_error!r}")
        self.variant = variant
        self.relative_error = rel if relative_error is None else relative_error
        self.ridge = rid if ridge is None else float(ridge)
        if not is_count(max_iter, 1):
            raise InputError(f"max_iter must be an integer >= 1, got {max_iter!r}")
        self.max_iter, self.tol_voltage, self.tol_objective = int(max_iter), float(tol_voltage), float(tol_objective)
        self.v_min, self.v_max = float(v_min), float(v_max)
        self._base = base
        self._fit: _core.PowerFit | None = None
        self.untrained_: tuple[str, ...] = ()
        self.device_: str | None = None
        self.energy_error_: np.ndarray | None = None
        self.interval_: float | None = None
        self.source_: str = "fitted"

    @classmethod
    def prior(cls, device: str | DeviceSpec, reference: Sequence[float] | None = None) -> PowerModel:
        """The prior of a catalog GPU (key, name, alias or entry), made without any measurement of it.

        See :mod:`gpudvfs.power.prior`. Placed at ``reference`` (core, memory) MHz, the GPU's default
        clocks by default: the catalog's rule scaled by the GPU's TDP (its SFU weight Nsight Compute's
        from Volta on, :mod:`gpudvfs.power.prior_pipes`; its core voltage curve
        :mod:`gpudvfs.power.prior_curve`), with the rule's 90% interval (``interval_``). Raises
        `InputError` if the GPU is not in the catalog.
        """
        spec = device if isinstance(device, DeviceSpec) else lookup(device)
        model = cls("curve")
        model._fit = _core.PowerFit.from_state(
            with_pipe_weights(prior_state(spec, reference=reference, curves=shipped_curves(spec)), spec))
        model.components_ = COMPONENTS
        model.device_ = spec.key
        model.source_ = "prior"
        model.interval_ = float(rule_document()["interval"])
        model._set_state()
        return model

    # ---------------------------------------------------------------- fitting
    def fit(self, dataset: PowerDataset, *, unused: str = "error") -> PowerModel:
        """Estimate the model from power and utilizations measured over a grid of (core, memory) clocks.

        A fit that did not converge, hit a voltage bound, fell back to per-domain voltages or left
        components untrained warns with its notes.

        A component zero in every row has no weight to learn: ``unused="error"`` refuses it with
        `InputError`; ``"zero"`` gives it weight 0 (the model then predicts no power for it: noted
        in ``notes_`` and ``untrained_``). Out-of-bounds watts, clocks or utilizations are an
        `InputError` too.
        """
        _require_dataset(dataset, "fit")
        if unused not in UNUSED:
            raise InputError(f"unknown unused={unused!r}; expected one of {UNUSED}")
        if dataset.n_domains != 2:
            raise InputError(f"{dataset.path}: the power model has a core and a memory domain, "
                             f"the file has {dataset.n_domains} domains")
        check_watts(dataset.watts, dataset.path)
        clock_array(dataset.freqs_mhz, f"{dataset.path}: frequencies")
        _utilization(dataset.utilization, len(dataset.components))
        zero = dataset.unused_components()
        if zero and unused == "error":
            raise InputError(f"{dataset.path}: component(s) {zero} are zero in every row, so their weight "
                             "cannot be estimated; measure benchmarks that use them or leave them out "
                             "(gpudvfs power fit --drop-unused)")
        trained = dataset.without_components(zero) if zero else dataset
        fit = self._estimate(trained, self._base)
        if not fit.state()["converged"] and self._base == "per-config":
            # One voltage per clock level has far fewer unknowns than one per pair and settles
            # where the per-pair alternation keeps creeping along its valley.
            fallback = self._estimate(trained, "per-domain")
            if fallback.state()["converged"]:
                fit = fallback
        if zero:
            fit = _core.PowerFit.from_state(_with_zero_weights(dict(fit.state()), dataset, zero))
        self._fit = fit
        self.components_ = tuple(dataset.components)
        self.untrained_ = tuple(zero)
        self._set_state()
        if not self.converged_ or self.on_bound_.any() or self.fallback_ or zero:
            warnings.warn(GpudvfsWarning("; ".join(self.notes_)), stacklevel=2)
        return self

    def _estimate(self, dataset: PowerDataset, base: str) -> _core.PowerFit:
        watts, core, mem, util = (np.ascontiguousarray(a, dtype=np.float64)
                                  for a in (dataset.watts, dataset.core_mhz, dataset.mem_mhz, dataset.utilization))
        try:
            return _core.PowerFit.fit(
                watts, core, mem, util, list(dataset.domain_sizes), float(dataset.reference_mhz[0]),
                float(dataset.reference_mhz[1]), base, self.max_iter, self.tol_voltage, self.tol_objective,
                self.v_min, self.v_max, self.relative_error, self.ridge)
        except ValueError as e:
            raise InputError(f"{dataset.path}: {e}") from None

    def _set_state(self) -> None:
        s = self._require_fit().state()
        self.domain_sizes_ = tuple(s["domain_sizes"])
        self.reference_mhz_ = tuple(s["ref_mhz"])
        self.static_w_ = np.array(s["static_coef"])
        self.idle_w_ = np.array(s["idle_coef"])
        self.weights_ = dict(zip(self.components_, s["weights"]))
        self.configs_ = np.array(s["configs"]).reshape(-1, 2)
        self.voltages_ = np.array(s["voltages"]).reshape(-1, 2)
        self.on_bound_ = np.array(s["on_bound"], dtype=bool).reshape(-1, 2)
        self.voltage_curve_ = (None if s["curves"] is None else
                               {d: {"break_mhz": c[0] * r if c[1] else math.inf, "slope_per_mhz": c[1] / r}
                                for d, c, r in zip(("core", "memory"), s["curves"], self.reference_mhz_)})
        self.iterations_ = s["iterations"]
        self.converged_ = s["converged"]
        self.train_mape_ = s["train_mape"]
        self.sse_ = s["sse"]
        self.notes_ = list(s["notes"])
        self.fallback_ = s["variant"] if s["variant"] != self._base else None
        if self.fallback_:
            self.notes_.insert(0, f"the {self._base} fit did not converge in {self.max_iter} iterations: fell back "
                                  f"to {self.fallback_} voltages, which did")

    def check_gpu(self, key: str) -> None:
        """Raise `InputError` if the model was fitted on another GPU than catalog ``key``'s.

        Weights and voltages belong to one GPU; a model that does not record which passes.
        """
        if self.device_ is None or self.device_ == key:
            return
        why = {"prior": (f"is the catalog prior of {self.device_}, not of {key}",
                         f"leave the power model out for {key}'s own prior"),
               "observed": (f"was observed on {self.device_}, not on {key}",
                            f"observe {key} while your work runs (gpudvfs power observe --device nvml -o MODEL)")}
        made, fits = why.get(self.source_, (
            f"was fitted on {self.device_}'s measurements, not {key}'s",
            f"fit one on this GPU (gpudvfs select fit-power / power fit --device {key})"))
        raise InputError(f"the power model {made}: {fits}")

    def _require_fit(self) -> _core.PowerFit:
        if self._fit is None:
            raise InputError("this PowerModel is not fitted: call fit(dataset) or PowerModel.load(path)")
        return self._fit

    # -------------------------------------------------------------- prediction
    def voltage(self, core_mhz: ArrayLike, mem_mhz: ArrayLike) -> np.ndarray:
        """Normalized (core, memory) voltages, of shape ``broadcast(core_mhz, mem_mhz) + (2,)``.

        `per-config` knows the measured pairs, `per-domain` the measured clocks; `curve` gives
        any clock (with a warning beyond the clocks it was fitted on). Raises `InputError` if the
        model is not fitted, a clock is invalid, or the variant does not know a pair.
        """
        fit = self._require_fit()
        c, m = np.broadcast_arrays(clock_array(core_mhz, "core_mhz"), clock_array(mem_mhz, "mem_mhz"))
        self._warn_outside_fit(c, m)
        try:
            v = fit.voltages(np.ascontiguousarray(c.ravel()), np.ascontiguousarray(m.ravel()))
        except ValueError as e:
            raise InputError(str(e)) from None
        return v.reshape(c.shape + (2,))

    def _warn_outside_fit(self, core: np.ndarray, mem: np.ndarray) -> None:
        """The `curve` variant extrapolates; say so beyond the clocks it was fitted on.

        The other variants refuse unmeasured clocks outright. A prior was fitted on no clock of
        its GPU: its curve is the catalog rule's at every clock, and it says so in ``notes_``.
        """
        if self._base != "curve" or core.size == 0 or self.source_ == "prior":
            return
        for name, clocks, fitted in (("core", core, self.configs_[:, 0]), ("memory", mem, self.configs_[:, 1])):
            lo, hi = fitted.min(), fitted.max()
            if clocks.min() < lo or clocks.max() > hi:
                warnings.warn(GpudvfsWarning(
                    f"{name} clocks {clocks.min():g}-{clocks.max():g} MHz reach beyond the fitted "
                    f"{lo:g}-{hi:g} MHz: the voltage curve is extrapolated there"), stacklevel=3)

    def predict(self, utilization: ArrayLike, core_mhz: ArrayLike, mem_mhz: ArrayLike) -> Any:
        """Watts for utilizations [..., n_components] in [0, 1] at clock pairs (MHz).

        The clocks broadcast against ``utilization.shape[:-1]``. Scalars in, a float out. Raises
        `InputError` if the model is not fitted, a utilization or clock is invalid, or the variant does
        not know a pair.
        """
        fit = self._require_fit()
        u = _utilization(utilization, len(self.components_))
        c, m = clock_array(core_mhz, "core_mhz"), clock_array(mem_mhz, "mem_mhz")
        self._warn_outside_fit(c, m)
        shape = np.broadcast_shapes(u.shape[:-1], c.shape, m.shape)
        ub = np.broadcast_to(u, shape + (u.shape[-1],)).reshape(-1, u.shape[-1])
        cb, mb = (np.broadcast_to(x, shape).ravel() for x in (c, m))
        try:
            p = fit.predict(np.ascontiguousarray(ub), np.ascontiguousarray(cb), np.ascontiguousarray(mb))
        except ValueError as e:
            raise InputError(str(e)) from None
        p = p.reshape(shape)
        return float(p) if p.ndim == 0 else p

    def predict_grid(self, utilization: ArrayLike, configs: ArrayLike | None = None) -> np.ndarray:
        """Watts [n_workloads x n_configs] through the batched Rust kernel.

        ``configs`` is [n x 2] MHz, the fitted ones by default.
        """
        self._require_fit()
        u = _utilization(utilization, len(self.components_))
        if u.ndim != 2:
            raise InputError(f"utilization must be [n_workloads x {len(self.components_)}], got {u.shape}")
        cfg = self.configs_ if configs is None else clock_array(configs, "configs")
        if cfg.ndim != 2 or cfg.shape[1] != 2:
            raise InputError(f"configs must be [n_configs x 2] (core, memory MHz), got shape {cfg.shape}")
        volts = self.voltage(cfg[:, 0], cfg[:, 1])
        freqs = cfg / np.asarray(self.reference_mhz_)
        return power_grid(u, self.domain_sizes_, self.static_w_, self.idle_w_,
                          list(self.weights_.values()), freqs, volts)

    def breakdown(self, utilization: ArrayLike, core_mhz: float, mem_mhz: float) -> dict[str, float]:
        """One workload's power at one clock pair split into the terms of Eq. 6-7 (W).

        ``static:<domain>``, ``idle:<domain>`` (the utilization-independent power of that V-F level)
        and ``dynamic:<component>``; they add up to :meth:`predict`.
        """
        self._require_fit()
        u = _utilization(utilization, len(self.components_))
        if u.ndim != 1:
            raise InputError(f"breakdown takes one workload's {len(self.components_)} utilizations")
        v = self.voltage(core_mhz, mem_mhz)
        x = np.array([core_mhz, mem_mhz], dtype=np.float64) / np.asarray(self.reference_mhz_)
        out: dict[str, float] = {}
        start = 0
        for d, (name, size) in enumerate(zip(("core", "memory"), self.domain_sizes_)):
            v2x = v[d] ** 2 * x[d]
            out[f"static:{name}"] = float(self.static_w_[d] * v[d])
            out[f"idle:{name}"] = float(v2x * self.idle_w_[d])
            for j in range(start, start + size):
                comp = self.components_[j]
                out[f"dynamic:{comp}"] = float(v2x * self.weights_[comp] * u[j])
            start += size
        return out

    # ------------------------------------------------------------ persistence
    def _options(self) -> dict[str, Any]:
        return {"variant": self.variant, "relative_error": self.relative_error, "ridge": self.ridge,
                "max_iter": self.max_iter, "tol_voltage": self.tol_voltage,
                "tol_objective": self.tol_objective, "v_min": self.v_min, "v_max": self.v_max}

    def save(self, path: str | Path) -> None:
        """Write the fitted model as versioned JSON, atomically."""
        fit = self._require_fit()
        state = dict(fit.state())
        if state["curves"] is not None:  # a flat curve's break is infinite, which JSON cannot hold
            state["curves"] = [[c[0], c[1]] if c[1] != 0 else [1.0, 0.0] for c in state["curves"]]
        doc = {"kind": "power-model", "version": MODEL_VERSION, "options": self._options(),
               "components": list(self.components_), "untrained": list(self.untrained_), "device": self.device_,
               "state": state}
        if self.energy_error_ is not None:
            doc["energy_error"] = self.energy_error_.tolist()
        if self.interval_ is not None:
            doc["interval"] = self.interval_
        if self.source_ != "fitted":
            doc["source"] = self.source_
        write_json_atomic(path, doc)

    @classmethod
    def load(cls, path: str | Path) -> PowerModel:
        """Read a model written by :meth:`save`.

        Raises `InputError` if it is not a power model of this version, or is incomplete or inconsistent.
        """
        doc = read_versioned(path, "power-model", MODEL_VERSION)
        options, names, state = doc.get("options"), doc.get("components"), doc.get("state")
        if not (isinstance(options, dict) and isinstance(state, dict) and isinstance(names, list)
                and all(isinstance(n, str) and n for n in names)):
            raise InputError(f"{path}: a power model file needs 'options' and 'state' objects and a list of "
                             "component names")
        if len(set(names)) != len(names):
            raise InputError(f"{path}: component names repeat: {names}")
        try:
            model = cls(**options)
            model._fit = _core.PowerFit.from_state(state)
        except (TypeError, ValueError, OverflowError) as e:
            raise InputError(f"{path}: invalid power model: {e}") from None
        model.components_ = tuple(names)
        n_weights = len(state["weights"])
        if len(names) != n_weights:
            raise InputError(f"{path}: {len(names)} component names for {n_weights} weights")
        untrained = doc.get("untrained", [])
        if not (isinstance(untrained, list) and all(isinstance(c, str) for c in untrained)
                and set(untrained) <= set(names)):
            raise InputError(f"{path}: 'untrained' must list some of the components {names}")
        model.untrained_ = tuple(untrained)
        device = doc.get("device")
        if not (device is None or (isinstance(device, str) and device)):
            raise InputError(f"{path}: 'device' must be a catalog key or null, got {device!r}")
        model.device_ = device
        model._set_state()
        error = doc.get("energy_error")
        if error is not None:
            if not (isinstance(error, list) and len(error) == len(model.configs_)
                    and all(is_finite_number(e, 0) for e in error)):
                raise InputError(f"{path}: 'energy_error' must list a finite relative error >= 0 for each of the "
                                 f"{len(model.configs_)} configurations")
            model.energy_error_ = np.array(error, dtype=np.float64)
        interval, source = doc.get("interval"), doc.get("source", "fitted")
        if not (interval is None or is_finite_number(interval, 0)):
            raise InputError(f"{path}: 'interval' must be a finite log half-width >= 0, got {interval!r}")
        if source not in SOURCES:
            raise InputError(f"{path}: 'source' must be one of {SOURCES}, got {source!r}")
        model.interval_, model.source_ = (None if interval is None else float(interval)), source
        return model

    def to_gpmtool(self, path: str | Path) -> None:
        """Write the model as a gpmTOOL model file (per-config or per-domain variants only)."""
        write_gpmtool_model(path, self.components_, dict(self._require_fit().state()))

    @classmethod
    def from_gpmtool(cls, path: str | Path) -> PowerModel:
        """A model from a gpmTOOL model file (v1: per-configuration voltages, v2: per-domain)."""
        names, state = read_gpmtool_model(path)
        model = cls(state["variant"])
        try:
            model._fit = _core.PowerFit.from_state(state)
        except ValueError as e:
            raise InputError(f"{path}: invalid gpmTOOL model: {e}") from None
        model.components_ = names
        model._set_state()
        return model

    def __repr__(self) -> str:
        """The variant, and whether the model is fitted."""
        state = "unfitted" if self._fit is None else f"fitted on {len(self.configs_)} configurations"
        return f"PowerModel(variant={self.variant!r}, {state})"


def _with_zero_weights(state: dict[str, Any], dataset: PowerDataset, zero: list[str]) -> dict[str, Any]:
    """A fit's state over ``dataset``'s components, with weight 0 for those in ``zero``.

    The fit was made without them; the domain sizes count them again.
    """
    fitted = iter(state["weights"])
    state["weights"] = [0.0 if c in zero else next(fitted) for c in dataset.components]
    state["domain_sizes"] = list(dataset.domain_sizes)
    state["notes"] = [*state["notes"], f"component(s) {zero} are zero in every training row: weight 0, so "
                      "their power is not predicted"]
    return state
