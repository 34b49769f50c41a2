"""Sweeps: workloads x a frequency grid on any `Device`, crash-safe and resumable.

Every measurement is appended to the output CSV (the `tidy` format) and flushed as soon
as it is taken, so a crash or kill loses at most the row in flight. Beside it,
``OUT.sweep.json`` records what the sweep measures and each workload's profile at the
reference (`gpudvfs.hardware.sweep_record`).

``resume=True`` continues a partial sweep only after proving that OUT is that sweep's own
file: its record matches the plan of this run (same device and seed, workloads, grid and
protocol), its header is the tidy header and every complete row is a measurement of the
plan. Anything else is refused without a byte of OUT changed; then a last line cut short
by a crash is dropped and only what is missing is measured. While a sweep runs it holds
an exclusive lock on OUT (``flock``), so a second sweep writing the same file is refused.

``leave_clocks=True`` sweeps a GPU whose clocks are not this process's to set (a shared or
lent machine): no clock is locked or reset, each workload is measured once at whatever clocks
the driver runs it at, and each row records the clocks seen during its measurement. The
record's reference clocks are then the driver's defaults, which the profiles need not have
run at (the driver may boost above them).
"""

from __future__ import annotations

import contextlib
import csv
import math
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import numpy as np

from gpudvfs.data.counters import COMPONENTS, DOMAIN_SIZES
from gpudvfs.data.datasets import PowerDataset
from gpudvfs.data.grid_csv import TIDY, read_grid
from gpudvfs.data.source import csv_line, format_number
from gpudvfs.errors import InputError
from gpudvfs.hardware.device import Device, Measurement, Workload
from gpudvfs.hardware.kernels import load_manifest
from gpudvfs.hardware.sweep_record import (
    COLUMNS,
    load_record,
    plan_differences,
    record_path,
    save_record,
    sweep_plan,
)
from gpudvfs.time.device import TimeDevice

try:
    import fcntl
except ImportError:  # Windows: no advisory locks; two sweeps on one file are not caught there
    fcntl = None  # type: ignore[assignment]

_NUMERIC = ("core_mhz", "mem_mhz", "time_ms", "watts", "joules", "repetitions", "duration_s")

#: Takes (done, total, label) as a sweep goes.
Progress = Callable[[int, int, str], None]


def _row(m: Measurement) -> str:
    nums = [m.core_mhz, m.mem_mhz, m.time_ms, m.watts, m.joules, m.repetitions, m.duration_s]
    return csv_line([m.workload, *map(format_number, nums), m.power_source, str(int(m.throttled)),
                     ";".join(m.throttle_reasons),
                     "" if m.temperature_c is None else format_number(m.temperature_c),
                     ";".join(f"{k}={format_number(v)}" for k, v in m.result.items())])


def grid(device: Device, core_mhz: Sequence[float] | None = None,
         mem_mhz: Sequence[float] | None = None) -> list[tuple[float, float]]:
    """A device's supported (core, memory) pairs, MHz, highest first, optionally restricted to the clocks given.

    `InputError` where a clock asked for is not supported, or no pair is left.
    """
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
            near = sorted({c for m in mems for c in device.core_clocks(m)}, key=lambda c: abs(c - missing[0]))[:2]
            raise InputError(f"core clocks {missing} MHz are not supported at the chosen memory clocks; the nearest "
                             f"to {missing[0]:g} supported: {', '.join(f'{c:g}' for c in sorted(near))} MHz")
    if not pairs:
        raise InputError("the frequency grid is empty")
    return pairs


def _complete_rows(out: Path, plan: dict) -> tuple[set[tuple[str, float, float]], int]:
    """(measured keys, bytes of complete lines) of a sweep's CSV, each complete row checked.

    Rows are checked against the plan; the bytes after the last newline are a row a crash cut
    short.
    """
    names = {w["name"] for w in plan["workloads"]}
    configs = None if plan.get("leave_clocks") else {tuple(c) for c in plan["configs"]}
    header = csv_line(COLUMNS)
    done: set[tuple[str, float, float]] = set()
    complete = 0
    with out.open("rb") as f:
        for number, raw in enumerate(f, start=1):
            if not raw.endswith(b"\n"):
                break  # the torn last row
            complete += len(raw)
            try:
                line = raw.decode("utf-8").rstrip("\r\n")
                fields = next(csv.reader([line])) if line else []
            except (UnicodeDecodeError, csv.Error) as e:
                raise InputError(f"{out}, line {number}: not a sweep row ({e})") from None
            if number == 1:
                if line != header:
                    raise InputError(f"{out}, line 1: not the header of a gpudvfs sweep (expected {header!r})")
                continue
            done.add(_check_row(out, number, fields, names, configs))
    return done, complete


