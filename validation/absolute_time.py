"""What a clock-left-to-the-driver run can score: the latency suite against the catalog's
time device, and the time model's uncalibrated time of every profiled kernel at the clocks it
ran at (one pair: nothing to calibrate on, and no frequency law to fit).

The device's constants come from the catalog or from the run's own latency suite (latencies,
sustained DRAM bandwidth, the host's launch overhead); which, is chosen leaving each kernel out
(the setting with the least mean error over the other kernels scores the one left out).

    python3 validation/absolute_time.py validation/nvidia-h100-80gb-hbm3 [catalog key]

The H100's profiles predate the XU and FMA-heavy pipes' counts the SFU and IMAD rates need;
the script also prints the figure with the counts of the pure SFU and integer sweeps filled in
from their disassembly (`design_counts`): what re-collected profiles would give, not a measurement.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

from gpudvfs.catalog import lookup
from gpudvfs.data import read
from gpudvfs.hardware.kernels import load_manifest
from gpudvfs.hardware.sweep import load_record, results, to_time_device
from gpudvfs.time import KernelProfile, TimeModel
from gpudvfs.time.device import TimeDevice


def latencies(folder: Path, device) -> dict[str, tuple[float, float]]:
    """(measured, catalog) of each latency-suite figure, in the time device's units."""
    g = read(folder / "time-suite.csv", "tidy")
    res = dict(zip(g.app.tolist(), results(folder / "time-suite.csv")))
    row = {n: i for i, n in enumerate(g.app.tolist())}
    fc, fm = g.core_mhz[row["time_dram_latency"]], g.mem_mhz[row["time_dram_latency"]]
    bw = row["time_dram_bandwidth"]
    delay = device.dram_delay_of(g.time_ms[bw], res["time_dram_bandwidth"]["bytes"] / 32, g.mem_mhz[bw])
    return {"dram latency (core cycles)": (res["time_dram_latency"]["cycles_per_access"],
                                           device.dm_lat_a * fc / fm + device.dm_lat_b),  # Eq. 4
            "L2 latency (core cycles)": (res["time_l2_latency"]["cycles_per_access"], device.l2_lat),
            "shared latency (core cycles)": (res["time_shared_latency"]["cycles_per_access"], device.sh_lat),
            "DRAM delay (memory cycles per SM transaction)": (
                delay, device.dm_del_a / g.mem_mhz[bw] + device.dm_del_b)}


def design_counts(name: str, counters: dict[str, float]) -> dict[str, float]:
    """The XU and FMA-heavy-only counts of a pure SFU or integer sweep kernel: the MUFU or IMAD
    instructions its disassembly must hold per element (the manifest's minimum counts) times
    the warps' loads, one an element (half its global requests: a load and a store); {} for any
    other kernel."""
    sweep = name.split("_")[0]
    if sweep not in ("sf", "int"):
        return {}
    bench = load_manifest()[name]
    loads = counters["global_requests"] / 2
    if sweep == "sf":
        return {"flop_count_sp_special": 32 * bench.sass["min_counts"]["MUFU"] * loads}
    return {"inst_fma_heavy_only": bench.sass["min_counts"]["IMAD"] * loads}


def time_errors(folder: Path, device, launch_ms: float = 0.0, design: bool = False) -> dict[str, float]:
    """Per profiled kernel: the model's time at the measured clocks, plus the host's
    ``launch_ms`` of each timed launch, over the measured time, minus 1, in %; each
    profile's reference is its own SM clock as ncu read it. ``design`` adds `design_counts`."""
    out = {}
    for f in ("power-suite.csv", "apps.csv"):
        g = read(folder / f, "tidy")
        names = g.app.tolist()
        for name, c in load_record(folder / f)["profiles"].items():
            if design:
                c = {**c, **design_counts(name, c)}
            i = names.index(name)
            prof = KernelProfile.from_counters(name, c, device=device, reference_mhz=(c["sm_clock_mhz"], g.mem_mhz[i]))
            t = TimeModel(device).predict(prof, np.array([g.core_mhz[i]]), np.array([g.mem_mhz[i]]))[0]
            out[name] = float(100 * (t + launch_ms) / g.time_ms[i] - 100)
    return out


