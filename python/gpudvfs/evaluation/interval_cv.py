"""The time interval scored on applications held out (:mod:`gpudvfs.time.interval`).

Its constants are fitted without each application, and that application's residuals are
checked against the interval: the coverage, overall and by distance from the reference, against
a constant interval of the same mean width.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from gpudvfs.errors import InputError
from gpudvfs.time.interval import fit_interval, spread

#: Log distances from the reference over which `interval_cv` reports the coverage.
DISTANCE_BANDS = ((0.0, 0.3), (0.3, 0.5), (0.5, np.inf))


def interval_cv(residuals: list[np.ndarray], distances: list[np.ndarray], groups: ArrayLike) -> dict[str, Any]:
    """The interval scored on applications held out (at least two ``groups``, one label per kernel).

    For each group, (A, B) and Z90 are fitted on the other groups' kernels, and its kernels'
    residuals are checked against ``Z90 sigma(d)``, pairs at the reference left out.
    ``residuals`` holds per kernel the log residual at each measured pair, ``distances`` the log
    distance of each of those pairs from the reference.

    Returns
    -------
    dict
        ``coverage``: the share of held-out residuals within the interval (the target 0.9);
        ``constant_coverage``: the share within a constant interval of the same
        ``mean_half_width``; both per band of distance (``by_distance``: a constant interval
        covers too much near the reference and too little far from it); and ``on_all``, the
        constants fitted on every kernel.

    Raises InputError if the lists and groups differ in length or there are fewer than two groups.
    """
    groups = np.asarray(groups)
    if len(residuals) != len(distances) or len(residuals) != len(groups) or len(np.unique(groups)) < 2:
        raise InputError("one residual and distance array per kernel, with a group each, of at least two groups")
    errs, dists, widths = [], [], []
    for g in np.unique(groups):
        train = [j for j in range(len(groups)) if groups[j] != g]
        a, b, z = fit_interval(residuals, distances, train)
        for j in np.flatnonzero(groups == g):
            off = distances[j] > 0
            errs.append(np.abs(residuals[j][off]))
            dists.append(distances[j][off])
            widths.append(z * spread(distances[j][off], a, b))
    err, dist, width = (np.concatenate(x) for x in (errs, dists, widths))
    flat = float(width.mean())
    bands = {}
    for lo, hi in DISTANCE_BANDS:
        m = (dist > lo) & (dist <= hi)
        if m.any():
            bands[f"{lo:g}-{hi:g}"] = {"pairs": int(m.sum()), "coverage": float(np.mean(err[m] <= width[m])),
                                       "mean_half_width": float(width[m].mean()),
                                       "constant_coverage": float(np.mean(err[m] <= flat))}
    a, b, z = fit_interval(residuals, distances, range(len(groups)))
    return {"coverage": float(np.mean(err <= width)), "mean_half_width": flat,
            "constant_coverage": float(np.mean(err <= flat)), "by_distance": bands,
            "on_all": {"spread_a": a, "spread_b": b, "z90": z}}
