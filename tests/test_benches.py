"""Every benchmark in benches/ still runs: each once at a tiny size (the figures are not checked, only that
the script runs through and its JSON, where it prints one, holds finite numbers).

A benchmark is run by hand for its figures; without this, a change to an API it calls breaks it unseen.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCHES = Path(__file__).resolve().parents[1] / "benches"

#: The arguments that make each benchmark tiny; None: only ``--help`` (its baseline alone takes
#: tens of seconds). A new benchmark needs an entry (`test_every_benchmark_has_tiny_arguments`).
TINY: dict[str, list[str] | None] = {
    "bench_budget.py": ["--gpus", "20", "--pairs", "10", "--repeat", "1", "--json"],
    "bench_callbacks.py": ["--steps", "5", "--repeat", "1", "--json"],
    "bench_govern.py": ["--repeat", "5", "--json"],
    "bench_govern_loop.py": ["--steps", "20", "--repeat", "1", "--json"],
    "bench_online.py": ["--streams", "50", "--json"],
    "bench_power_fit.py": None,
    "bench_power_grid.py": ["--workloads", "20", "--configs", "10", "--repeat", "1", "--json"],
    "bench_read.py": ["--mb", "0.05", "--repeat", "1", "--json"],
    "bench_small_calls.py": ["--rows", "1,10", "--configs", "5", "--budget-s", "0.001", "--json"],
    "bench_time_model.py": ["--kernels", "20", "--configs", "10", "--repeat", "1"],
    "bench_windows.py": ["--repeat", "5", "--json"],
}


def test_every_benchmark_has_tiny_arguments() -> None:
    assert sorted(p.name for p in BENCHES.glob("bench_*.py")) == sorted(TINY)


def _numbers(value: object) -> list[float]:
    if isinstance(value, dict):
        return [x for v in value.values() for x in _numbers(v)]
    if isinstance(value, list):
        return [x for v in value for x in _numbers(v)]
    return [float(value)] if isinstance(value, (int, float)) and not isinstance(value, bool) else []


@pytest.mark.parametrize("name", sorted(TINY))
def test_the_benchmark_runs(name: str) -> None:
    args = TINY[name]
    env = os.environ | {"PYTHONPATH": os.pathsep.join(p for p in (os.environ.get("PYTHONPATH"), str(BENCHES)) if p)}
    r = subprocess.run([sys.executable, str(BENCHES / name), *(args or ["--help"])], capture_output=True,
                       text=True, env=env, cwd=BENCHES, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    if args and "--json" in args:
        lines = [line for line in r.stdout.splitlines() if line.startswith(("{", "["))]
        assert lines, r.stdout[-2000:]
        numbers = _numbers(json.loads(lines[-1]))
        assert numbers and all(math.isfinite(x) for x in numbers)
