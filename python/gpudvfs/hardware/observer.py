"""Watching a GPU without touching it, for `gpudvfs power observe`.

Windows of readings (clocks, power, activities, throttle reasons) while the user's own work
runs, from a `ReadingSource`. `NvmlObserver` reads a real GPU through
NVML and sets nothing; `gpudvfs.hardware.driver_sim.DriverManagedGpu` is the simulated GPU
under its own driver. Readings go to and come back from a CSV (`write_readings`,
`read_readings`), so a run on a real GPU can be refitted and tested later.
"""

from __future__ import annotations

import csv
import math
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Protocol

from gpudvfs.catalog import lookup
from gpudvfs.errors import GpudvfsWarning, InputError
from gpudvfs.hardware.energy_counter import CounterPoller
from gpudvfs.hardware.gpm import GpmActivity
from gpudvfs.hardware.nvml import NvmlDevice

#: GPM's activities (SM active, busiest pipe, DRAM), and NVML's utilization rates where the GPU
#: has no GPM (Hopper and newer have it).
GPM_ACTIVITIES = ("sm", "pipe", "dram")
NVML_ACTIVITIES = ("gpu", "memory")
#: Power samples per window where the GPU has no energy counter.
POWER_POLL_S = 0.01


@dataclass(frozen=True)
class Reading:
    """One window of readings.

    ``t_s`` is its end, s from the first window's start; ``core_mhz_start`` and ``core_mhz`` the
    core clock at its start and end (a window the clock changed in mixes two clocks' power);
    ``activity`` the activities over it, fractions; ``throttle_reasons`` those active at its end.
    """

    t_s: float
    core_mhz_start: float
    core_mhz: float
    mem_mhz: float
    watts: float
    activity: tuple[float, ...]
    throttle_reasons: tuple[str, ...]


#: How a window's power was read: the simulator's exact mean, the energy counter between its
#: updates (a window at a change of work holds some of its neighbour's), the counter's raw
#: difference (off by up to one update), polled power readings, or not recorded (files written
#: before it was).
POWER_READINGS = ("exact", "counter-interpolated", "counter-raw", "samples", "unknown")


@dataclass(frozen=True)
class Observation:
    """Readings of one GPU in time order, the first ``n_core`` in the core domain.

    ``power`` says how power was read (:data:`POWER_READINGS`).
    """

    readings: list[Reading]
    activities: tuple[str, ...]
    n_core: int
    catalog_key: str
    default_mhz: tuple[float, float]
    power: str


class ReadingSource(Protocol):
    """What readings come from: a GPU read window by window.

    A source may also have ``finish(readings) -> readings``, which `observe` calls on what it
    read (`NvmlObserver.finish`).
    """

    @property
    def activities(self) -> tuple[str, ...]:
        """The activities' names, the first ``n_core`` in the core domain."""

    @property
    def n_core(self) -> int:
        """How many activities are in the core domain."""

    @property
    def catalog_key(self) -> str:
        """The catalog GPU."""

    @property
    def default_mhz(self) -> tuple[float, float]:
        """Its default (core, memory) clocks."""

    @property
    def power_reading(self) -> str:
        """How power is read (:data:`POWER_READINGS`)."""

    def read(self, window_s: float) -> Reading:
        """What the GPU did over one window of ``window_s`` seconds."""


