"""The deadline's confirmation constants chosen with each file held out.

A phase that settles on a pair whose time lies just over the deadline spends every step of
it over the bound: the bound is a multiple of the default clocks' time, measured on a few runs,
and the pair's mean is a few steps' too. `Governor`'s ``confirm_z`` and ``confirm_runs`` guard
against it (a pair already run needs ``confirm_z`` standard deviations of margin, else the
default clocks run again, or with ``confirm_pair`` the less certain of the two, up to
``confirm_runs`` runs, then the pair is left).

Each table (one file: a trace or a grid) held out in turn, the set chosen is the one of least
mean regret over the other tables among those whose replays keep every application of every
other table, in every seed, within MAX_VIOLATIONS of its steps over the bound (so that a file of
few jobs, where one job settled over the bound is 6% of the steps, stays within it too); where
none does, the set of the smallest such worst share. The held-out table is then replayed, with
every baseline, under the set chosen without it.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpudvfs.evaluation.govern_replay import ReplayResult, ReplaySetup, StrategyScores, replay
from gpudvfs.evaluation.governor_cv import MAX_VIOLATIONS, Progress, _Job, _run_jobs
from gpudvfs.evaluation.replay_table import ReplayTable, Target

#: The sets chosen among (``confirm_z`` 0 is no check): margins of 1-2 standard deviations and 8
#: runs (16 runs of a pair over the bound are 8% of a 200-step phase), with and without
#: ``confirm_pair``; docs/design.md gives the earlier, wider choice.
CONFIRM_ZS = (1.0, 1.5, 2.0)
CONFIRM_RUNS = (8,)
CONFIRM_PAIRS = (False, True)


def confirm_sets(zs: Sequence[float] = CONFIRM_ZS, runs: Sequence[int] = CONFIRM_RUNS,
                 pairs: Sequence[bool] = CONFIRM_PAIRS) -> list[dict[str, float]]:
    """Every (``confirm_z``, ``confirm_runs``, ``confirm_pair``) set; without a check, one set only.

    Returns
    -------
    list of dict of str to float
        The governor's keyword arguments of each set.
    """
    return [{"confirm_z": z, "confirm_runs": r, "confirm_pair": p} for z, r, p in itertools.product(zs, runs, pairs)
            if z > 0 or (r, p) == (runs[0], pairs[0])]


@dataclass(frozen=True)
class ReplayFile:
    """A table to replay: one file's, as `gpudvfs govern replay` replays it.

    ``each_once``: a trace (each job once, ``phase_steps`` steps) rather than a grid (``steps``
    steps in phases of about ``phase_steps``).
    """

    name: str
    table: ReplayTable
    each_once: bool
    phase_steps: int
    steps: int = 4000


@dataclass(frozen=True)
class DeadlineFold:
    """One file held out: the set chosen on the others and its replays under it, one per seed.

    Every baseline is replayed beside the governor.
    """

    name: str
    chosen: dict[str, float]
    replays: list[ReplayResult]

    def to_dict(self) -> dict:
        """Per strategy the regret and the share of steps over the bound, one value per seed."""
        strategies = {"governor": [r.governor for r in self.replays]} | {
            k: [r.baselines[k] for r in self.replays] for k in self.replays[0].baselines}
        return {"name": self.name, "chosen": self.chosen, "seeds": [r.seed for r in self.replays],
                "strategies": {k: {"regret": [s.regret_mean for s in v], "violations": [s.violations for s in v]}
                               for k, v in strategies.items()}}


def worst_share(setup: ReplaySetup, scores: StrategyScores) -> float:
    """The largest share of an application's steps over the bound (its phases together), of a strategy's scores."""
    assert scores.per_phase_over is not None  # a deadline's replay counts them
    apps = np.array([a for a, _ in setup.plan])
    steps = np.bincount(apps, [n for _, n in setup.plan])
    over = np.bincount(apps, scores.per_phase_over, minlength=len(steps))
    return float((over[steps > 0] / steps[steps > 0]).max())


def deadline_cv(files: Sequence[ReplayFile], *, slowdown: float = 0.05, seeds: Sequence[int] = (0, 1, 2),
                noise: float = 0.01, sets: Sequence[dict[str, float]] | None = None, workers: int | None = None,
                progress: Progress | None = None) -> tuple[dict[str, float], list[DeadlineFold], list[dict]]:
    """The confirmation set chosen on every file, and each file held out (module notes).

    At least two files. ``slowdown``: at most this much slower than the default setting; ``sets``
    default to `confirm_sets`. Returns the set chosen on all files, each file's fold, and each set
    with, per file, its mean regret and worst share of a job's steps over the bound (``regret``,
    ``worst_over``).
    """
    sets = list(sets or confirm_sets())
    target = Target("deadline", slowdown)
    jobs = [_Job(f.table, ReplaySetup.draw(f.table, target, f.steps, f.phase_steps, s, noise, each_once=f.each_once),
                 target, noise, sets) for f in files for s in seeds]
    runs = _run_jobs(jobs, workers, [f"{f.name}, seed {s}" for f in files for s in seeds], progress)
    # [file x seed x set]
    regret = np.array([[g.regret_mean for g in r] for r in runs]).reshape(len(files), len(seeds), len(sets))
    over = np.array([[worst_share(j.setup, g) for g in r] for j, r in zip(jobs, runs)]).reshape(regret.shape)

    def choose(keep: np.ndarray) -> dict[str, float]:
        worst = over[keep].max(axis=(0, 1))
        ok = worst <= MAX_VIOLATIONS
        score = np.where(ok, regret[keep].mean(axis=(0, 1)), np.inf) if ok.any() else worst
        return sets[int(np.argmin(score))]

    names = [f.name for f in files]
    folds = []
    for i, f in enumerate(files):
        chosen = choose(np.arange(len(files)) != i)
        constants: dict[str, Any] = chosen  # the governor's keyword arguments, ``confirm_pair`` a bool
        folds.append(DeadlineFold(f.name, chosen, [
            replay(f.table, policy="deadline", slowdown=slowdown, steps=f.steps, phase_steps=f.phase_steps, seed=s,
                   noise=noise, each_once=f.each_once, **constants) for s in seeds]))
    sensitivity = [c | {"regret": dict(zip(names, regret[:, :, j].mean(axis=1).tolist())),
                        "worst_over": dict(zip(names, over[:, :, j].max(axis=1).tolist()))} for j, c in enumerate(sets)]
    return choose(np.ones(len(files), dtype=bool)), folds, sensitivity
