"""`NvmlDevice`: a real NVIDIA GPU behind the `Device` protocol, through NVML.

Kernels are launched through a *launcher* (`gpudvfs.hardware.nvml.launchers`); `measure` takes a
launch's own GPU time where it returns one, and records its ``result()`` as
`Measurement.result` (the latency suite's cycles per access, from which the time device is
fitted).

Clocks and the board's power limit are set as `gpudvfs.hardware.nvml.clock_control` says;
`knobs` says which of these this process may set, without setting any. Locked clocks outlive
the process, so they are reset on `reset_clocks`, on leaving the ``with`` block, at interpreter
exit and on SIGINT/SIGTERM (`gpudvfs.hardware.nvml.clock_guard`). A power limit set is undone
with the clocks.

Power, by source (``power=``): the energy counter (Volta and newer) where the GPU has one, else
readings sampled through the measurement and integrated. ``power="samples"`` samples even where
a counter exists, to compare the two. Samples are taken at half the reading's refresh period,
inferred from the first sampled measurement (`gpudvfs.hardware.nvml.refresh`); where it cannot
be inferred (an H100's instant field once changed more often than its period allows), every
5 ms, with a warning.

``leave_clocks=True`` is for a GPU whose clocks are not this process's to change (a shared or
lent machine, even where the process is root): `lock_clocks` and `set_power_limit` then
refuse, nothing is set or reset, and `clock_permissions` tells what setting would need without
trying it.
"""

from __future__ import annotations

import math
import statistics
import time
import warnings
from pathlib import Path
from typing import Any

from gpudvfs.data.counters import COMPONENTS, power_utilizations, required_metrics, time_model_inputs
from gpudvfs.errors import GpudvfsError, GpudvfsWarning, InputError
from gpudvfs.hardware.device import Measurement, Workload
from gpudvfs.hardware.energy_counter import CounterPoller
from gpudvfs.hardware.kernels import benchmark, load_manifest
from gpudvfs.hardware.launch import target_argv
from gpudvfs.hardware.ncu import run_ncu
from gpudvfs.hardware.nvml.bindings import ClockControlError, whole_mhz
from gpudvfs.hardware.nvml.clock_control import ClockControl
from gpudvfs.hardware.nvml.gpu import NvmlGpu
from gpudvfs.hardware.nvml.launchers import Launcher, LaunchFn, default_launcher
from gpudvfs.hardware.nvml.refresh import infer_period
from gpudvfs.hardware.nvml.sampler import UNKNOWN_PERIOD_INTERVAL_S, Monitor, mean_between, sample_interval
from gpudvfs.hardware.nvml.throttle import IGNORED_THROTTLE_REASONS, reason_names
from gpudvfs.limits import is_count, is_finite_number

#: Where `NvmlDevice.measure` takes power from: the energy counter where the GPU has one
#: ("auto"), always the counter, or always sampled readings.
POWER_SOURCES = ("auto", "energy-counter", "samples")
# A sampled average needs several sensor updates to mean anything.
_MIN_REFRESH_PERIODS = 10
# A sampled reading lags the power: an averaged one by up to two refresh periods (the last
# completed period's mean, read up to a period later), a held instant field by up to one.
# Launches run this many periods before a sampled window, so its first readings are of the
# workload, not of what ran (or idled) before; where the period is unknown, two of the H100's.
_SETTLE_PERIODS = 2
_SETTLE_UNKNOWN_S = 0.2