class NvmlObserver:
    """Readings of an `NvmlDevice` opened with ``leave_clocks=True`` (else `InputError`): it sets nothing.

    Power is the energy counter's mean over each window, read between the counter's updates
    (`gpudvfs.hardware.energy_counter`; filled in by `finish`), else the mean of power readings
    polled every POWER_POLL_S; activities are GPM's where the GPU has GPM, else NVML's
    utilization rates.
    """

    def __init__(self, device: NvmlDevice) -> None:
        if not getattr(device, "leave_clocks", False):
            raise InputError("observation sets nothing: open the device with leave_clocks=True")
        self.device = device
        self.catalog_key = lookup(device.name).key
        try:
            self.default_mhz = device.default_clocks()
        except Exception:  # GeForce cards report no default application clocks: the catalog's
            self.default_mhz = lookup(device.name).default_mhz
        self._gpm = self._working_gpm(device)
        self.activities = GPM_ACTIVITIES if self._gpm is not None else NVML_ACTIVITIES
        self.n_core = len(self.activities) - 1
        self.power_reading = "counter-interpolated" if device.energy_joules() is not None else "samples"
        self._t0 = time.perf_counter()
        # The counter advances once per update period (0.1 s on an H200): a window's energy is
        # read between the updates around it, once the next one has come (`finish`).
        self._poller = CounterPoller(device.energy_joules).start() if device.energy_joules() is not None else None
        if self._poller is not None:  # the first window starts after an update: it is covered
            self._poller.wait_past(time.perf_counter())
        self._windows: list[tuple[float, float]] = []

    @staticmethod
    def _working_gpm(device: NvmlDevice) -> GpmActivity | None:
        """GPM where the GPU has it and a first window reads, else None.

        Activities must be of one kind throughout: without GPM, NVML's utilization rates serve.
        """
        gpm = device.gpm()
        if gpm is None:
            return None
        try:
            gpm.start()
            time.sleep(0.05)
            gpm.read()
        except Exception as e:  # an NVML error of any kind: the utilization rates serve
            warnings.warn(GpudvfsWarning(f"{device.name}: GPM failed ({e}); activities are NVML's utilization "
                                         "rates"), stacklevel=3)
            gpm.close()
            return None
        return gpm

    def read(self, window_s: float) -> Reading:
        """Wait one window and read the GPU; with a counter, its power is NaN until `finish`."""
        dev = self.device
        start = dev.clocks[0]
        t0 = time.perf_counter()
        polled = []
        while time.perf_counter() - t0 < window_s:
            if self._poller is None:
                polled.append(dev.power_watts())
            time.sleep(min(POWER_POLL_S, max(0.0, window_s - (time.perf_counter() - t0))))
        t1 = time.perf_counter()
        self._windows.append((t0, t1))
        # With a counter, the power is filled in by `finish`, when the updates after t1 have come.
        watts = math.nan if self._poller is not None else (sum(polled) / len(polled) if polled else
                                                           dev.power_watts())
        core, mem = dev.clocks
        activity = tuple(float(a) for a in (self._gpm.read() if self._gpm is not None else dev.utilization()))
        return Reading(t_s=t1 - self._t0, core_mhz_start=float(start), core_mhz=float(core), mem_mhz=float(mem),
                       watts=float(watts), activity=activity, throttle_reasons=tuple(dev.throttle_reasons()))

    def finish(self, readings: list[Reading]) -> list[Reading]:
        """The readings with each window's mean power from the counter's updates around it.

        NaN for a window no update covers; as they were where the GPU has no counter.
        """
        if self._poller is None:
            return readings
        self._poller.wait_past(self._windows[-1][1] if self._windows else 0.0)
        out = []
        for r, (t0, t1) in zip(readings, self._windows[-len(readings):] if readings else []):
            joules = self._poller.energy(t0, t1)
            out.append(replace(r, watts=math.nan if joules is None else joules / (t1 - t0)))
        return out

    def close(self) -> None:
        """Stop the counter's poller and free GPM's samples."""
        if self._poller is not None:
            self._poller.stop()
        if self._gpm is not None:
            self._gpm.close()


