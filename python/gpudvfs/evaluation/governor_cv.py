"""The governor's constants chosen over replays (`gpudvfs.evaluation.govern_replay`).

For one policy by leave-one-application-out (`cross_validate_governor`), and the defaults over
grids, policies and seeds, that choice cross-validated too (`choose_defaults`). The replays
run in worker processes, one per core by default; they are seeded, so any count of workers
gives the same figures.
"""

from __future__ import annotations

import contextlib
import itertools
import os
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import numpy as np

from gpudvfs.errors import InputError
from gpudvfs.evaluation.govern_replay import ReplaySetup, StrategyScores, governor_scores
from gpudvfs.evaluation.replay_table import ReplayTable, Target, subset
from gpudvfs.limits import is_count
from gpudvfs.stats import mean_interval

#: The governor's constants cross-validation chooses among: the prior's relative error and
#: the confidence bound's width (their product sets how far a prediction is doubted), the
#: residual's standard deviation (how far an unmeasured pair may differ from its neighbours)
#: and its correlation length in log-frequency (how far a measured pair's residual carries).
PRIOR_SDS = (0.05, 0.1, 0.2)
EXPLORES = (2.0, 4.0, 6.0)
RESIDUAL_SDS = (0.0, 0.03, 0.06)
RESIDUAL_SCALES = (0.1, 0.2, 0.4)
#: The recheck's (``recheck_z``, ``recheck_runs``) where it is chosen with the others (`govern
#: defaults --recheck`): off, or a one-sided bound of 1, 2 or 3 standard deviations of a pair's
#: mean (84%, 98%, 99.9% if normal) until the pair has run 2 times (one run again) or 5 (its
#: mean's sd about halved). Chosen so, one for every policy, it wins in-sample and loses held out
#: (docs/accuracy.md); a set that does not name it takes each policy's (`governor.RECHECK_Z`).
RECHECKS = ((0.0, 1), *itertools.product((1.0, 2.0, 3.0), (2, 5)))
CONSTANTS = ("prior_sd", "explore", "residual_sd", "residual_scale", "recheck_z", "recheck_runs")
#: The policies and seeds the default constants are chosen over (`choose_defaults`).
DEFAULT_POLICIES = ("energy", "edp", "deadline")
DEFAULT_SEEDS = (0, 1, 2, 3, 4)
#: The most steps a constrained policy's defaults may spend over its constraint, on any grid
#: (mean over the seeds): the deadline policy's bound.
MAX_VIOLATIONS = 0.05

#: ``progress(done, total, label)``: told as each job's replays come back.
Progress = Callable[[int, int, str], None]


def constant_sets(prior_sds: Iterable[float] = PRIOR_SDS, explores: Iterable[float] = EXPLORES,
                  residual_sds: Iterable[float] = RESIDUAL_SDS, residual_scales: Sequence[float] = RESIDUAL_SCALES,
                  rechecks: Sequence[tuple[float, int]] = ()) -> list[dict[str, float]]:
    """Every combination of the constants cross-validation chooses among.

    Each set is keyed by CONSTANTS, the recheck's two only where ``rechecks`` names any (without
    them each policy takes its own). Without a residual there is nothing to correlate, so those
    sets take the first correlation length only.
    """
    recheck: Sequence[tuple] = rechecks or [()]
    return [dict(zip(CONSTANTS, (p, e, r, s, *zn)))
            for p, e, r in itertools.product(prior_sds, explores, residual_sds)
            for s in (residual_scales if r > 0 else residual_scales[:1]) for zn in recheck]


@dataclass(frozen=True)
class _Job:
    """Replays of one table on one sequence of phases, one per set of constants.

    The unit of work `cross_validate_governor` and `choose_defaults` hand to worker
    processes; its setup is drawn in the caller, which checks the input and warns once.
    """

    table: ReplayTable
    setup: ReplaySetup
    target: Target
    noise: float
    sets: list[dict[str, float]]


