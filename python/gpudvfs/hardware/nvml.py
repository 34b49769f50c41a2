"""`NvmlDevice`: a real NVIDIA GPU behind the `Device` protocol, through NVML.

NVML comes from the PyPI package ``nvidia-ml-py`` (module ``pynvml``; not the unofficial
``pynvml`` package), imported only when an `NvmlDevice` is made, so gpudvfs imports without it.
Kernels are launched through a *launcher*: a callable that takes a `Workload` and returns a
zero-argument function that launches the work once and waits for it. The default launcher
loads microbenchmarks with `gpudvfs.hardware.kernels` on CuPy and calls ``workload.fn`` as is.
A launch function may return the launch's GPU time in milliseconds (e.g. from CUDA events);
`measure` then uses it instead of the wall clock around the launch. One with a ``result()``
method (the default launcher's, for microbenchmarks) gives what its last launch measured, which
`measure` records as `Measurement.result`: the latency suite's cycles per access, from which
the time device is fitted.

Clock control, by capability:

* locked clocks (``nvmlDeviceSetGpuLockedClocks``: Volta and newer;
  ``nvmlDeviceSetMemoryLockedClocks``: Ampere and newer), both need root;
* application clocks (``nvmlDeviceSetApplicationsClocks``) where locked clocks are not
  supported (before Volta, and the memory clock before Ampere); root, unless an administrator
  ran ``nvidia-smi -acp UNRESTRICTED``;
* the board's power limit (``nvmlDeviceSetPowerManagementLimit``, `set_power_limit`), root,
  within the range the board reports; reset puts back the limit it found. `knobs` says which
  of these this process may set, without setting any.

Power, by source (``power=``): the energy counter (Volta and newer) where the GPU has one, else
readings sampled through the measurement and integrated. ``power="samples"`` samples even where
a counter exists, to compare the two. Samples read NVML's instantaneous power field
(``NVML_FI_DEV_POWER_INSTANT``) where the driver answers it: from Ampere on,
``nvmlDeviceGetPowerUsage`` is a one-second average, too slow for short windows. Samples are
taken at half the reading's refresh period, inferred from the first sampled measurement; where
it cannot be inferred (an H100's instant field once changed more often than its period allows),
every 5 ms, with a warning.

``leave_clocks=True`` is for a GPU whose clocks are not this process's to change (a shared or
lent machine, even where the process is root): `lock_clocks` and `set_power_limit` then
refuse, nothing is set or reset, and `clock_permissions` tells what setting would need without trying it.

Locked clocks outlive the process, so they are reset on `reset_clocks`, on leaving the
``with`` block, at interpreter exit (atexit) and on SIGINT/SIGTERM (handlers installed while
any clocks are locked, chaining to the handlers they replaced, which are put back afterwards).
SIGKILL cannot be caught: after one, ``sudo nvidia-smi -rgc``, ``-rmc`` and ``-rac`` reset the
clocks, and ``-pl W`` the power limit. A power limit set is undone with the clocks.
"""

from __future__ import annotations

import atexit
import importlib
import math
import os
import signal
import statistics
import sys
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from gpudvfs.errors import GpudvfsError, GpudvfsWarning, InputError
from gpudvfs.hardware.device import ClockPermissionError, Measurement, Workload
from gpudvfs.hardware.energy_counter import CounterPoller
from gpudvfs.limits import is_count, is_finite_number

__all__ = [
    "IGNORED_THROTTLE_REASONS",
    "THROTTLE_REASONS",
    "ClockControlError",
    "NvmlDevice",
    "refresh_period_from_changes",
]

LaunchFn = Callable[[], "float | None"]
Launcher = Callable[[Workload], LaunchFn]

# NVML's clock event ("throttle") reason bits; the nvmlClocksEventReason* and older
# nvmlClocksThrottleReason* constants share these values.
THROTTLE_REASONS: tuple[tuple[int, str], ...] = (
    (0x0001, "gpu_idle"),
    (0x0002, "applications_clocks_setting"),
    (0x0004, "sw_power_cap"),
    (0x0008, "hw_slowdown"),
    (0x0010, "sync_boost"),
    (0x0020, "sw_thermal_slowdown"),
    (0x0040, "hw_thermal_slowdown"),
    (0x0080, "hw_power_brake_slowdown"),
    (0x0100, "display_clock_setting"),
    (0x0200, "board_limit"),
    (0x0400, "reliability"),
)
# Not throttling: GpuIdle is reported whenever nothing runs (before, between and after
# launches), and ApplicationsClocksSetting means "held at the clocks that were set", which is
# the configuration being measured.
IGNORED_THROTTLE_REASONS = 0x0001 | 0x0002

# Throttle/temperature polling period when power comes from the energy counter.
_MONITOR_INTERVAL_S = 0.01
# Power samples no closer than this: a reading that changes at every call (an instantaneous
# field) must not make the sampler spin.
_MIN_SAMPLE_INTERVAL_S = 0.001
# A sampled average needs several sensor updates to mean anything.
_MIN_REFRESH_PERIODS = 10
# Where the sensor's period could not be inferred: well under the 0.1 s an H100's instant
# field was seen to update at (validation/), so no update is missed.
_UNKNOWN_PERIOD_INTERVAL_S = 0.005
# A sampled reading lags the power: an averaged one by up to two refresh periods (the last
# completed period's mean, read up to a period later), a held instant field by up to one.
# Launches run this many periods before a sampled window, so its first readings are of the
# workload, not of what ran (or idled) before; where the period is unknown, two of the H100's.
_SETTLE_PERIODS = 2
_SETTLE_UNKNOWN_S = 0.2
#: Where `NvmlDevice.measure` takes power from: the energy counter where the GPU has one
#: ("auto"), always the counter, or always sampled readings.
POWER_SOURCES = ("auto", "energy-counter", "samples")
# nvmlFieldValue_t.valueType -> the member of its value union.
_FIELD_VALUE = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}


class ClockControlError(GpudvfsError, RuntimeError):
    """The GPU cannot be set to the requested clocks (not a permission problem)."""


