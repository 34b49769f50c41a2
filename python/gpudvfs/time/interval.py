"""How far a predicted time can be off at each clock pair: a 90% interval that grows with the distance.

The distance is the pair's from the reference the prediction was calibrated at.

A time calibrated on the profile's measured duration is exact at the reference and drifts as
the clocks move away from it: on the GTX 980 grids the cross-validated residuals' root mean
square is 3.8% within a log distance of 0.3 from the reference, 7.3% at 0.3-0.5 and 9.6% at
0.5-0.7. The spread ``sigma(d)`` is fitted to the squared log residuals as ``A + B d^2``
(`fit_spread`), ``d`` the log distance of the pair from the reference (`log_distance`), and
the interval is ``Z90 sigma(d)``, ``Z90`` the 90% quantile of ``|residual| / sigma(d)``: all
three from the residuals of `gpudvfs time cv`'s predictions, the settings chosen without each
kernel's application (`gpudvfs.evaluation.interval_cv` scores their coverage on applications
held out).
Uncalibrated, the level's own error (`UNCALIBRATED_LEVEL`) adds in quadrature.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
from numpy.typing import ArrayLike

from gpudvfs.errors import InputError

#: sigma(d)^2 = SPREAD_A + SPREAD_B d^2 and the 90% multiplier, fitted on every kernel of the
#: GTX 980 grids (`fit_interval`, as `interval_cv(...)["on_all"]` reports them;
#: tests/time/test_time_interval.py recomputes them).
SPREAD_A = 0.000799
SPREAD_B = 0.02489
Z90 = 1.373
#: The 90% quantile of |ln(predicted / measured)| of uncalibrated times over the 32 kernels an
#: H100 ran at the driver's clocks (validation/; tests/cli/test_demo.py recomputes it).
UNCALIBRATED_LEVEL = 0.885


def log_distance(configs: ArrayLike, reference: ArrayLike) -> np.ndarray:
    """Euclidean distance [K] between each (core, memory) pair's log clocks [K x 2] and the reference's.

    Raises `InputError` if the shapes are not [K x 2] and (2,), or a clock is not a positive
    finite number.
    """
    c, r = np.asarray(configs, dtype=np.float64), np.asarray(reference, dtype=np.float64)
    if c.ndim != 2 or c.shape[1] != 2 or r.shape != (2,):
        raise InputError(f"configs must be [K x 2] and the reference (core, memory), got {c.shape} and {r.shape}")
    if not ((c > 0).all() and (r > 0).all() and np.isfinite(c).all() and np.isfinite(r).all()):
        raise InputError("clocks must be positive, finite MHz")
    return np.sqrt(((np.log(c) - np.log(r)) ** 2).sum(axis=1))


def fit_spread(residuals: ArrayLike, d: ArrayLike) -> tuple[float, float]:
    """(A, B) >= 0: the least-squares fit of squared log residuals ln(predicted / measured) to ``A + B d^2``.

    A is the variance at the reference, B its growth per squared log distance ``d``.
    """
    r2 = np.asarray(residuals, dtype=np.float64) ** 2
    d2 = np.broadcast_to(np.asarray(d, dtype=np.float64) ** 2, r2.shape).ravel()
    r2 = r2.ravel()
    if r2.size == 0 or not (np.isfinite(r2).all() and np.isfinite(d2).all()):
        raise InputError("the spread needs at least one finite residual")
    a, b = np.linalg.lstsq(np.column_stack([np.ones_like(d2), d2]), r2, rcond=None)[0]
    if b < 0:  # no growth with the distance: the mean square alone
        return float(r2.mean()), 0.0
    if a < 0:  # no error at the reference: growth alone, through the origin
        return 0.0, float((r2 @ d2) / max(float(d2 @ d2), 1e-300))
    return float(a), float(b)


def spread(d: ArrayLike, a: float, b: float) -> np.ndarray:
    """Standard deviation of a log time error at a log distance from the reference: ``sqrt(a + b d^2)``."""
    return np.sqrt(a + b * np.asarray(d, dtype=np.float64) ** 2)


def time_interval(configs: ArrayLike, reference: ArrayLike, calibrated: bool) -> np.ndarray:
    """The 90% interval of a predicted time at each of ``configs`` [K x 2] MHz, as a log half-width [K].

    A time x lies in [x e^-q, x e^q] with ``q = Z90 sigma(d)``; not ``calibrated`` on the
    measured time at the reference, with the level's error (:data:`UNCALIBRATED_LEVEL`) in
    quadrature.
    """
    q = Z90 * spread(log_distance(configs, reference), SPREAD_A, SPREAD_B)
    return q if calibrated else np.hypot(q, UNCALIBRATED_LEVEL)


def fit_interval(residuals: list[np.ndarray], distances: list[np.ndarray],
                 kernels: Iterable[int]) -> tuple[float, float, float]:
    """(A, B) of :func:`fit_spread` and Z90 (the 90% quantile of ``|residual| / sigma(d)`` away from the reference).

    ``residuals`` and ``distances`` hold, per kernel, the log residual and distance at each of
    its measured pairs; ``kernels`` indexes those fitted on.
    """
    r = np.concatenate([residuals[j] for j in kernels])
    d = np.concatenate([distances[j] for j in kernels])
    a, b = fit_spread(r, d)
    off = d > 0
    return a, b, float(np.quantile(np.abs(r[off]) / np.maximum(spread(d[off], a, b), 1e-12), 0.9))
