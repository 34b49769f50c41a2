"""Sweeps: workloads x a frequency grid on any `Device`, crash-safe and resumable.

Every measurement is appended to the output CSV (the `tidy` format) and flushed as soon
as it is taken, so a crash or kill loses at most the row in flight. The counters of each
workload, profiled once at the reference (default) configuration, go to a JSON file
beside it (``OUT.profiles.json``), rewritten atomically after each profile. ``resume=True``
drops a partly written last row, then measures only what is missing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import InputError
from ..io import read
from ..io.datasets import PowerDataset
from ..io.jsonfile import read_versioned, write_json_atomic
from ..io.source import csv_line, format_number
from ..time.device import TimeDevice
from .counters.mapping import COMPONENTS, DOMAIN_SIZES
from .device import Device, Measurement, Workload

COLUMNS = ("workload", "core_mhz", "mem_mhz", "time_ms", "watts", "joules", "repetitions",
           "duration_s", "power_source", "throttled", "throttle_reasons", "temperature_c", "result")
PROFILES_VERSION = 1

Progress = Callable[[int, int, str], None]


def profiles_path(out: str | Path) -> Path:
    out = Path(out)
    return out.with_name(out.name + ".profiles.json")


def _row(m: Measurement) -> str:
    nums = [m.core_mhz, m.mem_mhz, m.time_ms, m.watts, m.joules, m.repetitions, m.duration_s]
    return csv_line([m.workload, *map(format_number, nums), m.power_source, str(int(m.throttled)),
                     ";".join(m.throttle_reasons),
                     "" if m.temperature_c is None else format_number(m.temperature_c),
                     ";".join(f"{k}={format_number(v)}" for k, v in m.result.items())])


def grid(device: Device, core_mhz: Sequence[float] | None = None,
         mem_mhz: Sequence[float] | None = None) -> list[tuple[float, float]]:
    """Supported (core, memory) pairs, highest clocks first, optionally restricted."""
    mems = device.memory_clocks()
    if mem_mhz is not None:
        bad = sorted(set(mem_mhz) - set(mems))
        if bad:
            raise InputError(f"memory clocks {bad} MHz are not supported; supported: {mems}")
        mems = [m for m in mems if m in set(mem_mhz)]
    pairs = []
    for m in mems:
        cores = device.core_clocks(m)
        if core_mhz is not None:
            cores = [c for c in cores if c in set(core_mhz)]
        pairs += [(c, m) for c in cores]
    if core_mhz is not None:
        missing = sorted(set(core_mhz) - {c for c, _ in pairs})
        if missing:
            raise InputError(f"core clocks {missing} MHz are not supported at the chosen memory clocks")
    if not pairs:
        raise InputError("the frequency grid is empty")
    return pairs


def _done_keys(out: Path) -> set[tuple[str, float, float]]:
    """What a partial sweep measured; a last line cut short by a crash is removed first."""
    text = out.read_text()
    if text and not text.endswith("\n"):
        text = text[: text.rfind("\n") + 1]
        out.write_text(text)
    if text.count("\n") <= 1:
        return set()
    g = read(out, "tidy")
    return set(zip(g.app.tolist(), g.core_mhz.tolist(), g.mem_mhz.tolist()))


def _save_profiles(path: Path, device: Device, profiles: dict[str, dict[str, float]]) -> None:
    write_json_atomic(path, {"kind": "sweep-profiles", "version": PROFILES_VERSION, "device": device.name,
                             "reference_mhz": list(device.default_clocks()), "profiles": profiles})


def load_profiles(path: str | Path) -> dict:
    return read_versioned(path, "sweep-profiles", PROFILES_VERSION)


@dataclass(frozen=True)
class SweepResult:
    out: Path
    profiles: Path
    measured: int
    skipped: int
    throttled: int


def suite_workloads(suite: str) -> list[Workload]:
    """The microbenchmarks of one suite of the kernel manifest (``power`` or ``time``)."""
    from .kernels import load_manifest

    found = load_manifest().suite(suite)
    if not found:
        raise InputError(f"no benchmarks in suite {suite!r}; the manifest has 'power' and 'time'")
    return [Workload(b.name, kernel=b.name) for b in found]


def run_sweep(device: Device, workloads: Sequence[Workload], out: str | Path, *,
              configs: Sequence[tuple[float, float]] | None = None, resume: bool = False,
              min_seconds: float = 1.0, repetitions: int | None = None,
              progress: Progress | None = None) -> SweepResult:
    """Profile each workload at the reference configuration, then measure it at every
    configuration; clocks are reset at the end, also after an error."""
    out = Path(out)
    names = [w.name for w in workloads]
    if not workloads:
        raise InputError("no workloads to sweep")
    if len(set(names)) != len(names):
        raise InputError(f"workload names must be unique, got {names}")
    configs = list(configs) if configs is not None else grid(device)
    ppath = profiles_path(out)
    if out.exists() and not resume:
        raise InputError(f"{out} exists: pass resume=True (--resume) to continue it, or remove it")
    done = _done_keys(out) if out.exists() else set()
    profiles = load_profiles(ppath)["profiles"] if resume and ppath.exists() else {}
    todo_profiles = [w for w in workloads if w.name not in profiles]
    todo = [(c, [w for w in workloads if (w.name, *c) not in done]) for c in configs]
    total = len(todo_profiles) + sum(len(ws) for _, ws in todo)
    step = 0
    throttled = 0

    def tick(label: str) -> None:
        nonlocal step
        step += 1
        if progress:
            progress(step, total, label)

    if progress:
        progress(0, total, "starting")
    new_file = not out.exists() or out.stat().st_size == 0
    try:
        if todo_profiles:
            device.lock_clocks(*device.default_clocks())
            for w in todo_profiles:
                profiles[w.name] = device.profile(w)
                _save_profiles(ppath, device, profiles)
                tick(f"profile {w.name}")
        with out.open("a") as f:
            if new_file:
                f.write(csv_line(COLUMNS) + "\n")
                f.flush()
            for (fc, fm), pending in todo:
                if not pending:
                    continue
                device.lock_clocks(fc, fm)
                for w in pending:
                    m = device.measure(w, min_seconds=min_seconds, repetitions=repetitions)
                    throttled += m.throttled
                    f.write(_row(m) + "\n")
                    f.flush()
                    tick(f"{w.name} @ {fc:g}/{fm:g} MHz")
    finally:
        device.reset_clocks()
    return SweepResult(out, ppath, step - len(todo_profiles), len(done), throttled)


def results(out: str | Path) -> list[dict[str, float]]:
    """The ``result`` column of a sweep, parsed: one dict per row (empty where none)."""
    g = read(out, "tidy")
    parsed = []
    for i, text in enumerate(g.columns["result"].tolist()):
        row = {}
        for item in filter(None, text.split(";")):
            key, _, value = item.partition("=")
            try:
                row[key] = float(value)
            except ValueError:
                raise InputError(f"{out}: row {i + 1}: result {item!r} is not key=number") from None
        parsed.append(row)
    return parsed


def to_time_device(out: str | Path, base: TimeDevice) -> tuple[TimeDevice, dict]:
    """Device parameters fitted to a sweep of the latency suite: the DRAM pointer chase's
    cycles by Eq. 4, the bandwidth benchmark's memory cycles per transaction by the delay
    law, the L2 and shared chases averaged; everything else from ``base``."""
    g = read(out, "tidy")
    res = results(out)
    names = g.app.tolist()

    def rows(name):
        idx = [i for i, n in enumerate(names) if n == name]
        if not idx:
            raise InputError(f"{out}: the latency suite's {name!r} was not measured")
        return idx

    lat = rows("time_dram_latency")
    bw = rows("time_dram_bandwidth")
    try:
        cycles = np.array([res[i]["cycles_per_access"] for i in lat])
        # Memory cycles per 32-byte transaction = time x memory clock / transactions.
        delay = np.array([g.time_ms[i] * g.mem_mhz[i] * 1e3 / (res[i]["bytes"] / 32) for i in bw])
        l2 = [res[i]["cycles_per_access"] for i in rows("time_l2_latency")]
        sh = [res[i]["cycles_per_access"] for i in rows("time_shared_latency")]
    except KeyError as e:
        raise InputError(f"{out}: a latency-suite row lacks its result {e}") from None
    return base.fit((g.core_mhz[lat], g.mem_mhz[lat], cycles), (g.mem_mhz[bw], delay),
                    l2_latency_cycles=l2, shared_latency_cycles=sh, name=f"fitted from {Path(out).name}")


def to_power_dataset(out: str | Path, components: Sequence[str] = COMPONENTS,
                     domain_sizes: Sequence[int] = DOMAIN_SIZES) -> PowerDataset:
    """The power suite's sweep as a gpmTOOL-style dataset: measured power per row with
    the workload's utilizations profiled at the reference configuration."""
    g = read(out, "tidy")
    doc = load_profiles(profiles_path(out))
    prof = doc["profiles"]
    missing = sorted(set(g.app.tolist()) - set(prof))
    if missing:
        raise InputError(f"{out}: no reference profile for {missing}")
    for name, p in prof.items():
        lacking = [c for c in components if c not in p]
        if lacking:
            raise InputError(f"{out}: profile of {name!r} lacks utilizations {lacking}")
    order = list(dict.fromkeys(g.app.tolist()))
    bench = np.array([order.index(a) for a in g.app.tolist()], dtype=np.int64)
    util = np.array([[prof[a][c] for c in components] for a in g.app.tolist()]).reshape(len(g), len(components))
    return PowerDataset(
        path=str(out),
        reference_mhz=tuple(float(x) for x in doc["reference_mhz"]),
        domain_sizes=tuple(domain_sizes),
        components=tuple(components),
        watts=g.watts.copy(),
        freqs_mhz=np.column_stack([g.core_mhz, g.mem_mhz]),
        utilization=util,
        row_names=tuple(g.app.tolist()),
        benchmark=bench,
        benchmarks=tuple(order),
    )
