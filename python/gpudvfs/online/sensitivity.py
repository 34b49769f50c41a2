"""Frequency sensitivity (Gupta et al. Sec. 4.4).

The time predicted at a candidate clock (Eq. 12), its slope (Eq. 13), and the counters' own
frequency dependence (Eq. 14), learned offline from a measurement grid. Clocks are
(m, domains) arrays in MHz, counters (m, counters) in ``features.counters`` order; ``coef``
is the model's (n_features,) coefficients or one row of them per candidate; a
``counter_model`` says how the counters move with the clock (without it they are taken as
frequency independent, dx = 0).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from gpudvfs.errors import InputError
from gpudvfs.online.features import FeatureMap
from gpudvfs.online.grid import GridTable


@dataclass(frozen=True, eq=False)
class CounterFrequencyModel:
    """Eq. 14: how a counter moves when only the clock does (same workload, dC = 0).

    Per domain d and counter i: x_i(f_new) - x_i(f) = x_i(f) (b1 r + b2 r^2) with
    r = f_d / f_d,new - 1, so a counter that counts per unit of work (instructions)
    stays put (b = 0) and a rate or stall count scales with the clock. Changes of several
    domains add up (first order). ``coef`` is (domains, counters, 2): b1 and b2 of each.
    """

    domains: tuple[str, ...]
    counters: tuple[str, ...]
    coef: np.ndarray

    @classmethod
    def fit(cls, table: GridTable, apps: Sequence[int], counters: Sequence[str]) -> CounterFrequencyModel:
        """Least squares over one-level moves of every domain, on every configuration of ``apps``.

        One-level moves are those a governor weighs. A counter never nonzero keeps b = 0.
        """
        cols = [table.counter_names.index(c) for c in counters]
        x_all = table.counters[list(apps)][..., cols]
        coef = np.zeros((len(table.domains), len(cols), 2))
        for d, lv in enumerate(table.levels):
            axis = 1 + d
            i = np.arange(len(lv) - 1)
            rows, target = [], []
            for a, b in ((i, i + 1), (i + 1, i)):  # up and down
                r = (lv[a] / lv[b] - 1.0).reshape((1,) * axis + (-1,) + (1,) * (x_all.ndim - axis - 1))
                xa, xb = np.take(x_all, a, axis=axis), np.take(x_all, b, axis=axis)
                rows.append(np.stack([xa * r, xa * r * r], axis=-1).reshape(-1, len(cols), 2))
                target.append((xb - xa).reshape(-1, len(cols)))
            a_mat, t = np.concatenate(rows), np.concatenate(target)
            for c in range(len(cols)):
                if np.any(a_mat[:, c] != 0):
                    coef[d, c] = np.linalg.lstsq(a_mat[:, c], t[:, c], rcond=None)[0]
        return cls(table.domains, tuple(counters), coef)

    def change(self, x: ArrayLike, f_now: ArrayLike, f_new: ArrayLike) -> np.ndarray:
        """Predicted (m, counters) changes of counters ``x`` when the clocks go f_now -> f_new."""
        x = np.atleast_2d(np.asarray(x, dtype=np.float64))
        r = np.atleast_2d(f_now) / np.atleast_2d(f_new) - 1.0
        dx = np.zeros_like(x)
        for d in range(len(self.domains)):
            rd = r[:, d:d + 1]
            dx += x * (self.coef[d, :, 0] * rd + self.coef[d, :, 1] * rd * rd)
        return dx


def predict_time_at(features: FeatureMap, coef: ArrayLike, time_ms: ArrayLike, f_now: ArrayLike, f_new: ArrayLike,
                    counters_now: ArrayLike, counter_model: CounterFrequencyModel | None = None) -> np.ndarray:
    """Eq. 12: time (ms) at clocks ``f_new`` of a workload now taking ``time_ms`` at ``f_now``.

    Raises `InputError` if the counters' columns are not the feature map's, or the counter
    model's counters differ.
    """
    x = np.atleast_2d(np.asarray(counters_now, dtype=np.float64))
    if x.shape[1] != len(features.counters):
        raise InputError(f"counters_now has {x.shape[1]} columns, the feature map {len(features.counters)}")
    if counter_model is not None and counter_model.counters != features.counters:
        raise InputError("the counter model and the feature map describe different counters")
    dx = 0.0 if counter_model is None else counter_model.change(x, f_now, f_new)
    h = features.regressors(f_now, f_new, x, x + dx)
    coef = np.broadcast_to(np.asarray(coef, dtype=np.float64), h.shape)
    return np.asarray(time_ms, dtype=np.float64) + np.einsum("ij,ij->i", h, coef)


def time_slope(features: FeatureMap, coef: ArrayLike, time_ms: ArrayLike, f_now: ArrayLike, f_new: ArrayLike,
               counters_now: ArrayLike, counter_model: CounterFrequencyModel | None = None) -> np.ndarray:
    """Eq. 13: d time / d f (ms per MHz), Eq. 12's finite difference over a move of one clock domain per row.

    Raises `InputError` if a row does not change exactly one clock domain, or as
    :func:`predict_time_at` raises.
    """
    f_now, f_new = np.atleast_2d(f_now), np.atleast_2d(f_new)
    moved = f_now != f_new
    if not np.all(moved.sum(axis=1) == 1):
        raise InputError("time_slope: each row must change exactly one clock domain")
    t_new = predict_time_at(features, coef, time_ms, f_now, f_new, counters_now, counter_model)
    return (t_new - np.asarray(time_ms, dtype=np.float64)) / (f_new - f_now)[moved]