class NvmlDevice(NvmlGpu):
    """GPU ``index`` through NVML, satisfying the `Device` protocol; use ``with`` so clocks are reset on the way out.

    Parameters
    ----------
    launcher : callable, optional
        Maps a `Workload` to its launch-and-wait function (see the module notes); by default
        `gpudvfs.hardware.nvml.launchers.default_launcher`.
    power : str
        One of `POWER_SOURCES` (see the module notes).
    leave_clocks : bool
        Never set the clocks or the power limit (see the module notes).

    Raises
    ------
    InputError
        Where ``power`` is not one of `POWER_SOURCES`, or there is no GPU ``index``.
    GpudvfsError
        Where NVML cannot be initialised, or ``power="energy-counter"`` on a GPU without one.
    """

    def __init__(self, index: int = 0, pynvml: Any = None, launcher: Launcher | None = None,
                 *, default_clocks: tuple[float, float] | None = None, power: str = "auto",
                 leave_clocks: bool = False) -> None:
        if power not in POWER_SOURCES:
            raise InputError(f"power: expected one of {POWER_SOURCES}, got {power!r}")
        super().__init__(index, pynvml, default_clocks=default_clocks)
        self._control = ClockControl(self._nv, self._handle, self.index, self.name)
        if power == "energy-counter" and not self.has_energy_counter:
            self.close()
            raise GpudvfsError(f"{self.name} has no energy counter (it needs Volta or newer); "
                               "use power='auto' or 'samples'")
        self.power = power
        self.leave_clocks = bool(leave_clocks)
        self._launcher: Launcher = launcher if launcher is not None else self._default_launcher
        self.refresh_period_s: float | None = None
        self._refresh_failed = False  # inferring it failed once: not tried again
        #: Where `profile` keeps each raw ncu CSV (``<workload>.ncu.csv``); None keeps none.
        self.ncu_logs: Path | None = None

    def close(self) -> None:
        """Reset the clocks and shut NVML down (NVML counts its users, so others keep it)."""
        try:
            # No control yet where opening the GPU failed: nothing was set.
            if getattr(self, "_control", None) is not None and self._control.active:
                self.reset_clocks()
        finally:
            super().close()

    def identity(self) -> dict[str, str | float | bool | None]:
        """``kind`` ("nvml"), ``name``, ``uuid`` and the ``power`` source."""
        return {"kind": "nvml", "name": self.name, "uuid": self.uuid(), "power": self.power}

    def check(self, workload: Workload) -> None:
        """Counters alone (a description for the simulator) are refused, and kernels the manifest lacks."""
        if workload.kernel is None and workload.fn is None:
            raise InputError(f"workload {workload.name!r} has only 'counters', which describe a workload to the "
                             "simulated GPU; on a real GPU give a manifest kernel or a 'callable'")
        if workload.kernel is not None and workload.kernel not in load_manifest().benchmarks:
            raise InputError(f"workload {workload.name!r}: no benchmark {workload.kernel!r} in the kernel manifest")

    # -- settings -----------------------------------------------------------------------------

    def knobs(self) -> dict[str, Any]:
        """What this process may set, read without setting anything.

        ``clocks`` (root, or application clocks open to all), ``core-clock`` (locked clocks: root),
        ``power-limit`` (root, where the board reports its range) and ``power_limit_w``, that range
        (None where it does not say).
        """
        perms = self.clock_permissions()
        limits = self.power_limits()
        low, high = limits["min"], limits["max"]
        span = None if low is None or high is None else (low, high)
        return {"clocks": perms["root"] or perms["application_clocks_root_only"] is False,
                "core-clock": perms["root"], "power-limit": perms["root"] and span is not None, "power_limit_w": span}

    def _refuse_if_left(self, what: str) -> None:
        if self.leave_clocks:
            raise ClockControlError(f"GPU {self.index} ({self.name}) was opened with leave_clocks=True: "
                                    f"its {what} the driver's, and gpudvfs sets none")

    def lock_clocks(self, core_mhz: float, mem_mhz: float) -> None:
        """Pin both clocks until `reset_clocks`.

        Raises
        ------
        ClockPermissionError
            Where setting clocks needs root; the message says how to get it.
        ClockControlError
            Where the device was opened with ``leave_clocks``, or the GPU cannot set the clocks.
        """
        self._refuse_if_left("clocks are")
        core = whole_mhz(core_mhz, "core_mhz")
        mem = whole_mhz(mem_mhz, "mem_mhz")
        cores = self.core_clocks(mem)  # also checks mem
        if core not in cores:
            raise InputError(f"core_mhz: {core_mhz!r} is not a supported core clock of "
                             f"{self.name} at memory clock {mem} MHz; supported: {cores}")
        self._control.lock(core, mem)

    def lock_core_clock(self, core_mhz: float) -> None:
        """Pin the core clock alone (``nvidia-smi -lgc``: locked clocks, Volta and newer) until `reset_clocks`.

        The memory clock is left to the driver. Raises as `lock_clocks`; `InputError` for a core
        clock the GPU lists at no memory clock.
        """
        self._refuse_if_left("clocks are")
        core = whole_mhz(core_mhz, "core_mhz")
        cores = sorted({c for m in self.memory_clocks() for c in self.core_clocks(m)}, reverse=True)
        if core not in cores:
            raise InputError(f"core_mhz: {core_mhz!r} is not a core clock {self.name} supports; supported: {cores}")
        self._control.lock_core(core)

    def set_power_limit(self, watts: float) -> None:
        """Set the board's power limit, W (root; within `power_limits`' ``min`` and ``max``), undone with the clocks.

        Raises
        ------
        InputError
            Where ``watts`` is outside the board's range.
        ClockPermissionError
            Where setting the limit needs root.
        ClockControlError
            Where the device was opened with ``leave_clocks``, or the board takes no limit.
        """
        self._refuse_if_left("settings are")
        limits = self.power_limits()
        low, high = limits["min"], limits["max"]
        if low is None or high is None:
            raise ClockControlError(f"{self.name} does not report the power limits it takes: it has no power-limit "
                                    "knob here")
        if not (is_finite_number(watts) and low <= watts <= high):
            raise InputError(f"power limit {watts!r} W is outside the {low:g}-{high:g} W {self.name} takes")
        self._control.set_power_limit(watts)

    def reset_clocks(self) -> None:
        """Undo every clock and power-limit setting this object made.

        `ClockControlError` where NVML refused; the message gives the ``nvidia-smi`` commands that do it.
        """
        self._control.reset()

    # -- power sensor -------------------------------------------------------------------------

    def infer_refresh_period(self, seconds: float = 3.0, min_changes: int = 30,
                             launch: LaunchFn | None = None, attempts: int = 3) -> float:
        """`gpudvfs.hardware.nvml.refresh.infer_period` on the power reading, kept in ``refresh_period_s``."""
        self.refresh_period_s = infer_period(self._power_mw, f"the power reading of {self.name}", seconds,
                                             min_changes, launch, attempts)
        return self.refresh_period_s

    def _sampling_period(self, launch: LaunchFn) -> float | None:
        """The refresh period samples are timed by, inferred on the first sampled measurement.

        None (from then on, with a warning) where it cannot be inferred.
        """
        if self.refresh_period_s is None and not self._refresh_failed:
            try:
                self.infer_refresh_period(launch=launch)
            except GpudvfsError as exc:  # the sensor's period is unknown; the power is not
                self._refresh_failed = True
                warnings.warn(f"{exc}. Power is sampled every {1e3 * UNKNOWN_PERIOD_INTERVAL_S:g} ms from now "
                              "on, and no measurement is checked against the sensor's period",
                              GpudvfsWarning, stacklevel=3)
        return self.refresh_period_s

    # -- measuring ----------------------------------------------------------------------------

    def profile(self, workload: Workload) -> dict[str, float]:
        """Counters of one launch at the current clocks, from Nsight Compute (NVML has none).

        ``ncu`` wraps a process that launches the workload (a manifest kernel, or a callable with an
        importable ``spec``) once on this GPU, reads its kernel named ``workload.profile_kernel`` (a
        microbenchmark's: its kernel function; else the first kernel launched), and its metrics map
        onto the power model's utilizations and the time model's inputs. The idle benchmark launches
        nothing: every component idles. Needs ``ncu`` on PATH and permission to read GPU counters (see
        `run_ncu`'s errors); `ValueError` where ncu recorded no launch of the kernel.
        """
        name = workload.profile_kernel
        if workload.kernel is not None and name is None:
            # By name: setting a benchmark up launches other kernels first (CuPy's random
            # generator fills its buffers), and an H100 profiled those (validation/).
            name = benchmark(workload.kernel).kernel
            if name is None:
                return dict.fromkeys(COMPONENTS, 0.0)
        metrics = required_metrics("power", "ncu") + required_metrics("time", "ncu")
        keep = None if self.ncu_logs is None else Path(self.ncu_logs) / f"{workload.name}.ncu.csv"
        # The clocks stay as this object locked them: ncu's default would lock the base clock.
        report = run_ncu(metrics, target_argv(workload, self.pci_bus_id()), launch_count=1, keep=keep,
                         kernel_name=name, extra_args=["--clock-control", "none"])
        if not report.kernels:
            which = f" matching {name!r}" if name else ""
            raise ValueError(f"ncu recorded no kernel launch{which} of {workload.name!r}")
        kernel = report.kernels[0]
        util = power_utilizations(kernel)
        time_inputs = time_model_inputs(kernel, missing="none")
        return {k: float(v) for k, v in {**util, **time_inputs}.items() if v is not None}

    def _default_launcher(self, workload: Workload) -> LaunchFn:
        return default_launcher(workload, self.pci_bus_id())

    def measure(self, workload: Workload, min_seconds: float = 1.0,
                repetitions: int | None = None) -> Measurement:
        """Launch ``workload`` back to back at the current clocks and measure time and power.

        The launches run until they span ``min_seconds`` or exactly ``repetitions`` times, after
        one untimed warm-up launch (first-launch costs such as module loading are not the
        kernel's). Power comes from the energy counter where the GPU has one: the mean power
        between the first and the last of its updates inside the window (polled every few ms;
        the raw difference where fewer than two came), else from power readings sampled at half
        the sensor's refresh period (so no update is missed) and integrated with the trapezoid
        rule over the measured launches alone, after launches over two refresh periods, with
        the sampler running, that let the lagging reading settle on the workload. Throttle
        reasons are polled before, during (every 10 ms, or with the power samples) and after,
        and any but the ignored ones flag the measurement; ``temperature_c`` is the mean of the
        polled readings. The clocks reported are the locked ones, or, when nothing is locked, the
        median of those NVML reported meanwhile. `GpudvfsError` where the energy counter went
        backwards.
        """
        if repetitions is None:
            if not (is_finite_number(min_seconds) and min_seconds > 0):
                raise InputError(f"min_seconds: expected a positive duration, got {min_seconds!r}")
        elif not is_count(repetitions, 1):
            raise InputError(f"repetitions: expected a positive integer, got {repetitions!r}")
        launch = self._launcher(workload)
        launch()
        sampled = not self.has_energy_counter or self.power == "samples"
        period = self._sampling_period(launch) if sampled else None
        locked = self._control.locked
        monitor = Monitor(self, sample_interval(sampled, period), power=sampled, clocks=locked is None)
        monitor.poll()
        monitor.start()
        counter = None if sampled else CounterPoller(self.energy_joules).start()
        times: list[float] = []
        try:
            if sampled:
                # Counted from here, after the sampler's thread has started: a slow warm-up
                # (module loading), the period's inference or, on a busy CPU, a late thread
                # start can leave the GPU idle for periods, and the window's first readings
                # would still be of that idle.
                settle = _SETTLE_UNKNOWN_S if period is None else _SETTLE_PERIODS * period
                settling = time.perf_counter()
                while time.perf_counter() - settling < settle:
                    launch()
            e0 = None if counter is None else self.energy_joules()
            t0 = end = time.perf_counter()
            while True:
                a = time.perf_counter()
                gpu_ms = launch()
                end = time.perf_counter()
                times.append(float(gpu_ms) / 1000.0 if gpu_ms is not None else end - a)
                if repetitions is not None:
                    if len(times) >= repetitions:
                        break
                elif end - t0 >= min_seconds:
                    break
            e1 = None if counter is None else self.energy_joules()
        finally:
            monitor.stop()
            if counter is not None:
                counter.stop()
        monitor.poll()
        duration = end - t0
        # The latency suite's readings (cycles per access), from the last launch.
        readings = getattr(launch, "result", None)
        result = readings() if readings is not None else {}

        if counter is None:
            watts = mean_between(monitor.times, monitor.watts, t0, end)
            if period is not None and duration < _MIN_REFRESH_PERIODS * period:
                warnings.warn(
                    f"{workload.name}: the measurement lasted {duration:.3g} s, under "
                    f"{_MIN_REFRESH_PERIODS} refresh periods of the power sensor "
                    f"({period:.3g} s); its power is mostly the surrounding "
                    "readings'", GpudvfsWarning, stacklevel=2)
        else:
            assert e0 is not None and e1 is not None  # a counter is polled only where the GPU has one
            watts = self._counter_watts(workload, counter, e1 - e0, t0, end)
        if locked is not None:
            core, mem = locked
        else:
            core, mem = statistics.median(monitor.core), statistics.median(monitor.mem)
        reasons = reason_names(monitor.mask & ~IGNORED_THROTTLE_REASONS)
        return Measurement(
            workload=workload.name,
            core_mhz=core,
            mem_mhz=mem,
            time_ms=1000.0 * sum(times) / len(times),
            watts=watts,
            joules=watts * duration,
            repetitions=len(times),
            duration_s=duration,
            power_source=("sampled-instant" if self.power_reading == "instant" else "sampled") if counter is None
            else "energy-counter",
            throttled=bool(reasons),
            throttle_reasons=reasons,
            temperature_c=statistics.fmean(monitor.temps),
            result=result,
        )

    def _counter_watts(self, workload: Workload, counter: CounterPoller, joules: float, t0: float,
                       t1: float) -> float:
        """The mean power over [t0, t1] from the energy counter, polled meanwhile.

        The counter advanced by ``joules`` from t0 to t1; NaN (with a warning) where it did not
        advance.
        """
        if joules < 0:
            raise GpudvfsError(f"{workload.name}: the energy counter of {self.name} went "
                               "backwards during the measurement (driver reloaded?)")
        if joules == 0:
            warnings.warn(
                f"{workload.name}: the energy counter did not advance during the "
                f"{t1 - t0:.3g} s measurement; power and energy are unknown (NaN). "
                "Measure for longer (min_seconds=...)", GpudvfsWarning, stacklevel=3)
            return math.nan
        # The mean power between the first and the last update inside the window, where two
        # came: a raw difference is off by up to one update's energy (20% over half a second on
        # an H200, whose counter updates every 0.1 s: validation/).
        between = counter.mean_power(t0, t1)
        return between if between is not None else joules / (t1 - t0)
