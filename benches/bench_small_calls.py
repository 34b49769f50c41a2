"""Per-call latency of the batched time-model and power-grid calls at 1, 10, 100 and 10,000
rows (kernels or workloads) x 100 clock pairs: the Rust core against the numpy reference of
the same equations, same run. Small batches are the governor's and a scheduler's per-job
calls, where a thread spawned per call would cost more than the work.

    python benches/bench_small_calls.py [--rows 1,10,100,10000] [--configs 100] [--budget-s 0.2] [--json]
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable

import numpy as np

from gpudvfs import TimeDevice, _core
from gpudvfs.power.equations import power_grid_numpy
from gpudvfs.time import INPUT_KEYS

from _timing import report
from time_model_reference import predict_reference


def per_call(fn: Callable[[], object], budget_s: float, repeat: int = 5) -> float:
    """Seconds per call: the best of ``repeat`` loops, each of as many calls as fill ``budget_s``."""
    fn()
    t0 = time.perf_counter()
    fn()
    calls = max(1, int(budget_s / max(time.perf_counter() - t0, 1e-7)))
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - t0) / calls)
    return best


def kernel_inputs(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {
        "warps_total": rng.uniform(1e3, 1e6, n), "active_warps": rng.uniform(4, 64, n),
        "warps_per_block": rng.choice([2.0, 4.0, 8.0, 16.0], n), "gld_trans": rng.uniform(0, 100, n),
        "trans_per_req": np.full(n, 4.0), "l2_hit_rate": rng.uniform(0, 1, n), "comp_inst": rng.uniform(10, 2000, n),
        "shared_trans": rng.uniform(0, 50, n), "dp_inst": rng.uniform(0, 10, n), "sf_inst": rng.uniform(0, 10, n),
        "extra_chain": rng.uniform(0, 5000, n), "imad_inst": rng.uniform(0, 10, n),
    }


def measure(n: int, configs: int, rng: np.random.Generator, budget_s: float) -> list[dict]:
    """Both calls at ``n`` rows, each checked against its reference first."""
    params = TimeDevice.gtx980().params()
    fc, fm = rng.uniform(400, 1200, configs), rng.uniform(400, 1200, configs)
    cols = kernel_inputs(n, rng)
    rows = np.ascontiguousarray(np.stack([cols[k] for k in INPUT_KEYS], axis=1))
    got = _core.time_predict(rows, fc, fm, params, "default")[0]
    assert np.allclose(got, predict_reference(cols, params, fc, fm)[0], rtol=1e-9), "time model != its reference"
    out = [report(f"time_predict {n}x{configs} per call",
                  per_call(lambda: _core.time_predict(rows, fc, fm, params, "default"), budget_s),
                  "numpy", per_call(lambda: predict_reference(cols, params, fc, fm), budget_s))]
    power = (rng.uniform(0, 1, (n, 8)), [7, 1], np.array([45.0, 8.0]), np.array([20.0, 6.0]),
             rng.uniform(0, 80, 8), rng.uniform(0.2, 1.2, (configs, 2)), rng.uniform(0.8, 1.1, (configs, 2)))
    assert np.allclose(_core.power_grid(*power), power_grid_numpy(*power), rtol=1e-9), "power_grid != its reference"
    out.append(report(f"power_grid {n}x{configs} per call", per_call(lambda: _core.power_grid(*power), budget_s),
                      "numpy", per_call(lambda: power_grid_numpy(*power), budget_s)))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", default="1,10,100,10000")
    ap.add_argument("--configs", type=int, default=100)
    ap.add_argument("--budget-s", type=float, default=0.2, help="seconds of calls per timed loop")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    out = [r for n in a.rows.split(",") for r in measure(int(n), a.configs, rng, a.budget_s)]
    if a.json:
        print(json.dumps(out))


if __name__ == "__main__":
    main()
