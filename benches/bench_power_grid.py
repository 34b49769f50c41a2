"""Batched power-equation evaluation, 10,000 workloads x 1,000 configurations:
the Rust kernel (gpudvfs.power_grid) against the plain numpy evaluation, same run.

    python benches/bench_power_grid.py [--workloads N] [--configs K] [--json]
"""

from __future__ import annotations

import argparse
import json

import numpy as np

import gpudvfs
from gpudvfs.power.equations import power_grid_numpy

from _timing import best_of, report


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workloads", type=int, default=10_000)
    ap.add_argument("--configs", type=int, default=1_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    args = (rng.uniform(0, 1, (a.workloads, 8)), [7, 1], [45.0, 8.0], [20.0, 6.0],
            rng.uniform(0, 80, 8), rng.uniform(0.2, 1.2, (a.configs, 2)),
            rng.uniform(0.8, 1.1, (a.configs, 2)))
    got, want = gpudvfs.power_grid(*args), power_grid_numpy(*args)
    err = float(np.max(np.abs(got - want) / np.abs(want)))
    t_rust = best_of(lambda: gpudvfs.power_grid(*args), a.repeat)
    t_np = best_of(lambda: power_grid_numpy(*args), a.repeat)
    r = report(f"power_grid {a.workloads}x{a.configs} (Rust)", t_rust, "numpy", t_np)
    r["max_rel_diff"] = err
    print(f"max relative difference: {err:.2e}")
    if a.json:
        print(json.dumps(r))


if __name__ == "__main__":
    main()