def _check_row(out: Path, number: int, fields: list[str], names: set[str],
               configs: set[tuple[float, ...]] | None) -> tuple[str, float, float]:
    """A row's (workload, core, memory) key, checked; ``configs`` None: any clocks (the driver's)."""
    where = f"{out}, line {number}"
    if len(fields) != len(COLUMNS):
        raise InputError(f"{where}: expected {len(COLUMNS)} fields, found {len(fields)}")
    row = dict(zip(COLUMNS, fields))
    try:
        values = {k: float(row[k]) for k in _NUMERIC}
    except ValueError:
        raise InputError(f"{where}: a number column holds text") from None
    if not all(math.isfinite(v) for v in values.values()):
        raise InputError(f"{where}: a number column is not finite")
    key = (row["workload"], values["core_mhz"], values["mem_mhz"])
    if key[0] not in names or (configs is not None and key[1:] not in configs):
        raise InputError(f"{where}: {key[0]!r} at {key[1]:g}/{key[2]:g} MHz is not a measurement of this sweep")
    return key


@contextlib.contextmanager
def _locked(fd: int, out: Path) -> Iterator[None]:
    if fcntl is not None:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise InputError(f"{out}: another sweep is writing this file (it holds its lock); "
                             "wait for it or choose another -o") from None
    yield


def _open_output(out: Path, resume: bool) -> tuple[int, bool]:
    """(file descriptor for appending, whether the file is new)."""
    try:
        return os.open(out, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL, 0o644), True
    except FileExistsError:
        if not resume:
            raise InputError(f"{out} exists: pass resume=True to continue it, or remove it") from None
    except OSError as e:
        raise InputError(f"{out}: cannot create the sweep's output ({e.strerror})") from None
    try:
        return os.open(out, os.O_WRONLY | os.O_APPEND), False
    except OSError as e:
        raise InputError(f"{out}: cannot open the sweep's output to resume it ({e.strerror})") from None


def _resume_state(out: Path, plan: dict) -> tuple[set, dict, int | None]:
    """(done keys, profiles, length to cut OUT to) of a sweep to resume.

    Or an error that says why OUT is not this sweep's file; nothing is written here.
    """
    size = out.stat().st_size
    if not record_path(out).exists():
        if size == 0:  # created, then killed before its record: nothing to lose
            return set(), {}, None
        raise InputError(f"{out}: no sweep record ({record_path(out).name}) beside it, so it is not a "
                         "gpudvfs sweep (or one written by an older gpudvfs); refusing to append to it")
    doc = load_record(out)
    diffs = plan_differences(doc["plan"], plan)
    if diffs:
        raise InputError(f"{out} is another sweep than this one: {'; '.join(diffs)}; "
                         "resume with the options it was started with, or write to a new -o")
    done, complete = _complete_rows(out, plan)
    return done, doc["profiles"], complete if complete < size else None


@dataclass(frozen=True)
class SweepResult:
    """What a sweep did: its CSV and record, rows measured now, rows already there (resumed), and throttled ones."""

    out: Path
    record: Path
    measured: int
    skipped: int
    throttled: int


def suite_workloads(suite: str) -> list[Workload]:
    """The microbenchmarks of suite ``"power"`` or ``"time"`` of the kernel manifest, in its order."""
    found = load_manifest().suite(suite)
    if not found:
        raise InputError(f"no benchmarks in suite {suite!r}; the manifest has 'power' and 'time'")
    return [Workload(b.name, kernel=b.name) for b in found]


