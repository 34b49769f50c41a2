"""The governor replayed against a grid in which every application was measured at every
(core, memory) pair: the workload switches application about every ``phase_steps`` steps,
each step observes the measured time and power at the chosen pair with relative noise, and
the offline predictions of an application come from models it was not in (its power from
a model fitted on the other applications; its time from the time model calibrated on its
own reference time, the one measurement a governor has of a new phase).

Each observation is the measured time and power times (1 + noise), the noise Gaussian of
standard deviation ``noise`` truncated to (-1, 1) (a draw outside is drawn again): every
observation stays positive, its mean unbiased, and at the default 1% no draw is ever redrawn.

Scores per strategy: ``regret_mean`` (energy spent over a phase, exploration included, over
the energy at the phase's best pair, minus 1; averaged over phases), ``violations``,
``clock_changes``, ``steps_to_settle`` (steps into a phase until its last change, averaged)
and ``wasted`` (energy spent beyond the best pair's, over the total at the best pairs). The
best pair of a phase is the policy's choice on the measured grid. `edp` minimizes energy x
time, so its regret is of that product over the phase (energy spent times time taken, over
the best pair's; its waste stays of energy). `power-cap` minimizes time, not energy, so its
regret and waste are of time: time spent over the time at the fastest pair under the cap
(the lowest-power pair where none is under it, with a warning). `cost` (Zeus's) minimizes
``eta * energy + (1 - eta) * max_power_w * time`` per step: its regret and waste are of that.
``violations``: the fraction of steps whose pair's measured time exceeds (1 + slowdown) x the
default clocks' (`deadline`), or whose measured power exceeds the cap (`power-cap`); absent
for `energy` and `edp`. Per phase: ``per_phase`` (its regret) and, with a constraint,
``per_phase_over`` (its steps over it). The
governor also reports ``decision_us``, the median time of one decision. Baselines in the
same run, on the same phases and noise: the default clocks, the models' choice alone, one
pair for all (chosen on the other applications' measurements; absent where the table has one
application, since no pair can be chosen without it), exhaustive profiling (every
pair once per phase, then the best measured), random search (RANDOM_PAIRS pairs, then the
best measured) and Zeus's just-in-time profiling (`zeus_baseline`).

Tables come from a grid's counters through the models (`replay_table`, `dcgm_replay_table`)
or from its time and power alone (`gpudvfs.govern.plain`), over clock pairs or one knob (a
core clock, a power limit: ``ReplayTable.knob``). A trace's jobs each run once
(``each_once``).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import time
import warnings
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import numpy as np

from gpudvfs.catalog import DeviceSpec
from gpudvfs.data.datasets import MeasurementGrid
from gpudvfs.errors import GpudvfsWarning, InputError
from gpudvfs.evaluation.dcgm_selection import loo_table
from gpudvfs.evaluation.regret import regret_table, single_pair_indices
from gpudvfs.govern.governor import GOVERNOR_POLICIES, Governor
from gpudvfs.govern.power_limit import limit_curves
from gpudvfs.limits import is_count, is_finite_number
from gpudvfs.policy.choose import fit_power_model, measured_table
from gpudvfs.policy.policies import highest_index, select
from gpudvfs.stats import mean_interval, paired_intervals
from gpudvfs.time import TimeDevice, TimeModel

RANDOM_PAIRS = 8
#: Zeus's JIT profiling as its `GlobalPowerLimitOptimizer` documents it: each setting, from
#: the highest down, runs this many warm-up steps, then this many measured ones.
ZEUS_WARMUP_STEPS = 10
ZEUS_PROFILE_STEPS = 40


@dataclass(frozen=True, eq=False)
class ReplayTable:
    """Per application [A x K]: measured and predicted time (ms) and power (W). ``knob``:
    what a setting sets, ``"clocks"`` (``configs`` the (core, memory) MHz pairs) or a single
    knob, ``"core_clock"`` or ``"power_limit"`` (``configs[:, 0]`` its values, MHz or W;
    ``configs[:, 1]`` a constant 1, which the governor's log-ratio features read as nothing).
    ``max_power_w``: the watts that price a second under the cost policy (Zeus's MAXPOWER:
    the highest power limit; where the knob is a clock, the most power measured at the
    highest setting)."""

    names: list[str]
    configs: np.ndarray
    default_index: int
    time_ms: np.ndarray
    watts: np.ndarray
    time_pred: np.ndarray
    watts_pred: np.ndarray
    knob: str = "clocks"
    max_power_w: float | None = None  # None: from the table, as above

    def __post_init__(self):
        if self.max_power_w is None:
            object.__setattr__(self, "max_power_w", float(
                self.configs[:, 0].max() if self.knob == "power_limit" else self.watts[:, self.default_index].max()))


@dataclass(frozen=True)
class Target:
    """What a replay's strategies aim at: the policy and its bound, cap or price of time."""

    policy: str = "energy"
    slowdown: float = 0.1
    power_cap_w: float | None = None
    eta: float = 0.5

    def objective(self, table: ReplayTable, t: np.ndarray, p: np.ndarray) -> np.ndarray:
        """What a step at time ``t`` and power ``p`` costs under the policy (time under a cap;
        the energy x time of `edp` is scored over a phase, in `_score`)."""
        if self.policy == "power-cap":
            return t
        if self.policy == "cost":
            return t * (self.eta * p + (1 - self.eta) * table.max_power_w)
        return t * p

    def select(self, table: ReplayTable, t, p, configs, default_index) -> np.ndarray:
        return select(t, p, configs, self.policy, default_index=default_index, slowdown=self.slowdown,
                      power_cap_w=self.power_cap_w, eta=self.eta, max_power_w=table.max_power_w).index

    def governor(self, table: ReplayTable, **constants) -> Governor:
        return Governor(table.configs, table.default_index, policy=self.policy, slowdown=self.slowdown,
                        power_cap_w=self.power_cap_w, eta=self.eta, max_power_w=table.max_power_w, **constants)


def replay_table(grid: MeasurementGrid, reference: tuple[float, float], device: TimeDevice, spec: DeviceSpec,
                 train: MeasurementGrid | None = None, clip: bool = False) -> ReplayTable:
    """The replay's table of ``grid``: power predicted by a model of ``train`` (no application
    of ``grid`` may be in it), or without ``train`` by a model of the grid's other
    applications; time by the time model calibrated on each application's reference time.
    The default clocks are the grid's highest pair (highest core clock, then memory)."""
    if train is None:
        tab = regret_table(grid, reference, device, spec, clip)
        names, configs, t, p, p_pred, profiles = (tab.names, tab.configs, tab.time_ms, tab.watts, tab.watts_pred,
                                                  tab.profiles)
    else:
        names, configs, t, p, util, profiles = measured_table(grid, reference, device, spec, clip)
        shared = sorted(set(names) & set(train.workload.tolist()))
        if shared:
            raise InputError(f"{train.path}: the scored applications must not be in TRAIN, but {len(shared)} are "
                             f"({', '.join(shared[:3])}{', ...' if len(shared) > 3 else ''}); leave --train out "
                             "to score each application with a model of the others")
        p_pred = fit_power_model(train, reference, device, spec, clip).predict_grid(util, configs)
    t_pred = TimeModel(device).predict(profiles, configs[:, 0], configs[:, 1], calibrate=True)
    return ReplayTable(names, configs, highest_index(configs), t, p, t_pred, p_pred)


def dcgm_replay_table(grid: MeasurementGrid, reference: tuple[float, float]) -> ReplayTable:
    """The replay's table of a DCGM grid: time by the DCGM time model and power by the power
    model on DCGM activities (calibrated on the application's reference power), both fitted
    without the application. The default clocks are the grid's highest pair."""
    tab = loo_table(grid, reference)
    return ReplayTable(tab.names, tab.configs, tab.fastest, tab.time_ms, tab.watts, tab.time_cv, tab.watts_pred)


class _Fixed:
    """One pair per application, ``pairs[a]``, no learning: the default clocks, the models'
    choice, one pair for all."""

    def __init__(self, pairs: np.ndarray):
        self.pairs = pairs

    def phase(self, a: int) -> None:
        self.k = int(self.pairs[a])

    def decide(self) -> int:
        return self.k

    def observe(self, k: int, time_ms: float, watts: float) -> None:
        pass


class _Search:
    """Measure a list of pairs once per phase (remembered across its recurrences), then run
    the best measured under the target. ``warmup`` and ``measured``: steps per pair before
    its measurement counts, and steps measured (their mean is the pair's)."""

    def __init__(self, table: ReplayTable, pairs_of, target: Target, warmup: int = 0, measured: int = 1):
        self.table, self.pairs_of, self.target = table, pairs_of, target
        self.warmup, self.measured = warmup, measured
        self.seen: dict[int, dict[int, list[tuple[float, float]]]] = {}
        self.plans: dict[int, list[int]] = {}

    def phase(self, a: int) -> None:
        self.a, self.steps, self.choice = a, 0, None
        if a not in self.seen:
            self.seen[a], self.plans[a] = {}, list(self.pairs_of(a))
        # A recurring phase goes on with what its earlier visits left unmeasured.
        self.todo = [k for k in self.plans[a] if len(self.seen[a].get(k, ())) < self.measured]

    def decide(self) -> int:
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
        if not (self.todo and self.todo[0] == k):
            return
        self.steps += 1
        if self.steps > self.warmup:
            self.seen[self.a].setdefault(k, []).append((time_ms, watts))
        if self.steps == self.warmup + self.measured:
            self.todo.pop(0)
            self.steps = 0


def zeus_baseline(table: ReplayTable, target: Target) -> _Search:
    """Zeus's just-in-time profiling (NSDI'23): every setting, from the highest down, runs
    ZEUS_WARMUP_STEPS steps and then ZEUS_PROFILE_STEPS measured ones; the job then keeps
    the one of least cost measured (a job that recurs is not profiled again)."""
    order = [int(k) for k in np.lexsort((table.configs[:, 1], table.configs[:, 0]))[::-1]]
    return _Search(table, lambda a: order, target, ZEUS_WARMUP_STEPS, ZEUS_PROFILE_STEPS)


class _Governed:
    """The governor; a new phase starts from the table's prediction, or with ``learn`` from
    what the phases before it taught (`SeenPrior`)."""

    def __init__(self, gov: Governor, table: ReplayTable, learn: bool = False):
        self.gov, self.table, self.decision_s = gov, table, []
        self.learnt = SeenPrior(table) if learn else None
        self.a: int | None = None

    def phase(self, a: int) -> None:
        t, p = self.table.time_pred[a], self.table.watts_pred[a]
        if self.learnt is not None:
            if self.a is not None:
                self.learnt.add(self.a, *self.gov.estimates()[:2])
            t, p = self.learnt.prior(a)
        self.a = a
        self.gov.phase(a, t, p)

    def decide(self) -> int:
        start = time.perf_counter()
        k = self.gov.decide()
        self.decision_s.append(time.perf_counter() - start)
        return k

    def observe(self, k: int, time_ms: float, watts: float) -> None:
        self.gov.observe(k, time_ms, watts)


class SeenPrior:
    """A new phase's prediction learnt from the phases seen before it: each seen phase's
    estimated curves (log time and log power over the settings, less their value at the
    default setting), averaged, on the new phase's own value at the default setting (the
    one measurement a governor has of it). Before any phase is seen, a cold start from no
    data: `cold_curves`."""

    def __init__(self, table: ReplayTable):
        self.table = table
        self.curves: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def add(self, a: int, log_time: np.ndarray, log_watts: np.ndarray) -> None:
        d = self.table.default_index
        self.curves[a] = (log_time - log_time[d], log_watts - log_watts[d])

    def prior(self, a: int) -> tuple[np.ndarray, np.ndarray]:
        d = self.table.default_index
        if self.curves:
            t, p = (np.mean([c[j] for b, c in self.curves.items() if b != a] or [c[j] for c in self.curves.values()],
                            axis=0) for j in (0, 1))
        else:
            t, p = cold_curves(self.table)
        return self.table.time_ms[a, d] * np.exp(t), self.table.watts[a, d] * np.exp(p)


def cold_curves(table: ReplayTable) -> tuple[np.ndarray, np.ndarray]:
    """Log time and log power over the settings, relative to the default, from no data: under
    a power limit L below the default's power P, power L and time (P / L)^(1/3)
    (`power_limit.limit_curves`); a core clock f below the default's F, time (F / f)^(1/2)
    (half the work bound by the clock) and power (f / F)^2 (voltage falling with the clock).
    Only the first phase of a replay with ``learn`` starts from these; every later one from
    what the earlier phases measured."""
    if table.knob == "power_limit":
        # P at the default setting is not known before it is measured: the default limit stands in.
        return limit_curves(table.configs[:, 0], table.configs[table.default_index, 0])
    x = np.log(table.configs[:, 0] / table.configs[table.default_index, 0])
    return -x / 2, 2 * x


def phases(n_apps: int, steps: int, phase_steps: int, rng: np.random.Generator) -> list[tuple[int, int]]:
    """(application, length) of each phase: lengths uniform in [0.75, 1.25] x phase_steps,
    no application twice in a row."""
    out, done, prev = [], 0, -1
    while done < steps:
        a = int(rng.integers(n_apps - 1)) if n_apps > 1 else 0
        a = a + (a >= prev) if n_apps > 1 and prev >= 0 else a
        length = min(steps - done, int(rng.integers(int(0.75 * phase_steps), int(1.25 * phase_steps) + 1)))
        out.append((a, max(1, length)))
        done += max(1, length)
        prev = a
    return out


def _run(strategy, table: ReplayTable, plan, noise: np.ndarray):
    """Energy per step [steps] (as observed), chosen pair per step, phase of each step."""
    energy, chosen, phase_of = [], [], []
    i = 0
    for ph, (a, length) in enumerate(plan):
        strategy.phase(a)
        for _ in range(length):
            k = strategy.decide()
            t = table.time_ms[a, k] * (1 + noise[i, 0])
            p = table.watts[a, k] * (1 + noise[i, 1])
            strategy.observe(k, t, p)
            energy.append(t * p)
            chosen.append(k)
            phase_of.append(ph)
            i += 1
    return np.array(energy), np.array(chosen), np.array(phase_of)


def _score(table: ReplayTable, plan, energy, chosen, phase_of, best_k, target: Target) -> dict:
    apps = np.array([a for a, n in plan for _ in range(n)])
    # What a step spends: energy, time under a power cap, Zeus's cost under `cost`.
    truth = target.objective(table, table.time_ms, table.watts)
    spent = energy if target.policy in ("energy", "edp", "deadline") else truth[apps, chosen]
    regrets, settle, wasted, base = [], [], 0.0, 0.0
    for ph, (a, _) in enumerate(plan):
        rows = phase_of == ph
        best = truth[a, best_k[a]]
        regret = spent[rows].mean() / best
        if target.policy == "edp":  # the phase's energy x its time, over the best pair's
            regret *= table.time_ms[a, chosen[rows]].mean() / table.time_ms[a, best_k[a]]
        regrets.append(regret - 1.0)
        wasted += float((spent[rows] - best).sum())
        base += best * rows.sum()
        ks = chosen[rows]
        moves = np.flatnonzero(ks[1:] != ks[:-1])
        settle.append(int(moves[-1]) + 2 if len(moves) else 1)
    out = {"regret_mean": float(np.mean(regrets)), "regret_max": float(np.max(regrets)), "per_phase": regrets,
           "clock_changes": int((chosen[1:] != chosen[:-1]).sum()), "steps_to_settle": float(np.mean(settle)),
           "wasted": wasted / base}
    allowed = _allowed(table, target)
    if allowed is not None:
        over = ~allowed[apps, chosen]
        out["violations"] = float(np.mean(over))
        # Per phase, for a share over the phases of some applications (`choose_defaults(cv=True)`).
        out["per_phase_over"] = np.bincount(phase_of, weights=over, minlength=len(plan)).astype(int).tolist()
    return out


def _allowed(table: ReplayTable, target: Target) -> np.ndarray | None:
    """[A x K]: where a pair meets the policy's constraint on the measured grid (1e-9 of slack
    for rounding); None for a policy without one."""
    t = table.time_ms
    if target.policy == "deadline":
        return t <= (1 + target.slowdown) * t[:, [table.default_index]] * (1 + 1e-9)
    if target.policy == "power-cap":
        return table.watts <= target.power_cap_w * (1 + 1e-9)
    return None


@dataclass(frozen=True)
class _Setup:
    plan: list
    draws: np.ndarray
    best_k: np.ndarray


def _setup(table: ReplayTable, target: Target, steps, phase_steps, seed, noise, warn: bool = True,
           each_once: bool = False) -> _Setup:
    """The phases, the noise and each application's best pair. ``each_once``: every
    application once, for ``phase_steps`` steps, in an order drawn by ``seed`` (``steps``
    unused), as jobs of a trace run."""
    if target.policy not in GOVERNOR_POLICIES:
        raise InputError(f"unknown policy {target.policy!r}; expected one of {GOVERNOR_POLICIES}")
    if steps < 1 or phase_steps < 1:
        raise InputError(f"steps and phase_steps must be at least 1, got {steps} and {phase_steps}")
    if not 0 <= noise < 0.5:
        raise InputError(f"noise must be in [0, 0.5), got {noise}")
    if not is_count(seed):
        raise InputError(f"seed must be an integer >= 0, got {seed!r}")
    if target.policy == "power-cap" and not (target.power_cap_w is not None and target.power_cap_w > 0):
        raise InputError(f"the power-cap policy needs power_cap_w > 0, got {target.power_cap_w}")
    if not (is_finite_number(target.eta, 0.0) and target.eta <= 1):
        raise InputError(f"eta must be in [0, 1], got {target.eta!r}")
    rng = np.random.default_rng(seed)
    if each_once:
        plan = [(int(a), phase_steps) for a in rng.permutation(len(table.names))]
        steps = len(plan) * phase_steps
    else:
        plan = phases(len(table.names), steps, phase_steps, rng)
    return _Setup(plan, _noise(rng, noise, steps), _best_index(table, plan, target, warn))


def _noise(rng: np.random.Generator, noise: float, steps: int) -> np.ndarray:
    """Relative noise of each step's time and power [steps x 2]: Gaussian, truncated to (-1, 1)
    so that an observation stays positive (a draw outside is drawn again; the draws inside are
    those of the plain Gaussian, so a noise that never reaches it leaves every figure as is)."""
    draws = noise * rng.standard_normal((steps, 2))
    while (out := np.abs(draws) >= 1.0).any():
        draws[out] = noise * rng.standard_normal(int(out.sum()))
    return draws


def _best_index(table: ReplayTable, plan, target: Target, warn: bool) -> np.ndarray:
    """Each application's best pair on the measured grid, the one its regret is measured
    against: the policy's choice (under a cap none meets, the lowest-power pair, with a warning)."""
    best = target.select(table, table.time_ms, table.watts, table.configs, table.default_index)
    if target.policy != "power-cap":
        return best
    cap = target.power_cap_w
    under = table.watts <= cap
    over = sorted({table.names[a] for a, _ in plan if not under[a].any()})
    if over and warn:
        warnings.warn(GpudvfsWarning(
            f"no pair stays under the {cap:g} W cap for {len(over)} application(s) ({', '.join(over[:3])}"
            f"{', ...' if len(over) > 3 else ''}): their best pair is the lowest-power one, and every step of "
            "theirs is a violation"), stacklevel=3)
    return best


def _one_pair_for_all(table: ReplayTable, best_k: np.ndarray, target: Target) -> np.ndarray:
    """Each application's pair when one pair serves all: the pair with the least mean regret on
    the measured grid over the *other* applications (under a deadline or cap, among the
    pairs that meet it for them), so that it is chosen without the application."""
    t = table.time_ms
    objective = target.objective(table, t, table.watts) * (t if target.policy == "edp" else 1.0)
    regret = objective / objective[np.arange(len(t)), best_k][:, None] - 1.0
    return single_pair_indices(regret, _allowed(table, target))[1]


def _governed(table: ReplayTable, setup: _Setup, target: Target, noise, governor: dict, learn: bool = False):
    gov = _Governed(target.governor(table, noise_sd=max(noise, 1e-3), **governor), table, learn)
    r = _score(table, setup.plan, *_run(gov, table, setup.plan, setup.draws), setup.best_k, target)
    return r | {"decision_us": float(np.median(gov.decision_s) * 1e6)}


def replay(table: ReplayTable, *, policy: str = "energy", slowdown: float = 0.1, power_cap_w: float | None = None,
           eta: float = 0.5, steps: int = 4000, phase_steps: int = 200, seed: int = 0, noise: float = 0.01,
           each_once: bool = False, learn: bool = False, **governor) -> dict:
    """Scores of the governor and the baselines on one sequence of phases (see the module),
    and ``intervals``: 95% bootstrap intervals over the applications of the governor's mean
    regret and of its paired difference from each baseline's. ``each_once``: each
    application runs once, ``phase_steps`` steps (a trace's jobs); ``learn``: a new phase's
    prediction is what the phases before it taught (`SeenPrior`), not the table's."""
    target = Target(policy, slowdown, power_cap_w, eta)
    setup = _setup(table, target, steps, phase_steps, seed, noise, each_once=each_once)
    k_all = len(table.configs)
    order = np.random.default_rng(seed + 1)
    others = [k for k in range(k_all) if k != table.default_index]
    baselines = {
        "default_clocks": _Fixed(np.full(len(table.names), table.default_index)),
        "model_only": _Fixed(target.select(table, table.time_pred, table.watts_pred, table.configs,
                                           table.default_index)),
        "one_pair_for_all": _Fixed(_one_pair_for_all(table, setup.best_k, target)) if len(table.names) > 1 else None,
        "exhaustive": _Search(table, lambda a: [table.default_index] + others, target),
        "random_search": _Search(table, lambda a: [table.default_index] + [
            int(k) for k in order.choice(others, min(RANDOM_PAIRS, len(others)), replace=False)], target),
        "zeus": zeus_baseline(table, target),
    }
    out = _governed(table, setup, target, noise, governor, learn)
    out["baselines"] = {name: _score(table, setup.plan, *_run(b, table, setup.plan, setup.draws), setup.best_k,
                                     target) for name, b in baselines.items() if b is not None}
    # The same phases under every strategy: the governor's regret beside each baseline's,
    # resampled by application (a phase goes with its application).
    out["intervals"] = paired_intervals(out["per_phase"], {k: v["per_phase"] for k, v in out["baselines"].items()},
                                        [a for a, _ in setup.plan])
    return {"policy": policy, "slowdown": slowdown if policy == "deadline" else None,
            "eta": eta if policy == "cost" else None, "steps": len(setup.draws), "phase_steps": phase_steps,
            "phases": len(setup.plan), "pairs": k_all, "apps": len(table.names), "knob": table.knob,
            "seed": seed, **out}


def subset(table: ReplayTable, apps: list[int]) -> ReplayTable:
    return ReplayTable([table.names[a] for a in apps], table.configs, table.default_index, table.time_ms[apps],
                       table.watts[apps], table.time_pred[apps], table.watts_pred[apps], table.knob,
                       table.max_power_w)


#: The governor's constants cross-validation chooses among: the prior's relative error and
#: the confidence bound's width (their product sets how far a prediction is doubted), the
#: residual's standard deviation (how far an unmeasured pair may differ from its neighbours)
#: and its correlation length in log-frequency (how far a measured pair's residual carries).
PRIOR_SDS = (0.05, 0.1, 0.2)
EXPLORES = (2.0, 4.0, 6.0)
RESIDUAL_SDS = (0.0, 0.03, 0.06)
RESIDUAL_SCALES = (0.1, 0.2, 0.4)
CONSTANTS = ("prior_sd", "explore", "residual_sd", "residual_scale")
#: The policies and seeds the default constants are chosen over (`choose_defaults`).
DEFAULT_POLICIES = ("energy", "edp", "deadline")
DEFAULT_SEEDS = (0, 1, 2, 3, 4)
#: The most steps a constrained policy's defaults may spend over its constraint, on any grid
#: (mean over the seeds): issue 14's bound for the deadline policy.
MAX_VIOLATIONS = 0.05


def constant_sets(prior_sds=PRIOR_SDS, explores=EXPLORES, residual_sds=RESIDUAL_SDS,
                  residual_scales=RESIDUAL_SCALES) -> list[dict]:
    """Every combination of the constants cross-validation chooses among; without a residual
    there is nothing to correlate, so those sets take the first correlation length only."""
    return [dict(zip(CONSTANTS, (p, e, r, s))) for p, e, r in itertools.product(prior_sds, explores, residual_sds)
            for s in (residual_scales if r > 0 else residual_scales[:1])]


@dataclass(frozen=True)
class _Job:
    """Replays of one table on one sequence of phases (its setup, drawn in the caller, which
    checks the input and warns once), one per set of constants: the unit of work
    `cross_validate` and `choose_defaults` hand to worker processes."""

    table: ReplayTable
    setup: _Setup
    target: Target
    noise: float
    sets: list


def _replays(job: _Job) -> list[dict]:
    return [_governed(job.table, job.setup, job.target, job.noise, c) for c in job.sets]


def _run_jobs(jobs: list[_Job], workers: int | None, labels: list[str],
              progress: Callable[[int, int, str], None] | None) -> list[list[dict]]:
    """Every job's replays, in order, over ``workers`` processes (default: one per core; 1:
    in this process). ``progress(done, total, labels[i])`` is called as job i's results come
    back, in order."""
    workers = (os.cpu_count() or 1) if workers is None else workers
    if not is_count(workers) or workers < 1:
        raise InputError(f"workers must be an integer >= 1, got {workers!r}")
    out = []
    with contextlib.ExitStack() as stack:
        results = map(_replays, jobs) if workers == 1 or len(jobs) < 2 else stack.enter_context(
            ProcessPoolExecutor(min(workers, len(jobs)))).map(_replays, jobs)
        for i, r in enumerate(results):
            out.append(r)
            if progress is not None:
                progress(i + 1, len(jobs), labels[i])
    return out


def cross_validate(tables: list[ReplayTable], *, policy: str = "energy", slowdown: float = 0.1,
                   power_cap_w: float | None = None, eta: float = 0.5, steps: int = 4000, phase_steps: int = 200,
                   seed: int = 0, noise: float = 0.01, prior_sds=PRIOR_SDS, explores=EXPLORES,
                   residual_sds=RESIDUAL_SDS, residual_scales=RESIDUAL_SCALES, workers: int | None = None,
                   progress: Callable[[int, int, str], None] | None = None) -> list[dict]:
    """Leave-one-application-out over the tables of one grid or several: for each
    application, the constants with the least regret on the replays without it (its grid's
    others, and every other grid whole; each grid's mean regret weighs the same), then the
    phases of that application in the replay of its whole grid, run with those constants.
    Per grid: the held-out regret (over its phases, and per application, with its 95%
    bootstrap interval over the applications, a phase going with its application) and the
    constants each application got; and every set of constants' in-sample regret per grid (the
    sensitivity). The replays run over ``workers`` processes (default: one per core);
    ``progress(done, total, label)`` is called after each grid whole and each application
    held out."""
    grid = constant_sets(prior_sds, explores, residual_sds, residual_scales)
    target = Target(policy, slowdown, power_cap_w, eta)

    def job(table, warn=False):  # a held-out table's warning is its grid's
        return _Job(table, _setup(table, target, steps, phase_steps, seed, noise, warn), target, noise, grid)

    fulls = [job(t, warn=True) for t in tables]
    held_out = [job(subset(t, [i for i in range(len(t.names)) if i != a])) for t in tables for a in range(len(t.names))]
    labels = [f"grid {g + 1} whole" for g in range(len(tables))] + [f"without {n}" for t in tables for n in t.names]
    results = iter(_run_jobs(fulls + held_out, workers, labels, progress))
    runs = [next(results) for _ in tables]
    out = []
    for g, (table, full) in enumerate(zip(tables, fulls)):
        others = np.array([[r["regret_mean"] for r in runs[h]] for h in range(len(tables)) if h != g])
        app_of_phase = np.array([a for a, _ in full.setup.plan])
        held, held_apps, chosen, per_app = [], [], {}, {}
        for a, name in enumerate(table.names):
            score = np.array([r["regret_mean"] for r in next(results)])
            best = int(np.argmin((score + others.sum(axis=0)) / (1 + len(others))))
            chosen[name] = grid[best]
            mine = [runs[g][best]["per_phase"][i] for i in np.flatnonzero(app_of_phase == a)]
            held += mine
            held_apps += [a] * len(mine)
            if mine:
                per_app[name] = float(np.mean(mine))
        out.append({"cv_regret_mean": float(np.mean(held)), "cv_regret_max": float(np.max(held)),
                    "interval": mean_interval(held, held_apps),
                    "phases": len(held), "chosen": chosen, "per_application": per_app,
                    "sensitivity": [c | {"regret_mean": r["regret_mean"], "regret_max": r["regret_max"]}
                                    for c, r in zip(grid, runs[g])]})
    return out


def choose_defaults(tables: list[ReplayTable], *, policies=DEFAULT_POLICIES, seeds=DEFAULT_SEEDS,
                    slowdown: float = 0.1, steps: int = 4000, phase_steps: int = 200, noise: float = 0.01,
                    sets: list[dict] | None = None, workers: int | None = None, cv: bool = False,
                    progress: Callable[[int, int, str], None] | None = None) -> dict:
    """The governor's default constants: among ``sets`` (default: every set cross-validation
    chooses among) whose replays keep the steps over a constraint at or under MAX_VIOLATIONS
    on every grid (mean over the seeds; a set none meets is out), the one with the least mean
    regret over the grids, policies and seeds. More seeds than cross-validation's one, since
    20 phases of one seed cannot show a violation rate: a deadline met by a point estimate
    is missed on the steps of a pair within the noise of the bound. Returns the chosen set and,
    per set, its mean regret and its worst grid's violations.

    ``cv``: also this choice cross-validated (``cv`` in the result), the figure that says what
    the defaults give an application they were not chosen on: for each application, the same
    choice made on the phases of the other applications alone, and that application's phases
    scored with the set it got. Both come from the same replays (a phase's learning is its own;
    what it shares with the phase before it is the pair it starts from), so this costs no
    replay more than the choice.

    The replays run over ``workers`` processes (default: one per core); ``progress(done,
    total, label)`` is called after each grid, policy and seed."""
    grid = constant_sets() if sets is None else list(sets)
    if not grid or not tables or not policies or not seeds:
        raise InputError("choosing the defaults needs at least one set of constants, grid, policy and seed")
    keys = list(itertools.product(range(len(tables)), range(len(policies)), range(len(seeds))))
    setups = [_setup(tables[g], Target(policies[p], slowdown), steps, phase_steps, seeds[s], noise, warn=False)
              for g, p, s in keys]
    jobs = [_Job(tables[g], setup, Target(policies[p], slowdown), noise, grid)
            for (g, p, _), setup in zip(keys, setups)]
    labels = [f"{policies[p]}, seed {seeds[s]}" for _, p, s in keys]
    scores = {key: _PhaseScores.of(setup, runs)
              for key, setup, runs in zip(keys, setups, _run_jobs(jobs, workers, labels, progress))}
    shape = (len(grid), len(tables), len(policies), len(seeds))
    mean, worst = _fold(scores, shape, lambda key: True)
    best = _least(mean, worst, "")
    out = {"chosen": grid[best], "seeds": list(seeds), "policies": list(policies), "max_violations": MAX_VIOLATIONS,
           "sets": [c | {"regret_mean": float(m), "violations_max": float(v), "feasible": bool(v <= MAX_VIOLATIONS)}
                    for c, m, v in zip(grid, mean, worst)]}
    if cv:
        out["cv"] = _cross_validated(scores, shape, tables, policies, grid, best)
    return out


@dataclass(frozen=True)
class _PhaseScores:
    """One replay (grid, policy, seed) under every set of constants, per phase: its application
    and steps, and per set its regret and its steps over the constraint (None without one)."""

    apps: np.ndarray           # [phases]
    steps: np.ndarray          # [phases]
    regret: np.ndarray         # [sets x phases]
    over: np.ndarray | None    # [sets x phases]

    @classmethod
    def of(cls, setup: _Setup, runs: list[dict]) -> _PhaseScores:
        constrained = "per_phase_over" in runs[0]
        return cls(np.array([a for a, _ in setup.plan]), np.array([n for _, n in setup.plan]),
                   np.array([r["per_phase"] for r in runs]),
                   np.array([r["per_phase_over"] for r in runs]) if constrained else None)


def _fold(scores: dict, shape: tuple, keep: Callable) -> tuple[np.ndarray, np.ndarray]:
    """Per set, over the phases ``keep(key)`` of each replay (a replay with none left has no
    say): the mean regret over the grids, policies and seeds, and the worst grid and policy's
    share of steps over its constraint (mean over the seeds; 0 without a constraint)."""
    regret, violations = np.zeros(shape), np.zeros(shape)
    used = np.zeros(shape[1:], dtype=bool)
    for key, sc in scores.items():
        m = np.ones(len(sc.apps), dtype=bool) & keep(key)
        if not m.any():
            continue
        used[key] = True
        regret[(slice(None), *key)] = sc.regret[:, m].mean(axis=1)
        if sc.over is not None:
            violations[(slice(None), *key)] = sc.over[:, m].sum(axis=1) / sc.steps[m].sum()
    if not used.any():
        raise InputError("no phase of another application to choose on: replay more steps")
    seeds = np.maximum(used.sum(axis=2), 1)
    return regret.sum(axis=(1, 2, 3)) / used.sum(), (violations.sum(axis=3) / seeds).max(axis=(1, 2))


def _least(mean: np.ndarray, worst: np.ndarray, without: str) -> int:
    """The set with the least mean regret among those within MAX_VIOLATIONS."""
    feasible = worst <= MAX_VIOLATIONS
    if not feasible.any():
        raise InputError(f"no set of constants keeps the steps over a constraint at or under {MAX_VIOLATIONS:.0%} "
                         f"on every grid{without}")
    return int(np.argmin(np.where(feasible, mean, np.inf)))


def _cross_validated(scores: dict, shape: tuple, tables: list[ReplayTable], policies, grid: list[dict],
                     best: int) -> dict:
    """`choose_defaults(cv=True)`'s ``cv``: per grid, each application's set chosen without it,
    and per policy the regret of every phase under its application's set (mean over the
    phases, then the seeds; max over both) and, under a constraint, the share of steps over
    it; beside each, the set chosen on every application (in-sample). ``interval``: 95%
    bootstrap intervals of each mean, and of the mean over the grids and policies, over the
    applications (a phase goes with its application, in every policy and seed)."""
    if sum(len(t.names) for t in tables) < 2:
        raise InputError("cross-validating the defaults needs at least 2 applications")
    n_seeds = shape[3]
    out, total, in_sample = [], [], []
    # Every held-out phase's regret, its application (grid, index) and its weight in the mean
    # of means below: for the bootstrap interval over the applications of both grids.
    pooled, owners, weights = [], [], []
    for g, table in enumerate(tables):
        held = {}  # application -> index of its set
        for a, name in enumerate(table.names):
            if not any((sc.apps == a).any() for (h, _, _), sc in scores.items() if h == g):
                continue  # no phase of it was drawn: nothing to score
            mean, worst = _fold(scores, shape, lambda key, g=g, a=a: scores[key].apps != a if key[0] == g else True)
            held[a] = _least(mean, worst, f" without {name}")
        per_policy = {}
        for p, policy in enumerate(policies):
            runs = [scores[g, p, s] for s in range(n_seeds)]
            sets = [np.array([held[a] for a in sc.apps]) for sc in runs]
            regrets = [sc.regret[k, np.arange(len(k))] for sc, k in zip(runs, sets)]
            # A phase weighs 1 / its replay's phases: the mean over the seeds of each one's mean.
            w = np.concatenate([np.full(len(r), 1.0 / len(r)) for r in regrets])
            apps = np.concatenate([sc.apps for sc in runs])
            phase_regrets = np.concatenate(regrets)
            row = {"regret_mean": float(np.mean([r.mean() for r in regrets])),
                   "regret_max": float(max(r.max() for r in regrets)),
                   "interval": mean_interval(phase_regrets, apps, weights=w),
                   "in_sample": float(np.mean([sc.regret[best].mean() for sc in runs]))}
            pooled.append(phase_regrets)
            owners += [f"{g}/{a}" for a in apps]
            weights.append(w)
            if runs[0].over is not None:
                row["violations"] = float(np.mean([sc.over[k, np.arange(len(k))].sum() / sc.steps.sum()
                                                   for sc, k in zip(runs, sets)]))
                row["in_sample_violations"] = float(np.mean([sc.over[best].sum() / sc.steps.sum() for sc in runs]))
            per_policy[policy] = row
            total.append(row["regret_mean"])
            in_sample.append(row["in_sample"])
        out.append({"policies": per_policy, "chosen": {table.names[a]: grid[k] for a, k in held.items()},
                    "same_as_chosen_on_all": sum(k == best for k in held.values())})
    # Each (grid, policy) weighs alike in the mean: its weights sum to the seeds, as everywhere.
    return {"regret_mean": float(np.mean(total)), "in_sample_regret_mean": float(np.mean(in_sample)),
            "interval": mean_interval(np.concatenate(pooled), np.array(owners), weights=np.concatenate(weights)),
            "grids": out}
