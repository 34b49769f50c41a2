"""How far a predicted time can be off at each clock pair: a 90% interval that grows with the
pair's distance from the reference the prediction was calibrated at.

A time calibrated on the profile's measured duration is exact at the reference and drifts as
the clocks move away from it: on the GTX 980 grids the cross-validated residuals' root mean
square is 3.8% within a log distance of 0.3 from the reference, 7.3% at 0.3-0.5 and 9.6% at
0.5-0.7. The spread ``sigma(d)`` is fitted to the squared log residuals as ``A + B d^2``
(`fit_spread`), ``d`` the log distance of the pair from the reference (`log_distance`), and
the interval is ``Z90 sigma(d)``, ``Z90`` the 90% quantile of ``|residual| / sigma(d)``: all
three from the residuals of `gpudvfs time cv`'s predictions, the settings chosen without each
kernel's application (`interval_cv` scores their coverage on applications held out).
Uncalibrated, the level's own error (`UNCALIBRATED_LEVEL`) adds in quadrature.
"""

from __future__ import annotations

import numpy as np

from gpudvfs.errors import InputError

#: sigma(d)^2 = SPREAD_A + SPREAD_B d^2 and the 90% multiplier, fitted on every kernel of the
#: GTX 980 grids (`interval_cv(...)["on_all"]`; tests/test_time_interval.py recomputes them).
SPREAD_A = 0.000799
SPREAD_B = 0.02489
Z90 = 1.373
#: Log distances from the reference over which `interval_cv` reports the coverage.
DISTANCE_BANDS = ((0.0, 0.3), (0.3, 0.5), (0.5, np.inf))
#: The 90% quantile of |ln(predicted / measured)| of uncalibrated times over the 32 kernels an
#: H100 ran at the driver's clocks (validation/; tests/test_demo.py recomputes it).
UNCALIBRATED_LEVEL = 0.885


def log_distance(configs, reference) -> np.ndarray:
    """Each (core, memory) pair's log distance from ``reference`` (core, memory MHz): [K]."""
    c, r = np.asarray(configs, dtype=np.float64), np.asarray(reference, dtype=np.float64)
    if c.ndim != 2 or c.shape[1] != 2 or r.shape != (2,):
        raise InputError(f"configs must be [K x 2] and the reference (core, memory), got {c.shape} and {r.shape}")
    if not ((c > 0).all() and (r > 0).all() and np.isfinite(c).all() and np.isfinite(r).all()):
        raise InputError("clocks must be positive, finite MHz")
    return np.sqrt(((np.log(c) - np.log(r)) ** 2).sum(axis=1))


def fit_spread(residuals, d) -> tuple[float, float]:
    """(A, B) of the least-squares fit of the squared ``residuals`` (log) to ``A + B d^2``,
    both >= 0; ``d`` broadcasts against ``residuals``."""
    r2 = np.asarray(residuals, dtype=np.float64) ** 2
    d2 = np.broadcast_to(np.asarray(d, dtype=np.float64) ** 2, r2.shape).ravel()
    r2 = r2.ravel()
    if r2.size == 0 or not (np.isfinite(r2).all() and np.isfinite(d2).all()):
        raise InputError("the spread needs at least one finite residual")
    a, b = np.linalg.lstsq(np.column_stack([np.ones_like(d2), d2]), r2, rcond=None)[0]
    if b < 0:  # no growth with the distance: the mean square alone
        return float(r2.mean()), 0.0
    if a < 0:  # no error at the reference: growth alone, through the origin
        return 0.0, float((r2 @ d2) / max((d2 @ d2), 1e-300))
    return float(a), float(b)


def spread(d, a: float, b: float) -> np.ndarray:
    return np.sqrt(a + b * np.asarray(d, dtype=np.float64) ** 2)


def time_interval(configs, reference, calibrated: bool) -> np.ndarray:
    """The 90% interval of a predicted time at each pair [K], as a log half-width (x lies in
    [x e^-q, x e^q]): ``Z90 sigma(d)``; uncalibrated, with the level's error in quadrature."""
    q = Z90 * spread(log_distance(configs, reference), SPREAD_A, SPREAD_B)
    return q if calibrated else np.hypot(q, UNCALIBRATED_LEVEL)


def interval_cv(residuals: list[np.ndarray], distances: list[np.ndarray], groups) -> dict:
    """The interval scored on applications held out: for each group, (A, B) and Z90 fitted on
    the other groups' kernels (``residuals``/``distances``: per kernel, the log residual and the
    log distance at each of its measured pairs), and the share of its kernels' residuals within
    ``Z90 sigma(d)``, pairs at the reference left out (``coverage``, the target 0.9); beside
    it the share within a constant interval of the same mean width (``constant_coverage``),
    both per band of distance (``by_distance``: a constant interval covers too much near the
    reference and too little far from it), and the constants fitted on every kernel (``on_all``)."""
    groups = np.asarray(groups)
    if len(residuals) != len(distances) or len(residuals) != len(groups) or len(np.unique(groups)) < 2:
        raise InputError("one residual and distance array per kernel, with a group each, of at least two groups")
    err, dist, width = [], [], []
    for g in np.unique(groups):
        train = [j for j in range(len(groups)) if groups[j] != g]
        a, b, z = _fit(residuals, distances, train)
        for j in np.flatnonzero(groups == g):
            off = distances[j] > 0
            err.append(np.abs(residuals[j][off]))
            dist.append(distances[j][off])
            width.append(z * spread(distances[j][off], a, b))
    err, dist, width = (np.concatenate(x) for x in (err, dist, width))
    flat = float(width.mean())
    bands = {}
    for lo, hi in DISTANCE_BANDS:
        m = (dist > lo) & (dist <= hi)
        if m.any():
            bands[f"{lo:g}-{hi:g}"] = {"pairs": int(m.sum()), "coverage": float(np.mean(err[m] <= width[m])),
                                       "mean_half_width": float(width[m].mean()),
                                       "constant_coverage": float(np.mean(err[m] <= flat))}
    a, b, z = _fit(residuals, distances, range(len(groups)))
    return {"coverage": float(np.mean(err <= width)), "mean_half_width": flat,
            "constant_coverage": float(np.mean(err <= flat)), "by_distance": bands,
            "on_all": {"spread_a": a, "spread_b": b, "z90": z}}


def _fit(residuals, distances, kernels) -> tuple[float, float, float]:
    r = np.concatenate([residuals[j] for j in kernels])
    d = np.concatenate([distances[j] for j in kernels])
    a, b = fit_spread(r, d)
    off = d > 0
    return a, b, float(np.quantile(np.abs(r[off]) / np.maximum(spread(d[off], a, b), 1e-12), 0.9))
