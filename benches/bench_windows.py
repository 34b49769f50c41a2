"""One `EnergyMonitor` window (begin_window + end_window) against a time.perf_counter pair, same
run: with no GPU (the monitor's own cost), with a RAPL tree of two zones (a package and its
DRAM, in a temporary folder standing in for /sys/class/powercap) and with the simulated GPU
(whose every reading computes its power). On NVML each end also waits for
the counter's next update (at most one update period, 99.4 ms on an H200) unless ``wait=False``;
that wait is not timed here.

    python benches/bench_windows.py [--repeat N] [--json]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from gpudvfs.hardware.windows import EnergyMonitor

from _timing import best_of


def _powercap(root: Path) -> None:
    for zone, name in (("intel-rapl:0", "package-0"), ("intel-rapl:0:0", "dram")):
        (root / zone).mkdir()
        (root / zone / "name").write_text(name)
        (root / zone / "energy_uj").write_text("1000")
        (root / zone / "max_energy_range_uj").write_text("262143328850")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=2000)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    n = a.repeat

    def pairs(mon: EnergyMonitor) -> None:
        for _ in range(n):
            mon.begin_window("step")
            mon.end_window("step")

    def clock_pairs() -> None:
        for _ in range(n):
            t0 = time.perf_counter()
            _ = time.perf_counter() - t0

    baseline = best_of(clock_pairs, 5) / n
    out = {"perf_counter_pair_us": baseline * 1e6}
    with tempfile.TemporaryDirectory() as tmp:
        _powercap(Path(tmp))
        for label, gpus, cpu in (("no GPU", [], False), ("RAPL (2 zones)", [], True), ("simulated GPU", [0], False)):
            with EnergyMonitor(gpus, device="sim", cpu=cpu, rapl_root=tmp, sync=None) as mon:
                ours = best_of(lambda m=mon: pairs(m), 5) / n
            print(f"{label}: one window {ours * 1e6:.1f} us; a perf_counter pair {baseline * 1e6:.2f} us; "
                  f"x{ours / baseline:.0f}")
            out |= {f"{label} us": ours * 1e6, f"{label} ratio": ours / baseline}
    if a.json:
        print(json.dumps(out))


if __name__ == "__main__":
    main()
