"""Validation of frequency selection on measured time and power at every configuration.

On `gtx980_time_power_dev.csv`: profile each application at the reference pair, predict its
time (time model, calibrated on its reference time) and power (power model fitted on the
*other* applications: leave-one-application-out, since no microbenchmark set exists for
this board) at every pair, choose, and score the choice by the measured energy.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpudvfs.catalog import DeviceSpec
from gpudvfs.data.datasets import MeasurementGrid
from gpudvfs.evaluation.regret import (
    MeanMax,
    NearTies,
    SinglePair,
    near_ties_by_tolerance,
    regret_table,
    single_pair,
    single_pair_indices,
)
from gpudvfs.evaluation.safe import SafeReport, safe_report
from gpudvfs.policy.choose import fit_power_model
from gpudvfs.policy.policies import highest_index, select
from gpudvfs.power.model import PowerModel
from gpudvfs.records import Record
from gpudvfs.stats import paired_intervals
from gpudvfs.time.device import TimeDevice


@dataclass(frozen=True)
class DeadlineRegret(Record):
    """The deadline policy's regret (``slowdown`` relative to the highest clocks) and the deadlines it met."""

    slowdown: float
    mean: float
    max: float
    deadline_met: int
    apps: int


@dataclass(frozen=True)
class SelectionBaselines(Record):
    """The regret of fixed choices: the highest clocks, the reference pair and one pair for all."""

    highest_clocks: MeanMax
    reference: MeanMax
    single_pair: SinglePair


@dataclass(frozen=True)
class Attribution(Record):
    """The minimum-energy regret with measured time, or measured power, in place of the prediction.

    How much of the regret each model leaves.
    """

    measured_time: MeanMax
    measured_power: MeanMax


@dataclass(frozen=True)
class Uncertainty(Record):
    """Each predicted energy's error (from the other applications' residuals) and choices that use it.

    ``energy_error_mean`` is the mean relative error of a predicted energy; ``within_error`` the
    share of measured energies within their prediction's error. ``worst_case``, ``expected`` and
    ``near_ties_to_highest`` are the regret when the choice minimizes the worst case within the
    error, its expectation, or takes the pair nearest the highest clocks within the chosen
    one's error band.
    """

    energy_error_mean: float
    within_error: float
    worst_case: MeanMax
    expected: MeanMax
    near_ties_to_highest: MeanMax


@dataclass(frozen=True)
class SelectionIntervals(Record):
    """95% bootstrap intervals over the applications of each policy's mean regret and its paired differences.

    Each is `gpudvfs.stats.paired_intervals`' result: for minimum energy, from the highest
    clocks and one pair for all (chosen without the application); for the deadline, from the
    highest clocks.
    """

    minimum_energy: dict
    deadline: dict


@dataclass(frozen=True)
class AppChoice(Record):
    """One application's chosen and best pairs and regrets under both policies."""

    chosen: tuple[float, ...]
    best: tuple[float, ...]
    regret: float
    deadline_choice: tuple[float, ...]
    deadline_regret: float


@dataclass(frozen=True)
class SelectionReport(Record):
    """Frequency selection scored on measured energy (:func:`evaluate_selection`); see there for each part.

    ``time_mape`` and ``power_mape`` are the predictions' errors (%); ``per_app`` maps each
    application to its `AppChoice`.
    """

    regret_mean: float
    regret_max: float
    deadline: DeadlineRegret
    baselines: SelectionBaselines
    attribution: Attribution
    uncertainty: Uncertainty
    near_ties: NearTies
    safe: SafeReport
    intervals: SelectionIntervals
    time_mape: float
    power_mape: float
    per_app: dict[str, AppChoice]


