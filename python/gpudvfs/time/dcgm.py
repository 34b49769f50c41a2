"""Time across clocks from DCGM activity at one reference clock pair.

For clusters that have DCGM profiling fields rather than instruction counters:

    T(fc, fm) = T_ref * (1 + s_c (fc_ref/fc - 1) + s_m (fm_ref/fm - 1))

``s_c`` is the share of the reference time that scales with the core clock, ``s_m`` the
share that scales with the memory clock; the rest (1 - s_c - s_m: host work, PCIe, launch
gaps, waits on a clock that does not move) scales with neither. ``s_c = 1`` is plain 1/f
scaling, ``s_c = s_m = 0`` time unchanged: the baselines.

Fitting: each training workload's shares by least squares on its measured curve, then the
shares of a new workload from its activities at the reference, one of two ways:

* ``mean``: the training workloads' mean share, whatever the activities;
* ``activity``: a ridge regression of the shares on (1, SM activity, pipe activity, DRAM
  activity), SM activity being ``sm_active`` where DCGM collected it, else
  ``gr_engine_active``, and pipe activity the largest of the FP64/FP32/FP16/tensor fields.

``auto`` (the default) picks one of them by leave-one-workload-out over the training
workloads, the same protocol
:func:`~gpudvfs.evaluation.dcgm_time.cross_validate_dcgm_time` scores it with.

Every ``reference`` below is the (core, memory) pair in MHz, the memory clock None where the
grid has no memory column.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from gpudvfs.data.datasets import MeasurementGrid
from gpudvfs.data.dcgm_fields import PIPES, find_fields
from gpudvfs.data.jsonfile import read_versioned, write_json_atomic
from gpudvfs.errors import InputError

PREDICTORS = ("auto", "mean", "activity")
#: Ridge penalty of the activity regression (on shares in [0, 1], features in [0, 1]).
RIDGE = 0.1
MODEL_KIND, MODEL_VERSION = "dcgm-time-model", 1


def activity_features(grid: MeasurementGrid) -> tuple[np.ndarray, list[str]]:
    """Per row of a grid, its (SM, pipe, DRAM) activities [rows x 3], and the columns they came from.

    A pipe or DRAM field the grid lacks reads 0. Raises `InputError` if the grid has no SM
    activity field with a non-zero value.
    """
    found = find_fields(grid.columns)
    sm = found.get("sm_active") or found.get("gr_engine_active")
    if sm is None:
        raise InputError(f"{grid.path}: no SM activity field (sm_active / SMACT / DCGM_FI_PROF_SM_ACTIVE, or "
                         "gr_engine_active / GRACT) with a non-zero value: the DCGM time model needs one")
    pipes = [found[p] for p in PIPES if p in found]
    zeros = np.zeros(len(grid))
    pipe = np.max([grid.columns[c] for c in pipes], axis=0) if pipes else zeros
    dram = grid.columns[found["dram_active"]] if "dram_active" in found else zeros
    used = [sm, *pipes] + ([found["dram_active"]] if "dram_active" in found else [])
    return np.column_stack([grid.columns[sm], pipe, dram]), used


def clock_terms(grid: MeasurementGrid, reference: tuple[float, float | None]) -> tuple[np.ndarray, np.ndarray]:
    """The clock terms ``fc_ref/fc - 1`` and ``fm_ref/fm - 1`` per row (the latter 0 without a memory column)."""
    xc = reference[0] / grid.core_mhz - 1.0
    xm = np.zeros(len(grid)) if grid.mem_mhz is None else reference[1] / grid.mem_mhz - 1.0
    return xc, xm


def measured_shares(grid: MeasurementGrid,
                    reference: tuple[float, float | None]) -> tuple[list[str], np.ndarray, np.ndarray, bool]:
    """Each workload's (s_c, s_m) fitted to its own measured curve, clipped to s >= 0 and s_c + s_m <= 1.

    Returns the workloads measured at the reference (file order), each one's reference row,
    their shares [workloads x 2] (s_m 0 where the memory clock does not move), and whether the
    grid moves the memory clock at all.
    """
    names, ref = grid.reference_rows(reference)
    xc, xm = clock_terms(grid, reference)
    varies_mem = bool(np.any(xm != 0))
    work = grid.workload
    shares = np.zeros((len(names), 2))
    for a, (n, i) in enumerate(zip(names, ref)):
        rows = work == n
        y = grid.time_ms[rows] / grid.time_ms[i] - 1.0
        x = np.column_stack([xc[rows], xm[rows]]) if varies_mem else xc[rows, None]
        s = np.linalg.lstsq(x, y, rcond=None)[0].clip(0.0, 1.0)
        shares[a, :len(s)] = s / max(1.0, s.sum())
    return names, ref, shares, varies_mem


class DcgmTimeModel:
    """Shares of core- and memory-bound time from DCGM activity; see the module docs.

    ``predictor`` is one of :data:`PREDICTORS`; ``ridge`` the activity regression's penalty.
    Fitted: ``chosen_`` (``mean`` or ``activity``), ``mean_share_`` (the training workloads'
    mean (s_c, s_m)), ``coef_`` ([4 x 2] ridge coefficients of (s_c, s_m) on (1, SM, pipe, DRAM
    activity)), ``fields_`` (the columns read), ``core_range_`` and ``mem_range_`` (the clocks
    the training grid spanned; ``mem_range_`` None without a memory column).
    """

    chosen_: str
    reference_mhz_: tuple[float, float | None]
    varies_mem_: bool
    core_range_: tuple[float, float]
    mem_range_: tuple[float, float] | None
    mean_share_: np.ndarray
    coef_: np.ndarray
    fields_: list[str]

    def __init__(self, predictor: str = "auto", ridge: float = RIDGE) -> None:
        if predictor not in PREDICTORS:
            raise InputError(f"unknown predictor {predictor!r}; expected one of {PREDICTORS}")
        if not ridge >= 0:
            raise InputError(f"ridge must be >= 0, got {ridge!r}")
        self.predictor, self.ridge = predictor, float(ridge)

    def fit(self, grid: MeasurementGrid, reference: tuple[float, float | None]) -> DcgmTimeModel:
        """Fit the shares to a DCGM grid of at least two workloads, with time and activity fields at every pair.

        Raises `InputError` if the grid has no SM activity field, fewer than two workloads at the
        reference, or no reference row at all.
        """
        _, ref, shares, varies_mem = measured_shares(grid, reference)
        features, self.fields_ = activity_features(grid)
        return self.fit_shares(features[ref], shares, varies_mem, (reference[0], reference[1]),
                               grid.core_mhz, grid.mem_mhz)

    def fit_shares(self, features: np.ndarray, shares: np.ndarray, varies_mem: bool,
                   reference: tuple[float, float | None], core_mhz: np.ndarray,
                   mem_mhz: np.ndarray | None) -> DcgmTimeModel:
        """Fit the model to workloads' measured shares, as :meth:`fit` does after measuring them.

        Leave-one-out scoring calls it with one workload's row left out. ``features`` are (SM, pipe,
        DRAM) activities at the reference; the range of the clocks ``core_mhz`` and ``mem_mhz`` is kept.
        """
        if len(shares) < 2:
            raise InputError("the DCGM time model needs at least two training workloads")
        self.reference_mhz_, self.varies_mem_ = reference, varies_mem
        self.core_range_ = (float(core_mhz.min()), float(core_mhz.max()))
        self.mem_range_ = None if mem_mhz is None else (float(mem_mhz.min()), float(mem_mhz.max()))
        self.chosen_ = self.predictor if self.predictor != "auto" else _choose(features, shares, self.ridge)
        self.mean_share_ = shares.mean(axis=0)
        self.coef_ = _ridge(features, shares, self.ridge)
        return self

    def save(self, path: str | Path) -> None:
        """Write the fitted shares and their predictor as versioned JSON, atomically."""
        if not hasattr(self, "coef_"):
            raise InputError("the DCGM time model is not fitted")
        write_json_atomic(path, {
            "kind": MODEL_KIND, "version": MODEL_VERSION, "predictor": self.predictor, "ridge": self.ridge,
            "chosen": self.chosen_, "reference_mhz": list(self.reference_mhz_), "varies_mem": self.varies_mem_,
            "core_range": list(self.core_range_),
            "mem_range": None if self.mem_range_ is None else list(self.mem_range_),
            "mean_share": self.mean_share_.tolist(), "coef": self.coef_.tolist(), "fields": self.fields_})

    @classmethod
    def load(cls, path: str | Path) -> DcgmTimeModel:
        """Read a model written by :meth:`save`; `InputError` if it is not a DCGM time model of this version."""
        doc = read_versioned(path, MODEL_KIND, MODEL_VERSION)
        try:
            m = cls(doc["predictor"], doc["ridge"])
            m.chosen_, m.varies_mem_, m.fields_ = str(doc["chosen"]), bool(doc["varies_mem"]), list(doc["fields"])
            m.reference_mhz_ = _pair(doc["reference_mhz"])
            m.core_range_ = _pair(doc["core_range"])
            m.mem_range_ = None if doc["mem_range"] is None else _pair(doc["mem_range"])
            m.mean_share_ = np.array(doc["mean_share"], dtype=np.float64)
            m.coef_ = np.array(doc["coef"], dtype=np.float64)
        except (KeyError, TypeError, ValueError) as e:
            raise InputError(f"{path}: not a complete DCGM time model ({e})") from None
        if (m.chosen_ not in ("mean", "activity") or m.mean_share_.shape != (2,) or m.coef_.shape != (4, 2)
                or not np.all(np.isfinite(m.coef_))):
            raise InputError(f"{path}: not a complete DCGM time model (shapes or values)")
        return m

    def shares(self, activities: ArrayLike) -> np.ndarray:
        """(s_c, s_m) [workloads x 2] from rows of (SM, pipe, DRAM) activity at the reference.

        Each share is >= 0 and the two sum to at most 1.
        """
        x = np.atleast_2d(np.asarray(activities, dtype=np.float64))
        if x.shape[-1] != 3 or not np.all(np.isfinite(x)):
            raise InputError(f"activities must be finite rows of (SM, pipe, DRAM) activity, got shape {x.shape}")
        if self.chosen_ == "mean":
            return np.broadcast_to(self.mean_share_, (len(x), 2)).copy()
        return _predict_shares(self.coef_, x)

    def predict(self, activities: ArrayLike, reference_time_ms: ArrayLike, core_mhz: ArrayLike,
                mem_mhz: ArrayLike | None = None) -> np.ndarray:
        """Time (ms) [workloads x clocks] from each workload's (SM, pipe, DRAM) activities and time at the reference.

        ``mem_mhz`` None keeps the reference's; another memory clock is an `InputError` for a model
        fitted at one memory clock.
        """
        s = self.shares(activities)
        t_ref = np.atleast_1d(np.asarray(reference_time_ms, dtype=np.float64))
        if t_ref.shape != (len(s),) or not np.all(t_ref > 0) or not np.all(np.isfinite(t_ref)):
            raise InputError("reference_time_ms must hold one positive finite time per workload")
        fc = np.asarray(core_mhz, dtype=np.float64)
        fm = np.full_like(fc, np.nan) if mem_mhz is None else np.asarray(mem_mhz, dtype=np.float64)
        fc, fm = np.broadcast_arrays(fc, fm)
        ref_mem = self.reference_mhz_[1]
        if not self.varies_mem_ and np.any(np.isfinite(fm) & (fm != (ref_mem or np.nan))):
            raise InputError("the model was fitted at one memory clock: it cannot say how time moves with another")
        # A grid that moved the memory clock was matched on it: its reference has one.
        xm = ref_mem / fm - 1.0 if self.varies_mem_ and ref_mem is not None else np.zeros_like(fc)
        xc = self.reference_mhz_[0] / fc - 1.0
        return t_ref[:, None] * (1.0 + s[:, :1] * xc.ravel() + s[:, 1:] * xm.ravel())


def _pair(values: list) -> tuple[Any, Any]:
    a, b = values  # a ValueError for a list of another length
    return (a, b)


def _ridge(features: np.ndarray, shares: np.ndarray, ridge: float) -> np.ndarray:
    x = np.column_stack([np.ones(len(features)), features])
    # Ridge as extra rows (the intercept not shrunk); least squares keeps collinear activities
    # (one SM activity in every workload) solvable.
    rows = np.sqrt(ridge) * np.eye(x.shape[1])[1:]
    return np.linalg.lstsq(np.vstack([x, rows]), np.vstack([shares, np.zeros((len(rows), 2))]), rcond=None)[0]


def _predict_shares(coef: np.ndarray, features: np.ndarray) -> np.ndarray:
    s = (np.column_stack([np.ones(len(features)), features]) @ coef).clip(0.0, 1.0)
    return s / np.maximum(1.0, s.sum(axis=1, keepdims=True))


def _choose(features: np.ndarray, shares: np.ndarray, ridge: float) -> str:
    """The predictor with the lower leave-one-out error of the shares on ``shares``' workloads."""
    n = len(shares)
    if n < 3:
        return "mean"
    err = {"mean": 0.0, "activity": 0.0}
    for k in range(n):
        keep = np.arange(n) != k
        err["mean"] += float(np.abs(shares[keep].mean(axis=0) - shares[k]).sum())
        guess = _predict_shares(_ridge(features[keep], shares[keep], ridge), features[k:k + 1])[0]
        err["activity"] += float(np.abs(guess - shares[k]).sum())
    return min(err, key=lambda k: err[k])