def _replays(job: _Job) -> list[StrategyScores]:
    # A deadline takes no recheck (the Rust core's rule): sets that differ in it alone are replayed once.
    def key(c: dict[str, float]) -> tuple:
        return tuple(sorted((c | dict(zip(CONSTANTS[-2:], RECHECKS[0])) if job.target.policy == "deadline"
                             else c).items()))

    done: dict[tuple, StrategyScores] = {}
    for c in job.sets:
        if key(c) not in done:
            done[key(c)] = governor_scores(job.table, job.setup, job.target, job.noise, c)
    return [done[key(c)] for c in job.sets]


def _run_jobs(jobs: list[_Job], workers: int | None, labels: list[str],
              progress: Progress | None) -> list[list[StrategyScores]]:
    """Every job's replays, in order, over ``workers`` processes (default: one per core; 1: this one).

    ``progress(done, total, labels[i])`` is called as job i's results come back, in order.
    """
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


@dataclass(frozen=True)
class SetScore:
    """One set of constants' in-sample regret on a grid's replay: mean and worst over its phases."""

    constants: dict[str, float]
    regret_mean: float
    regret_max: float

    def to_dict(self) -> dict:
        """The set and its regret in one JSON object."""
        return self.constants | {"regret_mean": self.regret_mean, "regret_max": self.regret_max}


@dataclass(frozen=True)
class GovernorCV:
    """One grid's leave-one-application-out figures (`cross_validate_governor`).

    The held-out regret is each phase's under the constants chosen without its application (mean
    and worst, per application where a phase drew it); ``interval`` is the 95% bootstrap interval
    of the mean over the applications (a phase goes with its application); ``sensitivity`` every
    set's in-sample regret.
    """

    cv_regret_mean: float
    cv_regret_max: float
    interval: tuple[float, float]
    phases: int
    chosen: dict[str, dict[str, float]]
    per_application: dict[str, float]
    sensitivity: list[SetScore]

    def to_dict(self) -> dict:
        """The figures as `gpudvfs govern cv --json` prints each grid's."""
        return {"cv_regret_mean": self.cv_regret_mean, "cv_regret_max": self.cv_regret_max, "interval": self.interval,
                "phases": self.phases, "chosen": self.chosen, "per_application": self.per_application,
                "sensitivity": [s.to_dict() for s in self.sensitivity]}


def cross_validate_governor(tables: list[ReplayTable], *, policy: str = "energy", slowdown: float = 0.1,
                            power_cap_w: float | None = None, eta: float = 0.5, steps: int = 4000,
                            phase_steps: int = 200, seed: int = 0, noise: float = 0.01,
                            prior_sds: Iterable[float] = PRIOR_SDS, explores: Iterable[float] = EXPLORES,
                            residual_sds: Iterable[float] = RESIDUAL_SDS,
                            residual_scales: Sequence[float] = RESIDUAL_SCALES,
                            rechecks: Sequence[tuple[float, int]] = (), workers: int | None = None,
                            progress: Progress | None = None) -> list[GovernorCV]:
    """The governor's constants chosen by leave-one-application-out over the tables of one grid or several.

    For each application, the constants with the least regret on the replays without it (its
    grid's others, and every other grid whole; each grid's mean regret weighs the same), then
    the phases of that application in the replay of its whole grid, run with those constants.

    One table per grid, one result per grid in order. The policy's settings and the replay's are
    as `govern_replay.replay` takes them; ``noise`` is each observation's relative standard
    deviation; the constants' values are chosen among as `constant_sets` combines them.
    ``workers``: processes (default: one per core; 1: this one). `InputError` as
    `ReplaySetup.draw` raises it.
    """
    grid = constant_sets(prior_sds, explores, residual_sds, residual_scales, rechecks)
    target = Target(policy, slowdown, power_cap_w, eta)

    def job(table: ReplayTable, warn: bool = False) -> _Job:  # a held-out table's warning is its grid's
        return _Job(table, ReplaySetup.draw(table, target, steps, phase_steps, seed, noise, warn), target, noise, grid)

    fulls = [job(t, warn=True) for t in tables]
    held_out = [job(subset(t, [i for i in range(len(t.names)) if i != a])) for t in tables for a in range(len(t.names))]
    labels = [f"grid {g + 1} whole" for g in range(len(tables))] + [f"without {n}" for t in tables for n in t.names]
    results = iter(_run_jobs(fulls + held_out, workers, labels, progress))
    runs = [next(results) for _ in tables]
    out = []
    for g, (table, full) in enumerate(zip(tables, fulls)):
        others = np.array([[r.regret_mean for r in runs[h]] for h in range(len(tables)) if h != g])
        app_of_phase = np.array([a for a, _ in full.setup.plan])
        held: list[float] = []
        held_apps: list[int] = []
        chosen, per_app = {}, {}
        for a, name in enumerate(table.names):
            score = np.array([r.regret_mean for r in next(results)])
            best = int(np.argmin((score + others.sum(axis=0)) / (1 + len(others))))
            chosen[name] = grid[best]
            mine = [runs[g][best].per_phase[i] for i in np.flatnonzero(app_of_phase == a)]
            held += mine
            held_apps += [a] * len(mine)
            if mine:
                per_app[name] = float(np.mean(mine))
        out.append(GovernorCV(float(np.mean(held)), float(np.max(held)), mean_interval(held, held_apps), len(held),
                              chosen, per_app,
                              [SetScore(c, r.regret_mean, r.regret_max) for c, r in zip(grid, runs[g])]))
    return out


