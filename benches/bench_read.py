"""Reading a ~100 MB tidy sweep file (what `gpudvfs sweep` writes): gpudvfs.read against
its locating path alone (chunk by chunk, what it read every file with before the one-pass
fast path), pandas.read_csv (C engine) and pyarrow.csv.read_csv, same run and file; the peak memory of
gpudvfs.read (growth of the resident set, in a fresh process) relative to the arrays it
returns; and the time to refuse a file of the same size whose line 6 is bad.

    pip install pandas pyarrow   # the bench extra; a baseline that is missing is skipped
    python benches/bench_read.py [--mb 100] [--repeat 5] [--json]
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from itertools import islice
from pathlib import Path

import numpy as np

import gpudvfs
from gpudvfs.data import grid_csv
from gpudvfs.data.source import csv_line
from gpudvfs.hardware.device import Measurement
from gpudvfs.hardware.sweep import COLUMNS, _row

from _timing import best_of, report

CORE_MHZ = range(600, 2000, 15)
MEM_MHZ = (877, 5001)


def write_sweep(path: Path, mb: float, seed: int = 0) -> int:
    """A tidy sweep file of at least ``mb`` MB: workloads over a clock grid, random measurements."""
    rng = np.random.default_rng(seed)
    rows = 0
    with path.open("w") as f:
        f.write(csv_line(COLUMNS) + "\n")
        w = 0
        while f.tell() < mb * 1e6:
            lines = []
            for core in CORE_MHZ:
                for mem in MEM_MHZ:
                    t, p = rng.uniform(0.1, 100), rng.uniform(50, 300)
                    throttled = w % 7 == 0
                    lines.append(_row(Measurement(
                        workload=f"kernel_{w}", core_mhz=core, mem_mhz=mem, time_ms=t, watts=p, joules=p * t / 1e3,
                        repetitions=int(rng.integers(10, 1000)), duration_s=float(rng.uniform(1, 2)),
                        power_source="energy-counter" if w % 2 else "sampled", throttled=throttled,
                        throttle_reasons=("sw_thermal",) if throttled else (),
                        temperature_c=None if w % 5 == 0 else float(rng.integers(30, 90)),
                        result={"bytes": float(rng.integers(1, 10**9))})))
            f.write("\n".join(lines) + "\n")
            rows += len(lines)
            w += 1
    return rows


def with_bad_line_6(good: Path, bad: Path) -> None:
    """A copy of ``good`` whose line 6 (the fifth row) has a negative time."""
    with good.open() as src, bad.open("w") as out:
        out.writelines(islice(src, 5))
        fields = next(src).split(",")
        fields[COLUMNS.index("time_ms")] = "-1"
        out.write(",".join(fields))
        shutil.copyfileobj(src, out)


# Run in a fresh process, so that its peak resident memory is this read's alone. VmHWM, not
# getrusage's ru_maxrss: Linux carries that over from the parent across exec.
PEAK = """
import re, sys, gpudvfs
def hwm():
    return int(re.search(r"VmHWM:\\s*(\\d+) kB", open("/proc/self/status").read()).group(1)) * 1024
before = hwm()
grid = gpudvfs.read(sys.argv[1], "tidy")
print(hwm() - before, sum(a.nbytes for a in grid.columns.values()))
"""


def peak_memory(path: Path) -> tuple[int, int]:
    """(growth of the peak resident memory while reading, bytes of the arrays returned); Linux."""
    out = subprocess.run([sys.executable, "-c", PEAK, str(path)], capture_output=True, text=True, check=True)
    peak, arrays = map(int, out.stdout.split())
    return peak, arrays


def locating_only(path: Path) -> Callable[[], object]:
    """gpudvfs.read without its one-pass fast path: every file read as a failing one is."""
    def read():
        saved, grid_csv.read_valid = grid_csv.read_valid, lambda *_: None
        try:
            return gpudvfs.read(path, "tidy")
        finally:
            grid_csv.read_valid = saved
    return read


def baselines(path: Path) -> dict:
    """The readers to compare against, where installed."""
    out = {"gpudvfs.read, locating path alone (before)": locating_only(path)}
    try:
        pd = importlib.import_module("pandas")
        out["pandas.read_csv (C engine)"] = lambda: pd.read_csv(path, engine="c")
    except ImportError:
        print("pandas is not installed (pip install pandas): skipping that baseline")
    try:
        pa_csv = importlib.import_module("pyarrow.csv")
        out["pyarrow.csv.read_csv"] = lambda: pa_csv.read_csv(path)
    except ImportError:
        print("pyarrow is not installed (pip install pyarrow): skipping that baseline")
    return out


def taking_turns(readers: dict[str, Callable[[], object]], repeat: int) -> dict[str, tuple[float, float]]:
    """Each reader's least wall and CPU seconds (all threads) over ``repeat`` calls, one warm-up each.

    The readers take turns, so that a change in the load of a shared machine falls on all of them.
    """
    for fn in readers.values():
        fn()
    best = dict.fromkeys(readers, (math.inf, math.inf))
    for _ in range(repeat):
        for name, fn in readers.items():
            wall, cpu = time.perf_counter(), time.process_time()
            fn()
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            best[name] = (min(best[name][0], wall), min(best[name][1], cpu))
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=100.0, help="size of the generated file")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path, bad = Path(tmp) / "sweep.csv", Path(tmp) / "bad.csv"
        rows = write_sweep(path, a.mb)
        with_bad_line_6(path, bad)
        mb = path.stat().st_size / 1e6
        print(f"{path.name}: {mb:.1f} MB, {rows} rows")

        ours = "gpudvfs.read"
        times = taking_turns({ours: lambda: gpudvfs.read(path, "tidy"), **baselines(path)}, a.repeat)
        (t_ours, cpu_ours) = times.pop(ours)
        print(f"{ours}: {mb / t_ours:.1f} MB/s, {cpu_ours:.2f} CPU s")
        results = []
        for name, (t, cpu) in times.items():
            print(f"{name}: {mb / t:.1f} MB/s, {cpu:.2f} CPU s (CPU time x{cpu / cpu_ours:.2f} ours)")
            results.append(report("gpudvfs.read tidy", t_ours, name, t)
                           | {"baseline_mb_per_s": mb / t, "cpu_seconds": cpu_ours, "baseline_cpu_seconds": cpu})

        peak, arrays = peak_memory(path)
        print(f"peak memory while reading: {peak / 1e6:.0f} MB for {arrays / 1e6:.0f} MB of arrays "
              f"(x{peak / arrays:.2f})")

        def refuse() -> None:
            try:
                gpudvfs.read(bad, "tidy")
            except gpudvfs.DataFileError as e:
                assert e.line == 6, e
            else:
                raise AssertionError("the bad file was read")

        t0 = time.perf_counter()
        refuse()
        t_first = time.perf_counter() - t0
        t_refuse = best_of(refuse, a.repeat)
        print(f"refusing the file with a bad line 6: {t_refuse * 1e3:.1f} ms (first call {t_first * 1e3:.1f} ms)")
    if a.json:
        print(json.dumps({"mb": mb, "rows": rows, "seconds": t_ours, "mb_per_s": mb / t_ours, "baselines": results,
                          "peak_bytes": peak, "array_bytes": arrays, "peak_ratio": peak / arrays,
                          "refuse_seconds": t_refuse}))


if __name__ == "__main__":
    main()
