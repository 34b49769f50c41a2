"""The strategies a governor replay runs on the same phases.

The governor, a new phase starting from the models' prediction or from what earlier phases
taught (`SeenPrior`), and the baselines: one pair per application (`FixedPairs`: the default
clocks, the models' choice, one pair for all) and measuring pairs before keeping the best
(`MeasureThenKeep`: exhaustive profiling, random search, Zeus's just-in-time profiling,
`zeus_baseline`).

A strategy is told each phase's application (``phase``), names the setting of each step
(``decide``) and is told what the step measured there (``observe``). The governor runs through
its one control loop, `GovernedLoop`, as the daemon and the training integrations run it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np

from gpudvfs.evaluation.replay_table import ReplayTable, Target
from gpudvfs.govern.governor import Governor
from gpudvfs.govern.loop import GovernedLoop
from gpudvfs.govern.priors import limit_curves

#: Zeus's JIT profiling as its `GlobalPowerLimitOptimizer` documents it: each setting, from
#: the highest down, runs this many warm-up steps, then this many measured ones.
ZEUS_WARMUP_STEPS = 10
ZEUS_PROFILE_STEPS = 40


class Strategy(Protocol):
    """What a replay drives, step by step."""

    def phase(self, a: int) -> None:
        """Start a phase of application ``a`` (a row of the table)."""

    def decide(self) -> int:
        """The index of the setting the next step runs at."""

    def observe(self, k: int, time_ms: float, watts: float) -> None:
        """What a step at setting ``k`` measured: its time (ms) and power (W)."""


class FixedPairs:
    """One setting per application (``pairs``: [A] indices) and no learning.

    The default clocks, the models' choice, one pair for all.
    """

    def __init__(self, pairs: np.ndarray) -> None:
        self.pairs = pairs
        self.k = 0

    def phase(self, a: int) -> None:
        """Its setting from now on."""
        self.k = int(self.pairs[a])

    def decide(self) -> int:
        """The setting of the phase's application."""
        return self.k

    def observe(self, k: int, time_ms: float, watts: float) -> None:
        """Nothing is learnt from a step."""


class MeasureThenKeep:
    """Measure a list of settings once per phase, then run the best measured under the target.

    What an application's phases measured is remembered across its recurrences. ``pairs_of(a)``:
    the settings measured for application ``a``, in order (the first is among those kept at the
    end); each runs ``warmup`` steps, then ``measured`` steps whose mean is the setting's.
    """

    def __init__(self, table: ReplayTable, pairs_of: Callable[[int], Sequence[int]], target: Target,
                 warmup: int = 0, measured: int = 1) -> None:
        self.table, self.pairs_of, self.target = table, pairs_of, target
        self.warmup, self.measured = warmup, measured
        self.seen: dict[int, dict[int, list[tuple[float, float]]]] = {}
        self.plans: dict[int, list[int]] = {}
        self.a, self.steps = 0, 0
        self.todo: list[int] = []
        self.choice: int | None = None

    def phase(self, a: int) -> None:
        """Measure what the application's earlier phases left unmeasured."""
        self.a, self.steps, self.choice = a, 0, None
        if a not in self.seen:
            self.seen[a], self.plans[a] = {}, list(self.pairs_of(a))
        # A recurring phase goes on with what its earlier visits left unmeasured.
        self.todo = [k for k in self.plans[a] if len(self.seen[a].get(k, ())) < self.measured]

    def decide(self) -> int:
        """The next setting to measure, else the best measured."""
        if self.todo:
            return self.todo[0]
        if self.choice is None:  # once per phase: nothing is measured after the plan
            m = self.seen[self.a]
            ks = sorted(k for k in m if len(m[k]) >= self.measured)  # the first pair planned is among them
            t, p = (np.array([np.mean([x[j] for x in m[k]]) for k in ks]) for j in (0, 1))
            d = ks.index(self.table.default_index) if self.table.default_index in ks else 0
            self.choice = ks[int(self.target.select(self.table, t, p, self.table.configs[ks], d)[0])]
        return self.choice

    def observe(self, k: int, time_ms: float, watts: float) -> None:
        """Count a step at the setting being measured (a warm-up step runs but is not kept)."""
        if not (self.todo and self.todo[0] == k):
            return
        self.steps += 1
        if self.steps > self.warmup:
            self.seen[self.a].setdefault(k, []).append((time_ms, watts))
        if self.steps == self.warmup + self.measured:
            self.todo.pop(0)
            self.steps = 0


