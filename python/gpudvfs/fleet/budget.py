"""One clock pair per GPU: the GPUs' predicted power within a cluster budget, the total time (or energy) least.

A multiple-choice knapsack solved in the Rust core (`rust/src/budget/`): the Lagrangian greedy
with its LP bound, repair, an exact core and exchanges; `exact=True` runs the exact Pareto
program (small instances only).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from gpudvfs import _core
from gpudvfs.errors import InputError


@dataclass(frozen=True)
class BudgetChoice:
    """A budget's solution: ``choice[i]`` the option GPU i takes, its total watts and value.

    ``bound`` is a lower bound on the best total value, so ``value / bound - 1`` bounds how far from
    optimal the choice can be.
    """

    choice: np.ndarray
    watts: float
    value: float
    bound: float

    @property
    def gap_bound(self) -> float:
        """How far from optimal the choice can be: ``value / bound - 1`` (0 without a bound)."""
        return self.value / self.bound - 1.0 if self.bound > 0 else 0.0


def solve_budget(watts: ArrayLike, value: ArrayLike, budget_w: float, *, exact: bool = False) -> BudgetChoice:
    """One option per GPU with the least total value whose total power is within ``budget_w`` (W).

    ``watts`` and ``value`` (time or energy) are [GPUs x options]; a NaN value forbids a pair (e.g.
    over a slowdown bound). ``exact`` runs the exact Pareto program (small instances only).
    `InputError` where the shapes differ, or the core refuses the instance (no choice within the
    budget, an instance too large to solve exactly).
    """
    w = np.ascontiguousarray(watts, dtype=np.float64)
    v = np.ascontiguousarray(value, dtype=np.float64)
    if w.ndim != 2 or w.shape != v.shape:
        raise InputError(f"watts {w.shape} and value {v.shape} must be one [GPUs x options] shape")
    try:
        choice, total_w, total_v, bound = _core.budget_solve(w, v, float(budget_w), exact)
    except ValueError as e:
        raise InputError(str(e)) from None
    return BudgetChoice(np.asarray(choice, dtype=np.int64), total_w, total_v, bound)


def random_instance(rng: np.random.Generator, gpus: int, pairs: int,
                    tightness: float = 0.5) -> tuple[np.ndarray, np.ndarray, float]:
    """[gpus x pairs] watts and time shaped like clock pairs (power rises, time falls with the clock), and a budget.

    Per GPU a static power, a dynamic power and a core-bound share of its time; the budget lies
    ``tightness`` of the way from the least total power (0) to the most (1).
    """
    f = np.sort(rng.uniform(0.3, 1.0, (gpus, pairs)), axis=1)
    watts = rng.uniform(50, 150, (gpus, 1)) + rng.uniform(100, 300, (gpus, 1)) * f ** rng.uniform(2, 3, (gpus, 1))
    share = rng.uniform(0, 1, (gpus, 1))
    t = rng.uniform(1, 10, (gpus, 1)) * (1 - share + share / f) * rng.uniform(0.97, 1.03, (gpus, pairs))
    lo, hi = watts.min(axis=1).sum(), watts.max(axis=1).sum()
    # A hair above the least total, which another summation order could otherwise round past.
    return watts, t, float(lo + tightness * (hi - lo) + 1e-9 * hi)


def bench(gpus: int = 10_000, pairs: int = 1_000, small: int = 50, seed: int = 0, repeats: int = 3) -> dict:
    """Time the solver on a large random budget and measure its gap to the exact optimum on small ones.

    ``small`` random instances of 12 to 36 GPUs x 6 to 16 pairs (more GPUs than the exact core
    holds) are scored against the exact solver; the large one runs ``repeats`` times. Returns ``ms``
    (the best run), ``bound_gap`` (its LP gap certificate), ``within_budget``, ``gap_max`` and
    ``gap_mean`` over the small instances, and the sizes.
    """
    rng = np.random.default_rng(seed)
    watts, t, budget = random_instance(rng, gpus, pairs)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        big = solve_budget(watts, t, budget)
        times.append(time.perf_counter() - start)
    gaps = []
    for _ in range(small):
        size = int(rng.integers(12, 37)), int(rng.integers(6, 17))
        w, v, b = random_instance(rng, *size, float(rng.uniform(0.05, 0.95)))
        gaps.append(solve_budget(w, v, b).value / solve_budget(w, v, b, exact=True).value - 1.0)
    return {"gpus": gpus, "pairs": pairs, "ms": 1e3 * min(times), "bound_gap": big.gap_bound,
            "within_budget": bool(big.watts <= budget), "small_instances": small, "gap_max": max(gaps),
            "gap_mean": float(np.mean(gaps))}
