"""A STAND-IN for nvidia-ml-py's ``pynvml`` module: one in-memory fake GPU, for tests.

No NVIDIA code and no GPU. It copies the names, argument order, units (mW, mJ, MHz) and
error classes of the subset of nvidia-ml-py that `NvmlDevice` uses (test_nvml.py checks them
against the real module when it is installed), and simulates a GPU whose capabilities a test
chooses: locked clocks or not, root or not, energy counter or not, and so on.

Ground truth: the GPU draws ``idle_watts`` when idle and ``busy_watts(core, mem)`` while a
test's workload runs (`FakeNvml.run`); `true_energy_j` integrates that exactly. The energy
counter reports the same integral in whole mJ. The power sensor, like NVIDIA's, only updates
every ``refresh_s``: each update reports the mean true power over the period just ended plus
a little seeded Gaussian noise. Time is real (``time.perf_counter``), with small periods, or a
test's `virtual_clock.VirtualClock` (``clock=``), which `run` moves instead of sleeping.
"""

from __future__ import annotations

import bisect
import json
import math
import os
import random
import threading
import time
from collections.abc import Callable
from types import SimpleNamespace

from virtual_clock import VirtualClock

# Constants, with nvidia-ml-py's names and values.
NVML_SUCCESS = 0
NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_CLOCK_GRAPHICS = 0
NVML_CLOCK_SM = 1
NVML_CLOCK_MEM = 2
NVML_TEMPERATURE_GPU = 0
nvmlClocksThrottleReasonGpuIdle = 0x0000000000000001
nvmlClocksThrottleReasonApplicationsClocksSetting = 0x0000000000000002
nvmlClocksThrottleReasonSwPowerCap = 0x0000000000000004
nvmlClocksThrottleReasonHwSlowdown = 0x0000000000000008
nvmlClocksThrottleReasonSwThermalSlowdown = 0x0000000000000020
nvmlClocksThrottleReasonHwThermalSlowdown = 0x0000000000000040
nvmlClocksEventReasonGpuIdle = 0x0000000000000001
nvmlClocksEventReasonApplicationsClocksSetting = 0x0000000000000002
nvmlClocksEventReasonSwPowerCap = 0x0000000000000004
nvmlClocksEventReasonHwSlowdown = 0x0000000000000008
NVML_GPM_METRICS_GET_VERSION = 1
NVML_GPM_METRIC_SM_UTIL = 2
NVML_GPM_METRIC_ANY_TENSOR_UTIL = 5
NVML_GPM_METRIC_DRAM_BW_UTIL = 10
NVML_GPM_METRIC_FP64_UTIL = 11
NVML_GPM_METRIC_FP32_UTIL = 12
NVML_GPM_METRIC_FP16_UTIL = 13
NVML_FI_DEV_POWER_INSTANT = 186
NVML_RESTRICTED_API_SET_APPLICATION_CLOCKS = 0
NVML_FEATURE_DISABLED = 0
NVML_FEATURE_ENABLED = 1
NVML_VALUE_TYPE_UNSIGNED_INT = 1


class NVMLError(Exception):
    """Like nvidia-ml-py's: ``.value`` is the NVML return code."""

    value = -1

    def __init__(self, value: int | None = None):
        super().__init__()
        if value is not None:
            self.value = value

    def __str__(self) -> str:
        return {2: "Invalid Argument", 3: "Not Supported", 4: "Insufficient Permissions",
                13: "Function Not Found"}.get(self.value, f"NVML Error with code {self.value}")


class NVMLError_InvalidArgument(NVMLError):
    value = NVML_ERROR_INVALID_ARGUMENT


class NVMLError_NotSupported(NVMLError):
    value = NVML_ERROR_NOT_SUPPORTED


class NVMLError_NoPermission(NVMLError):
    value = NVML_ERROR_NO_PERMISSION


class NVMLError_FunctionNotFound(NVMLError):
    value = NVML_ERROR_FUNCTION_NOT_FOUND


class c_nvmlGpmMetricsGet_t:  # noqa: N801 -- nvidia-ml-py's name
    """The fields of nvidia-ml-py's ctypes structure that NVML reads and fills."""

    def __init__(self) -> None:
        self.version = 0
        self.numMetrics = 0
        self.sample1 = self.sample2 = None
        self.metrics = [SimpleNamespace(metricId=0, nvmlReturn=0, value=0.0) for _ in range(98)]


