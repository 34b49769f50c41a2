"""The governor replayed against a grid in which every application was measured at every pair.

The workload switches application about every ``phase_steps`` steps, each step observes the
measured time and power at the chosen (core, memory) pair with relative noise, and the
offline predictions of an application come from models it was not in (its power from a model
fitted on the other applications; its time from the time model calibrated on its own
reference time, the one measurement a governor has of a new phase).

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
default clocks' (`deadline`), or whose measured power exceeds the cap (`power-cap`); None
for the other policies (absent from the JSON). Per phase: ``per_phase`` (its regret) and,
with a constraint, ``per_phase_over`` (its steps over it). The governor runs through
`GovernedLoop` (`GovernorStrategy`) and also reports ``decision_us``, the median time of one of
the loop's decisions (`GovernedLoop.decision_s`). Baselines in the same run, on the same
phases and noise: the default clocks, the models' choice alone, one pair for all (for each
application, of the settings that meet the constraint on every other application of the table,
or on the most of them, the one of least mean regret over them, on their measurements; absent
where the table has one application, since no pair can be chosen without it), exhaustive
profiling (every pair once per phase, then the best measured), random search (RANDOM_PAIRS
pairs, then the best measured) and Zeus's just-in-time profiling (`zeus_baseline`).

The table replayed and the target scored are `gpudvfs.evaluation.replay_table`'s; the
strategies `gpudvfs.evaluation.replay_strategies`'; the governor's constants chosen by
cross-validation over replays, `gpudvfs.evaluation.governor_cv`. A trace's jobs each run once
(``each_once``).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, replace

import numpy as np

from gpudvfs.errors import GpudvfsWarning, InputError
from gpudvfs.evaluation.regret import single_pair_indices
from gpudvfs.evaluation.replay_strategies import FixedPairs, GovernorStrategy, MeasureThenKeep, Strategy, zeus_baseline
from gpudvfs.evaluation.replay_table import ReplayTable, Target
from gpudvfs.govern.governor import GOVERNOR_POLICIES
from gpudvfs.limits import is_count, is_finite_number
from gpudvfs.stats import paired_intervals

RANDOM_PAIRS = 8


@dataclass(frozen=True)
class StrategyScores:
    """One strategy's scores over a replay's phases (see the module).

    ``clock_changes``: steps whose setting differs from the step before; ``steps_to_settle``:
    steps into a phase until its last change, mean over the phases; ``wasted``: spent beyond
    the best settings, over the total at the best settings; the violations (steps over the
    constraint) None without one; ``decision_us`` the governor's median decision time, None for
    a baseline.
    """

    regret_mean: float
    regret_max: float
    per_phase: list[float]
    clock_changes: int
    steps_to_settle: float
    wasted: float
    violations: float | None = None
    per_phase_over: list[int] | None = None
    decision_us: float | None = None

    def to_dict(self) -> dict:
        """The scores as `gpudvfs govern replay --json` prints them, per phase left out."""
        out = {"regret_mean": self.regret_mean, "regret_max": self.regret_max, "clock_changes": self.clock_changes,
               "steps_to_settle": self.steps_to_settle, "wasted": self.wasted}
        if self.violations is not None:
            out["violations"] = self.violations
        if self.decision_us is not None:
            out["decision_us"] = self.decision_us
        return out


@dataclass(frozen=True)
class ReplayResult:
    """The governor and the baselines on one sequence of phases (`replay`).

    ``intervals``: 95% bootstrap intervals over the applications (a phase goes with its
    application) of the governor's mean regret (``mean``) and of its paired difference from each
    baseline's (``minus_<baseline>``), all on the same phases and noise.
    """

    policy: str
    slowdown: float | None
    eta: float | None
    steps: int
    phase_steps: int
    phases: int
    pairs: int
    apps: int
    knob: str
    seed: int
    governor: StrategyScores
    baselines: dict[str, StrategyScores]
    intervals: dict

    def to_dict(self) -> dict:
        """The replay as `gpudvfs govern replay --json` prints it, the governor's scores at the top level."""
        return {"policy": self.policy, "slowdown": self.slowdown, "eta": self.eta, "steps": self.steps,
                "phase_steps": self.phase_steps, "phases": self.phases, "pairs": self.pairs, "apps": self.apps,
                "knob": self.knob, "seed": self.seed, **self.governor.to_dict(),
                "baselines": {k: v.to_dict() for k, v in self.baselines.items()}, "intervals": self.intervals}


