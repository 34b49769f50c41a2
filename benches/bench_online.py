"""Online predictor speed, each against the numpy implementation of the same update
(rls_reference.py) in the same run:

1. one stream from Python, ``predict`` + ``update`` with n features: median time per pair
   (target: 1.5 us for n = 4);
2. a bank of 100,000 streams x 4 features, one ``update`` call: stream-updates per second
   (target: 20 million), after checking that Rust and numpy agree.

    python benches/bench_online.py [--streams S] [--features n] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

from gpudvfs import OnlinePredictor, OnlinePredictorBank

from _timing import best_of
from rls_reference import NumpyRlsBank, make_batches

SINGLE_TARGET_S = 1.5e-6
BANK_TARGET = 20e6


def median_pair_time(predict, update, xs, ys, block: int, blocks: int) -> float:
    """Median over blocks of the mean time of one predict + update pair."""
    times = []
    m = len(xs)
    for b in range(blocks + 1):  # the first block warms up
        t0 = time.perf_counter()
        for i in range(block):
            j = (b * block + i) % m
            predict(xs[j])
            update(xs[j], ys[j])
        times.append((time.perf_counter() - t0) / block)
    return statistics.median(times[1:])


def single(n: int) -> dict:
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (1024, n))
    y = x @ rng.normal(size=n)
    rust = OnlinePredictor(n, 0.95)
    out = {"features": n}
    for kind, xs in (("list", x.tolist()), ("ndarray", list(x))):
        out[f"rust_{kind}_s"] = median_pair_time(rust.predict, rust.update, xs, y.tolist(), 1000, 200)
    ref = NumpyRlsBank(1, n, 0.95)
    out["numpy_s"] = median_pair_time(ref.predict, ref.update, list(x[:, None, :]), list(y[:, None]), 100, 50)
    out["ratio"] = out["numpy_s"] / out["rust_list_s"]
    return out


def bank(streams: int, n: int) -> dict:
    x, y, mask = make_batches(12, streams, n, seed=1)
    rust = OnlinePredictorBank(streams, n, 0.95)
    ref = NumpyRlsBank(streams, n, 0.95)
    for k in range(8):  # agreement on masked batches with zero and collinear rows
        rust.update(x[k], y[k], mask[k])
        ref.update(x[k], y[k], mask[k])
    st = rust.state()
    diff = max(float(np.max(np.abs(st["coef"] - ref.coef) / (1 + np.abs(ref.coef)))),
               float(np.max(np.abs(st["covariance"] - ref.cov) / (1 + np.abs(ref.cov)))))
    calls = iter(range(10**9))

    def rust_call():
        k = 8 + next(calls) % 4
        rust.update(x[k], y[k])

    def numpy_call():
        k = 8 + next(calls) % 4
        ref.update(x[k], y[k])

    t_rust = best_of(rust_call, 20)
    t_np = best_of(numpy_call, 5)
    return {"streams": streams, "features": n, "threads": "one per core", "max_rel_diff": diff,
            "rust_s": t_rust, "numpy_s": t_np, "rust_updates_per_s": streams / t_rust,
            "numpy_updates_per_s": streams / t_np, "ratio": t_np / t_rust}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--streams", type=int, default=100_000)
    ap.add_argument("--features", type=int, default=4)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    s = single(a.features)
    print(f"one stream, n={a.features}: predict + update median {s['rust_list_s'] * 1e9:.0f} ns (list), "
          f"{s['rust_ndarray_s'] * 1e9:.0f} ns (ndarray); numpy {s['numpy_s'] * 1e6:.1f} us; "
          f"x{s['ratio']:.0f}; target {SINGLE_TARGET_S * 1e6:g} us "
          f"{'met' if max(s['rust_list_s'], s['rust_ndarray_s']) <= SINGLE_TARGET_S else 'NOT met'}")
    b = bank(a.streams, a.features)
    print(f"bank {a.streams} x {a.features}: Rust {b['rust_updates_per_s'] / 1e6:.1f} M stream-updates/s "
          f"({b['rust_s'] * 1e3:.2f} ms per call); numpy {b['numpy_updates_per_s'] / 1e6:.2f} M/s; "
          f"x{b['ratio']:.1f}; target {BANK_TARGET / 1e6:g} M/s "
          f"{'met' if b['rust_updates_per_s'] >= BANK_TARGET else 'NOT met'}; "
          f"max relative difference to numpy {b['max_rel_diff']:.1e}")
    if a.json:
        print(json.dumps({"single": s, "bank": b}))


if __name__ == "__main__":
    main()
