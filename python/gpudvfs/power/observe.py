"""Refining a GPU's power prior from what its driver does by itself: passive observation.

While the user's own work runs, the driver visits clocks of its own accord (idle clocks,
boost, power and thermal throttling), and each visit is a point of power against clocks and
activity. The power model of Guerreiro et al. over the observed activities (GPM's SM, pipe
and DRAM activity, or NVML's kernel and memory busy fractions where the GPU has no GPM):

    P = s_c V + V^2 x (i_c + sum_k w_k a_k) + s_m + x_m (i_m + sum_j w_j a_j),

V the core voltage relative to the default clock's on the prior's flat-then-linear curve,
x and x_m the clocks over the default ones. Its coefficients and curve are fitted to the
readings by Levenberg-Marquardt with a Gaussian prior centred on the catalog prior (its
terms at the default clocks, its curve): where the readings say little (a clock seen only
idle), the prior stands; where they say much, they win. A reading whose window saw the
clock change mixes two clocks' power, and one at a change of work its neighbour's: both are
left out (`steady_readings`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from numpy.typing import ArrayLike

from gpudvfs import _core
from gpudvfs.errors import InputError
from gpudvfs.power.model import PowerModel
from gpudvfs.power.prior import curve_state

#: Relative error of one reading against the model: sensor noise plus what the activities do
#: not capture of the power. With the prior's standard deviations below, it weighs the readings
#: against the prior. None was tuned: on the simulator under its own driver (seeds 0-2, 60 s)
#: the largest voltage error, 2.8-3.3% as set, moves to 3.2-3.7 / 2.6-3.1% with COEF_LOG_SD at
#: 0.35 / 1.4, to 2.5-3.1 / 5.5-5.9% with READING_SD at 0.01 / 0.1, and to 5.2-5.5 / 2.8-3.3% with
#: BREAK_SD at 0.05 / 0.5: a prior held tighter than the readings warrant costs the most.
READING_SD = 0.03
#: Prior standard deviations: of each coefficient's logarithm (a factor of about 2), and of the
#: curve's break (as a fraction of the default clock) and slope's logarithm.
COEF_LOG_SD = 0.7
BREAK_SD = 0.15
SLOPE_LOG_SD = 0.7
#: Least slope the prior's curve is given, so that a flat prior curve can still bend.
MIN_SLOPE = 0.05
#: How far a window's activities may differ from its neighbours' and still count as steady,
#: where power is read between the counter's updates: on the H200's readings
#: (validation/nvidia-h200/observe-2) the fit's residual sd is 18.7% with no such rule, 9.6% at
#: 0.2, 6.9% at 0.1 and at 0.05. Not applied to exact readings (the simulator's), where leaving
#: the windows at a change of work out only loses readings.
STEADY_ACTIVITY = 0.1
#: Fewest distinct core clocks (among readings kept) for the fit to move the curve.
MIN_CLOCKS = 2


class ObservedWindow(Protocol):
    """What the fit reads of one window of readings (`gpudvfs.hardware.observer.Reading` has it)."""

    @property
    def core_mhz_start(self) -> float:
        """The core clock at the window's start (MHz)."""

    @property
    def core_mhz(self) -> float:
        """The core clock at its end (MHz)."""

    @property
    def mem_mhz(self) -> float:
        """The memory clock (MHz)."""

    @property
    def watts(self) -> float:
        """The mean power over the window (W)."""

    @property
    def activity(self) -> Sequence[float]:
        """The activities over it (fractions)."""


class Observed(Protocol):
    """What the fit reads of an observation (`gpudvfs.hardware.observer.Observation` has it)."""

    @property
    def readings(self) -> Sequence[ObservedWindow]:
        """The windows, in time order."""

    @property
    def activities(self) -> tuple[str, ...]:
        """Names of the activities the fit reads, the core domain's (``n_core``) first."""

    @property
    def n_core(self) -> int:
        """How many activities belong to the core domain."""

    @property
    def power(self) -> str:
        """How power was read: ``exact`` (the simulator's) or not."""


@dataclass(frozen=True)
class ObservedFit:
    """The refined model (``source_`` ``observed``, or ``prior`` where the prior stands) and what the fit saw.

    ``clocks_seen`` are the readings' distinct core clocks (MHz); ``residual_sd`` the residuals'
    standard deviation in log space (about the relative one; NaN without readings);
    ``prior_stands`` why the prior stands, None where the readings moved it.
    """

    model: PowerModel
    readings_used: int
    clocks_seen: tuple[float, ...]
    residual_sd: float
    prior_stands: str | None


