"""Cluster power budget, 10,000 GPUs x 1,000 clock pairs: the Rust solver (Lagrangian greedy,
repair, exact core, exchanges) against the Lagrangian relaxation by bisection on the
multiplier in numpy (each GPU's argmin of time + multiplier x watts), same run and instance.

    python benches/bench_budget.py [--gpus N] [--pairs K] [--json]
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from gpudvfs.fleet.budget import random_instance, solve_budget

from _timing import best_of, report


def lagrangian_numpy(watts: np.ndarray, t: np.ndarray, budget: float, iterations: int = 60) -> float:
    """Total time of the rounded Lagrangian choice: the least multiplier whose argmins fit."""
    rows = np.arange(len(watts))
    lo, hi = 0.0, float(np.max(t)) / 1e-3
    for _ in range(iterations):
        mid = 0.5 * (lo + hi)
        pick = np.argmin(t + mid * watts, axis=1)
        if watts[rows, pick].sum() <= budget:
            hi = mid
        else:
            lo = mid
    return float(t[rows, np.argmin(t + hi * watts, axis=1)].sum())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpus", type=int, default=10_000)
    ap.add_argument("--pairs", type=int, default=1_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    watts, t, budget = random_instance(np.random.default_rng(0), a.gpus, a.pairs)
    ours = solve_budget(watts, t, budget)
    theirs = lagrangian_numpy(watts, t, budget)
    t_rust = best_of(lambda: solve_budget(watts, t, budget), a.repeat)
    t_np = best_of(lambda: lagrangian_numpy(watts, t, budget), a.repeat)
    r = report(f"budget {a.gpus}x{a.pairs} (Rust)", t_rust, "numpy Lagrangian bisection", t_np)
    r |= {"rust_total_time": ours.value, "numpy_total_time": theirs, "rust_gap_bound": ours.gap_bound}
    print(f"total time: Rust {ours.value:.6g} (within {100 * ours.gap_bound:.2g}% of the LP bound), "
          f"numpy Lagrangian {theirs:.6g}")
    if a.json:
        print(json.dumps(r))


if __name__ == "__main__":
    main()
