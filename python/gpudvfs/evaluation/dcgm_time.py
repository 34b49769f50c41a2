"""The DCGM time model (:mod:`gpudvfs.time.dcgm`) scored leave-one-workload-out on a measured grid.

Each workload's curve is predicted by a model fitted on the other workloads, against 1/f
scaling, time unchanged, each predictor forced, and the curve the model's form fits to the
workload itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from gpudvfs.data.datasets import MeasurementGrid
from gpudvfs.stats import mape
from gpudvfs.time.dcgm import RIDGE, DcgmTimeModel, activity_features, clock_terms, measured_shares


def loo_predictions(grid: MeasurementGrid, reference: tuple[float, float | None],
                    ridge: float = RIDGE) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Per row of a DCGM grid, the time (ms) predicted with its workload left out of the fit.

    ``reference`` is the (core, memory) MHz pair whose activities the model reads (memory None
    where the grid has one memory clock); ``ridge`` penalises the activity regression.

    Returns
    -------
    predictions : dict of str to numpy.ndarray
        One time per row under each key: ``cv`` (the predictor chosen on the other workloads),
        ``mean`` and ``activity`` (each predictor forced), the baselines ``inverse_f`` and
        ``unchanged``, and ``own_fit`` (the curve fitted to the workload itself, a floor no
        prediction of this form can beat).
    info : dict
        What the fits found: ``names``, ``shares`` (measured [workloads x 2]), ``fields``,
        ``memory_clock_varies``, ``chosen`` (workload -> predictor) and
        ``distinct_time_curves``.

    Raises InputError if the grid has no SM activity field or fewer than three workloads.
    """
    names, ref, shares, varies_mem = measured_shares(grid, reference)
    features, fields = activity_features(grid)
    feats = features[ref]
    work = grid.workload
    xc, xm = clock_terms(grid, reference)
    preds = {k: np.empty(len(grid)) for k in ("cv", "mean", "activity", "inverse_f", "unchanged", "own_fit")}
    chosen = {}
    for a, name in enumerate(names):
        keep = np.arange(len(names)) != a
        rows = work == name
        t_ref = grid.time_ms[ref[a]]

        def curve(s: Sequence[float], rows: np.ndarray = rows, t_ref: float = t_ref) -> np.ndarray:
            return t_ref * (1.0 + s[0] * xc[rows] + s[1] * xm[rows])

        for p in ("auto", "mean", "activity"):
            model = DcgmTimeModel(p, ridge).fit_shares(feats[keep], shares[keep], varies_mem,
                                                       (reference[0], reference[1]), grid.core_mhz, grid.mem_mhz)
            preds["cv" if p == "auto" else p][rows] = curve(model.shares(feats[a:a + 1])[0])
            if p == "auto":
                chosen[name] = model.chosen_
        preds["inverse_f"][rows] = curve((1.0, 0.0))
        preds["unchanged"][rows] = t_ref
        preds["own_fit"][rows] = curve(shares[a])
    meas = grid.time_ms
    # Workloads whose measured curves are identical teach the model one curve, not several.
    curves = {tuple(np.round(meas[work == n] / meas[ref[a]], 9)) for a, n in enumerate(names)}
    info = {"names": names, "shares": shares, "fields": fields, "memory_clock_varies": varies_mem,
            "chosen": chosen, "distinct_time_curves": len(curves)}
    return preds, info


def cross_validate_dcgm_time(grid: MeasurementGrid, reference: tuple[float, float | None],
                             ridge: float = RIDGE) -> dict[str, Any]:
    """Leave-one-workload-out error of the DCGM time model on a measured grid (module notes).

    The arguments are `loo_predictions`'.

    Returns
    -------
    dict
        ``cv_mape`` (%), ``predictors`` and ``baselines`` (MAPE of each), ``own_fit_mape``,
        ``chosen`` (how often each predictor was chosen), ``per_workload`` errors and shares,
        and what the grid held (``reference_mhz``, ``workloads``, ``rows``, ``fields``,
        ``memory_clock_varies``, ``distinct_time_curves``).

    Raises InputError if the grid has no SM activity field or fewer than three workloads.
    """
    preds, info = loo_predictions(grid, reference, ridge)
    meas, work, chosen = grid.time_ms, grid.workload, info["chosen"]
    return {
        "reference_mhz": list(reference), "workloads": len(info["names"]), "rows": int(len(grid)),
        "fields": info["fields"], "memory_clock_varies": info["memory_clock_varies"],
        "distinct_time_curves": info["distinct_time_curves"],
        "cv_mape": mape(preds["cv"], meas),
        "predictors": {k: mape(preds[k], meas) for k in ("mean", "activity")},
        "baselines": {k: mape(preds[k], meas) for k in ("inverse_f", "unchanged")},
        "own_fit_mape": mape(preds["own_fit"], meas),
        "chosen": {p: sum(1 for v in chosen.values() if v == p) for p in ("mean", "activity")},
        "per_workload": {n: {"cv": mape(preds["cv"], meas, work == n),
                             "inverse_f": mape(preds["inverse_f"], meas, work == n),
                             "measured_core_share": float(info["shares"][a, 0]), "chosen": chosen[n]}
                         for a, n in enumerate(info["names"])},
    }