@dataclass(frozen=True)
class DefaultsCandidate:
    """One set of constants as `choose_defaults` weighed it.

    Its mean regret over the grids, policies and seeds; its worst grid and policy's share of
    steps over the constraint (mean over the seeds), feasible at or under MAX_VIOLATIONS.
    """

    constants: dict[str, float]
    regret_mean: float
    violations_max: float
    feasible: bool

    def to_dict(self) -> dict:
        """The set and its figures in one JSON object."""
        return self.constants | {"regret_mean": self.regret_mean, "violations_max": self.violations_max,
                                 "feasible": self.feasible}


@dataclass(frozen=True)
class PolicyHeldOut:
    """One grid and policy's figures with the defaults' choice held out (`choose_defaults(cv=True)`).

    ``regret_mean``: every phase's regret under its application's set, chosen without it, mean
    over each replay's phases, then over the seeds (``interval``: its 95% bootstrap interval over
    the applications); ``in_sample`` the same under the set chosen on every application. The
    violations (share of steps over the constraint) are None without a constraint.
    """

    regret_mean: float
    regret_max: float
    interval: tuple[float, float]
    in_sample: float
    violations: float | None = None
    in_sample_violations: float | None = None

    def to_dict(self) -> dict:
        """The figures as `gpudvfs govern defaults --cv --json` prints them."""
        out = {"regret_mean": self.regret_mean, "regret_max": self.regret_max, "interval": self.interval,
               "in_sample": self.in_sample}
        if self.violations is not None:
            out |= {"violations": self.violations, "in_sample_violations": self.in_sample_violations}
        return out


@dataclass(frozen=True)
class GridHeldOut:
    """One grid's part of the defaults' choice held out: per policy, and each application's set chosen without it."""

    policies: dict[str, PolicyHeldOut]
    chosen: dict[str, dict[str, float]]
    same_as_chosen_on_all: int

    def to_dict(self) -> dict:
        """JSON-ready, as `gpudvfs govern defaults --cv --json` prints it."""
        return {"policies": {k: v.to_dict() for k, v in self.policies.items()}, "chosen": self.chosen,
                "same_as_chosen_on_all": self.same_as_chosen_on_all}


@dataclass(frozen=True)
class DefaultsCV:
    """The defaults' choice cross-validated: what they give an application they were not chosen on.

    Each grid and policy weighs alike in the means; ``interval`` is the 95% bootstrap interval of
    ``regret_mean`` over the applications of every grid (a phase goes with its application, in
    every policy and seed).
    """

    regret_mean: float
    in_sample_regret_mean: float
    interval: tuple[float, float]
    grids: list[GridHeldOut]

    def to_dict(self) -> dict:
        """JSON-ready, as `gpudvfs govern defaults --cv --json` prints it under ``cv``."""
        return {"regret_mean": self.regret_mean, "in_sample_regret_mean": self.in_sample_regret_mean,
                "interval": self.interval, "grids": [g.to_dict() for g in self.grids]}


