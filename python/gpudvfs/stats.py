"""How far a mean over a few workloads could move with other workloads: the cluster bootstrap.

A figure such as a mean regret over 15 applications hangs on which applications were
measured. Resampling the applications (whole groups: an application's kernels go together,
as the cross-validation holds them out) with replacement and taking the mean of each resample
gives the spread a different set of the same kind would show; the percentile interval of those
means is what :func:`mean_interval` returns. For a paired comparison (model against a
baseline on the same workloads) pass the per-workload differences, or the baselines to
:func:`paired_intervals`, which resamples the same groups for each.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from gpudvfs.errors import InputError
from gpudvfs.limits import is_count, is_number

#: Resamples drawn, and the seed, by default: at 4000 the interval's ends move by 1-2% of
#: its width from seed to seed.
RESAMPLES = 4000
SEED = 0


def _finite_vector(x: ArrayLike, name: str) -> np.ndarray:
    v = np.asarray(x)
    if v.dtype.kind not in "iuf" or v.ndim != 1 or v.size == 0:
        raise InputError(f"{name} must be a non-empty 1-D sequence of numbers, got {v.dtype} of shape {v.shape}")
    v = v.astype(float)
    if not np.isfinite(v).all():
        raise InputError(f"{name} must be finite, got {int((~np.isfinite(v)).sum())} that are not")
    return v


def mean_interval(values: ArrayLike, groups: ArrayLike | None = None, *, weights: ArrayLike | None = None,
                  level: float = 0.95, resamples: int = RESAMPLES, seed: int = SEED) -> tuple[float, float]:
    """Percentile interval (two-sided; low, high) of the mean of values over resamples of their groups with replacement.

    ``values`` are 1-D, one per workload; ``groups`` label them (default: each its own group).
    A resample's mean weighs every value alike, so a group of three counts three times as much
    as a group of one, as in the figure itself; or by ``weights`` (each > 0), for a figure that
    is a mean of means (replays of unequal lengths). ``level`` is the coverage, in (0, 1).

    Raises InputError if the values or weights are not finite 1-D numbers, ``resamples`` is under 1,
    ``seed`` negative, or ``level`` outside (0, 1).
    """
    v = _finite_vector(values, "values")
    w = np.ones_like(v) if weights is None else _finite_vector(weights, "weights")
    if w.shape != v.shape or not (w > 0).all():
        raise InputError(f"weights must be {v.size} numbers > 0, one per value")
    if not (is_number(level) and 0 < level < 1):
        raise InputError(f"level must be in (0, 1), got {level!r}")
    if not is_count(resamples, 1):
        raise InputError(f"resamples must be an integer >= 1, got {resamples!r}")
    if not is_count(seed):
        raise InputError(f"seed must be an integer >= 0, got {seed!r}")
    labels = np.arange(v.size) if groups is None else np.asarray(groups)
    if labels.shape != v.shape:
        raise InputError(f"groups must give one label per value ({v.size}), got shape {labels.shape}")
    _, index = np.unique(labels, return_inverse=True)
    sums, counts = np.bincount(index, weights=w * v), np.bincount(index, weights=w)
    picks = np.random.default_rng(seed).integers(0, sums.size, size=(resamples, sums.size))
    means = sums[picks].sum(axis=1) / counts[picks].sum(axis=1)
    lo, hi = np.percentile(means, [50 * (1 - level), 50 * (1 + level)])
    return float(lo), float(hi)


def paired_intervals(values: ArrayLike, baselines: Mapping[str, ArrayLike] | None = None,
                     groups: ArrayLike | None = None, **options: Any) -> dict[str, tuple[float, float]]:
    """:func:`mean_interval` of values and of their paired difference from each baseline.

    All from the same resamples of the same groups. ``baselines`` maps a name to the baseline's
    values on the same workloads; ``**options`` are :func:`mean_interval`'s.

    Returns
    -------
    dict of str to tuple of (float, float)
        ``mean``: the interval of the values' mean; ``minus_<name>``: that of their
        difference from each baseline.

    Raises InputError if a baseline's shape is not the values', or as :func:`mean_interval` raises.
    """
    v = np.asarray(values)
    out = {"mean": mean_interval(v, groups, **options)}
    for name, base in (baselines or {}).items():
        b = np.asarray(base)
        if b.shape != v.shape:
            raise InputError(f"baseline {name!r} has shape {b.shape}, the values {v.shape}: one per workload")
        out[f"minus_{name}"] = mean_interval(v - b, groups, **options)
    return out


def mape(pred: np.ndarray, meas: np.ndarray, mask: np.ndarray | None = None) -> float:
    """Mean absolute percentage error (%) of predictions against measurements (non-zero, of ``pred``'s shape).

    ``mask`` selects the rows (boolean or indices) averaged over; all by default.
    """
    e = np.abs(pred - meas) / meas
    return float(100.0 * (e if mask is None else e[mask]).mean())
