"""Validation of frequency selection on measured time and power at every configuration
(`gtx980_time_power_dev.csv`): profile each application at the reference pair, predict its
time (time model, calibrated on its reference time) and power (power model fitted on the
*other* applications: leave-one-application-out, since no microbenchmark set exists for
this board) at every pair, choose, and score the choice by the measured energy.
"""

from __future__ import annotations

import numpy as np

from gpudvfs.catalog import DeviceSpec
from gpudvfs.data.datasets import MeasurementGrid
from gpudvfs.evaluation.regret import mean_max, near_ties_by_tolerance, regret_table, single_pair, single_pair_indices
from gpudvfs.evaluation.safe import safe_report
from gpudvfs.policy.policies import highest_index, select
from gpudvfs.power.model import PowerModel
from gpudvfs.stats import paired_intervals
from gpudvfs.time.device import TimeDevice


def energy_errors(grid: MeasurementGrid, reference: tuple[float, float], *, time_device: TimeDevice,
                  spec: DeviceSpec, clip: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(configs [K x 2], relative error of a predicted energy at each [K]): the root mean
    square over the grid's applications of the log errors of their calibrated time and of
    their power from a model fitted without them. The error bar `select choose` reports."""
    tab = regret_table(grid, reference, time_device, spec, clip)
    return tab.configs, tab.pair_error(tab.calibrated_time(time_device))


def with_energy_error(model: PowerModel, grid: MeasurementGrid, reference: tuple[float, float],
                      device: TimeDevice, spec: DeviceSpec, clip: bool = False) -> PowerModel:
    """``model`` (fitted by `gpudvfs.policy.choose.fit_power_model` on ``grid``) with its
    ``energy_error_`` set: per configuration, the error of a predicted energy with the
    workload held out (:func:`energy_errors`)."""
    pairs, error = energy_errors(grid, reference, time_device=device, spec=spec, clip=clip)
    at = {pair: i for i, pair in enumerate(map(tuple, pairs.tolist()))}
    model.energy_error_ = error[[at[pair] for pair in map(tuple, model.configs_.tolist())]]
    return model


def evaluate_selection(grid: MeasurementGrid, reference: tuple[float, float], *, time_device: TimeDevice,
                       spec: DeviceSpec, slowdown: float = 0.1, clip: bool = False) -> dict:
    """Energy regret (measured energy of the chosen pair over the measured minimum, minus 1)
    per application of the minimum-energy and the deadline policy (slowdown relative to the
    highest clocks), and of the baselines: the highest clocks, the reference pair and one
    pair for all (:func:`single_pair`). ``attribution`` is the
    minimum-energy regret with measured time (or power) in place of the prediction: how
    much of the regret each model leaves. ``uncertainty``: each energy's error (from the
    other applications' residuals), the share of measured energies within it, and the regret
    when the choice uses it: the worst case within it, its expectation, or the pair nearest
    the highest clocks within the chosen one's error band; and ``near_ties``, the pair nearest
    the highest clocks within a fixed tolerance of the predicted minimum, the tolerance (0:
    none) chosen for each application on the others (:func:`near_ties_by_tolerance`).
    ``intervals``: 95% bootstrap intervals over the applications of both policies' mean
    regret and of its paired difference from the highest clocks and, for minimum energy,
    from one pair for all (chosen without the application). ``safe``: the minimum-energy choice
    kept only where its predicted saving exceeds the spread (`gpudvfs.evaluation.safe.safe_report`)."""
    tab = regret_table(grid, reference, time_device, spec, clip)
    names, configs, t = tab.names, tab.configs, tab.time_ms
    e = tab.energy
    hi = highest_index(configs)
    t_pred = tab.calibrated_time(time_device)
    energy = select(t_pred, tab.watts_pred, configs, "energy")
    deadline = select(t_pred, tab.watts_pred, configs, "deadline", default_index=hi, slowdown=slowdown)
    rows = np.arange(len(names))
    met = t[rows, deadline.index] <= (1 + slowdown) * t[:, hi]
    chosen, within = tab.regret(energy.index), tab.regret(deadline.index)
    highest = tab.regret(np.full(len(names), hi))
    one_pair = tab.regret(single_pair_indices(tab.regret_at_every_pair)[1])
    err = tab.energy_error(t_pred)
    return {
        "regret_mean": float(chosen.mean()), "regret_max": float(chosen.max()),
        "deadline": {"slowdown": slowdown, **mean_max(within),
                     "deadline_met": int(met.sum()), "apps": len(names)},
        "baselines": {
            "highest_clocks": mean_max(highest),
            "reference": mean_max(tab.regret(np.full(len(names), tab.index_of(reference)))),
            "single_pair": single_pair(tab.regret_at_every_pair, configs),
        },
        # Which model the regret comes from: choose with one of them replaced by the measurement.
        "attribution": {"measured_time": mean_max(tab.regrets(t)),
                        "measured_power": mean_max(tab.regrets(t_pred, tab.watts))},
        "uncertainty": {"energy_error_mean": float(err.mean()),
                        # How often a measured energy lies within its predicted one's error band.
                        "within_error": float(np.mean(np.abs(np.log(t_pred * tab.watts_pred / e)) <= np.log1p(err))),
                        "worst_case": mean_max(tab.regrets(t_pred, error=err, rule="worst")),
                        "expected": mean_max(tab.regrets(t_pred, error=err, rule="expected")),
                        "near_ties_to_highest": mean_max(tab.regrets(t_pred, error=err, near_ties=True,
                                                                     default_index=hi))},
        "near_ties": near_ties_by_tolerance(tab, t_pred, hi),
        "safe": safe_report(tab.regret_at_every_pair, np.log(t_pred * tab.watts_pred), np.log(e), configs,
                            tab.index_of(reference)),
        "intervals": {"minimum_energy": paired_intervals(chosen, {"highest_clocks": highest, "single_pair": one_pair}),
                      "deadline": paired_intervals(within, {"highest_clocks": highest})},
        "time_mape": float(100 * np.mean(np.abs(t_pred - t) / t)),
        "power_mape": float(100 * np.mean(np.abs(tab.watts_pred - tab.watts) / tab.watts)),
        "per_app": {n: {"chosen": configs[energy.index[a]].tolist(), "best": configs[np.argmin(e[a])].tolist(),
                        "regret": float(chosen[a]),
                        "deadline_choice": configs[deadline.index[a]].tolist(),
                        "deadline_regret": float(within[a])}
                    for a, n in enumerate(names)},
    }
