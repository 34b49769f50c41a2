"""Validation of frequency selection on measured time and power at every configuration
(`gtx980_time_power_dev.csv`): profile each application at the reference pair, predict its
time (time model, calibrated on its reference time) and power (power model fitted on the
*other* applications: leave-one-application-out, since no microbenchmark set exists for
this board) at every pair, choose, and score the choice by the measured energy.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from ..bootstrap import paired_intervals
from ..catalog import DeviceSpec
from ..errors import GpudvfsWarning, InputError
from ..io.datasets import MeasurementGrid
from ..power.model import PowerModel
from ..time.crossval import nested_choice
from ..time.device import TimeDevice
from ..time.model import TimeModel
from ..time.profile import KernelProfile
from .choose import measured_table, training_dataset
from .policies import highest_index, select
from .safe import safe_report
from .scores import mean_max

#: Tie tolerances tried for the near-ties rule (a relative energy difference): 0 is no rule.
TIE_TOLERANCES = (0.0, 0.0025, 0.005, 0.01, 0.02, 0.03, 0.05, 0.1)


@dataclass(frozen=True, eq=False)
class RegretTable:
    """Every application of a grid measured at every pair, with its power predicted by a
    model fitted on the other applications: what a choice is scored against."""

    names: list[str]
    configs: np.ndarray          # [K x 2] MHz
    time_ms: np.ndarray          # measured [A x K]
    watts: np.ndarray            # measured [A x K]
    watts_pred: np.ndarray       # leave-one-application-out [A x K]
    profiles: list[KernelProfile]

    @property
    def energy(self) -> np.ndarray:
        return self.time_ms * self.watts

    def calibrated_time(self, device: TimeDevice) -> np.ndarray:
        """Each application's time at every pair predicted by the time model on ``device``,
        calibrated on its reference time: [A x K]."""
        return TimeModel(device).predict(self.profiles, self.configs[:, 0], self.configs[:, 1], calibrate=True)

    def index_of(self, pair) -> int:
        return int(np.flatnonzero((self.configs == np.asarray(pair)).all(axis=1))[0])

    @property
    def regret_at_every_pair(self) -> np.ndarray:
        """Measured energy at each pair over the application's measured minimum, minus 1: [A x K]."""
        e = self.energy
        return e / e.min(axis=1, keepdims=True) - 1.0

    def regret(self, idx: np.ndarray) -> np.ndarray:
        """:attr:`regret_at_every_pair` at the chosen pair, per application."""
        return self.regret_at_every_pair[np.arange(len(self.names)), idx]

    def regrets(self, time_pred: np.ndarray, watts_pred: np.ndarray | None = None, **rules) -> np.ndarray:
        """Regret of the minimum-energy choice on predicted time (and the fitted power)."""
        watts = self.watts_pred if watts_pred is None else watts_pred
        return self.regret(select(time_pred, watts, self.configs, "energy", **rules).index)

    def _squared_log_errors(self, time_pred: np.ndarray) -> np.ndarray:
        """Per application and pair, the squared log errors of predicted time and of the
        held-out power, summed: [A x K]."""
        return np.log(time_pred / self.time_ms) ** 2 + np.log(self.watts_pred / self.watts) ** 2

    def energy_error(self, time_pred: np.ndarray) -> np.ndarray:
        """Relative error of each predicted energy, from the other applications' residuals
        at the same pair (time and power errors combined): [A x K]."""
        sq = self._squared_log_errors(time_pred)
        return np.expm1(np.sqrt((sq.sum(axis=0) - sq) / (len(self.names) - 1)))

    def pair_error(self, time_pred: np.ndarray) -> np.ndarray:
        """Relative error of an energy predicted at each pair for an application that is none
        of these, from all their residuals: [K]."""
        return np.expm1(np.sqrt(self._squared_log_errors(time_pred).mean(axis=0)))


def regret_table(grid: MeasurementGrid, reference: tuple[float, float], device: TimeDevice,
                 spec: DeviceSpec, clip: bool = False, groups: dict | None = None) -> RegretTable:
    """The grid's applications with their power from a model fitted without them; with
    ``groups`` (application name -> label), without every application of their label (an
    application's kernels left out together, `gpudvfs.time.crossval.application_groups`)."""
    names, configs, t, p, util, profiles = measured_table(grid, reference, device, spec, clip)
    label = [(groups or {}).get(n, ("own", n)) for n in names]
    p_pred = np.empty_like(p)
    for a in range(len(names)):
        train = [i for i in range(len(names)) if label[i] != label[a]]
        data = training_dataset(util[train], configs, p[train], reference, [names[i] for i in train])
        # A component only the held-out application uses has no weight to learn: it gets none.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", GpudvfsWarning)
            model = PowerModel("per-domain").fit(data, unused="zero")
        p_pred[a] = model.predict_grid(util[a:a + 1], configs)[0]
    return RegretTable(names, configs, t, p, p_pred, profiles)