def zeus_baseline(table: ReplayTable, target: Target) -> MeasureThenKeep:
    """Zeus's just-in-time profiling (NSDI'23).

    Every setting, from the highest down, runs ZEUS_WARMUP_STEPS steps and then
    ZEUS_PROFILE_STEPS measured ones; the job then keeps the one of least cost measured (a job
    that recurs is not profiled again).
    """
    order = [int(k) for k in np.lexsort((table.configs[:, 1], table.configs[:, 0]))[::-1]]
    return MeasureThenKeep(table, lambda a: order, target, ZEUS_WARMUP_STEPS, ZEUS_PROFILE_STEPS)


class GovernorStrategy:
    """The governor, driven through `GovernedLoop` as a training loop drives it.

    A phase is `GovernedLoop.phase` (it sets the phase's first setting), a step
    `GovernedLoop.step_end` (it observes the step at the setting held, then decides and sets the
    next; after a phase's last step too, as in training, where a step's end does not know the
    next phase: the next phase starts from that setting); ``decision_s`` keeps each decision's
    time (`GovernedLoop.decision_s`). A new phase starts from the table's prediction, or with
    ``learn`` from what the phases before it taught (`SeenPrior`). ``log``: the loop's, a dict
    per decision.
    """

    def __init__(self, gov: Governor, table: ReplayTable, learn: bool = False,
                 log: Callable[[dict], None] | None = None) -> None:
        self.loop = GovernedLoop(gov, replay_knob, log=log)
        self.table = table
        self.decision_s: list[float] = []
        self.learnt = SeenPrior(table) if learn else None
        self.a: int | None = None

    def phase(self, a: int) -> None:
        """Start from the application's prediction."""
        t, p = self.table.time_pred[a], self.table.watts_pred[a]
        if self.learnt is not None:
            if self.a is not None:
                self.learnt.add(self.a, *self.loop.governor.estimates()[:2])
            t, p = self.learnt.prior(a)
        self.a = a
        self.loop.phase(a, t, p)
        self._timed()

    def decide(self) -> int:
        """The setting the loop holds."""
        k = self.loop.held
        assert k is not None  # set by `phase`
        return k

    def observe(self, k: int, time_ms: float, watts: float) -> None:
        """End the step (at ``k``, the setting held): the loop observes it and sets the next."""
        self.loop.step_end(time_ms=time_ms, watts=watts)
        self._timed()

    def _timed(self) -> None:
        assert self.loop.decision_s is not None  # the loop has decided
        self.decision_s.append(self.loop.decision_s)


def replay_knob(core_mhz: float, mem_mhz: float) -> None:
    """A replay's ``set_clocks``: its step runs at the setting the loop holds (`GovernedLoop.held`)."""


class SeenPrior:
    """A new phase's prediction learnt from the phases seen before it.

    Each seen phase's estimated curves (log time and log power over the settings, less their
    value at the default setting) are averaged and placed on the new phase's own value at the
    default setting (the one measurement a governor has of it). Before any phase is seen, a
    cold start from no data: `cold_curves`.
    """

    def __init__(self, table: ReplayTable) -> None:
        self.table = table
        self.curves: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def add(self, a: int, log_time: np.ndarray, log_watts: np.ndarray) -> None:
        """Keep what a phase of application ``a`` ended with: [K] estimated log time and log power."""
        d = self.table.default_index
        self.curves[a] = (log_time - log_time[d], log_watts - log_watts[d])

    def prior(self, a: int) -> tuple[np.ndarray, np.ndarray]:
        """The prediction a new phase of application ``a`` starts from.

        [K] time (ms) and power (W): the mean of the other applications' curves seen (its own where
        it is the only one seen), else the cold start.
        """
        d = self.table.default_index
        if self.curves:
            t, p = (np.mean([c[j] for b, c in self.curves.items() if b != a] or [c[j] for c in self.curves.values()],
                            axis=0) for j in (0, 1))
        else:
            t, p = cold_curves(self.table)
        return self.table.time_ms[a, d] * np.exp(t), self.table.watts[a, d] * np.exp(p)


def cold_curves(table: ReplayTable) -> tuple[np.ndarray, np.ndarray]:
    """Log time and log power over the settings, relative to the default, from no data.

    Under a power limit L below the default's power P, power L and time (P / L)^(1/3)
    (`priors.limit_curves`); a core clock f below the default's F, time (F / f)^(1/2)
    (half the work bound by the clock) and power (f / F)^2 (voltage falling with the clock).
    Only the first phase of a replay with ``learn`` starts from these; every later one from
    what the earlier phases measured.

    Parameters
    ----------
    table : ReplayTable
        The settings and the default one.

    Returns
    -------
    tuple of numpy.ndarray
        [K] log time and log power, 0 at the default setting.
    """
    if table.knob == "power-limit":
        # P at the default setting is not known before it is measured: the default limit stands in.
        return limit_curves(table.configs[:, 0], table.configs[table.default_index, 0])
    x = np.log(table.configs[:, 0] / table.configs[table.default_index, 0])
    return -x / 2, 2 * x