def run_sweep(device: Device, workloads: Sequence[Workload], out: str | Path, *,
              configs: Sequence[tuple[float, float]] | None = None, resume: bool = False,
              min_seconds: float = 1.0, repetitions: int | None = None,
              progress: Progress | None = None, profile: bool = True, leave_clocks: bool = False) -> SweepResult:
    """Profile each workload at the reference configuration, then measure it at every one.

    Every workload is checked against the device (``Device.check``) before anything is measured or
    written; clocks are reset at the end, also after an error. Rows are appended to ``out``
    (`COLUMNS`), the record goes beside it; ``configs`` default to every supported pair (`grid`);
    ``resume`` and ``leave_clocks`` are as the module notes say (no ``configs`` with the latter);
    ``profile=False`` measures power and time only, with no profiler. `InputError` where the
    workloads or options are invalid, or ``out`` is not this sweep's to resume.
    """
    out = Path(out)
    names = [w.name for w in workloads]
    if not workloads:
        raise InputError("no workloads to sweep")
    if len(set(names)) != len(names):
        raise InputError(f"workload names must be unique, got {names}")
    if leave_clocks and configs is not None:
        raise InputError("a sweep that leaves the clocks to the driver takes no clock pairs (configs)")
    for w in workloads:
        device.check(w)
    configs = [] if leave_clocks else list(configs) if configs is not None else grid(device)
    plan = sweep_plan(device, workloads, configs, min_seconds, repetitions, profile, leave_clocks)
    fd, new_file = _open_output(out, resume)
    with os.fdopen(fd, "a", encoding="utf-8", newline="") as f, _locked(fd, out):
        done, profiles, cut = (set(), {}, None) if new_file else _resume_state(out, plan)
        if cut is not None:
            os.ftruncate(fd, cut)
        if new_file or out.stat().st_size == 0:
            save_record(out, plan, device, profiles)
            f.write(csv_line(COLUMNS) + "\n")
            f.flush()
        return _measure(device, workloads, configs, out, f, plan, done, profiles, min_seconds, repetitions,
                        progress)


def _measure(device: Device, workloads: Sequence[Workload], configs: Sequence[tuple[float, float]], out: Path,
             f: TextIO, plan: dict, done: set, profiles: dict, min_seconds: float, repetitions: int | None,
             progress: Progress | None) -> SweepResult:
    todo_profiles = [w for w in workloads if w.name not in profiles] if plan["profiled"] else []
    leave = bool(plan.get("leave_clocks"))
    if leave:  # one pass at whatever clocks the driver runs; a row of any clocks counts as done
        measured = {key[0] for key in done}
        todo: list[tuple[tuple[float, float] | None, list[Workload]]] = [
            (None, [w for w in workloads if w.name not in measured])]
    else:
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
    try:
        if todo_profiles:
            if not leave:
                device.lock_clocks(*device.default_clocks())
            for w in todo_profiles:
                profiles[w.name] = device.profile(w)
                save_record(out, plan, device, profiles)
                tick(f"profile {w.name}")
        for pair, pending in todo:
            if not pending:
                continue
            if pair is not None:
                device.lock_clocks(*pair)
            where = "the driver's clocks" if pair is None else f"{pair[0]:g}/{pair[1]:g} MHz"
            for w in pending:
                m = device.measure(w, min_seconds=min_seconds, repetitions=repetitions)
                throttled += m.throttled
                f.write(_row(m) + "\n")
                f.flush()
                tick(f"{w.name} @ {where}")
    finally:
        if not leave:
            device.reset_clocks()
    return SweepResult(out, record_path(out), step - len(todo_profiles), len(done), throttled)


@dataclass(frozen=True)
class SweepRows:
    """A sweep's CSV as columns, one entry per row; ``result`` as written (``key=value`` pairs joined by ``;``)."""

    workload: np.ndarray
    core_mhz: np.ndarray
    mem_mhz: np.ndarray
    time_ms: np.ndarray
    watts: np.ndarray
    result: np.ndarray

    def __len__(self) -> int:
        """The number of rows."""
        return len(self.workload)


def read_rows(out: str | Path) -> SweepRows:
    """Read a sweep's CSV (the `tidy` format); `DataFileError` where it is not one."""
    c = read_grid(out, TIDY).columns
    return SweepRows(c["workload"], c["core_mhz"], c["mem_mhz"], c["time_ms"], c["watts"], c["result"])


