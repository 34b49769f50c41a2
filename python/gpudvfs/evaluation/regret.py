"""Energy regret: what a choice of clocks costs over the least energy each application
measured, scored against one pair for all applications and the near-ties rule."""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from gpudvfs.catalog import DeviceSpec
from gpudvfs.data.datasets import MeasurementGrid
from gpudvfs.errors import GpudvfsWarning, InputError
from gpudvfs.evaluation.nested import nested_choice
from gpudvfs.policy.choose import measured_table, training_dataset
from gpudvfs.policy.policies import select
from gpudvfs.power.model import PowerModel
from gpudvfs.time.device import TimeDevice
from gpudvfs.time.model import TimeModel
from gpudvfs.time.profile import KernelProfile

#: Tie tolerances tried for the near-ties rule (a relative energy difference): 0 is no rule.
TIE_TOLERANCES = (0.0, 0.0025, 0.005, 0.01, 0.02, 0.03, 0.05, 0.1)



def mean_max(r: np.ndarray) -> dict:
    """A regret's mean and max, as the reports give them."""
    return {"mean": float(r.mean()), "max": float(r.max())}


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
    application's kernels left out together, `gpudvfs.evaluation.nested.application_groups`)."""
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