def settings(folder: Path, key: str = "h100-sxm") -> dict[str, tuple[object, float]]:
    """(time device, launch overhead ms) of each setting the cross-validation chooses among."""
    catalog = TimeDevice.from_spec(lookup(key))
    suite, fit = to_time_device(folder / "time-suite.csv", catalog)
    overhead = fit["launch_overhead_ms"]
    return {"catalog": (catalog, 0.0), "catalog + launch overhead": (catalog, overhead),
            "suite": (suite, 0.0), "suite + launch overhead": (suite, overhead)}


def leave_one_kernel_out(errors: dict[str, dict[str, float]]) -> tuple[dict[str, float], dict[str, str]]:
    """Each kernel's error under the setting with the least mean |error| over the other
    kernels, and that setting."""
    names = list(next(iter(errors.values())))
    held, chosen = {}, {}
    for k in names:
        chosen[k] = min(errors, key=lambda s: np.mean([abs(errors[s][n]) for n in names if n != k]))
        held[k] = errors[chosen[k]][k]
    return held, chosen


def sensitivity(folder: Path, device, launch_ms: float, factor: float = 1.1) -> dict[str, tuple[float, float]]:
    """MAPE over the kernels with each suite constant at 1/factor and factor of its value."""
    moves = {"DRAM latency": lambda d, f: (replace(d, dm_lat_a=d.dm_lat_a * f, dm_lat_b=d.dm_lat_b * f), launch_ms),
             "L2 latency": lambda d, f: (replace(d, l2_lat=d.l2_lat * f), launch_ms),
             "shared latency": lambda d, f: (replace(d, sh_lat=d.sh_lat * f), launch_ms),
             "DRAM delay": lambda d, f: (replace(d, dm_del_a=d.dm_del_a * f, dm_del_b=d.dm_del_b * f), launch_ms),
             "launch overhead": lambda d, f: (d, launch_ms * f)}
    return {k: tuple(float(np.abs(list(time_errors(folder, *move(device, f)).values())).mean())
                     for f in (1 / factor, factor)) for k, move in moves.items()}


def main(argv: list[str]) -> None:
    folder = Path(argv[0])
    key = argv[1] if len(argv) > 1 else "h100-sxm"
    options = settings(folder, key)
    for k, (measured, catalog) in latencies(folder, options["catalog"][0]).items():
        print(f"{k}: measured {measured:.2f}, catalog {catalog:.2f} ({100 * (catalog / measured - 1):+.1f}%)")
    overhead = options["suite + launch overhead"][1]
    print(f"launch overhead (ms, the shared chase's launch beyond its chase): {overhead:.4f}")
    errors = {s: time_errors(folder, *v) for s, v in options.items()}
    held, chosen = leave_one_kernel_out(errors)
    print(f"{'kernel':14s} {'held out':>9s}  " + "  ".join(f"{s:>24s}" for s in errors))
    for name, e in held.items():
        print(f"{name:14s} {e:+8.1f}%  " + "  ".join(f"{errors[s][name]:+23.1f}%" for s in errors))
    e = np.abs(list(held.values()))
    picks = {s: list(chosen.values()).count(s) for s in set(chosen.values())}
    print(f"uncalibrated time, leave-one-kernel-out: MAPE {e.mean():.1f}%, median {np.median(e):.1f}%, over {len(e)} "
          f"kernels (settings chosen: {picks})")
    for s, err in errors.items():
        a = np.abs(list(err.values()))
        print(f"  {s}: MAPE {a.mean():.1f}%, median {np.median(a):.1f}%")
    designed = {s: time_errors(folder, *v, design=True) for s, v in options.items()}
    e = np.abs(list(leave_one_kernel_out(designed)[0].values()))
    print(f"with the SFU and integer sweeps' XU and FMA-heavy counts from their disassembly (not measured): "
          f"MAPE {e.mean():.1f}%, median {np.median(e):.1f}%")
    best = max(picks, key=picks.get)
    print(f"MAPE with each constant of '{best}' at 1/1.1 and 1.1 of its value:")
    for k, (lo, hi) in sensitivity(folder, *options[best]).items():
        print(f"  {k}: {lo:.1f}% / {hi:.1f}%")


if __name__ == "__main__":
    main(sys.argv[1:])