def phases(n_apps: int, steps: int, phase_steps: int, rng: np.random.Generator) -> list[tuple[int, int]]:
    """(application, length) of each phase of a replay, the lengths adding up to ``steps``.

    Lengths uniform in [0.75, 1.25] x phase_steps, no application twice in a row.
    """
    out, done, prev = [], 0, -1
    while done < steps:
        a = int(rng.integers(n_apps - 1)) if n_apps > 1 else 0
        a = a + (a >= prev) if n_apps > 1 and prev >= 0 else a
        length = min(steps - done, int(rng.integers(int(0.75 * phase_steps), int(1.25 * phase_steps) + 1)))
        out.append((a, max(1, length)))
        done += max(1, length)
        prev = a
    return out


def _run(strategy: Strategy, table: ReplayTable, plan: list[tuple[int, int]],
         noise: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
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


def _score(table: ReplayTable, plan: list[tuple[int, int]], energy: np.ndarray, chosen: np.ndarray,
           phase_of: np.ndarray, best_k: np.ndarray, target: Target) -> StrategyScores:
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
        regrets.append(float(regret - 1.0))
        wasted += float((spent[rows] - best).sum())
        base += best * rows.sum()
        ks = chosen[rows]
        moves = np.flatnonzero(ks[1:] != ks[:-1])
        settle.append(int(moves[-1]) + 2 if len(moves) else 1)
    allowed = _allowed(table, target)
    violations = per_phase_over = None
    if allowed is not None:
        over = ~allowed[apps, chosen]
        violations = float(np.mean(over))
        # Per phase, for a share over the phases of some applications (`choose_defaults(cv=True)`).
        per_phase_over = np.bincount(phase_of, weights=over, minlength=len(plan)).astype(int).tolist()
    return StrategyScores(float(np.mean(regrets)), float(np.max(regrets)), regrets,
                          int((chosen[1:] != chosen[:-1]).sum()), float(np.mean(settle)), float(wasted / base),
                          violations, per_phase_over)


def _allowed(table: ReplayTable, target: Target) -> np.ndarray | None:
    """[A x K]: where a pair meets the policy's constraint on the measured grid.

    With 1e-9 of slack for rounding; None for a policy without one.
    """
    t = table.time_ms
    if target.policy == "deadline":
        return t <= (1 + target.slowdown) * t[:, [table.default_index]] * (1 + 1e-9)
    if target.policy == "power-cap":
        assert target.power_cap_w is not None  # ReplaySetup.draw refuses a cap policy without one
        return table.watts <= target.power_cap_w * (1 + 1e-9)
    return None


@dataclass(frozen=True)
class ReplaySetup:
    """What every strategy of a replay runs on: its phases, its noise and each application's best pair.

    ``plan``: (application, steps) of each phase, in order; ``draws``: [steps x 2] each step's
    relative noise of time and power; ``best_k``: [A] each application's pair on the measured grid
    its regret is measured against (the policy's choice; under a cap none meets, the lowest-power
    pair).
    """

    plan: list[tuple[int, int]]
    draws: np.ndarray
    best_k: np.ndarray

    @classmethod
    def draw(cls, table: ReplayTable, target: Target, steps: int, phase_steps: int, seed: int, noise: float,
             warn: bool = True, each_once: bool = False) -> ReplaySetup:
        """The phases, the noise and each application's best pair of a replay, the same for every strategy.

        ``noise``: the relative noise's standard deviation, in [0, 0.5). ``each_once``: every
        application once, for ``phase_steps`` steps, in an order drawn by ``seed``, as jobs of a
        trace run (``steps`` unused). ``warn`` where no pair of an application meets a power cap.
        `InputError` on an unknown policy, a power-cap policy without a cap, an ``eta`` outside
        [0, 1], or a count, seed or noise out of range.
        """
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
        return cls(plan, _noise(rng, noise, steps), _best_index(table, plan, target, warn))


def _noise(rng: np.random.Generator, noise: float, steps: int) -> np.ndarray:
    """Relative noise of each step's time and power [steps x 2].

    Gaussian, truncated to (-1, 1) so that an observation stays positive (a draw outside is
    drawn again; the draws inside are those of the plain Gaussian, so a noise that never
    reaches it leaves every figure as is).
    """
    draws = noise * rng.standard_normal((steps, 2))
    while (out := np.abs(draws) >= 1.0).any():
        draws[out] = noise * rng.standard_normal(int(out.sum()))
    return draws


def _best_index(table: ReplayTable, plan: list[tuple[int, int]], target: Target, warn: bool) -> np.ndarray:
    """Each application's best pair on the measured grid, the one its regret is measured against.

    The policy's choice (under a cap none meets, the lowest-power pair, with a warning).
    """
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
    """Each application's pair when one pair serves all, chosen without the application.

    The pair with the least mean regret on the measured grid over the *other* applications
    (under a deadline or cap, among the pairs that meet it for them).
    """
    t = table.time_ms
    objective = target.objective(table, t, table.watts) * (t if target.policy == "edp" else 1.0)
    regret = objective / objective[np.arange(len(t)), best_k][:, None] - 1.0
    return single_pair_indices(regret, _allowed(table, target))[1]


def governor_scores(table: ReplayTable, setup: ReplaySetup, target: Target, noise: float,
                    governor: dict[str, float], learn: bool = False) -> StrategyScores:
    """The governor's scores on a replay's phases, with its median decision time.

    The governor assumes the noise's standard deviation (at least 0.1%); ``governor`` holds its
    constants (``prior_sd``, ``explore``, ...); with ``learn`` a new phase starts from what the
    phases before it taught (`SeenPrior`).
    """
    gov = GovernorStrategy(target.governor(table, noise_sd=max(noise, 1e-3), **governor), table, learn)
    scores = _score(table, setup.plan, *_run(gov, table, setup.plan, setup.draws), setup.best_k, target)
    return replace(scores, decision_us=float(np.median(gov.decision_s) * 1e6))


def replay(table: ReplayTable, *, policy: str = "energy", slowdown: float = 0.1, power_cap_w: float | None = None,
           eta: float = 0.5, steps: int = 4000, phase_steps: int = 200, seed: int = 0, noise: float = 0.01,
           each_once: bool = False, learn: bool = False, **governor: float) -> ReplayResult:
    """Scores of the governor and the baselines on one sequence of phases (see the module).

    The policy's settings as `Governor` takes them (``slowdown``: at most this much slower than
    the default setting); the phases and noise as `ReplaySetup.draw` draws them (``seed`` also
    seeds random search); with ``learn`` a new phase's prediction is what the phases before it
    taught (`SeenPrior`), not the table's; ``governor``: constants other than the defaults
    (``hysteresis``, ``prior_sd``, ...).
    """
    target = Target(policy, slowdown, power_cap_w, eta)
    setup = ReplaySetup.draw(table, target, steps, phase_steps, seed, noise, each_once=each_once)
    k_all = len(table.configs)
    order = np.random.default_rng(seed + 1)
    others = [k for k in range(k_all) if k != table.default_index]
    baselines: dict[str, Strategy | None] = {
        "default_clocks": FixedPairs(np.full(len(table.names), table.default_index)),
        "model_only": FixedPairs(target.select(table, table.time_pred, table.watts_pred, table.configs,
                                               table.default_index)),
        "one_pair_for_all": (FixedPairs(_one_pair_for_all(table, setup.best_k, target)) if len(table.names) > 1
                             else None),
        "exhaustive": MeasureThenKeep(table, lambda a: [table.default_index] + others, target),
        "random_search": MeasureThenKeep(table, lambda a: [table.default_index] + [
            int(k) for k in order.choice(others, min(RANDOM_PAIRS, len(others)), replace=False)], target),
        "zeus": zeus_baseline(table, target),
    }
    gov = governor_scores(table, setup, target, noise, governor, learn)
    scored = {name: _score(table, setup.plan, *_run(b, table, setup.plan, setup.draws), setup.best_k, target)
              for name, b in baselines.items() if b is not None}
    # The same phases under every strategy: the governor's regret beside each baseline's,
    # resampled by application (a phase goes with its application).
    intervals = paired_intervals(gov.per_phase, {k: v.per_phase for k, v in scored.items()},
                                 [a for a, _ in setup.plan])
    return ReplayResult(policy, slowdown if policy == "deadline" else None, eta if policy == "cost" else None,
                        len(setup.draws), phase_steps, len(setup.plan), k_all, len(table.names), table.knob, seed,
                        gov, scored, intervals)
