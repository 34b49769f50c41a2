"""Validation of frequency selection on measured time and power at every configuration
(`gtx980_time_power_dev.csv`): profile each application at the reference pair, predict its
time (time model, calibrated on its reference time) and power (power model fitted on the
*other* applications: leave-one-application-out, since no microbenchmark set exists for
this board) at every pair, choose, and score the choice by the measured energy.
"""

from __future__ import annotations

import warnings

import numpy as np

from ..errors import GpudvfsWarning
from ..io.datasets import MeasurementGrid
from ..power.model import PowerModel
from ..time.device import TimeDevice
from ..time.model import TimeModel
from .choose import measured_table, training_dataset
from .policies import select


def evaluate_selection(grid: MeasurementGrid, reference: tuple[float, float], *, slowdown: float = 0.1,
                       time_device: TimeDevice | None = None) -> dict:
    """Energy regret (measured energy of the chosen pair over the measured minimum, minus 1)
    per application of the minimum-energy and the deadline policy (slowdown relative to the
    highest clocks), and of three baselines: the highest clocks, the reference pair and the
    single pair best for these applications in hindsight. ``attribution`` is the
    minimum-energy regret with measured time (or power) in place of the prediction: how
    much of the regret each model leaves."""
    names, configs, t, p, util, profiles = measured_table(grid, reference)
    e = t * p
    e_min = e.min(axis=1)
    hi = int(np.flatnonzero((configs == configs.max(axis=0)).all(axis=1))[0])
    ref = int(np.flatnonzero((configs == np.asarray(reference)).all(axis=1))[0])
    t_pred = TimeModel(time_device or TimeDevice.gtx980()).predict(profiles, configs[:, 0], configs[:, 1],
                                                                    calibrate=True)
    p_pred = np.empty_like(p)
    for a in range(len(names)):
        train = [i for i in range(len(names)) if i != a]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", GpudvfsWarning)
            model = PowerModel("per-domain").fit(training_dataset(util[train], configs, p[train], reference,
                                                          [names[i] for i in train]))
        p_pred[a] = model.predict_grid(util[a:a + 1], configs)[0]
    energy = select(t_pred, p_pred, configs, "energy")
    deadline = select(t_pred, p_pred, configs, "deadline", default_index=hi, slowdown=slowdown)
    rows = np.arange(len(names))

    def regret(idx) -> np.ndarray:
        return e[rows, idx] / e_min - 1.0

    def summary(r: np.ndarray) -> dict:
        return {"mean": float(r.mean()), "max": float(r.max())}

    hindsight = int(np.argmin((e / e_min[:, None] - 1.0).mean(axis=0)))
    met = t[rows, deadline.index] <= (1 + slowdown) * t[:, hi]
    chosen, within = regret(energy.index), regret(deadline.index)
    # Which model the regret comes from: choose with one of them replaced by the measurement.
    attribution = {f"measured_{k}": summary(regret(select(tt, pp, configs, "energy").index))
                   for k, tt, pp in (("time", t, p_pred), ("power", t_pred, p))}
    return {
        "regret_mean": float(chosen.mean()), "regret_max": float(chosen.max()),
        "deadline": {"slowdown": slowdown, **summary(within),
                     "deadline_met": int(met.sum()), "apps": len(names)},
        "baselines": {
            "highest_clocks": summary(regret(np.full(len(names), hi))),
            "reference": summary(regret(np.full(len(names), ref))),
            "best_single_pair": {**summary(regret(np.full(len(names), hindsight))),
                                 "pair": configs[hindsight].tolist()},
        },
        "attribution": attribution,
        "time_mape": float(100 * np.mean(np.abs(t_pred - t) / t)),
        "power_mape": float(100 * np.mean(np.abs(p_pred - p) / p)),
        "per_app": {n: {"chosen": configs[energy.index[a]].tolist(), "best": configs[np.argmin(e[a])].tolist(),
                        "regret": float(chosen[a]),
                        "deadline_choice": configs[deadline.index[a]].tolist(),
                        "deadline_regret": float(within[a])}
                    for a, n in enumerate(names)},
    }