def _reason_names(mask: int) -> tuple[str, ...]:
    names = [name for bit, name in THROTTLE_REASONS if mask & bit]
    known = 0
    for bit, _ in THROTTLE_REASONS:
        known |= bit
    if mask & ~known:
        names.append(f"unknown_0x{mask & ~known:x}")
    return tuple(names)


def _import_pynvml() -> Any:
    try:
        import pynvml
    except ImportError as exc:
        raise ImportError(
            "NvmlDevice needs NVML's Python bindings: pip install nvidia-ml-py "
            "(or gpudvfs[measure])"
        ) from exc
    return pynvml


def _whole_mhz(value: float, arg: str) -> int:
    try:
        f = float(value)
    except (TypeError, ValueError):
        raise InputError(f"{arg}: expected a clock in MHz, got {value!r}") from None
    if not math.isfinite(f) or f <= 0 or f != int(f):
        raise InputError(f"{arg}: expected a positive whole number of MHz, got {value!r}")
    return int(f)


def _process_name(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8") as f:
            return f.read().strip() or f"pid {pid}"
    except OSError:
        return f"pid {pid}"


def _mean_between(t: list[float], y: list[float], a: float, b: float) -> float:
    """Mean over [a, b] of readings ``y`` taken at ascending times ``t``, joined by straight
    lines (the trapezoid rule): a reading taken before the launches began, or after they
    ended, counts only as far as the line to it reaches into [a, b]."""
    times, readings = np.asarray(t), np.asarray(y)
    ts = np.concatenate(([a], times[(times > a) & (times < b)], [b]))
    ys = np.interp(ts, times, readings)
    return float(np.sum(np.diff(ts) * (ys[1:] + ys[:-1])) / (2 * (b - a)))


def refresh_period_from_changes(changes: list[tuple[float, float]]) -> float:
    """The update period of a sensor from the times its value was seen to change.

    Each change is a bracket ``(start of the last poll that saw the old value, end of the first
    poll that saw the new one)``: the update happened inside it. A change within a twentieth of
    the usual interval after the one before is the same update landing in two steps (an H100's
    instant power field does this at about one update in four, 0.1 ms apart: see validation/),
    and is merged into it. Brackets much wider than usual (the poller was
    descheduled) are dropped, since their update time is vague. The intervals between the
    remaining changes are whole multiples of the period (more than one where an update
    repeated the previous value or fell in a dropped bracket), so the period is taken as the
    largest value that (nearly) as many intervals are near-whole multiples of as of any value
    (an approximate greatest common divisor, where a median would follow the multiples), then
    refined as those intervals' total time over their total count of periods.
    Raises ValueError with fewer than 5 usable intervals.
    """
    if len(changes) < 6:
        raise ValueError(f"{len(changes)} changes seen, at least 6 needed")
    # The upper quartile of the intervals is a whole period even where half the updates land
    # in two steps (or where some repeat the value: then a multiple, still far above a step).
    gaps = sorted(b2 - b1 for (_, b1), (_, b2) in zip(changes, changes[1:]))
    split = gaps[3 * len(gaps) // 4] / 20
    merged = changes[:1]
    for a, b in changes[1:]:
        if b - merged[-1][1] >= split:
            merged.append((a, b))
    changes = merged
    widths = [b - a for a, b in changes]
    if len(widths) < 6:
        raise ValueError(f"{len(widths)} distinct updates seen, at least 6 needed")
    # A precise bracket is one poll wide; a quarter of them at least are, even when the
    # poller is descheduled often, so the lower quartile measures a poll.
    limit = 3 * sorted(widths)[len(widths) // 4]
    times = [b for a, b in changes if b - a <= limit]
    diffs = [y - x for x, y in zip(times, times[1:]) if y > x]
    if len(diffs) < 5:
        raise ValueError(f"{len(diffs)} precisely timed intervals, at least 5 needed")

    def fits(d: float, c: float) -> bool:
        m = round(d / c)
        return m >= 1 and abs(d / c - m) <= 0.12  # in periods; the polls' timing error

    candidates = sorted({d / m for d in diffs for m in range(1, 9)}, reverse=True)
    share = {c: sum(fits(d, c) for d in diffs) / len(diffs) for c in candidates}
    # Every fraction of the period fits as well as the period; a multiple of it fits only
    # the intervals that happen to be its multiples. Hence: the largest candidate that fits
    # (nearly) as many as the best one.
    top = max(share.values())
    if top < 0.8:
        raise ValueError("the intervals between changes share no common period")
    best = next(c for c in candidates if share[c] >= top - 0.05)
    kept = [d for d in diffs if fits(d, best)]
    period = sum(kept) / sum(round(d / best) for d in kept)
    # Cross-check against all changes, precise or not: each needs an update of its own, so no
    # more than span / period can be seen, and most updates should be seen (values rarely
    # repeat). A poller starved in step with the scheduler can fake a period that fails this.
    seen = (len(changes) - 1) * period / (changes[-1][1] - changes[0][1])
    if not 0.5 <= seen <= 1.05:
        raise ValueError(f"a period of {period:.4g} s would mean {seen:.0%} of the updates were "
                         "seen to change the value; the polls were likely delayed too much")
    return period


class _ClockGuard:
    """Resets every device with locked clocks at exit and on SIGINT/SIGTERM (one per process)."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self._devices: list[NvmlDevice] = []
        self._previous: dict[int, Any] = {}
        self._lock = threading.RLock()
        self._atexit_registered = False
        self._thread_warned = False

    def add(self, device: NvmlDevice) -> None:
        with self._lock:
            if device not in self._devices:
                self._devices.append(device)
            if not self._atexit_registered:
                atexit.register(self.reset_all)
                self._atexit_registered = True
            if not self._previous:
                self._install()

    def discard(self, device: NvmlDevice) -> None:
        with self._lock:
            if device in self._devices:
                self._devices.remove(device)
            if not self._devices:
                self._uninstall()

    def _install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            # Python only lets the main thread set signal handlers.
            if self._thread_warned:
                return
            self._thread_warned = True
            warnings.warn(
                "clocks locked from a thread other than the main one: SIGINT/SIGTERM cannot "
                "be hooked, so a signal would leave them locked (atexit still resets them)",
                GpudvfsWarning,
                stacklevel=4,
            )
            return
        for signum in self.SIGNALS:
            previous = signal.getsignal(signum)
            if previous is signal.SIG_IGN:
                continue  # the process does not end on it, so nothing to clean up
            # Recorded first: a signal right after the handler is set must find what to chain
            # to, not end the process as if there had been none.
            self._previous[signum] = previous
            signal.signal(signum, self._handle)

    def _uninstall(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return  # handlers stay; with no devices they only chain to the previous ones
        for signum, previous in self._previous.items():
            # Put back only our own handler: someone may have replaced it since.
            if signal.getsignal(signum) == self._handle:
                signal.signal(signum, signal.SIG_DFL if previous is None else previous)
        self._previous.clear()

    def reset_all(self) -> None:
        with self._lock:
            devices = list(self._devices)
        for device in devices:
            try:
                device.reset_clocks()
            except Exception as exc:  # one failure must not keep the others locked
                print(f"gpudvfs: could not reset clocks of GPU {device.index}: {exc}",
                      file=sys.stderr)

    def _handle(self, signum: int, frame: Any) -> None:
        previous = self._previous.get(signum, signal.SIG_DFL)
        self.reset_all()
        if callable(previous):
            previous(signum, frame)
            return
        # SIG_DFL (or a handler set outside Python): end the way the signal would have.
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)


_GUARD = _ClockGuard()


class _Monitor:
    """Polls power (when sampled), throttle reasons, temperature and clocks in a thread."""

    def __init__(self, device: NvmlDevice, interval: float, power: bool, clocks: bool):
        self.device = device
        self.interval = interval
        self.power = power
        self.clocks = clocks
        self.times: list[float] = []
        self.watts: list[float] = []
        self.mask = 0
        self.temps: list[float] = []
        self.core: list[float] = []
        self.mem: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="gpudvfs-nvml-monitor",
                                        daemon=True)
        self._error: BaseException | None = None

    def poll(self) -> None:
        d = self.device
        if self.power:
            w = d.power_watts()
            self.times.append(time.perf_counter())
            self.watts.append(w)
        self.mask |= d._throttle_mask()
        self.temps.append(d.temperature_c())
        if self.clocks:
            core, mem = d._current_clocks()
            self.core.append(core)
            self.mem.append(mem)

    def _run(self) -> None:
        start = time.perf_counter()
        k = 1
        try:
            # Absolute schedule, so the sampling period does not drift with the poll's cost.
            while not self._stop.wait(max(0.0, start + k * self.interval - time.perf_counter())):
                self.poll()
                k += 1
        except BaseException as exc:
            self._error = exc

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        if self._error is not None:
            raise self._error


class _OnDevice:
    """A loaded benchmark launched on its GPU (CuPy's current device while it runs)."""

    def __init__(self, run: Any, cuda_device: Any):
        self._run, self._device = run, cuda_device

    def __call__(self) -> None:
        with self._device:
            self._run()  # a loaded benchmark launches once and waits for its stream

    def result(self) -> dict[str, float]:
        """What the last launch measured (empty for a benchmark that measures nothing)."""
        if not getattr(self._run, "measures", False):
            return {}
        with self._device:
            return dict(self._run.result())


class NvmlDevice:
    """GPU ``index`` through NVML, satisfying the `Device` protocol.

    ``pynvml`` injects the NVML module (tests pass a stand-in); by default nvidia-ml-py's is
    imported. ``launcher`` maps a `Workload` to its launch-and-wait function (see the module
    docstring). ``default_clocks`` gives the reference (core, memory) MHz for GPUs that do not
    report default application clocks (most GeForce cards). ``power`` is one of
    `POWER_SOURCES` (see the module notes). ``leave_clocks``: never set the clocks (module
    notes). Use it as a context manager so clocks are reset and NVML shut down on the way out.
    """

    def __init__(self, index: int = 0, pynvml: Any = None, launcher: Launcher | None = None,
                 *, default_clocks: tuple[float, float] | None = None, power: str = "auto",
                 leave_clocks: bool = False):
        if power not in POWER_SOURCES:
            raise InputError(f"power: expected one of {POWER_SOURCES}, got {power!r}")
        nv = _import_pynvml() if pynvml is None else pynvml
        self._nv = nv
        try:
            nv.nvmlInit()
        except nv.NVMLError as exc:
            raise GpudvfsError(
                f"NVML could not be initialised ({exc}); NvmlDevice needs the NVIDIA driver "
                "(libnvidia-ml) on this machine"
            ) from exc
        self._nvml_open = True
        try:
            count = nv.nvmlDeviceGetCount()
            if not is_count(index) or index >= count:
                raise InputError(f"index: expected a GPU index in 0..{count - 1}, got {index!r}")
            self.index = index
            self._handle = nv.nvmlDeviceGetHandleByIndex(index)
            name = nv.nvmlDeviceGetName(self._handle)
            self.name: str = name.decode() if isinstance(name, bytes) else str(name)
            self._has_energy = self._probe_energy()
            if power == "energy-counter" and not self._has_energy:
                raise GpudvfsError(f"{self.name} has no energy counter (it needs Volta or newer); "
                                   "use power='auto' or 'samples'")
            self._instant_field = self._probe_instant_power()
        except BaseException:
            self.close()
            raise
        self.power = power
        self.leave_clocks = bool(leave_clocks)
        self._launcher: Launcher = launcher if launcher is not None else self._default_launcher
        self._default_override = default_clocks
        self.refresh_period_s: float | None = None
        self._refresh_failed = False  # inferring it failed once: not tried again
        #: Where `profile` keeps each raw ncu CSV (``<workload>.ncu.csv``); None keeps none.
        self.ncu_logs: Path | None = None
        self._state = threading.RLock()
        self._active: list[str] = []  # NVML settings in force, in the order they were made
        self._locked: tuple[float, float] | None = None
        self._limit_before_mw: int | None = None  # the power limit before `set_power_limit`
        self._gpu_lock_ok: bool | None = None  # capability, learnt on first use
        self._mem_lock_ok: bool | None = None
        self._reasons_fn: Callable[[Any], int] | None = None
        self._reasons_warned = False
        self._mem_clocks: list[float] | None = None
        self._core_clocks: dict[float, list[float]] = {}

    # -- lifetime ---------------------------------------------------------------------------

    def __enter__(self) -> NvmlDevice:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Reset the clocks and shut NVML down (NVML counts its users, so others keep it)."""
        try:
            if getattr(self, "_active", None):
                self.reset_clocks()
        finally:
            if getattr(self, "_nvml_open", False):
                self._nvml_open = False
                self._nv.nvmlShutdown()

    # -- queries ----------------------------------------------------------------------------

    def _unsupported(self) -> tuple[type[BaseException], ...]:
        # FunctionNotFound: the driver predates the call; treated like NotSupported.
        nv = self._nv
        return (nv.NVMLError_NotSupported, nv.NVMLError_FunctionNotFound)

    def _probe_energy(self) -> bool:
        try:
            self._nv.nvmlDeviceGetTotalEnergyConsumption(self._handle)
        except self._unsupported():
            return False
        return True

    def _probe_instant_power(self) -> int | None:
        """NVML's instantaneous power field id where this driver and GPU answer it, else None."""
        nv = self._nv
        field = getattr(nv, "NVML_FI_DEV_POWER_INSTANT", None)
        if field is None or not hasattr(nv, "nvmlDeviceGetFieldValues"):
            return None
        try:
            value = nv.nvmlDeviceGetFieldValues(self._handle, [field])[0]
        except nv.NVMLError:
            return None
        return field if value.nvmlReturn == 0 and value.valueType in _FIELD_VALUE else None

    @property
    def power_reading(self) -> str:
        """Which reading power samples come from: ``"instant"`` or ``"average"``
        (``nvmlDeviceGetPowerUsage``, a one-second average from Ampere on)."""
        return "average" if self._instant_field is None else "instant"

    def _power_mw(self) -> float:
        if self._instant_field is not None:
            value = self._nv.nvmlDeviceGetFieldValues(self._handle, [self._instant_field])[0]
            if value.nvmlReturn == 0:
                return float(getattr(value.value, _FIELD_VALUE[value.valueType]))
            # Once the field fails, the average serves from then on, and the samples say so
            # (`power_reading`, a measurement's `power_source`), instead of mixing the two.
            warnings.warn(GpudvfsWarning(
                f"{self.name}: NVML's instant power field failed (return code {value.nvmlReturn}); power "
                "samples come from nvmlDeviceGetPowerUsage from now on (a one-second average from Ampere on)"),
                stacklevel=2)
            self._instant_field = None
        return float(self._nv.nvmlDeviceGetPowerUsage(self._handle))

    def power_limits(self) -> dict[str, float | None]:
        """The board's power limits in W: ``enforced`` now, ``default``, and the range an
        administrator may set (``min``, ``max``); None where NVML does not tell."""
        nv, h = self._nv, self._handle

        def call(name: str):
            fn = getattr(nv, name, None)
            if fn is None:
                return None
            try:
                return fn(h)
            except nv.NVMLError:
                return None

        bounds = call("nvmlDeviceGetPowerManagementLimitConstraints") or (None, None)
        watts = [None if v is None else v / 1000.0 for v in (call("nvmlDeviceGetEnforcedPowerLimit"),
                                                             call("nvmlDeviceGetPowerManagementDefaultLimit"),
                                                             *bounds)]
        return dict(zip(("enforced", "default", "min", "max"), watts))

    def memory_clocks(self) -> list[float]:
        if self._mem_clocks is None:
            raw = self._nv.nvmlDeviceGetSupportedMemoryClocks(self._handle)
            self._mem_clocks = sorted((float(c) for c in raw), reverse=True)
        return list(self._mem_clocks)

    def core_clocks(self, mem_mhz: float) -> list[float]:
        mem = _whole_mhz(mem_mhz, "mem_mhz")
        supported = self.memory_clocks()
        if mem not in supported:
            raise InputError(f"mem_mhz: {mem_mhz!r} is not a supported memory clock of "
                             f"{self.name}; supported: {supported}")
        key = float(mem)
        if key not in self._core_clocks:
            raw = self._nv.nvmlDeviceGetSupportedGraphicsClocks(self._handle, mem)
            self._core_clocks[key] = sorted((float(c) for c in raw), reverse=True)
        return list(self._core_clocks[key])

    def default_clocks(self) -> tuple[float, float]:
        if self._default_override is not None:
            core, mem = self._default_override
            return float(core), float(mem)
        nv = self._nv
        try:
            core = nv.nvmlDeviceGetDefaultApplicationsClock(self._handle, nv.NVML_CLOCK_GRAPHICS)
            mem = nv.nvmlDeviceGetDefaultApplicationsClock(self._handle, nv.NVML_CLOCK_MEM)
        except self._unsupported() as exc:
            raise ClockControlError(
                f"{self.name} reports no default application clocks ({exc}); give the "
                "reference configuration as NvmlDevice(default_clocks=(core_mhz, mem_mhz))"
            ) from exc
        return float(core), float(mem)

    def power_watts(self) -> float:
        """The power reading now (see `power_reading`)."""
        return self._power_mw() / 1000.0  # NVML gives mW

    def energy_joules(self) -> float | None:
        if not self._has_energy:
            return None
        return self._nv.nvmlDeviceGetTotalEnergyConsumption(self._handle) / 1000.0  # mJ

    def temperature_c(self) -> float:
        nv = self._nv
        return float(nv.nvmlDeviceGetTemperature(self._handle, nv.NVML_TEMPERATURE_GPU))

    def _current_clocks(self) -> tuple[float, float]:
        nv = self._nv
        return (float(nv.nvmlDeviceGetClockInfo(self._handle, nv.NVML_CLOCK_GRAPHICS)),
                float(nv.nvmlDeviceGetClockInfo(self._handle, nv.NVML_CLOCK_MEM)))

    @property
    def clocks(self) -> tuple[float, float]:
        """The (core, memory) MHz the GPU runs at now."""
        return self._current_clocks()

    def processes(self) -> tuple[tuple[int, str], ...]:
        """The compute processes on this GPU: (pid, name), by pid. The name is the process's
        command where this process can see it (``/proc``; another PID namespace cannot),
        else ``pid <N>``."""
        procs = self._nv.nvmlDeviceGetComputeRunningProcesses(self._handle)
        return tuple(sorted((int(p.pid), _process_name(int(p.pid))) for p in procs))

    def gpm(self):
        """GPM activities of this GPU (`gpudvfs.hardware.gpm.GpmActivity`: Hopper and newer), or
        None where NVML has no GPM for it."""
        from gpudvfs.hardware.gpm import GpmActivity

        return GpmActivity.open(self._nv, self._handle)

    def utilization(self) -> tuple[float, float]:
        """(kernel, memory) busy fractions over NVML's last sample period: the share of time a
        kernel ran, and the share device memory was read or written. Coarser than DCGM's
        profiling activities: a kernel that keeps one SM busy counts as fully busy."""
        u = self._nv.nvmlDeviceGetUtilizationRates(self._handle)
        return float(u.gpu) / 100.0, float(u.memory) / 100.0

    def _throttle_mask(self) -> int:
        """Raw reason bits; 0 (after one warning) where the GPU cannot report them."""
        nv = self._nv
        if self._reasons_fn is None:
            # The "event reasons" call replaced the "throttle reasons" one (same bits) in
            # newer drivers; older bindings or drivers only have the latter.
            candidates = [getattr(nv, n) for n in ("nvmlDeviceGetCurrentClocksEventReasons",
                                                   "nvmlDeviceGetCurrentClocksThrottleReasons")
                          if hasattr(nv, n)]
            for fn in candidates:
                try:
                    mask = int(fn(self._handle))
                except nv.NVMLError_FunctionNotFound:
                    continue
                except nv.NVMLError_NotSupported:
                    break
                self._reasons_fn = fn
                return mask
            self._reasons_fn = lambda handle: 0
            if not self._reasons_warned:
                self._reasons_warned = True
                warnings.warn(f"{self.name} does not report clock throttle reasons; "
                              "measurements cannot be flagged as throttled",
                              GpudvfsWarning, stacklevel=3)
            return 0
        return int(self._reasons_fn(self._handle))

    def throttle_reasons(self) -> tuple[str, ...]:
        """Active reasons holding the clocks down, without the ignored ones
        (`IGNORED_THROTTLE_REASONS`: GPU idle, application clocks setting)."""
        return _reason_names(self._throttle_mask() & ~IGNORED_THROTTLE_REASONS)

    # -- clocks -----------------------------------------------------------------------------

    def _permission_error(self, kind: str, core: int, mem: int,
                          exc: BaseException) -> ClockPermissionError:
        where = f"GPU {self.index} ({self.name})"
        if kind == "locked":
            msg = (f"setting locked clocks on {where} needs root (NVML returned: {exc}). "
                   "Run as root, e.g. `sudo python ...`: the privilege "
                   f"`sudo nvidia-smi -i {self.index} -lgc {core},{core}` needs. NVML has no "
                   "setting that opens locked clocks to other users.")
        else:
            msg = (f"setting application clocks on {where} needs root (NVML returned: {exc}). "
                   "Run as root, or have an administrator allow all users with "
                   f"`sudo nvidia-smi -i {self.index} -acp UNRESTRICTED` (on drivers that still "
                   "honour this deprecated switch). That permission lasts "
                   "only while the driver keeps the GPU initialised; on a headless Linux machine "
                   "it is lost when the last GPU process exits unless persistence mode is on: "
                   f"`sudo nvidia-smi -i {self.index} -pm 1` first.")
        return ClockPermissionError(msg)

    def clock_permissions(self) -> dict:
        """What setting clocks would take here, read without setting any: whether this process
        is root (locked clocks need it) and whether NVML restricts application clocks to root
        (None where the driver does not say)."""
        nv = self._nv
        try:
            restricted = nv.nvmlDeviceGetAPIRestriction(self._handle, nv.NVML_RESTRICTED_API_SET_APPLICATION_CLOCKS)
        except (*self._unsupported(), AttributeError):
            restricted = None
        return {"root": hasattr(os, "geteuid") and os.geteuid() == 0,
                "application_clocks_root_only": None if restricted is None
                else restricted == nv.NVML_FEATURE_ENABLED}

    def knobs(self) -> dict:
        """What this process may set, read without setting anything: ``clocks`` (root, or
        application clocks open to all) and ``power_limit`` (root, where the board reports its
        range), and ``power_limit_w``, that range (None where it does not say)."""
        perms = self.clock_permissions()
        limits = self.power_limits()
        span = None if limits["min"] is None or limits["max"] is None else (limits["min"], limits["max"])
        return {"clocks": perms["root"] or perms["application_clocks_root_only"] is False,
                "power_limit": perms["root"] and span is not None, "power_limit_w": span}

    def lock_clocks(self, core_mhz: float, mem_mhz: float) -> None:
        if self.leave_clocks:
            raise ClockControlError(f"GPU {self.index} ({self.name}) was opened with leave_clocks=True: "
                                    "its clocks are the driver's, and gpudvfs sets none")
        core = _whole_mhz(core_mhz, "core_mhz")
        mem = _whole_mhz(mem_mhz, "mem_mhz")
        cores = self.core_clocks(mem)  # also checks mem
        if core not in cores:
            raise InputError(f"core_mhz: {core_mhz!r} is not a supported core clock of "
                             f"{self.name} at memory clock {mem} MHz; supported: {cores}")
        with self._state:
            if self._active:
                self.reset_clocks()  # start from driver control, so settings never mix
            _GUARD.add(self)  # before the first NVML call, so a signal mid-way still resets
            try:
                self._apply(core, mem)
            except BaseException as exc:
                try:
                    self.reset_clocks()
                except ClockControlError as reset_exc:
                    raise reset_exc from exc
                raise
            self._locked = (float(core), float(mem))

    def _apply(self, core: int, mem: int) -> None:
        nv, h = self._nv, self._handle
        unsupported = self._unsupported()
        gpu_done = mem_done = False
        if self._gpu_lock_ok is not False:
            try:
                nv.nvmlDeviceSetGpuLockedClocks(h, core, core)
            except unsupported:
                self._gpu_lock_ok = False
            except nv.NVMLError_NoPermission as exc:
                raise self._permission_error("locked", core, mem, exc) from exc
            else:
                self._gpu_lock_ok = gpu_done = True
                self._active.append("gpu_locked")
        if gpu_done and self._mem_lock_ok is not False:
            try:
                nv.nvmlDeviceSetMemoryLockedClocks(h, mem, mem)
            except (*unsupported, AttributeError):  # AttributeError: bindings too old
                self._mem_lock_ok = False
            except nv.NVMLError_NoPermission as exc:
                raise self._permission_error("locked", core, mem, exc) from exc
            else:
                self._mem_lock_ok = mem_done = True
                self._active.append("mem_locked")
        if gpu_done and mem_done:
            return
        # Application clocks carry both clocks: all of them before Volta, the memory clock
        # before Ampere (where the core clock is already locked and takes precedence).
        try:
            nv.nvmlDeviceSetApplicationsClocks(h, mem, core)
        except unsupported as exc:
            what = "the memory clock" if gpu_done else "clocks"
            raise ClockControlError(
                f"{self.name} supports neither locked nor application clocks for {what} "
                f"({exc}); cannot run at {core} MHz core / {mem} MHz memory"
            ) from exc
        except nv.NVMLError_NoPermission as exc:
            raise self._permission_error("application", core, mem, exc) from exc
        self._active.append("app_clocks")

    def set_power_limit(self, watts: float) -> None:
        """Set the board's power limit (root; within `power_limits`' ``min`` and ``max``).
        `reset_clocks` (and `close`, and the signal guard) puts back the limit it found, as it
        undoes clock settings."""
        if self.leave_clocks:
            raise ClockControlError(f"GPU {self.index} ({self.name}) was opened with leave_clocks=True: "
                                    "its settings are the driver's, and gpudvfs sets none")
        limits = self.power_limits()
        low, high = limits["min"], limits["max"]
        if low is None or high is None:
            raise ClockControlError(f"{self.name} does not report the power limits it takes: it has no power-limit "
                                    "knob here")
        if not (is_finite_number(watts) and low <= watts <= high):
            raise InputError(f"power limit {watts!r} W is outside the {low:g}-{high:g} W {self.name} takes")
        nv, h = self._nv, self._handle
        with self._state:
            if "power_limit" not in self._active:
                self._limit_before_mw = int(nv.nvmlDeviceGetPowerManagementLimit(h))
            _GUARD.add(self)  # before the NVML call, so a signal mid-way still puts the limit back
            try:
                nv.nvmlDeviceSetPowerManagementLimit(h, round(watts * 1000))
            except BaseException as exc:
                if not self._active:
                    _GUARD.discard(self)
                if isinstance(exc, nv.NVMLError_NoPermission):
                    raise ClockPermissionError(
                        f"setting the power limit of GPU {self.index} ({self.name}) needs root (NVML returned: "
                        f"{exc}); the privilege `sudo nvidia-smi -i {self.index} -pl {watts:g}` needs") from exc
                if isinstance(exc, self._unsupported()):
                    raise ClockControlError(f"{self.name} does not take a power limit ({exc})") from exc
                raise
            if "power_limit" not in self._active:
                self._active.append("power_limit")

    def reset_clocks(self) -> None:
        """Undo every clock (and power-limit) setting this object made (no-op when it made none)."""
        nv, h = self._nv, self._handle
        resets = {"gpu_locked": "nvmlDeviceResetGpuLockedClocks",
                  "mem_locked": "nvmlDeviceResetMemoryLockedClocks",
                  "app_clocks": "nvmlDeviceResetApplicationsClocks"}
        with self._state:
            failed: list[str] = []
            for what in reversed(list(self._active)):
                # The guard's signal handler may reset (re-entrantly, in this thread) while
                # this loop runs: what it undid is gone from the list already.
                if what not in self._active:
                    continue
                try:
                    if what == "power_limit":
                        nv.nvmlDeviceSetPowerManagementLimit(h, self._limit_before_mw)
                    else:
                        getattr(nv, resets[what])(h)
                except nv.NVMLError as exc:
                    failed.append(f"{what}: {exc}")
                else:
                    if what in self._active:
                        self._active.remove(what)
            if failed:
                # Still registered with the guard, so exit handling tries again.
                raise ClockControlError(f"could not reset clocks of GPU {self.index} "
                                        f"({'; '.join(failed)}); reset them with `sudo "
                                        f"nvidia-smi -i {self.index} -rgc` (locked core clock), "
                                        "`-rmc` (locked memory clock), `-rac` (application "
                                        "clocks) or `-pl W` (the power limit)")
            self._locked = None
            _GUARD.discard(self)

    # -- power sensor -----------------------------------------------------------------------

    def infer_refresh_period(self, seconds: float = 3.0, min_changes: int = 30,
                             launch: LaunchFn | None = None, attempts: int = 3) -> float:
        """Infer how often the power reading updates: poll it as fast as possible, time the
        changes of value and estimate the period with `refresh_period_from_changes`. Polls
        until ``min_changes`` changes or ``seconds``; polls again, up to ``attempts`` times in
        all, when the polls were timed too badly to tell (a busy CPU). ``launch``, if given, is
        run repeatedly in this thread meanwhile, so a reading that is flat at idle still moves.
        Stores the period in ``refresh_period_s`` and returns it."""
        if not (seconds > 0 and math.isfinite(seconds)):
            raise InputError(f"seconds: expected a positive duration, got {seconds!r}")
        if min_changes < 7:
            raise InputError(f"min_changes: expected at least 7, got {min_changes!r}")
        if attempts < 1:
            raise InputError(f"attempts: expected at least 1, got {attempts!r}")
        for attempt in range(1, attempts + 1):
            changes = self._power_changes(seconds, min_changes, launch)
            try:
                period = refresh_period_from_changes(changes)
            except ValueError as exc:
                if len(changes) < min_changes:
                    raise GpudvfsError(
                        f"the power reading of {self.name} changed {len(changes)} times in "
                        f"{seconds} s, too few to infer its refresh period ({exc}); pass a "
                        "workload to keep the GPU busy (launch=...) or poll for longer "
                        "(seconds=...)") from None
                if attempt == attempts:
                    raise GpudvfsError(
                        f"could not infer the refresh period of {self.name}'s power reading in "
                        f"{attempts} attempts ({exc}); retry on a less busy CPU") from None
            else:
                self.refresh_period_s = period
                return period
        raise AssertionError("unreachable")

    def _power_changes(self, seconds: float, min_changes: int,
                       launch: LaunchFn | None) -> list[tuple[float, float]]:
        done = threading.Event()
        changes: list[tuple[float, float]] = []
        error: list[BaseException] = []

        def poll() -> None:
            try:
                # A reading is taken somewhere inside its call, so a change seen by one call
                # happened after the previous call began and before this one returned.
                previous_start = time.perf_counter()
                deadline = previous_start + seconds
                last = self._power_mw()
                while not done.is_set() and len(changes) < min_changes:
                    start = time.perf_counter()
                    value = self._power_mw()
                    end = time.perf_counter()
                    if value != last:
                        changes.append((previous_start, end))
                        last = value
                    previous_start = start
                    if end > deadline:
                        break
            except BaseException as exc:
                error.append(exc)
            finally:
                done.set()

        if launch is None:
            poll()
        else:
            # The poller gets its own thread: launches can last longer than a refresh period.
            poller = threading.Thread(target=poll, name="gpudvfs-refresh-poll", daemon=True)
            poller.start()
            try:
                while not done.is_set():
                    launch()
            finally:
                done.set()
                poller.join()
        if error:
            raise error[0]
        return changes

    # -- measuring --------------------------------------------------------------------------

    def profile(self, workload: Workload) -> dict[str, float]:
        """Counters of one launch at the current clocks, from Nsight Compute (NVML has
        none): ``ncu`` wraps a process that launches the workload once on this GPU, reads its
        kernel named ``workload.profile_kernel`` (a microbenchmark's: its kernel function; else
        the first kernel launched), and its metrics map onto the power model's utilizations and
        the time model's inputs. The idle benchmark launches nothing: every component idles.
        Needs ``ncu`` on PATH and permission to read GPU counters (see run_ncu's errors)."""
        from gpudvfs.data.counters import COMPONENTS, power_utilizations, required_metrics, time_model_inputs
        from gpudvfs.hardware.launch import target_argv
        from gpudvfs.hardware.ncu import run_ncu

        name = workload.profile_kernel
        if workload.kernel is not None and name is None:
            from gpudvfs.hardware.kernels import benchmark

            # By name: setting a benchmark up launches other kernels first (CuPy's random
            # generator fills its buffers), and an H100 profiled those (validation/).
            name = benchmark(workload.kernel).kernel
            if name is None:
                return dict.fromkeys(COMPONENTS, 0.0)
        metrics = required_metrics("power", "ncu") + required_metrics("time", "ncu")
        keep = None if self.ncu_logs is None else Path(self.ncu_logs) / f"{workload.name}.ncu.csv"
        # The clocks stay as this object locked them: ncu's default would lock the base clock.
        report = run_ncu(metrics, target_argv(workload, self._pci_bus_id()), launch_count=1, keep=keep,
                         kernel_name=name, extra_args=["--clock-control", "none"])
        if not report.kernels:
            which = f" matching {name!r}" if name else ""
            raise ValueError(f"ncu recorded no kernel launch{which} of {workload.name!r}")
        kernel = report.kernels[0]
        util = power_utilizations(kernel)
        time_inputs = time_model_inputs(kernel, missing="none")
        return {k: float(v) for k, v in {**util, **time_inputs}.items() if v is not None}

    def _pci_bus_id(self) -> str:
        """The GPU's PCI address: CUDA and NVML may number GPUs differently
        (CUDA_DEVICE_ORDER); the address names the same GPU in both."""
        pci = self._nv.nvmlDeviceGetPciInfo(self._handle)
        return f"{pci.domain:04x}:{pci.bus:02x}:{pci.device:02x}.0"

    def identity(self) -> dict[str, str | float | bool | None]:
        uuid = self._nv.nvmlDeviceGetUUID(self._handle)
        return {"kind": "nvml", "name": self.name, "uuid": uuid.decode() if isinstance(uuid, bytes) else str(uuid),
                "power": self.power}

    def check(self, workload: Workload) -> None:
        """A real GPU runs manifest kernels and callables; counters alone describe a
        workload to the simulator only."""
        if workload.kernel is None and workload.fn is None:
            raise InputError(f"workload {workload.name!r} has only 'counters', which describe a workload to the "
                             "simulated GPU; on a real GPU give a manifest kernel or a 'callable'")
        if workload.kernel is not None:
            from gpudvfs.hardware.kernels import load_manifest

            if workload.kernel not in load_manifest().benchmarks:
                raise InputError(f"workload {workload.name!r}: no benchmark {workload.kernel!r} in the kernel manifest")

    def sm_count(self) -> int:
        """Streaming multiprocessors, from CUDA (NVML does not report them)."""
        try:
            import cupy
        except ImportError as exc:
            raise ImportError("the SM count comes from CUDA: pip install cupy-cuda12x "
                              "(or gpudvfs[measure])") from exc
        device = cupy.cuda.Device.from_pci_bus_id(self._pci_bus_id())
        return int(device.attributes["MultiProcessorCount"])

    def _default_launcher(self, workload: Workload) -> LaunchFn:
        if workload.fn is not None:
            from gpudvfs.hardware.launch import callable_device

            fn, where = workload.fn, callable_device(self._pci_bus_id())

            def launch_fn() -> None:
                with where:  # CuPy's current device is this GPU
                    fn()  # by the Workload contract it launches and waits; its result is not a time

            return launch_fn
        try:
            import cupy
        except ImportError as exc:
            raise ImportError("kernel workloads need CuPy: pip install cupy-cuda12x "
                              "(or gpudvfs[measure])") from exc
        kernels = importlib.import_module("gpudvfs.hardware.kernels")
        cuda_device = cupy.cuda.Device.from_pci_bus_id(self._pci_bus_id())
        with cuda_device:  # kernels.load compiles and allocates on the current device
            run = kernels.load(workload.kernel, dict(workload.params))
        return _OnDevice(run, cuda_device)

    def measure(self, workload: Workload, min_seconds: float = 1.0,
                repetitions: int | None = None) -> Measurement:
        """Launch ``workload`` back to back until the launches span ``min_seconds`` or exactly
        ``repetitions`` times, after one untimed warm-up launch (first-launch costs such as
        module loading are not the kernel's). Power comes from the energy counter where the
        GPU has one: the mean power between the first and the last of its updates inside the
        window (polled every few ms; the raw difference where fewer than two came), else from
        power readings sampled at half the sensor's refresh period (so no update is missed) and
        integrated with the trapezoid rule over the measured launches
        alone, after launches over two refresh periods, with the sampler running, that let the
        lagging reading settle on the workload. Throttle reasons are polled before, during
        (every 10 ms, or with the power samples) and after, and any but the ignored ones (GPU
        idle, application clocks setting) flag the measurement; ``temperature_c`` is the mean
        of the polled readings. The clocks reported are the locked ones, or, when nothing is
        locked, the median of those NVML reported meanwhile.
        """
        if repetitions is None:
            if not (is_finite_number(min_seconds) and min_seconds > 0):
                raise InputError(f"min_seconds: expected a positive duration, got {min_seconds!r}")
        elif not is_count(repetitions, 1):
            raise InputError(f"repetitions: expected a positive integer, got {repetitions!r}")
        launch = self._launcher(workload)
        launch()
        sampled = not self._has_energy or self.power == "samples"
        if sampled and self.refresh_period_s is None and not self._refresh_failed:
            try:
                self.infer_refresh_period(launch=launch)
            except GpudvfsError as exc:  # the sensor's period is unknown; the power is not
                self._refresh_failed = True
                warnings.warn(f"{exc}. Power is sampled every {1e3 * _UNKNOWN_PERIOD_INTERVAL_S:g} ms from now "
                              "on, and no measurement is checked against the sensor's period",
                              GpudvfsWarning, stacklevel=2)
        period = self.refresh_period_s
        if not sampled:
            interval = _MONITOR_INTERVAL_S
        else:
            interval = _UNKNOWN_PERIOD_INTERVAL_S if period is None else max(period / 2, _MIN_SAMPLE_INTERVAL_S)
        locked = self._locked
        monitor = _Monitor(self, interval, power=sampled, clocks=locked is None)
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
            e0 = None if sampled else self._nv.nvmlDeviceGetTotalEnergyConsumption(self._handle)
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
            e1 = None if sampled else self._nv.nvmlDeviceGetTotalEnergyConsumption(self._handle)
        finally:
            monitor.stop()
            if counter is not None:
                counter.stop()
        monitor.poll()
        duration = end - t0
        # The latency suite's readings (cycles per access), from the last launch.
        readings = getattr(launch, "result", None)
        result = readings() if readings is not None else {}

        if sampled:
            watts = _mean_between(monitor.times, monitor.watts, t0, end)
            joules = watts * duration
            if period is not None and duration < _MIN_REFRESH_PERIODS * period:
                warnings.warn(
                    f"{workload.name}: the measurement lasted {duration:.3g} s, under "
                    f"{_MIN_REFRESH_PERIODS} refresh periods of the power sensor "
                    f"({period:.3g} s); its power is mostly the surrounding "
                    "readings'", GpudvfsWarning, stacklevel=2)
        else:
            assert e0 is not None and e1 is not None
            if e1 < e0:
                raise GpudvfsError(f"{workload.name}: the energy counter of {self.name} went "
                                   "backwards during the measurement (driver reloaded?)")
            if e1 == e0:
                warnings.warn(
                    f"{workload.name}: the energy counter did not advance during the "
                    f"{duration:.3g} s measurement; power and energy are unknown (NaN). "
                    "Measure for longer (min_seconds=...)", GpudvfsWarning, stacklevel=2)
                joules = watts = math.nan
            else:
                # The mean power between the first and the last update inside the window, where
                # two came: a raw difference is off by up to one update's energy (20% over half
                # a second on an H200, whose counter updates every 0.1 s: validation/).
                between = counter.mean_power(t0, end) if counter is not None else None
                watts = between if between is not None else (e1 - e0) / 1000.0 / duration
                joules = watts * duration

        if locked is not None:
            core, mem = locked
        else:
            core, mem = statistics.median(monitor.core), statistics.median(monitor.mem)
        reasons = _reason_names(monitor.mask & ~IGNORED_THROTTLE_REASONS)
        return Measurement(
            workload=workload.name,
            core_mhz=core,
            mem_mhz=mem,
            time_ms=1000.0 * sum(times) / len(times),
            watts=watts,
            joules=joules,
            repetitions=len(times),
            duration_s=duration,
            power_source=("sampled-instant" if self._instant_field is not None else "sampled") if sampled
            else "energy-counter",
            throttled=bool(reasons),
            throttle_reasons=reasons,
            temperature_c=statistics.fmean(monitor.temps),
            result=result,
        )