@dataclass(frozen=True)
class DefaultsChoice:
    """The governor's default constants (`choose_defaults`), every set weighed in the order given."""

    chosen: dict[str, float]
    seeds: tuple[int, ...]
    policies: tuple[str, ...]
    max_violations: float
    sets: list[DefaultsCandidate]
    cv: DefaultsCV | None = None

    def to_dict(self) -> dict:
        """The choice as `gpudvfs govern defaults --json` prints it."""
        out = {"chosen": self.chosen, "seeds": list(self.seeds), "policies": list(self.policies),
               "max_violations": self.max_violations, "sets": [s.to_dict() for s in self.sets]}
        if self.cv is not None:
            out["cv"] = self.cv.to_dict()
        return out


def choose_defaults(tables: list[ReplayTable], *, policies: Sequence[str] = DEFAULT_POLICIES,
                    seeds: Sequence[int] = DEFAULT_SEEDS, slowdown: float = 0.1, steps: int = 4000,
                    phase_steps: int = 200, noise: float = 0.01, sets: Sequence[dict[str, float]] | None = None,
                    workers: int | None = None, cv: bool = False, progress: Progress | None = None) -> DefaultsChoice:
    """The governor's default constants: the least mean regret among the sets that keep the constraints.

    Among ``sets`` (default: `constant_sets()`), those whose replays keep the steps over a constraint at or under
    MAX_VIOLATIONS on every grid (mean over the seeds; a set none meets is out); of these, the
    one with the least mean regret over the grids, policies and seeds. More seeds than
    cross-validation's one, since 20 phases of one seed cannot show a violation rate: a
    deadline met by a point estimate is missed on the steps of a pair within the noise of the
    bound.

    With ``cv``, also this choice cross-validated, the figure that says what the defaults give
    an application they were not chosen on: for each application, the same choice made on the
    phases of the other applications alone, and that application's phases scored with the set
    it got. Both come from the same replays (a phase's learning is its own; what it shares
    with the phase before it is the pair it starts from), so this costs no replay more than
    the choice.

    Arguments as `cross_validate_governor` takes them; every seed replays every grid and policy.
    `InputError` with no set, grid, policy or seed, where no set keeps the constraints, and with
    ``cv`` with fewer than 2 applications or none drawn besides one held out.
    """
    grid = constant_sets() if sets is None else list(sets)
    if not grid or not tables or not policies or not seeds:
        raise InputError("choosing the defaults needs at least one set of constants, grid, policy and seed")
    keys = list(itertools.product(range(len(tables)), range(len(policies)), range(len(seeds))))
    setups = [ReplaySetup.draw(tables[g], Target(policies[p], slowdown), steps, phase_steps, seeds[s], noise,
                               warn=False) for g, p, s in keys]
    jobs = [_Job(tables[g], setup, Target(policies[p], slowdown), noise, grid)
            for (g, p, _), setup in zip(keys, setups)]
    labels = [f"{policies[p]}, seed {seeds[s]}" for _, p, s in keys]
    scores = {key: _PhaseScores.of(setup, runs)
              for key, setup, runs in zip(keys, setups, _run_jobs(jobs, workers, labels, progress))}
    shape = (len(grid), len(tables), len(policies), len(seeds))
    mean, worst = _fold(scores, shape)
    best = _least(mean, worst, "")
    return DefaultsChoice(
        grid[best], tuple(seeds), tuple(policies), MAX_VIOLATIONS,
        [DefaultsCandidate(c, float(m), float(v), bool(v <= MAX_VIOLATIONS)) for c, m, v in zip(grid, mean, worst)],
        _cross_validated(scores, shape, tables, policies, grid, best) if cv else None)