def results(out: str | Path) -> list[dict[str, float]]:
    """The ``result`` column parsed, a dict per row; `InputError` where one is not ``key=number`` pairs."""
    parsed = []
    for i, text in enumerate(read_rows(out).result.tolist()):
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
    """Device parameters fitted to a sweep of the latency suite, and the fit's report.

    The DRAM pointer chase's cycles by Eq. 4, the bandwidth benchmark's memory cycles per
    transaction by the delay law, the L2 and shared chases averaged; everything else from
    ``base``.

    Each launch is timed on the host, launch and wait included. Where the shared chase
    records its steps, that overhead is measured (its launch's time beyond its timed chase,
    the median over its rows; the report's ``launch_overhead_ms``) and taken off the bandwidth
    benchmark's time: left in, it reads 2.5 of an H100's 2.8 TB/s (validation/). `InputError`
    where a benchmark of the suite was not measured, or a row lacks its result.
    """
    g = read_rows(out)
    res = results(out)
    names = g.workload.tolist()

    def rows(name: str) -> list[int]:
        idx = [i for i, n in enumerate(names) if n == name]
        if not idx:
            raise InputError(f"{out}: the latency suite's {name!r} was not measured")
        return idx

    lat = rows("time_dram_latency")
    bw = rows("time_dram_bandwidth")
    shared = rows("time_shared_latency")
    try:
        cycles = np.array([res[i]["cycles_per_access"] for i in lat])
        sh = [res[i]["cycles_per_access"] for i in shared]
        chase_ms = [res[i]["steps"] * res[i]["cycles_per_access"] / (g.core_mhz[i] * 1e3)
                    for i in shared if "steps" in res[i]]
        overhead = float(np.median(g.time_ms[shared] - chase_ms)) if len(chase_ms) == len(shared) else 0.0
        busy = g.time_ms[bw] - overhead
        if not np.all(busy > 0):
            raise InputError(f"{out}: the bandwidth benchmark's launches ({g.time_ms[bw].min():.4g} ms) are no longer "
                             f"than the launch overhead the shared chase measured ({overhead:.4g} ms)")
        delay = np.array([base.dram_delay_of(t, res[i]["bytes"] / 32, g.mem_mhz[i]) for t, i in zip(busy, bw)])
        l2 = [res[i]["cycles_per_access"] for i in rows("time_l2_latency")]
    except KeyError as e:
        raise InputError(f"{out}: a latency-suite row lacks its result {e}") from None
    device, report = base.fit((g.core_mhz[lat], g.mem_mhz[lat], cycles), (g.mem_mhz[bw], delay),
                              l2_latency_cycles=l2, shared_latency_cycles=sh, name=f"fitted from {Path(out).name}")
    return device, report | {"launch_overhead_ms": overhead}


def to_power_dataset(out: str | Path, components: Sequence[str] = COMPONENTS,
                     domain_sizes: Sequence[int] = DOMAIN_SIZES) -> PowerDataset:
    """The power suite's profiled sweep as a gpmTOOL-style dataset: power per row, utilizations from the reference.

    `InputError` where a workload has no reference profile, or its profile lacks a component.
    """
    g = read_rows(out)
    names = g.workload.tolist()
    doc = load_record(out)
    prof = doc["profiles"]
    missing = sorted(set(names) - set(prof))
    if missing:
        raise InputError(f"{out}: no reference profile for {missing}")
    for name, p in prof.items():
        lacking = [c for c in components if c not in p]
        if lacking:
            raise InputError(f"{out}: profile of {name!r} lacks utilizations {lacking}")
    order = list(dict.fromkeys(names))
    bench = np.array([order.index(a) for a in names], dtype=np.int64)
    util = np.array([[prof[a][c] for c in components] for a in names]).reshape(len(g), len(components))
    return PowerDataset(
        path=str(out),
        reference_mhz=tuple(float(x) for x in doc["reference_mhz"]),
        domain_sizes=tuple(domain_sizes),
        components=tuple(components),
        watts=g.watts.copy(),
        freqs_mhz=np.column_stack([g.core_mhz, g.mem_mhz]),
        utilization=util,
        row_names=tuple(names),
        benchmark=bench,
        benchmarks=tuple(order),
    )