def observe(source: ReadingSource, seconds: float, window_s: float = 0.1,
            progress: Callable[[int, int], None] | None = None) -> Observation:
    """Read a GPU window by window, one reading per ``window_s`` seconds.

    The readings are finished by the source's ``finish`` where it has one.
    A source that fails to answer partway, or Ctrl-C, keeps what was read and warns. `InputError`
    where ``seconds`` or ``window_s`` is not positive, or ``window_s`` exceeds ``seconds``.
    """
    if not (seconds > 0 and window_s > 0 and window_s <= seconds):
        raise InputError(f"--seconds must be > 0 and at least one --interval ({window_s}), got {seconds}")
    n = max(1, int(round(seconds / window_s)))
    out: list[Reading] = []
    for i in range(n):
        try:
            out.append(source.read(window_s))
        except Exception as e:  # a driver call that fails mid-run: keep the readings so far
            if not out:
                raise
            warnings.warn(GpudvfsWarning(f"the GPU stopped answering after {len(out)} readings ({e}); "
                                         "fitting those"), stacklevel=2)
            break
        except KeyboardInterrupt:  # Ctrl-C ends the watch early: what was read is kept
            if not out:
                raise
            warnings.warn(GpudvfsWarning(f"interrupted after {len(out)} of {n} readings; fitting those"),
                          stacklevel=2)
            break
        if progress:
            progress(i + 1, n)
    finish = getattr(source, "finish", None)
    return Observation(finish(out) if finish is not None else out, tuple(source.activities), source.n_core,
                       source.catalog_key, source.default_mhz, source.power_reading)


_COLUMNS = [f.name for f in fields(Reading)]


def write_readings(path: str | Path, obs: Observation) -> None:
    """Write an observation as CSV.

    A comment line with the device, default clocks, the core activities' count and how power
    was read, then one row per reading (activities in their own columns, throttle reasons
    joined by '|').
    """
    with open(path, "w", newline="", encoding="utf-8") as f:
        f.write(f"# gpudvfs readings: device={obs.catalog_key} default_mhz={obs.default_mhz[0]:g},"
                f"{obs.default_mhz[1]:g} core_activities={obs.n_core} power={obs.power}\n")
        w = csv.writer(f)
        w.writerow([c for c in _COLUMNS if c != "activity"] + list(obs.activities))
        for r in obs.readings:
            w.writerow([r.t_s, r.core_mhz_start, r.core_mhz, r.mem_mhz, r.watts, "|".join(r.throttle_reasons),
                        *r.activity])


def read_readings(path: str | Path) -> Observation:
    """Read what `write_readings` wrote; `InputError` where it cannot be read or is not a readings file.

    ``power`` is ``"unknown"`` in a file written before it was recorded.
    """
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as e:
        raise InputError(f"{path}: cannot be read ({e.strerror})") from None
    head = lines[0].split() if lines else []
    meta = dict(p.split("=", 1) for p in head[3:] if "=" in p)
    if head[:3] != ["#", "gpudvfs", "readings:"] or not {"device", "default_mhz", "core_activities"} <= set(meta):
        raise InputError(f"{path}, line 1: not a gpudvfs readings file (`gpudvfs power observe --readings`)")
    power = meta.get("power", "unknown")
    if power not in POWER_READINGS:
        raise InputError(f"{path}, line 1: power={power!r} is not one of {POWER_READINGS}")
    rows = list(csv.reader(lines[1:]))
    fixed = [c for c in _COLUMNS if c != "activity"]
    if not rows or rows[0][:len(fixed)] != fixed:
        raise InputError(f"{path}, line 2: expected the columns {fixed} and the activities")
    activities = tuple(rows[0][len(fixed):])
    out = []
    for n, row in enumerate(rows[1:], start=3):
        try:
            t, c0, c, m, w = (float(x) for x in row[:5])
            act = tuple(float(x) for x in row[len(fixed):])
        except ValueError:
            raise InputError(f"{path}, line {n}: expected numbers, got {row}") from None
        if len(act) != len(activities):
            raise InputError(f"{path}, line {n}: {len(act)} activities, the header names {len(activities)}")
        out.append(Reading(t, c0, c, m, w, act, tuple(x for x in row[5].split("|") if x)))
    try:
        dc, dm = (float(x) for x in meta["default_mhz"].split(","))
        n_core = int(meta["core_activities"])
    except ValueError:
        raise InputError(f"{path}, line 1: unreadable default_mhz or core_activities") from None
    return Observation(out, activities, n_core, meta["device"], (dc, dm), power)
