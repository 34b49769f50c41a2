"""Frequency selection scored on a DCGM grid, against the best measured clocks.

Each workload's time (DCGM time model) and power (power model on DCGM activities, calibrated
on its reference power) is predicted with that workload left out of both fits, the clocks are
chosen by a policy, and the choice is scored by the measured energy against the best
measured clocks.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpudvfs.data.datasets import MeasurementGrid, PowerDataset
from gpudvfs.errors import InputError
from gpudvfs.evaluation.dcgm_time import loo_predictions as time_predictions
from gpudvfs.evaluation.power_errors import held_out_predictions
from gpudvfs.evaluation.regret import MeanMax, SinglePair, single_pair, single_pair_indices
from gpudvfs.evaluation.safe import SafeReport, safe_report
from gpudvfs.policy.policies import highest_index, select
from gpudvfs.power.dcgm import dcgm_power_dataset
from gpudvfs.records import Record
from gpudvfs.stats import paired_intervals

#: The policies scored on a DCGM grid (`gpudvfs select eval`).
DCGM_POLICIES = ("energy", "edp", "deadline")


@dataclass(frozen=True)
class WorkloadRegrets(MeanMax):
    """A choice's regret: mean, max and each workload's."""

    per_workload: dict[str, float]


@dataclass(frozen=True)
class DcgmBaselines(Record):
    """The regret of the highest clocks, the reference clocks, 1/f time with the calibrated power, one pair for all."""

    highest_clocks: WorkloadRegrets
    reference: WorkloadRegrets
    inverse_f_time: WorkloadRegrets
    single_pair: SinglePair


@dataclass(frozen=True)
class DcgmSelectionReport(Record):
    """A policy's choice on a DCGM grid scored by measured energy (:func:`evaluate_dcgm_selection` says what each is).

    ``model`` is the regret of the models' choice, each workload left out of the fits;
    ``chosen`` maps each workload to the models' (core, memory) MHz pair; ``deadline_met`` counts,
    under the deadline policy, the workloads the choice meets it for.
    """

    policy: str
    reference_mhz: tuple[float, ...]
    workloads: int
    distinct_time_curves: int
    model: WorkloadRegrets
    chosen: dict[str, tuple[float, ...]]
    baselines: DcgmBaselines
    intervals: dict
    deadline_met: int | None = None
    safe: SafeReport | None = None


def power_predictions(grid: MeasurementGrid, reference: tuple[float, float],
                      variant: str = "default") -> tuple[PowerDataset, dict[str, np.ndarray]]:
    """Leave-one-workload-out power predictions of every row of a DCGM grid: the dataset and its predictions by kind.

    See :func:`~gpudvfs.evaluation.power_errors.held_out_predictions`; ``reference`` is the
    (core, memory) pair whose activities are the model's input.
    """
    ds = dcgm_power_dataset(grid, reference)
    return ds, held_out_predictions(ds, len(ds.benchmarks), variant=variant)[0]


@dataclass(frozen=True, eq=False)
class LooTable:
    """Per workload [A x K]: measured time (ms) and power (W) at every pair, and each predicted without the workload.

    ``configs`` is [K x 2] (core, memory MHz), ``fastest`` the highest pair's index;
    ``time_cv`` comes from the DCGM time model, ``time_inverse_f`` from 1/f scaling;
    ``watts_pred`` from the power model, calibrated on the workload's measured reference power.
    """

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
    """Every workload's measured and held-out predicted time and power at every pair.

    Raises InputError where the grid has no power column.
    """
    watts = grid.watts
    if watts is None:
        raise InputError(f"{grid.path}: the grid has no power column; selection needs measured power")
    t_pred, info = time_predictions(grid, reference)
    _, p_pred = power_predictions(grid, reference, variant)
    names = info["names"]
    configs, (t, w, t_cv, t_inv, w_pred) = grid.table(
        names, grid.time_ms, watts, t_pred["cv"], t_pred["inverse_f"], p_pred["calibrated"],
        mem_mhz=reference[1])
    return LooTable(names, configs, highest_index(configs), t, w, t_cv, t_inv, w_pred,
                    info["distinct_time_curves"])


def evaluate_dcgm_selection(grid: MeasurementGrid, reference: tuple[float, float], *, policy: str = "energy",
                       slowdown: float = 0.1, variant: str = "default") -> DcgmSelectionReport:
    """Energy regret per workload of a policy's choice, against the baselines.

    The regret is the measured energy at the chosen clocks over the measured minimum, minus
    1; the baselines are the highest clocks, the reference clocks, 1/f time scaling
    with the calibrated power (what a governor without the time model would do) and one
    pair for all (:func:`~gpudvfs.evaluation.regret.single_pair`); ``intervals``: 95% bootstrap
    intervals over the workloads of the model's mean regret and of its paired difference from
    the highest clocks, 1/f time and one pair for all (chosen without the workload); ``safe``
    (energy and EDP): the choice kept only where its predicted gain exceeds the spread
    (`gpudvfs.evaluation.safe.safe_report`). ``slowdown`` is the deadline policy's allowed
    slowdown over the highest clocks.

    Raises InputError for a policy not in `DCGM_POLICIES`.
    """
    if policy not in DCGM_POLICIES:
        raise InputError(f"policy must be energy, edp or deadline on a DCGM grid, got {policy!r}")
    tab = loo_table(grid, reference, variant)
    names, configs, t, w, fastest = tab.names, tab.configs, tab.time_ms, tab.watts, tab.fastest
    e = t * w
    ref = int(np.flatnonzero(configs[:, 0] == reference[0])[0])

    def chosen(tp: np.ndarray, wp: np.ndarray) -> np.ndarray:
        return select(tp, wp, configs, policy, default_index=fastest, slowdown=slowdown).index

    # The measured best under the same policy: minimum energy (or EDP) among the pairs the
    # measured times allow.
    best = chosen(t, w)
    objective = e if policy != "edp" else e * t
    regret = objective / objective[np.arange(len(names)), best][:, None] - 1.0
    meets = t <= (1 + slowdown) * t[:, [fastest]] * (1 + 1e-12)  # the deadline, measured

    def at(index: np.ndarray) -> np.ndarray:
        return regret[np.arange(len(names)), index]

    def score(r: np.ndarray) -> WorkloadRegrets:
        return WorkloadRegrets.of(r, per_workload=dict(zip(names, r.tolist())))

    model = chosen(tab.time_cv, tab.watts_pred)
    # Under a deadline a fixed pair must meet it for the applications it is chosen on.
    allowed = meets if policy == "deadline" else None
    compared = {"highest_clocks": at(np.full(len(names), fastest)),
                "inverse_f_time": at(chosen(tab.time_inverse_f, tab.watts_pred)),
                "single_pair": at(single_pair_indices(regret, allowed)[1])}
    deadline = policy == "deadline"
    predicted = tab.time_cv * tab.watts_pred * (tab.time_cv if policy == "edp" else 1.0)
    return DcgmSelectionReport(
        policy=policy, reference_mhz=tuple(reference), workloads=len(names),
        distinct_time_curves=tab.distinct_time_curves, model=score(at(model)),
        chosen={n: tuple(configs[k].tolist()) for n, k in zip(names, model)},
        baselines=DcgmBaselines(
            highest_clocks=score(compared["highest_clocks"]),
            reference=score(at(np.full(len(names), ref))),
            inverse_f_time=score(compared["inverse_f_time"]),
            single_pair=single_pair(regret, configs, allowed)),
        intervals=paired_intervals(at(model), compared),
        deadline_met=int(meets[np.arange(len(names)), model].sum()) if deadline else None,
        safe=None if deadline else safe_report(regret, np.log(predicted), np.log(objective), configs, ref))


def evaluate_policies(grid: MeasurementGrid, reference: tuple[float, float], *, slowdown: float = 0.1,
                      variant: str = "default") -> dict[str, DcgmSelectionReport]:
    """:func:`evaluate_dcgm_selection` under each of `DCGM_POLICIES`: `gpudvfs select eval` of a DCGM grid."""
    return {p: evaluate_dcgm_selection(grid, reference, policy=p, slowdown=slowdown, variant=variant)
            for p in DCGM_POLICIES}