def _volts(x: np.ndarray, xb: float, slope: float) -> np.ndarray:
    return 1.0 + slope * (np.maximum(0.0, x - xb) - max(0.0, 1.0 - xb))


class _Problem:
    """The model's parameters as one vector, with their prior means and deviations.

    Logs of s_c, i_c, the core weights, s_m, i_m, the memory weights, the slope; and the break.
    """

    def __init__(self, prior: PowerModel, n_core: int, n_mem: int) -> None:
        self.n_core, self.n_mem = n_core, n_mem
        xb, slope = prior._require_fit().state()["curves"][0]
        if not np.isfinite(xb):
            xb, slope = 0.8, 0.0
        core_dyn = sum(w for c, w in prior.weights_.items() if c != "DRAM")
        mem_dyn = prior.weights_.get("DRAM", 0.1 * core_dyn)
        # Each activity's weight starts at its share of the prior's dynamic power of its domain.
        coefs = [prior.static_w_[0], prior.idle_w_[0], *[core_dyn / n_core] * n_core, prior.static_w_[1],
                 prior.idle_w_[1], *[mem_dyn / max(n_mem, 1)] * n_mem]
        floor = 1e-3 * max(sum(coefs), 1.0)
        self.mean = np.array([np.log(max(c, floor)) for c in coefs] + [np.log(max(slope, MIN_SLOPE)), xb])
        self.sd = np.array([COEF_LOG_SD] * len(coefs) + [SLOPE_LOG_SD, BREAK_SD])

    def split(self, theta: np.ndarray) -> tuple[float, float, np.ndarray, float, float, np.ndarray, float, float]:
        c = np.exp(theta[:-2])
        n, m = self.n_core, self.n_mem
        slope, xb = float(np.exp(theta[-2])), float(theta[-1])
        return c[0], c[1], c[2:2 + n], c[2 + n], c[3 + n], c[4 + n:4 + n + m], slope, xb

    def power(self, theta: np.ndarray, x: np.ndarray, xm: np.ndarray, act: np.ndarray) -> np.ndarray:
        sc, ic, wc, sm, im, wm, slope, xb = self.split(theta)
        v = _volts(x, xb, slope)
        return sc * v + v**2 * x * (ic + act[:, :self.n_core] @ wc) + sm + xm * (im + act[:, self.n_core:] @ wm)


def _levenberg_marquardt(residuals: Callable[[np.ndarray], np.ndarray], theta: np.ndarray,
                         iters: int = 200) -> np.ndarray:
    """Least squares of ``residuals(theta)`` (a vector) by Levenberg-Marquardt with a forward-difference Jacobian.

    A dozen parameters, hundreds of readings.
    """
    lam, r = 1e-2, residuals(theta)
    cost = r @ r
    for _ in range(iters):
        h = 1e-6 * np.maximum(1.0, np.abs(theta))
        jac = np.column_stack([(residuals(theta + h[i] * np.eye(len(theta))[i]) - r) / h[i]
                               for i in range(len(theta))])
        g, a = jac.T @ r, jac.T @ jac
        while True:
            trial = theta + np.linalg.solve(a + lam * np.diag(np.diag(a) + 1e-12), -g)
            rt = residuals(trial)
            if rt @ rt < cost:
                break
            lam *= 4
            if lam > 1e12:
                return theta
        improved, theta, r, lam = cost - rt @ rt, trial, rt, max(lam / 3, 1e-9)
        cost = r @ r
        if improved < 1e-10 * max(cost, 1e-300):
            return theta
    return theta