def _core_steps(top: int, bottom: int, step: int) -> list[int]:
    return list(range(top, bottom - 1, -step))


DEFAULT_CLOCK_TABLE = {
    877: _core_steps(1530, 135, 15),
    1215: _core_steps(1530, 135, 15),
    405: _core_steps(1005, 135, 15),
}


class FakeNvml:
    """A module-like object: pass it as ``NvmlDevice(pynvml=FakeNvml(...))``.

    Capability switches (all keyword arguments) let a test pose as different GPUs:
    ``locked_gpu`` (Volta+), ``locked_mem`` (Ampere+), ``app_clocks`` (datacenter parts),
    ``root`` (the process may set clocks), ``app_clocks_unrestricted`` (``nvidia-smi -acp 0``
    was run), ``energy_counter`` (Volta+), ``event_reasons_api`` (newer drivers),
    ``instant_power`` (the instantaneous power field: the true power now, with the sensor's
    noise, where ``nvmlDeviceGetPowerUsage`` averages over ``refresh_s``). ``energy_period_s``: the
    energy counter advances only at multiples of this period since the fake's start, by what was
    drawn since its last update (an H200's updates every 0.1 s: validation/nvidia-h200); None:
    continuously.
    ``state_file``: the clock settings are written there (JSON) after every change, so a test
    can read them after this process has died.
    """

    # The names a module has; the error classes too, so `nv.NVMLError_NoPermission` works.
    NVMLError = NVMLError
    NVMLError_InvalidArgument = NVMLError_InvalidArgument
    NVMLError_NotSupported = NVMLError_NotSupported
    NVMLError_NoPermission = NVMLError_NoPermission
    NVMLError_FunctionNotFound = NVMLError_FunctionNotFound
    NVML_CLOCK_GRAPHICS = NVML_CLOCK_GRAPHICS
    NVML_CLOCK_SM = NVML_CLOCK_SM
    NVML_CLOCK_MEM = NVML_CLOCK_MEM
    NVML_TEMPERATURE_GPU = NVML_TEMPERATURE_GPU
    NVML_GPM_METRICS_GET_VERSION = NVML_GPM_METRICS_GET_VERSION
    NVML_GPM_METRIC_SM_UTIL = NVML_GPM_METRIC_SM_UTIL
    NVML_GPM_METRIC_ANY_TENSOR_UTIL = NVML_GPM_METRIC_ANY_TENSOR_UTIL
    NVML_GPM_METRIC_DRAM_BW_UTIL = NVML_GPM_METRIC_DRAM_BW_UTIL
    NVML_GPM_METRIC_FP64_UTIL = NVML_GPM_METRIC_FP64_UTIL
    NVML_GPM_METRIC_FP32_UTIL = NVML_GPM_METRIC_FP32_UTIL
    NVML_GPM_METRIC_FP16_UTIL = NVML_GPM_METRIC_FP16_UTIL
    NVML_FI_DEV_POWER_INSTANT = NVML_FI_DEV_POWER_INSTANT
    NVML_RESTRICTED_API_SET_APPLICATION_CLOCKS = NVML_RESTRICTED_API_SET_APPLICATION_CLOCKS
    NVML_FEATURE_DISABLED = NVML_FEATURE_DISABLED
    NVML_FEATURE_ENABLED = NVML_FEATURE_ENABLED
    c_nvmlGpmMetricsGet_t = c_nvmlGpmMetricsGet_t

    def __init__(self, *, name: str = "Fake GPU (stand-in)",
                 clock_table: dict[int, list[int]] | None = None,
                 default_clocks: tuple[int, int] = (1312, 877),
                 locked_gpu: bool = True, locked_mem: bool = True, app_clocks: bool = True,
                 root: bool = True, app_clocks_unrestricted: bool = False,
                 energy_counter: bool = True, event_reasons_api: bool = True, gpm: bool = False,
                 instant_power: bool = False, power_limits_w: tuple[float, float, float] = (300.0, 100.0, 350.0),
                 refresh_s: float = 0.005, noise_w: float = 0.3, seed: int = 0,
                 idle_watts: float = 40.0, state_file: str | None = None, energy_period_s: float | None = None,
                 pci: tuple[int, int, int] = (0, 0x3B, 0), clock: VirtualClock | None = None):
        self.name = name
        self.clock_table = {m: list(c) for m, c in (clock_table or DEFAULT_CLOCK_TABLE).items()}
        self.default = default_clocks
        self.caps = SimpleNamespace(locked_gpu=locked_gpu, locked_mem=locked_mem,
                                    app_clocks=app_clocks, energy_counter=energy_counter,
                                    event_reasons_api=event_reasons_api, gpm=gpm, instant_power=instant_power)
        self.power_limits_w = power_limits_w  # (enforced, min, max)
        self.default_limit_w = power_limits_w[0]
        self.root = root
        self.app_clocks_unrestricted = app_clocks_unrestricted
        self.refresh_s = refresh_s
        self.noise_w = noise_w
        self.seed = seed
        self.idle_watts = idle_watts
        self.state_file = state_file
        self.energy_period_s = energy_period_s
        self.pci = pci
        self.throttle_mask = 0  # reasons a test switches on, beyond idle/app-clocks
        self.init_count = 0
        self.calls: list[str] = []  # names of the clock-setting calls made, in order
        self.pids: list[int] = []  # compute processes on the GPU
        self.mem_busy = 0.5
        self.fp32_busy = 0.7

        self.locked_gpu: tuple[int, int] | None = None
        self.locked_mem: tuple[int, int] | None = None
        self.app_clocks: tuple[int, int] | None = None  # (mem, core), NVML's order
        self.busy = False
        self._lock = threading.RLock()
        self._writes = 0
        self.clock: Callable[[], float] = clock or time.perf_counter
        self.sleep: Callable[[float], None] = clock.sleep if clock else time.sleep
        self._epoch = self.clock()
        # Truth: piecewise constant; segment i starts at _seg_t[i] with the rates _seg_rate[i]
        # (watts, and 1 while the test's workload runs) and the totals _seg_sum[i] (joules drawn,
        # seconds busy) accumulated before it.
        self._seg_t = [self._epoch]
        self._seg_rate = [(idle_watts, 0.0)]
        self._seg_sum = [(0.0, 0.0)]
        self.gpm_samples = 0  # GPM samples allocated and not freed
        self._sensor_k = -1
        self._sensor_mw = 0
        self._write_state()

    # -- the fake GPU's physics --------------------------------------------------------------

    def busy_watts(self, core: float, mem: float) -> float:
        return 30.0 + 0.12 * core + 0.05 * mem

    def effective_clocks(self) -> tuple[int, int]:
        core, mem = self.default
        if self.app_clocks is not None:
            mem, core = self.app_clocks
        if self.locked_gpu is not None:
            core = self.locked_gpu[1]
        if self.locked_mem is not None:
            mem = self.locked_mem[1]
        return core, mem

    def _true_watts_now(self) -> float:
        if not self.busy:
            return self.idle_watts
        watts = self.busy_watts(*self.effective_clocks())
        # A limit set below the default caps the busy power (at the default, as before).
        return min(watts, self.power_limits_w[0]) if self.power_limits_w[0] < self.default_limit_w else watts

    def _changed(self) -> None:
        """Start a new truth segment (call with the lock held, after a state change)."""
        now = self.clock()
        self._seg_sum.append(self._totals_at(now))
        self._seg_t.append(now)
        self._seg_rate.append((self._true_watts_now(), float(self.busy)))

    def _totals_at(self, t: float) -> tuple[float, float]:
        """(joules drawn, seconds busy) from the epoch to ``t``."""
        i = max(0, bisect.bisect_right(self._seg_t, t) - 1)
        dt = t - self._seg_t[i]
        (e, b), (w, on) = self._seg_sum[i], self._seg_rate[i]
        return e + w * dt, b + on * dt

    def _energy_at(self, t: float) -> float:
        return self._totals_at(t)[0]

    def true_energy_j(self, t0: float, t1: float) -> float:
        """Exact energy drawn between two instants of its ``clock``."""
        with self._lock:
            return self._energy_at(t1) - self._energy_at(t0)

    def run(self, seconds: float) -> None:
        """Be busy (draw busy power) for ``seconds``: a test's stand-in for a kernel."""
        with self._lock:
            self.busy = True
            self._changed()
        self.sleep(seconds)
        with self._lock:
            self.busy = False
            self._changed()

    def _write_state(self) -> None:
        if self.state_file is None:
            return
        # A real NVML call is one C call, which no Python signal handler interrupts; this
        # stand-in's body is Python, and a handler that resets the clocks (re-entrantly, in this
        # thread) can write in the middle of this write. So each write has its own file, and
        # a write that a newer one overtook writes again: the file always ends at the newest.
        self._writes += 1
        seq = self._writes
        tmp = f"{self.state_file}.{os.getpid()}.{seq}.tmp"
        with open(tmp, "w") as f:
            json.dump({"locked_gpu": self.locked_gpu, "locked_mem": self.locked_mem,
                       "app_clocks": self.app_clocks, "calls": self.calls}, f)
        os.replace(tmp, self.state_file)  # atomic: a reader never sees half a file
        if self._writes != seq:
            self._write_state()

    def _check(self, handle: object) -> None:
        if handle is not self._handle_obj:
            raise NVMLError_InvalidArgument()

    def _need(self, capability: bool, permitted: bool) -> None:
        if not capability:
            raise NVMLError_NotSupported()
        if not permitted:
            raise NVMLError_NoPermission()

    def _set(self, call: str, attr: str, value: object) -> None:
        with self._lock:
            setattr(self, attr, value)
            self.calls.append(call)
            self._changed()
            self._write_state()

    # -- the pynvml API subset -----------------------------------------------------------------

    _handle_obj = object()

    def nvmlInit(self) -> None:
        self.init_count += 1

    def nvmlShutdown(self) -> None:
        self.init_count -= 1

    def nvmlDeviceGetCount(self) -> int:
        return 1

    def nvmlDeviceGetHandleByIndex(self, index: int) -> object:
        if index != 0:
            raise NVMLError_InvalidArgument()
        return self._handle_obj

    def nvmlDeviceGetName(self, handle: object) -> str:
        self._check(handle)
        return self.name

    def nvmlDeviceGetUUID(self, handle: object) -> str:
        self._check(handle)
        return "GPU-00000000-1111-2222-3333-444444444444"

    def nvmlDeviceGetPciInfo(self, handle: object) -> SimpleNamespace:
        self._check(handle)
        domain, bus, device = self.pci
        return SimpleNamespace(domain=domain, bus=bus, device=device)

    def nvmlDeviceGetSupportedMemoryClocks(self, handle: object) -> list[int]:
        self._check(handle)
        return sorted(self.clock_table)  # NVML promises no order; ascending here on purpose

    def nvmlDeviceGetSupportedGraphicsClocks(self, handle: object, memoryClockMHz: int) -> list[int]:
        self._check(handle)
        if memoryClockMHz not in self.clock_table:
            raise NVMLError_InvalidArgument()
        return list(self.clock_table[memoryClockMHz])

    def nvmlDeviceGetDefaultApplicationsClock(self, handle: object, type: int) -> int:
        self._check(handle)
        if not self.caps.app_clocks:
            raise NVMLError_NotSupported()
        return self.default[1] if type == NVML_CLOCK_MEM else self.default[0]

    def nvmlDeviceGetClockInfo(self, handle: object, type: int) -> int:
        self._check(handle)
        core, mem = self.effective_clocks()
        return mem if type == NVML_CLOCK_MEM else core

    def _valid_pair(self, core: int, mem: int | None) -> None:
        mems = [mem] if mem is not None else list(self.clock_table)
        if mem is not None and mem not in self.clock_table:
            raise NVMLError_InvalidArgument()
        if not any(core in self.clock_table[m] for m in mems):
            raise NVMLError_InvalidArgument()

    def nvmlDeviceSetGpuLockedClocks(self, handle: object, minGpuClockMHz: int,
                                     maxGpuClockMHz: int) -> None:
        self._check(handle)
        self._need(self.caps.locked_gpu, self.root)
        self._valid_pair(minGpuClockMHz, None)
        self._valid_pair(maxGpuClockMHz, None)
        self._set("nvmlDeviceSetGpuLockedClocks", "locked_gpu", (minGpuClockMHz, maxGpuClockMHz))

    def nvmlDeviceResetGpuLockedClocks(self, handle: object) -> None:
        self._check(handle)
        self._need(self.caps.locked_gpu, self.root)
        self._set("nvmlDeviceResetGpuLockedClocks", "locked_gpu", None)

    def nvmlDeviceSetMemoryLockedClocks(self, handle: object, minMemClockMHz: int,
                                        maxMemClockMHz: int) -> None:
        self._check(handle)
        self._need(self.caps.locked_mem, self.root)
        if minMemClockMHz not in self.clock_table or maxMemClockMHz not in self.clock_table:
            raise NVMLError_InvalidArgument()
        self._set("nvmlDeviceSetMemoryLockedClocks", "locked_mem", (minMemClockMHz, maxMemClockMHz))

    def nvmlDeviceResetMemoryLockedClocks(self, handle: object) -> None:
        self._check(handle)
        self._need(self.caps.locked_mem, self.root)
        self._set("nvmlDeviceResetMemoryLockedClocks", "locked_mem", None)

    def nvmlDeviceSetApplicationsClocks(self, handle: object, maxMemClockMHz: int,
                                        maxGraphicsClockMHz: int) -> None:
        self._check(handle)
        self._need(self.caps.app_clocks, self.root or self.app_clocks_unrestricted)
        self._valid_pair(maxGraphicsClockMHz, maxMemClockMHz)
        self._set("nvmlDeviceSetApplicationsClocks", "app_clocks",
                  (maxMemClockMHz, maxGraphicsClockMHz))

    def nvmlDeviceResetApplicationsClocks(self, handle: object) -> None:
        self._check(handle)
        self._need(self.caps.app_clocks, self.root or self.app_clocks_unrestricted)
        self._set("nvmlDeviceResetApplicationsClocks", "app_clocks", None)

    def nvmlDeviceGetAPIRestriction(self, handle: object, apiType: int) -> int:
        self._check(handle)
        if apiType != NVML_RESTRICTED_API_SET_APPLICATION_CLOCKS:
            raise NVMLError_InvalidArgument()
        return NVML_FEATURE_DISABLED if self.app_clocks_unrestricted else NVML_FEATURE_ENABLED

    def nvmlDeviceGetPowerUsage(self, handle: object) -> int:
        self._check(handle)
        with self._lock:
            now = self.clock()
            k = math.floor((now - self._epoch) / self.refresh_s)
            if k != self._sensor_k:
                # Update k covers the period [(k-1)P, kP] after the epoch.
                if k < 1:
                    mean_w = self.idle_watts
                else:
                    end = self._epoch + k * self.refresh_s
                    mean_w = self.true_energy_j(end - self.refresh_s, end) / self.refresh_s
                noise = random.Random(self.seed * 1_000_003 + k).gauss(0.0, self.noise_w)
                self._sensor_k = k
                self._sensor_mw = max(0, round((mean_w + noise) * 1000))
            return self._sensor_mw

    def nvmlDeviceGetFieldValues(self, handle: object, fieldIds: list[int]) -> list[SimpleNamespace]:
        """Only the instantaneous power field (``instant_power``) is known; the others answer
        NOT_SUPPORTED in their own entry, as NVML does."""
        self._check(handle)
        out = []
        for field in fieldIds:
            if field == NVML_FI_DEV_POWER_INSTANT and self.caps.instant_power:
                with self._lock:
                    # Updated four times per refresh period: the true power at the update.
                    k = math.floor((self.clock() - self._epoch) / (self.refresh_s / 4))
                    at = self._epoch + k * self.refresh_s / 4
                    i = max(0, bisect.bisect_right(self._seg_t, at) - 1)
                    watts = self._seg_rate[i][0] + random.Random(self.seed * 7919 + k).gauss(0.0, self.noise_w)
                out.append(SimpleNamespace(fieldId=field, nvmlReturn=NVML_SUCCESS,
                                           valueType=NVML_VALUE_TYPE_UNSIGNED_INT,
                                           value=SimpleNamespace(uiVal=max(0, round(watts * 1000)))))
            else:
                out.append(SimpleNamespace(fieldId=field, nvmlReturn=NVML_ERROR_NOT_SUPPORTED, valueType=0,
                                           value=SimpleNamespace(dVal=0.0)))
        return out

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: object) -> int:
        self._check(handle)
        return round(self.power_limits_w[0] * 1000)

    def nvmlDeviceGetPowerManagementLimit(self, handle: object) -> int:
        self._check(handle)
        return round(self.power_limits_w[0] * 1000)

    def nvmlDeviceSetPowerManagementLimit(self, handle: object, limit: int) -> None:
        """Root only, within the constraints; the enforced limit follows (the default stays)."""
        self._check(handle)
        self._need(True, self.root)
        if not self.power_limits_w[1] * 1000 <= limit <= self.power_limits_w[2] * 1000:
            raise NVMLError_InvalidArgument()
        self._set("nvmlDeviceSetPowerManagementLimit", "power_limits_w", (limit / 1000.0, *self.power_limits_w[1:]))

    def nvmlDeviceGetPowerManagementDefaultLimit(self, handle: object) -> int:
        self._check(handle)
        return round(self.default_limit_w * 1000)

    def nvmlDeviceGetPowerManagementLimitConstraints(self, handle: object) -> list[int]:
        self._check(handle)
        return [round(self.power_limits_w[1] * 1000), round(self.power_limits_w[2] * 1000)]

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: object) -> int:
        self._check(handle)
        if not self.caps.energy_counter:
            raise NVMLError_NotSupported()
        with self._lock:
            t = self.clock()
            if self.energy_period_s is not None:  # the last update's instant
                t = self._epoch + math.floor((t - self._epoch) / self.energy_period_s) * self.energy_period_s
            return math.floor(self._energy_at(t) * 1000)

    def _reasons(self) -> int:
        mask = self.throttle_mask
        if not self.busy:
            mask |= nvmlClocksThrottleReasonGpuIdle
        if self.app_clocks is not None:
            mask |= nvmlClocksThrottleReasonApplicationsClocksSetting
        return mask

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: object) -> int:
        self._check(handle)
        if not self.caps.event_reasons_api:
            raise NVMLError_FunctionNotFound()
        return self._reasons()

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle: object) -> int:
        self._check(handle)
        return self._reasons()

    def nvmlDeviceGetTemperature(self, handle: object, sensor: int) -> int:
        self._check(handle)
        return 62 if self.busy else 38

    # GPM (Hopper and newer; ``gpm=True``): SM utilization is the share of the window a
    # test's workload ran, DRAM bandwidth ``mem_busy`` of that, FP32 ``fp32_busy`` of it; the
    # tensor metric is one this GPU does not count.

    def nvmlGpmQueryDeviceSupport(self, device: object) -> SimpleNamespace:
        self._check(device)
        return SimpleNamespace(version=1, isSupportedDevice=int(self.caps.gpm))

    def nvmlGpmSampleAlloc(self) -> SimpleNamespace:
        self.gpm_samples += 1
        return SimpleNamespace(t=None, busy=None)

    def nvmlGpmSampleFree(self, gpmSample: SimpleNamespace) -> None:
        self.gpm_samples -= 1

    def nvmlGpmSampleGet(self, device: object, gpmSample: SimpleNamespace) -> SimpleNamespace:
        self._check(device)
        if not self.caps.gpm:
            raise NVMLError_NotSupported()
        with self._lock:
            gpmSample.t = self.clock()
            gpmSample.busy = self._totals_at(gpmSample.t)[1]
        return gpmSample

    def nvmlGpmMetricsGet(self, metricsGet: c_nvmlGpmMetricsGet_t) -> c_nvmlGpmMetricsGet_t:
        a, b = metricsGet.sample1, metricsGet.sample2
        if metricsGet.version != NVML_GPM_METRICS_GET_VERSION or a.t is None or b.t is None or b.t <= a.t:
            raise NVMLError_InvalidArgument()
        share = (b.busy - a.busy) / (b.t - a.t)
        of = {NVML_GPM_METRIC_SM_UTIL: 1.0, NVML_GPM_METRIC_DRAM_BW_UTIL: self.mem_busy,
              NVML_GPM_METRIC_FP32_UTIL: self.fp32_busy, NVML_GPM_METRIC_FP16_UTIL: 0.0,
              NVML_GPM_METRIC_FP64_UTIL: 0.0}
        for m in metricsGet.metrics[:metricsGet.numMetrics]:
            m.nvmlReturn = NVML_ERROR_NOT_SUPPORTED if m.metricId not in of else NVML_SUCCESS
            m.value = 100.0 * share * of.get(m.metricId, 0.0)
        return metricsGet

    def nvmlDeviceGetComputeRunningProcesses(self, handle: object) -> list[SimpleNamespace]:
        """``self.pids``: the processes a test has put on the GPU."""
        self._check(handle)
        return [SimpleNamespace(pid=pid, usedGpuMemory=2**30) for pid in self.pids]

    def nvmlDeviceGetUtilizationRates(self, handle: object) -> SimpleNamespace:
        """Percentages, as NVML gives them: fully busy while a test's kernel runs (``run``),
        memory busy at ``self.mem_busy`` of that."""
        self._check(handle)
        gpu = 100 if self.busy else 0
        return SimpleNamespace(gpu=gpu, memory=round(gpu * self.mem_busy))
