"""`NvmlGpu`: what NVML reports about one GPU, read without setting anything.

Power readings: samples read NVML's instantaneous power field (``NVML_FI_DEV_POWER_INSTANT``)
where the driver answers it, since from Ampere on ``nvmlDeviceGetPowerUsage`` is a one-second
average, too slow for short windows. The energy counter (Volta and newer) is read where the GPU
has one.
"""

from __future__ import annotations

import os
import warnings
from typing import Any, TypeVar

from gpudvfs.errors import GpudvfsError, GpudvfsWarning, InputError
from gpudvfs.hardware.gpm import GpmActivity
from gpudvfs.hardware.nvml.bindings import (
    FIELD_VALUE,
    ClockControlError,
    field_number,
    import_pynvml,
    text,
    unsupported,
    whole_mhz,
)
from gpudvfs.hardware.nvml.throttle import IGNORED_THROTTLE_REASONS, ThrottleReader, reason_names
from gpudvfs.limits import is_count

_Gpu = TypeVar("_Gpu", bound="NvmlGpu")

def _process_name(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8") as f:
            return f.read().strip() or f"pid {pid}"
    except OSError:
        return f"pid {pid}"


class NvmlGpu:
    """GPU ``index`` through NVML: its clocks, power, temperature, limits and activity; close it (or use ``with``).

    Parameters
    ----------
    pynvml : module, optional
        The NVML module (tests pass a stand-in); by default nvidia-ml-py's is imported.
    default_clocks : tuple of float, optional
        The reference (core, memory) MHz, for GPUs that do not report default application
        clocks (most GeForce cards).

    Raises
    ------
    InputError
        Where there is no GPU ``index``.
    GpudvfsError
        Where NVML cannot be initialised (no NVIDIA driver).
    """

    def __init__(self, index: int = 0, pynvml: Any = None, *,
                 default_clocks: tuple[float, float] | None = None) -> None:
        nv = import_pynvml() if pynvml is None else pynvml
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
                raise InputError(f"index: GPU {index!r} is not on this machine (NVML sees {count}: "
                                 f"{'none' if count == 0 else f'0..{count - 1}'})")
            self.index: int = index
            self._handle = nv.nvmlDeviceGetHandleByIndex(index)
            self.name: str = text(nv.nvmlDeviceGetName(self._handle))
            self._has_energy = self._probe_energy()
            self._instant_field = self._probe_instant_power()
        except BaseException:
            self.close()
            raise
        self._default_override = default_clocks
        self._throttle = ThrottleReader(nv, self._handle, self.name)
        self._mem_clocks: list[float] | None = None
        self._core_clocks: dict[float, list[float]] = {}

    def __enter__(self: _Gpu) -> _Gpu:
        """Use the GPU in a ``with`` block."""
        return self

    def __exit__(self, *exc: object) -> None:
        """Close it on the way out."""
        self.close()

    def close(self) -> None:
        """Shut NVML down (NVML counts its users, so others keep it)."""
        if getattr(self, "_nvml_open", False):
            self._nvml_open = False
            self._nv.nvmlShutdown()

    def _probe_energy(self) -> bool:
        try:
            self._nv.nvmlDeviceGetTotalEnergyConsumption(self._handle)
        except unsupported(self._nv):
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
        return field if value.nvmlReturn == 0 and value.valueType in FIELD_VALUE else None

    # -- clocks -------------------------------------------------------------------------------

    def memory_clocks(self) -> list[float]:
        """NVML's supported memory clocks, MHz, descending (the `Device` protocol's)."""
        if self._mem_clocks is None:
            raw = self._nv.nvmlDeviceGetSupportedMemoryClocks(self._handle)
            self._mem_clocks = sorted((float(c) for c in raw), reverse=True)
        return list(self._mem_clocks)

    def core_clocks(self, mem_mhz: float) -> list[float]:
        """NVML's supported core clocks at ``mem_mhz`` (the `Device` protocol's)."""
        mem = whole_mhz(mem_mhz, "mem_mhz")
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
        """The ones given when opened, else the default application clocks.

        Raises `ClockControlError` where the GPU reports neither.
        """
        if self._default_override is not None:
            core, mem = self._default_override
            return float(core), float(mem)
        nv = self._nv
        try:
            core = nv.nvmlDeviceGetDefaultApplicationsClock(self._handle, nv.NVML_CLOCK_GRAPHICS)
            mem = nv.nvmlDeviceGetDefaultApplicationsClock(self._handle, nv.NVML_CLOCK_MEM)
        except unsupported(nv) as exc:
            raise ClockControlError(
                f"{self.name} reports no default application clocks ({exc}); give the "
                "reference configuration as NvmlDevice(default_clocks=(core_mhz, mem_mhz))"
            ) from exc
        return float(core), float(mem)

    @property
    def clocks(self) -> tuple[float, float]:
        """The (core, memory) MHz the GPU runs at now."""
        nv = self._nv
        return (float(nv.nvmlDeviceGetClockInfo(self._handle, nv.NVML_CLOCK_GRAPHICS)),
                float(nv.nvmlDeviceGetClockInfo(self._handle, nv.NVML_CLOCK_MEM)))

    def clock_permissions(self) -> dict[str, bool | None]:
        """What setting clocks would take here, read without setting any.

        ``root``: whether this process is root (locked clocks need it);
        ``application_clocks_root_only``: whether NVML restricts application clocks to root
        (None where the driver does not say).
        """
        nv = self._nv
        cannot_tell: tuple[type[BaseException], ...] = (*unsupported(nv), AttributeError)
        try:
            restricted = nv.nvmlDeviceGetAPIRestriction(self._handle, nv.NVML_RESTRICTED_API_SET_APPLICATION_CLOCKS)
        except cannot_tell:
            restricted = None
        return {"root": hasattr(os, "geteuid") and os.geteuid() == 0,
                "application_clocks_root_only": None if restricted is None
                else restricted == nv.NVML_FEATURE_ENABLED}

    # -- power --------------------------------------------------------------------------------

    @property
    def power_reading(self) -> str:
        """Which reading power samples come from: ``"instant"`` or ``"average"``.

        ``"average"`` is ``nvmlDeviceGetPowerUsage``, a one-second average from Ampere on.
        """
        return "average" if self._instant_field is None else "instant"

    def _power_mw(self) -> float:
        if self._instant_field is not None:
            value = self._nv.nvmlDeviceGetFieldValues(self._handle, [self._instant_field])[0]
            if value.nvmlReturn == 0:
                return field_number(value)
            # Once the field fails, the average serves from then on, and the samples say so
            # (`power_reading`, a measurement's `power_source`), instead of mixing the two.
            warnings.warn(GpudvfsWarning(
                f"{self.name}: NVML's instant power field failed (return code {value.nvmlReturn}); power "
                "samples come from nvmlDeviceGetPowerUsage from now on (a one-second average from Ampere on)"),
                stacklevel=2)
            self._instant_field = None
        return float(self._nv.nvmlDeviceGetPowerUsage(self._handle))

    def power_watts(self) -> float:
        """The power reading now, W (see `power_reading`)."""
        return self._power_mw() / 1000.0  # NVML gives mW

    @property
    def has_energy_counter(self) -> bool:
        """Whether the GPU has an energy counter (Volta and newer)."""
        return self._has_energy

    def energy_joules(self) -> float | None:
        """J since the driver loaded; None where the GPU has no counter (before Volta)."""
        if not self._has_energy:
            return None
        return self._nv.nvmlDeviceGetTotalEnergyConsumption(self._handle) / 1000.0  # mJ

    def power_limits(self) -> dict[str, float | None]:
        """The board's power limits, W: ``enforced``, ``default``, the settable ``min`` and ``max``; None: unknown."""
        nv, h = self._nv, self._handle

        def call(name: str) -> Any:
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

    # -- state --------------------------------------------------------------------------------

    def temperature_c(self) -> float:
        """The GPU's temperature, degrees C."""
        nv = self._nv
        return float(nv.nvmlDeviceGetTemperature(self._handle, nv.NVML_TEMPERATURE_GPU))

    def throttle_mask(self) -> int:
        """NVML's reason bits holding the clocks down now, ignored ones included; 0 (after a warning): unreadable."""
        return self._throttle.mask()

    def throttle_reasons(self) -> tuple[str, ...]:
        """Active reasons (`THROTTLE_REASONS`) but `IGNORED_THROTTLE_REASONS` (GPU idle, application clocks)."""
        return reason_names(self.throttle_mask() & ~IGNORED_THROTTLE_REASONS)

    def processes(self) -> tuple[tuple[int, str], ...]:
        """The compute processes on this GPU, (pid, name) by pid.

        The name is the process's command where this process can see it (``/proc``; another PID
        namespace cannot), else ``pid <N>``.
        """
        procs = self._nv.nvmlDeviceGetComputeRunningProcesses(self._handle)
        return tuple(sorted((int(p.pid), _process_name(int(p.pid))) for p in procs))

    def gpm(self) -> GpmActivity | None:
        """GPM activities of this GPU (Hopper and newer); None where NVML has none for it."""
        return GpmActivity.open(self._nv, self._handle)

    def utilization(self) -> tuple[float, float]:
        """The (kernel, memory) busy fractions in [0, 1] over NVML's last sample period.

        Coarser than DCGM's profiling activities: a kernel that keeps one SM busy counts as fully busy.
        """
        u = self._nv.nvmlDeviceGetUtilizationRates(self._handle)
        return float(u.gpu) / 100.0, float(u.memory) / 100.0

    # -- identity -----------------------------------------------------------------------------

    def uuid(self) -> str:
        """NVML's ``GPU-...`` UUID."""
        return text(self._nv.nvmlDeviceGetUUID(self._handle))

    def pci_bus_id(self) -> str:
        """``domain:bus:device.0`` (hex): the same GPU in CUDA and NVML, which may number GPUs differently."""
        pci = self._nv.nvmlDeviceGetPciInfo(self._handle)
        return f"{pci.domain:04x}:{pci.bus:02x}:{pci.device:02x}.0"

    def sm_count(self) -> int:
        """Streaming multiprocessors, from CUDA (NVML does not report them); `ImportError` without CuPy."""
        try:
            import cupy
        except ImportError as exc:
            raise ImportError("the SM count comes from CUDA: pip install cupy-cuda12x "
                              "(or gpudvfs[measure])") from exc
        device = cupy.cuda.Device.from_pci_bus_id(self.pci_bus_id())
        return int(device.attributes["MultiProcessorCount"])