def fit_observed(prior: PowerModel, activity_names: tuple[str, ...], n_core: int, core_mhz: ArrayLike,
                 mem_mhz: ArrayLike, watts: ArrayLike, activity: ArrayLike, *,
                 configs: ArrayLike | None = None) -> ObservedFit:
    """The prior refined by N readings: clocks (MHz), ``watts`` (W) and ``activity`` [N x A] (fractions).

    The first ``n_core`` activities are the core domain's. Readings without a positive power,
    clocks or finite activities are left out; activities are clipped into [0, 1]. The model is
    laid out on ``configs`` (the prior's by default) and predicts power from those activities
    at any clock. Raises `InputError` if the shapes differ or ``n_core`` is not in [1, A].
    """
    core, mem, p = (np.asarray(a, dtype=np.float64) for a in (core_mhz, mem_mhz, watts))
    act = np.asarray(activity, dtype=np.float64)
    n = len(p)
    if not (core.shape == mem.shape == p.shape == (n,) and act.shape == (n, len(activity_names))):
        raise InputError(f"readings: {n} powers need as many clocks and [{n} x {len(activity_names)}] activities")
    if not (0 < n_core <= len(activity_names)):
        raise InputError(f"n_core must be in [1, {len(activity_names)}], got {n_core}")
    ok = np.isfinite(p) & (p > 0) & np.isfinite(core) & (core > 0) & np.isfinite(mem) & (mem > 0)
    ok &= np.all(np.isfinite(act), axis=1)
    core, mem, p, act = core[ok], mem[ok], p[ok], np.clip(act[ok], 0.0, 1.0)
    clocks = tuple(float(c) for c in np.unique(core))
    ref = prior.reference_mhz_
    problem = _Problem(prior, n_core, len(activity_names) - n_core)
    stands = None
    if len(p) == 0:
        stands = "no reading with a power, clocks and activities"
    elif len(clocks) < MIN_CLOCKS:
        stands = (f"the driver ran one core clock ({clocks[0]:g} MHz) all along: no clock variation to learn the "
                  "voltage from; run work that lets the GPU idle and boost (or throttle), or observe longer")
    x, xm = core / ref[0], mem / ref[1]
    theta = problem.mean.copy()
    if stands is None:
        def residuals(t: np.ndarray) -> np.ndarray:
            return np.r_[(problem.power(t, x, xm, act) / p - 1.0) / READING_SD, (t - problem.mean) / problem.sd]
        theta = _levenberg_marquardt(residuals, theta)
    sc, ic, wc, sm, im, wm, slope, xb = problem.split(theta)
    resid = np.log(problem.power(theta, x, xm, act) / p) if len(p) else np.array([np.nan])
    state = curve_state(ref, [sc, sm], [ic, im], [*wc, *wm],
                        (n_core, len(activity_names) - n_core), [[xb, slope], None],
                        prior.configs_ if configs is None else configs,
                        [stands and f"prior stands: {stands}" or
                         f"observed: refined from {len(p)} readings at {len(clocks)} core clocks"])
    model = PowerModel("curve")
    model._fit = _core.PowerFit.from_state(state)
    model.components_ = tuple(activity_names)
    model.device_ = prior.device_
    model.source_ = "prior" if stands else "observed"
    sd = float(np.sqrt(np.mean(resid**2))) if len(p) else None
    model.interval_ = prior.interval_ if stands or sd is None else 1.645 * sd
    model._set_state()
    return ObservedFit(model, int(len(p)), clocks, float("nan") if sd is None else sd, stands)


def steady_readings(readings: Sequence[ObservedWindow], tolerance: float = STEADY_ACTIVITY) -> list[ObservedWindow]:
    """The windows that saw one core clock and the same activities, within ``tolerance``, as the windows on both sides.

    A window's power read between the energy counter's updates around it holds, at a change
    of work, some of its neighbour's. An infinite tolerance keeps every window of one clock
    (the first and last included).
    """
    return [readings[i] for i in _steady_indices(readings, tolerance)]


def _steady_indices(readings: Sequence[ObservedWindow], tolerance: float) -> list[int]:
    out = []
    for i, r in enumerate(readings):
        if r.core_mhz_start != r.core_mhz:
            continue
        if np.isinf(tolerance):
            out.append(i)
            continue
        if i == 0 or i == len(readings) - 1:
            continue
        a = np.asarray(r.activity)
        if all(np.max(np.abs(np.asarray(n.activity) - a)) <= tolerance for n in (readings[i - 1], readings[i + 1])):
            out.append(i)
    return out


def fit_readings(prior: PowerModel, obs: Observed, leave_out: Collection[int] = ()) -> ObservedFit:
    """`fit_observed` on an observation's readings at a steady clock.

    Where power was not read exactly, at a steady activity too (`steady_readings`); the refined
    model is laid out on the prior's pairs and every pair seen. ``leave_out`` indexes readings
    the fit leaves out (a held-out workload's windows), after steadiness is judged on them all.
    """
    kept = _steady_indices(obs.readings, STEADY_ACTIVITY if obs.power != "exact" else np.inf)
    steady = [obs.readings[i] for i in kept if i not in leave_out]
    activity_names, n_core = obs.activities, obs.n_core
    seen = {(r.core_mhz, r.mem_mhz) for r in steady}
    configs = np.unique(np.r_[prior.configs_, np.array(sorted(seen), dtype=np.float64).reshape(-1, 2)], axis=0)
    return fit_observed(prior, activity_names, n_core, [r.core_mhz for r in steady], [r.mem_mhz for r in steady],
                        [r.watts for r in steady], [r.activity for r in steady], configs=configs)
