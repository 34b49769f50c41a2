"""What a clock-left-to-the-driver run can score: the latency suite against the catalog's
time device, and the time model's uncalibrated time of every profiled kernel at the clocks it
ran at (one pair: nothing to calibrate on, and no frequency law to fit).

    python3 validation/absolute_time.py validation/nvidia-h100-80gb-hbm3 [catalog key]
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from gpudvfs.catalog import lookup
from gpudvfs.io import read
from gpudvfs.measure.sweep import load_record, results
from gpudvfs.time import KernelProfile, TimeModel


def latencies(folder: Path, device) -> dict[str, tuple[float, float]]:
    """(measured, catalog) of each latency-suite figure, in the time device's units."""
    g = read(folder / "time-suite.csv", "tidy")
    res = dict(zip(g.app.tolist(), results(folder / "time-suite.csv")))
    row = {n: i for i, n in enumerate(g.app.tolist())}
    fc, fm = g.core_mhz[row["time_dram_latency"]], g.mem_mhz[row["time_dram_latency"]]
    bw = row["time_dram_bandwidth"]
    delay = device.dram_delay_of(g.time_ms[bw], res["time_dram_bandwidth"]["bytes"] / 32, g.mem_mhz[bw])
    return {"dram latency (core cycles)": (res["time_dram_latency"]["cycles_per_access"],
                                           device.dm_lat_a + device.dm_lat_b * fc / fm),
            "L2 latency (core cycles)": (res["time_l2_latency"]["cycles_per_access"], device.l2_lat),
            "shared latency (core cycles)": (res["time_shared_latency"]["cycles_per_access"], device.sh_lat),
            "DRAM delay (memory cycles per SM transaction)": (
                delay, device.dm_del_a / g.mem_mhz[bw] + device.dm_del_b)}


def time_errors(folder: Path, device) -> dict[str, float]:
    """Per profiled kernel: the model's time at the measured clocks over the measured time,
    minus 1, in %; each profile's reference is its own SM clock as ncu read it."""
    out = {}
    for f in ("power-suite.csv", "apps.csv"):
        g = read(folder / f, "tidy")
        names = g.app.tolist()
        for name, c in load_record(folder / f)["profiles"].items():
            i = names.index(name)
            prof = KernelProfile.from_counters(name, c, device=device, reference_mhz=(c["sm_clock_mhz"], g.mem_mhz[i]))
            t = TimeModel(device).predict(prof, np.array([g.core_mhz[i]]), np.array([g.mem_mhz[i]]))[0]
            out[name] = float(100 * (t / g.time_ms[i] - 1))
    return out


def main(argv: list[str]) -> None:
    folder = Path(argv[0])
    device = lookup(argv[1] if len(argv) > 1 else "h100-sxm").time_device()
    for k, (measured, catalog) in latencies(folder, device).items():
        print(f"{k}: measured {measured:.2f}, catalog {catalog:.2f} ({100 * (catalog / measured - 1):+.1f}%)")
    errors = time_errors(folder, device)
    for name, e in errors.items():
        print(f"{name:14s} {e:+7.1f}%")
    e = np.abs(list(errors.values()))
    print(f"uncalibrated time: MAPE {e.mean():.1f}%, median {np.median(e):.1f}%, over {len(e)} kernels")


if __name__ == "__main__":
    main(sys.argv[1:])