@dataclass(frozen=True)
class _PhaseScores:
    """One replay (grid, policy, seed) under every set of constants, per phase.

    Its application and steps, and per set its regret and its steps over the constraint
    (None without one).
    """

    apps: np.ndarray           # [phases]
    steps: np.ndarray          # [phases]
    regret: np.ndarray         # [sets x phases]
    over: np.ndarray | None    # [sets x phases]

    @classmethod
    def of(cls, setup: ReplaySetup, runs: list[StrategyScores]) -> _PhaseScores:
        constrained = runs[0].per_phase_over is not None
        return cls(np.array([a for a, _ in setup.plan]), np.array([n for _, n in setup.plan]),
                   np.array([r.per_phase for r in runs]),
                   np.array([r.per_phase_over for r in runs]) if constrained else None)


def _fold(scores: dict[tuple[int, int, int], _PhaseScores], shape: tuple[int, int, int, int],
          without: tuple[int, int] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Per set, its mean regret and worst share of steps over a constraint.

    Over the phases of each replay, those of application ``without = (grid, application)``
    left out (a replay with none left has no say): the mean regret over the grids, policies
    and seeds, and the worst grid and policy's share of steps over its constraint (mean over
    the seeds; 0 without a constraint).
    """
    regret, violations = np.zeros(shape), np.zeros(shape)
    used = np.zeros(shape[1:], dtype=bool)
    for key, sc in scores.items():
        m = sc.apps != without[1] if without is not None and key[0] == without[0] else np.ones(len(sc.apps), bool)
        if not m.any():
            continue
        used[key] = True
        regret[(slice(None),) + key] = sc.regret[:, m].mean(axis=1)
        if sc.over is not None:
            violations[(slice(None),) + key] = sc.over[:, m].sum(axis=1) / sc.steps[m].sum()
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


def _cross_validated(scores: dict[tuple[int, int, int], _PhaseScores], shape: tuple[int, int, int, int],
                     tables: list[ReplayTable], policies: Sequence[str], grid: list[dict[str, float]],
                     best: int) -> DefaultsCV:
    """`choose_defaults(cv=True)`'s ``cv``.

    Per grid, each application's set chosen without it, and per policy the regret of every
    phase under its application's set (mean over the phases, then the seeds; max over both)
    and, under a constraint, the share of steps over it; beside each, the set chosen on every
    application (in-sample). ``interval``: 95% bootstrap intervals of each mean, and of the
    mean over the grids and policies, over the applications (a phase goes with its
    application, in every policy and seed).
    """
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
            mean, worst = _fold(scores, shape, (g, a))
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
            violations = in_sample_violations = None
            overs = [sc.over for sc in runs if sc.over is not None]  # all of a policy's replays, or none
            if overs:
                violations = float(np.mean([o[k, np.arange(len(k))].sum() / sc.steps.sum()
                                            for o, sc, k in zip(overs, runs, sets)]))
                in_sample_violations = float(np.mean([o[best].sum() / sc.steps.sum() for o, sc in zip(overs, runs)]))
            row = PolicyHeldOut(float(np.mean([r.mean() for r in regrets])), float(max(r.max() for r in regrets)),
                                mean_interval(phase_regrets, apps, weights=w),
                                float(np.mean([sc.regret[best].mean() for sc in runs])), violations,
                                in_sample_violations)
            pooled.append(phase_regrets)
            owners += [f"{g}/{a}" for a in apps]
            weights.append(w)
            per_policy[policy] = row
            total.append(row.regret_mean)
            in_sample.append(row.in_sample)
        out.append(GridHeldOut(per_policy, {table.names[a]: grid[k] for a, k in held.items()},
                               sum(k == best for k in held.values())))
    # Each (grid, policy) weighs alike in the mean: its weights sum to the seeds, as everywhere.
    return DefaultsCV(float(np.mean(total)), float(np.mean(in_sample)),
                      mean_interval(np.concatenate(pooled), np.array(owners), weights=np.concatenate(weights)), out)