def energy_errors(grid: MeasurementGrid, reference: tuple[float, float], *, time_device: TimeDevice,
                  spec: DeviceSpec, clip: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(configs [K x 2], relative error of a predicted energy at each [K]): the root mean
    square over the grid's applications of the log errors of their calibrated time and of
    their power from a model fitted without them. The error bar `select choose` reports."""
    tab = regret_table(grid, reference, time_device, spec, clip)
    return tab.configs, tab.pair_error(tab.calibrated_time(time_device))


def single_pair_indices(regret: np.ndarray, allowed: np.ndarray | None = None,
                        groups: np.ndarray | None = None) -> tuple[int, np.ndarray]:
    """The baseline of one pair for every application, from ``regret`` [A x K] (each
    application's regret at each pair; ``allowed`` [A x K]: where a pair meets its
    constraint): the pair with the least mean regret over all applications (hindsight, a
    bound on any fixed choice), and for each application the pair with the least mean regret
    over the *other* applications (with ``groups``, a label per application: over those of
    the other groups; a fixed pair chosen without measuring it), each among the pairs all of
    them allow. Where no pair is allowed for them all (a power cap some exceed everywhere),
    the pairs allowed for the most of them are the candidates."""
    ok = np.ones(regret.shape, dtype=bool) if allowed is None else allowed
    rows = np.arange(len(regret))
    labels = rows if groups is None else np.asarray(groups)
    if len(np.unique(labels)) < 2:
        raise InputError("one pair for all, chosen without each application, needs applications of at least "
                         f"two groups; got {len(rows)} application(s) of one")

    def best(apps) -> int:
        count = ok[apps].sum(axis=0)
        return int(np.argmin(np.where(count == count.max(), regret[apps].mean(axis=0), np.inf)))

    return best(rows), np.array([best(labels != labels[a]) for a in rows])


def single_pair(regret: np.ndarray, configs: np.ndarray, allowed: np.ndarray | None = None) -> dict:
    """:func:`single_pair_indices` scored: ``hindsight`` and ``cross_validated`` regrets, with
    their pairs; with ``allowed``, how many applications each meets its constraint for
    (``met``: a pair chosen without an application need not meet it)."""
    hindsight, held_out = single_pair_indices(regret, allowed)
    rows = np.arange(len(regret))
    out = {"hindsight": {**mean_max(regret[:, hindsight]), "pair": configs[hindsight].tolist()},
           "cross_validated": {**mean_max(regret[rows, held_out]), "pairs": configs[held_out].tolist()}}
    if allowed is not None:
        out["hindsight"]["met"] = int(allowed[:, hindsight].sum())
        out["cross_validated"]["met"] = int(allowed[rows, held_out].sum())
    return out


def near_ties_by_tolerance(tab: RegretTable, time_pred: np.ndarray, default_index: int,
                           tolerances=TIE_TOLERANCES, groups: np.ndarray | None = None) -> dict:
    """The near-ties rule with a fixed tolerance: among pairs whose predicted energy is within
    ``1 + tolerance`` of the predicted minimum, the one nearest ``default_index``. The regret
    at each tolerance (how the figure moves with it), and cross-validated: each application
    scored at the tolerance with the least mean regret over the other applications (with
    ``groups``, a label per application: over those of the other groups)."""
    regret = np.array([tab.regrets(time_pred, error=tol, near_ties=True, default_index=default_index)
                       for tol in tolerances])
    chosen = nested_choice(regret, groups)
    return {"cross_validated": {**mean_max(regret[chosen, np.arange(regret.shape[1])]),
                                "tolerances": [tolerances[c] for c in chosen]},
            "over_tolerance": {f"{tol:g}": mean_max(r) for tol, r in zip(tolerances, regret)}}


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
    kept only where its predicted saving exceeds the spread (`gpudvfs.select.safe.safe_report`)."""
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
