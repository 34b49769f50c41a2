"""Timing helper for the benchmarks: best of several runs, since the machine is shared."""

from __future__ import annotations

import time
from collections.abc import Callable


def best_of(fn: Callable[[], object], repeat: int = 5) -> float:
    """Smallest wall time of ``repeat`` calls, in seconds (one warm-up call first)."""
    fn()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _seconds(s: float) -> str:
    return f"{s * 1e3:.1f} ms" if s >= 1e-3 else f"{s * 1e6:.1f} us"


def report(name: str, ours: float, baseline_name: str, baseline: float) -> dict:
    ratio = baseline / ours
    print(f"{name}: {_seconds(ours)}; {baseline_name}: {_seconds(baseline)}; speed-up x{ratio:.2f}")
    return {"name": name, "seconds": ours, "baseline": baseline_name,
            "baseline_seconds": baseline, "speedup": ratio}
