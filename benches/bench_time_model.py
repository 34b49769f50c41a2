"""Batched time-model prediction, 10,000 kernel profiles x 1,000 configurations: the Rust
core (gpudvfs.TimeModel) against the vectorized numpy specification
(benches/time_model_reference.py) of the same equations, same run, results compared.

    python benches/bench_time_model.py [--kernels N] [--configs K] [--mode default|paper]
"""

from __future__ import annotations

import argparse

import numpy as np

from gpudvfs import KernelProfile, TimeDevice, TimeModel
from gpudvfs.time import INPUT_KEYS

from _timing import best_of, report
from time_model_reference import predict_reference


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", type=int, default=10_000)
    ap.add_argument("--configs", type=int, default=1_000)
    ap.add_argument("--mode", default="default")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    n = a.kernels
    cols = {
        "warps_total": rng.uniform(1e3, 1e6, n), "active_warps": rng.uniform(4, 64, n),
        "warps_per_block": rng.choice([2.0, 4.0, 8.0, 16.0], n), "gld_trans": rng.uniform(0, 100, n),
        "trans_per_req": np.full(n, 4.0), "l2_hit_rate": rng.uniform(0, 1, n),
        "comp_inst": rng.uniform(10, 2000, n), "shared_trans": rng.uniform(0, 50, n) * (rng.uniform(size=n) < 0.5),
        "dp_inst": rng.uniform(0, 10, n) * (rng.uniform(size=n) < 0.3),
        "sf_inst": rng.uniform(0, 10, n) * (rng.uniform(size=n) < 0.3),
        "extra_chain": rng.uniform(0, 5000, n) * (rng.uniform(size=n) < 0.3),
        "imad_inst": rng.uniform(0, 10, n) * (rng.uniform(size=n) < 0.3),
    }
    profiles = [KernelProfile("k", *(float(cols[k][i]) for k in INPUT_KEYS)) for i in range(n)]
    fc, fm = rng.uniform(400, 1200, a.configs), rng.uniform(400, 1200, a.configs)
    dev = TimeDevice.gtx980()
    model = TimeModel(dev, a.mode)
    t_rust = best_of(lambda: model.predict(profiles, fc, fm), a.repeat)
    t_np = best_of(lambda: predict_reference(cols, dev.params(), fc, fm, a.mode), a.repeat)
    got, want = model.predict(profiles, fc, fm), predict_reference(cols, dev.params(), fc, fm, a.mode)[0]
    report(f"time model {n}x{a.configs} ({a.mode}, Rust)", t_rust, "numpy", t_np)
    print(f"max relative difference: {float(np.max(np.abs(got - want) / want)):.2e}")


if __name__ == "__main__":
    main()
