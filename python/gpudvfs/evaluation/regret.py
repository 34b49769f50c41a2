"""Energy regret: what a choice of clocks costs over the least energy each application measured.

Scored against one pair for all applications and the near-ties rule.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from gpudvfs.catalog import DeviceSpec
from gpudvfs.data.datasets import MeasurementGrid
from gpudvfs.errors import GpudvfsWarning, InputError
from gpudvfs.evaluation.nested import nested_choice
from gpudvfs.policy.choose import measured_table, training_dataset
from gpudvfs.policy.policies import select
from gpudvfs.power.model import PowerModel
from gpudvfs.records import Record
from gpudvfs.time.device import TimeDevice
from gpudvfs.time.model import TimeModel
from gpudvfs.time.profile import KernelProfile

#: Tie tolerances tried for the near-ties rule (a relative energy difference): 0 is no rule.
TIE_TOLERANCES = (0.0, 0.0025, 0.005, 0.01, 0.02, 0.03, 0.05, 0.1)

_M = TypeVar("_M", bound="MeanMax")


@dataclass(frozen=True)
class MeanMax(Record):
    """A regret's mean and max over the applications, as the reports give them."""

    mean: float
    max: float

    @classmethod
    def of(cls: type[_M], r: np.ndarray, **extra: Any) -> _M:
        """The record of ``r``'s mean and max (one regret per application), of the class it is called on.

        ``**extra`` fills the fields of a record that extends `MeanMax`.
        """
        return cls(float(r.mean()), float(r.max()), **extra)


@dataclass(frozen=True)
class FixedPair(MeanMax):
    """One pair for all applications, chosen on all of them: the regret in hindsight, a bound on any fixed choice.

    ``met``: how many applications it meets the constraint for (None without a constraint).
    """

    pair: tuple[float, ...]
    met: int | None = None


@dataclass(frozen=True)
class HeldOutPairs(MeanMax):
    """One pair for all, each application scored at the pair chosen without it (``pairs``).

    ``met``: how many applications their pair meets the constraint for (None without a
    constraint; a pair chosen without an application need not meet it).
    """

    pairs: tuple[tuple[float, ...], ...]
    met: int | None = None


@dataclass(frozen=True)
class SinglePair(Record):
    """The baseline of one pair for every application: in hindsight, and cross-validated."""

    hindsight: FixedPair
    cross_validated: HeldOutPairs


@dataclass(frozen=True)
class TolerancesChosen(MeanMax):
    """The near-ties rule's regret, each application at the tolerance chosen without it."""

    tolerances: tuple[float, ...]


@dataclass(frozen=True)
class NearTies(Record):
    """The near-ties rule scored: cross-validated, and at each fixed tolerance."""

    cross_validated: TolerancesChosen
    over_tolerance: dict[str, MeanMax]


@dataclass(frozen=True, eq=False)
class RegretTable:
    """Every application of a grid measured at every pair: what a choice is scored against.

    ``configs`` is [K x 2] (core, memory MHz); ``time_ms``, ``watts`` are measured [A x K];
    ``watts_pred`` [A x K] is predicted by a power model fitted without the application.
    """

    names: list[str]
    configs: np.ndarray
    time_ms: np.ndarray
    watts: np.ndarray
    watts_pred: np.ndarray
    profiles: list[KernelProfile]

    @property
    def energy(self) -> np.ndarray:
        """Measured energy [A x K] (time x power, in mJ)."""
        return self.time_ms * self.watts

    def calibrated_time(self, device: TimeDevice) -> np.ndarray:
        """Each application's time (ms) [A x K] by the time model, calibrated on its reference time."""
        return TimeModel(device).predict(self.profiles, self.configs[:, 0], self.configs[:, 1], calibrate=True)

    def index_of(self, pair: tuple[float, float]) -> int:
        """The row in ``configs`` of a (core, memory) MHz pair."""
        return int(np.flatnonzero((self.configs == np.asarray(pair)).all(axis=1))[0])

    @property
    def regret_at_every_pair(self) -> np.ndarray:
        """Measured energy at each pair over the application's measured minimum, minus 1: [A x K]."""
        e = self.energy
        return e / e.min(axis=1, keepdims=True) - 1.0

    def regret(self, idx: np.ndarray) -> np.ndarray:
        """:attr:`regret_at_every_pair` at the chosen pair of each application (``idx`` [A]): [A]."""
        return self.regret_at_every_pair[np.arange(len(self.names)), idx]

    def regrets(self, time_pred: np.ndarray, watts_pred: np.ndarray | None = None, **rules: Any) -> np.ndarray:
        """Regret [A] of the minimum-energy choice on predicted time and power [A x K].

        ``watts_pred`` defaults to the power fitted without each application; ``**rules`` are
        `gpudvfs.policy.select`'s uncertainty options (``error``, ``rule``, ``near_ties``,
        ``default_index``).
        """
        watts = self.watts_pred if watts_pred is None else watts_pred
        return self.regret(select(time_pred, watts, self.configs, "energy", **rules).index)

    def _squared_log_errors(self, time_pred: np.ndarray) -> np.ndarray:
        """Per application and pair, the squared log errors of predicted time and of the held-out power, summed."""
        return np.log(time_pred / self.time_ms) ** 2 + np.log(self.watts_pred / self.watts) ** 2

    def energy_error(self, time_pred: np.ndarray) -> np.ndarray:
        """Relative error [A x K] of each predicted energy, from the other applications' residuals at the same pair.

        Time and power errors are combined.
        """
        sq = self._squared_log_errors(time_pred)
        return np.expm1(np.sqrt((sq.sum(axis=0) - sq) / (len(self.names) - 1)))

    def pair_error(self, time_pred: np.ndarray) -> np.ndarray:
        """Relative error [K] of an energy predicted at each pair for an application none of these is.

        It comes from all their residuals.
        """
        return np.expm1(np.sqrt(self._squared_log_errors(time_pred).mean(axis=0)))


