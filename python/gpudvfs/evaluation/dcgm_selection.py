"""Frequency selection scored on a DCGM grid: each workload's time (DCGM time model) and power
(power model on DCGM activities, calibrated on its reference power) predicted with that
workload left out of both fits, the clocks chosen by a policy, and the choice scored by
the measured energy against the best measured clocks.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpudvfs.data.datasets import MeasurementGrid, PowerDataset
from gpudvfs.errors import InputError
from gpudvfs.evaluation.dcgm_time import loo_predictions as time_predictions
from gpudvfs.evaluation.power_errors import held_out_predictions
from gpudvfs.evaluation.regret import single_pair, single_pair_indices
from gpudvfs.evaluation.safe import safe_report
from gpudvfs.policy.policies import highest_index, select
from gpudvfs.power.dcgm import dcgm_power_dataset
from gpudvfs.stats import paired_intervals


def power_predictions(grid: MeasurementGrid, reference: tuple[float, float],
                    variant: str = "default") -> tuple[PowerDataset, dict[str, np.ndarray]]:
    """Leave-one-workload-out power predictions of every row of a DCGM grid (see
    :func:`~gpudvfs.evaluation.power_errors.held_out_predictions`)."""
    ds = dcgm_power_dataset(grid, reference)
    return ds, held_out_predictions(ds, len(ds.benchmarks), variant=variant)[0]


@dataclass(frozen=True, eq=False)
class LooTable:
    """Per workload [A x K]: measured time (ms) and power (W) at every pair, and each
    predicted with the workload left out of the fits: time by the DCGM time model
    (``time_cv``) and by 1/f scaling (``time_inverse_f``), power calibrated on the
    workload's measured reference power. ``fastest``: the highest pair."""

    names: list[str]
    configs: np.ndarray
    fastest: int
    time_ms: np.ndarray
    watts: np.ndarray
    time_cv: np.ndarray
    time_inverse_f: np.ndarray
    watts_pred: np.ndarray
    distinct_time_curves: int


def loo_table(grid: MeasurementGrid, reference: tuple[float, float], variant: str = "default") -> LooTable:
    t_pred, info = time_predictions(grid, reference)
    _, p_pred = power_predictions(grid, reference, variant)
    names = info["names"]
    configs, (t, w, t_cv, t_inv, w_pred) = grid.table(
        names, grid.time_ms, grid.watts, t_pred["cv"], t_pred["inverse_f"], p_pred["calibrated"],
        mem_mhz=reference[1])
    return LooTable(names, configs, highest_index(configs), t, w, t_cv, t_inv, w_pred,
                    info["distinct_time_curves"])


def evaluate_selection(grid: MeasurementGrid, reference: tuple[float, float], *, policy: str = "energy",
                       slowdown: float = 0.1, variant: str = "default") -> dict:
    """Energy regret (measured energy at the chosen clocks over the measured minimum, minus
    1) per workload, against the highest clocks, the reference clocks, 1/f time scaling
    with the calibrated power (what a governor without the time model would do) and one
    pair for all (:func:`~gpudvfs.evaluation.regret.single_pair`); ``intervals``: 95% bootstrap
    intervals over the workloads of the model's mean regret and of its paired difference from
    the highest clocks, 1/f time and one pair for all (chosen without the workload); ``safe``
    (energy and EDP): the choice kept only where its predicted gain exceeds the spread
    (`gpudvfs.evaluation.safe.safe_report`)."""
    if policy not in ("energy", "edp", "deadline"):
        raise InputError(f"policy must be energy, edp or deadline on a DCGM grid, got {policy!r}")
    tab = loo_table(grid, reference, variant)
    names, configs, t, w, fastest = tab.names, tab.configs, tab.time_ms, tab.watts, tab.fastest
    e = t * w
    ref = int(np.flatnonzero(configs[:, 0] == reference[0])[0])

    def chosen(tp, wp):
        return select(tp, wp, configs, policy, default_index=fastest, slowdown=slowdown).index

    # The measured best under the same policy: minimum energy (or EDP) among the pairs the
    # measured times allow.
    best = chosen(t, w)
    objective = e if policy != "edp" else e * t
    regret = objective / objective[np.arange(len(names)), best][:, None] - 1.0
    meets = t <= (1 + slowdown) * t[:, [fastest]] * (1 + 1e-12)  # the deadline, measured

    def at(index) -> np.ndarray:
        return regret[np.arange(len(names)), index]

    def score(r):
        return {"mean": float(r.mean()), "max": float(r.max()), "per_workload": dict(zip(names, r.tolist()))}

    model = chosen(tab.time_cv, tab.watts_pred)
    # Under a deadline a fixed pair must meet it for the applications it is chosen on.
    allowed = meets if policy == "deadline" else None
    compared = {"highest_clocks": at(np.full(len(names), fastest)),
                "inverse_f_time": at(chosen(tab.time_inverse_f, tab.watts_pred)),
                "single_pair": at(single_pair_indices(regret, allowed)[1])}
    out = {"policy": policy, "reference_mhz": list(reference), "workloads": len(names),
           "distinct_time_curves": tab.distinct_time_curves, "model": score(at(model)),
           "chosen": {n: configs[k].tolist() for n, k in zip(names, model)},
           "baselines": {
               "highest_clocks": score(compared["highest_clocks"]),
               "reference": score(at(np.full(len(names), ref))),
               "inverse_f_time": score(compared["inverse_f_time"]),
               "single_pair": single_pair(regret, configs, allowed),
           },
           "intervals": paired_intervals(at(model), compared)}
    if policy == "deadline":
        out["deadline_met"] = int(meets[np.arange(len(names)), model].sum())
    else:
        predicted = tab.time_cv * tab.watts_pred * (tab.time_cv if policy == "edp" else 1.0)
        out["safe"] = safe_report(regret, np.log(predicted), np.log(objective), configs, ref)
    return out