def energy_errors(grid: MeasurementGrid, reference: tuple[float, float], *, time_device: TimeDevice,
                  spec: DeviceSpec, clip: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """The relative error of a predicted energy at each pair: the error bar `select choose` reports.

    It is the root mean square over the grid's applications of the log errors of their
    calibrated time and of their power from a model fitted without them. Returns the pairs
    [K x 2] and the error at each [K].
    """
    tab = regret_table(grid, reference, time_device, spec, clip)
    return tab.configs, tab.pair_error(tab.calibrated_time(time_device))


def fit_power_model_with_error(grid: MeasurementGrid, reference: tuple[float, float], device: TimeDevice,
                               spec: DeviceSpec, clip: bool = False) -> PowerModel:
    """The power model `select choose` applies, with the error of a predicted energy at each configuration.

    The model is `gpudvfs.policy.choose.fit_power_model`'s; its ``energy_error_`` is that of a
    workload held out (:func:`energy_errors`): one more power fit per workload.
    """
    model = fit_power_model(grid, reference, device, spec, clip)
    pairs, error = energy_errors(grid, reference, time_device=device, spec=spec, clip=clip)
    at = {pair: i for i, pair in enumerate(map(tuple, pairs.tolist()))}
    model.energy_error_ = error[[at[pair] for pair in map(tuple, model.configs_.tolist())]]
    return model


def evaluate_selection(grid: MeasurementGrid, reference: tuple[float, float], *, time_device: TimeDevice,
                       spec: DeviceSpec, slowdown: float = 0.1, clip: bool = False) -> SelectionReport:
    """Energy regret per application of the minimum-energy and the deadline policy, and of the baselines.

    The regret is the measured energy of the chosen pair over the measured minimum, minus 1;
    the deadline's slowdown is relative to the highest clocks; the baselines are the highest
    clocks, the reference pair and one pair for all (:func:`single_pair`). ``attribution`` is the
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
    kept only where its predicted saving exceeds the spread (`gpudvfs.evaluation.safe.safe_report`).
    """
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
    return SelectionReport(
        regret_mean=float(chosen.mean()), regret_max=float(chosen.max()),
        deadline=DeadlineRegret(slowdown, float(within.mean()), float(within.max()), int(met.sum()), len(names)),
        baselines=SelectionBaselines(
            highest_clocks=MeanMax.of(highest),
            reference=MeanMax.of(tab.regret(np.full(len(names), tab.index_of(reference)))),
            single_pair=single_pair(tab.regret_at_every_pair, configs)),
        # Which model the regret comes from: choose with one of them replaced by the measurement.
        attribution=Attribution(MeanMax.of(tab.regrets(t)), MeanMax.of(tab.regrets(t_pred, tab.watts))),
        uncertainty=Uncertainty(
            energy_error_mean=float(err.mean()),
            # How often a measured energy lies within its predicted one's error band.
            within_error=float(np.mean(np.abs(np.log(t_pred * tab.watts_pred / e)) <= np.log1p(err))),
            worst_case=MeanMax.of(tab.regrets(t_pred, error=err, rule="worst")),
            expected=MeanMax.of(tab.regrets(t_pred, error=err, rule="expected")),
            near_ties_to_highest=MeanMax.of(tab.regrets(t_pred, error=err, near_ties=True, default_index=hi))),
        near_ties=near_ties_by_tolerance(tab, t_pred, hi),
        safe=safe_report(tab.regret_at_every_pair, np.log(t_pred * tab.watts_pred), np.log(e), configs,
                         tab.index_of(reference)),
        intervals=SelectionIntervals(
            minimum_energy=paired_intervals(chosen, {"highest_clocks": highest, "single_pair": one_pair}),
            deadline=paired_intervals(within, {"highest_clocks": highest})),
        time_mape=float(100 * np.mean(np.abs(t_pred - t) / t)),
        power_mape=float(100 * np.mean(np.abs(tab.watts_pred - tab.watts) / tab.watts)),
        per_app={n: AppChoice(tuple(configs[energy.index[a]].tolist()), tuple(configs[np.argmin(e[a])].tolist()),
                              float(chosen[a]), tuple(configs[deadline.index[a]].tolist()), float(within[a]))
                 for a, n in enumerate(names)})