def regret_table(grid: MeasurementGrid, reference: tuple[float, float], device: TimeDevice,
                 spec: DeviceSpec, clip: bool = False, groups: dict | None = None) -> RegretTable:
    """The grid's applications with their power from a model fitted without them.

    With ``groups`` (application name -> label), each application's power comes from a model
    fitted without every application of its label (an application's kernels left out together,
    `gpudvfs.evaluation.nested.application_groups`). ``reference`` is the (core, memory) pair
    whose counters profile each application.
    """
    m = measured_table(grid, reference, device, spec, clip)
    label = [(groups or {}).get(n, ("own", n)) for n in m.names]
    p_pred = np.empty_like(m.watts)
    for a in range(len(m.names)):
        train = [i for i in range(len(m.names)) if label[i] != label[a]]
        data = training_dataset(m.utilization[train], m.configs, m.watts[train], reference,
                                [m.names[i] for i in train])
        # A component only the held-out application uses has no weight to learn: it gets none.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", GpudvfsWarning)
            model = PowerModel("per-domain").fit(data, unused="zero")
        p_pred[a] = model.predict_grid(m.utilization[a:a + 1], m.configs)[0]
    return RegretTable(m.names, m.configs, m.time_ms, m.watts, p_pred, m.profiles)


def single_pair_indices(regret: np.ndarray, allowed: np.ndarray | None = None,
                        groups: np.ndarray | None = None) -> tuple[int, np.ndarray]:
    """The baseline of one pair for every application: the pair in hindsight, and each application's held-out pair [A].

    In hindsight: the pair with the least mean regret over all applications (a bound on any
    fixed choice). Held out: for each application the pair with the least mean regret over the
    *other* applications (with ``groups``: over those of the other groups; a fixed pair chosen
    without measuring it). Each is chosen among the pairs all of them allow (``allowed``
    [A x K]); where no pair is allowed for them all (a power cap some exceed everywhere), the
    pairs allowed for the most of them are the candidates.

    Raises InputError with applications of fewer than two groups.
    """
    ok = np.ones(regret.shape, dtype=bool) if allowed is None else allowed
    rows = np.arange(len(regret))
    labels = rows if groups is None else np.asarray(groups)
    if len(np.unique(labels)) < 2:
        raise InputError("one pair for all, chosen without each application, needs applications of at least "
                         f"two groups; got {len(rows)} application(s) of one")

    def best(apps: np.ndarray) -> int:
        count = ok[apps].sum(axis=0)
        return int(np.argmin(np.where(count == count.max(), regret[apps].mean(axis=0), np.inf)))

    return best(rows), np.array([best(labels != labels[a]) for a in rows])


def single_pair(regret: np.ndarray, configs: np.ndarray, allowed: np.ndarray | None = None) -> SinglePair:
    """:func:`single_pair_indices` scored, in hindsight and cross-validated, with the pairs.

    With ``allowed`` [A x K], each score counts the applications its pairs meet the constraint for.
    """
    hindsight, held_out = single_pair_indices(regret, allowed)
    rows = np.arange(len(regret))
    met = (None, None) if allowed is None else (int(allowed[:, hindsight].sum()), int(allowed[rows, held_out].sum()))
    return SinglePair(
        FixedPair.of(regret[:, hindsight], pair=tuple(configs[hindsight].tolist()), met=met[0]),
        HeldOutPairs.of(regret[rows, held_out], pairs=tuple(map(tuple, configs[held_out].tolist())), met=met[1]))


def near_ties_by_tolerance(tab: RegretTable, time_pred: np.ndarray, default_index: int,
                           tolerances: tuple[float, ...] = TIE_TOLERANCES, groups: np.ndarray | None = None
                           ) -> NearTies:
    """The near-ties rule with a fixed tolerance, at each tolerance and cross-validated.

    The rule: among pairs whose predicted energy is within ``1 + tolerance`` of the predicted
    minimum, the one nearest ``default_index``. The regret at each tolerance (0: no rule) says
    how the figure moves with it; cross-validated, each application is scored at the tolerance
    with the least mean regret over the other applications (with ``groups``: over those of the
    other groups).
    """
    regret = np.array([tab.regrets(time_pred, error=tol, near_ties=True, default_index=default_index)
                       for tol in tolerances])
    chosen = nested_choice(regret, groups)
    return NearTies(TolerancesChosen.of(regret[chosen, np.arange(regret.shape[1])],
                                        tolerances=tuple(tolerances[c] for c in chosen)),
                    {f"{tol:g}": MeanMax.of(r) for tol, r in zip(tolerances, regret)})
