"""The `Device` protocol: what the measurement layer needs from a GPU.

Two implementations: `NvmlDevice` (a real GPU through nvidia-ml-py, kernels through CuPy)
and `SimulatedDevice` (a physically plausible GPU with readable ground truth). Everything
above this protocol (sweeps, fitting, the demo) runs the same on both.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable


@dataclass(frozen=True)
class Workload:
    """Something to launch and time: a microbenchmark, a user callable, or counters.

    A microbenchmark from the kernel manifest (``kernel`` + template ``params`` such as ``bytes``,
    ``elements``, ``reps``) or a user callable that launches work and waits for it (``fn``).
    ``counters`` says what the workload does for the simulated GPU
    (`gpudvfs.hardware.simulated.profile_of`; a real GPU ignores it); a workload with counters alone
    runs only there. ``name`` keys a sweep's rows; ``spec`` is ``module:function`` of ``fn``, so a
    profiler can launch it in a process of its own; ``profile_kernel`` is which kernel of the launch a
    profiler reads (Nsight Compute's ``--kernel-name``, e.g. ``regex:gemm``; None: the first).
    `ValueError` where both ``kernel`` and ``fn`` are given, or none of the three.
    """

    name: str
    kernel: str | None = None
    params: Mapping[str, int | float] = field(default_factory=dict)
    fn: Callable[[], None] | None = None
    counters: Mapping[str, float] = field(default_factory=dict)
    spec: str | None = None
    profile_kernel: str | None = None

    def __post_init__(self) -> None:
        """Check that the workload has one thing to run."""
        if self.kernel is not None and self.fn is not None:
            raise ValueError(f"workload {self.name!r}: give kernel= or fn=, not both")
        if self.kernel is None and self.fn is None and not self.counters:
            raise ValueError(f"workload {self.name!r}: nothing to run: give kernel=, fn= or counters=")


@dataclass(frozen=True)
class Measurement:
    """One workload measured at one clock configuration (MHz), per launch (``time_ms``) and over the whole measurement.

    ``watts`` comes from the energy counter where the GPU has one (``power_source="energy-counter"``)
    or from power samples integrated over time (``"sampled"``, ``"sampled-instant"``); ``throttled``
    says whether the GPU reported any throttle reason meanwhile; ``temperature_c`` is the mean (None
    where unreadable); ``result`` is what the benchmark measured itself: ``cycles_per_access``
    (latency suite), ``bytes`` moved per launch (bandwidth benchmark).
    """

    workload: str
    core_mhz: float
    mem_mhz: float
    time_ms: float
    watts: float
    joules: float
    repetitions: int
    duration_s: float
    power_source: str
    throttled: bool = False
    throttle_reasons: tuple[str, ...] = ()
    temperature_c: float | None = None
    result: Mapping[str, float] = field(default_factory=dict)


@runtime_checkable
class Device(Protocol):
    """A GPU whose clocks can be set and whose power and time can be measured; clocks in MHz, descending."""

    name: str

    def memory_clocks(self) -> list[float]:
        """Supported memory clocks."""

    def core_clocks(self, mem_mhz: float) -> list[float]:
        """Supported core clocks at a memory clock; `InputError` where ``mem_mhz`` is not supported."""

    def default_clocks(self) -> tuple[float, float]:
        """(core, memory): the configuration the GPU runs at by default, the reference."""

    def sm_count(self) -> int:
        """Number of streaming multiprocessors (a device query, not a measurement)."""

    def identity(self) -> dict[str, str | float | bool | None]:
        """Plain JSON values that tell this GPU (and its settings) apart: a sweep resumed on another is refused."""

    def check(self, workload: Workload) -> None:
        """Refuse a workload this device cannot run, before any work starts (`InputError`)."""

    def lock_clocks(self, core_mhz: float, mem_mhz: float) -> None:
        """Pin both clocks; `ClockPermissionError` where the process may not."""

    def lock_core_clock(self, core_mhz: float) -> None:
        """Pin the core clock alone (``nvidia-smi -lgc``), the memory clock left to the driver; as `lock_clocks`."""

    def reset_clocks(self) -> None:
        """Return the clocks to the driver's control, and the power limit this object set to what it was."""

    @property
    def clocks(self) -> tuple[float, float]:
        """The (core, memory) MHz the GPU runs at now."""

    def power_limits(self) -> dict[str, float | None]:
        """The board's power limits, W: ``enforced``, ``default``, the settable ``min`` and ``max`` (None: unknown)."""

    def set_power_limit(self, watts: float) -> None:
        """Set the board's power limit; `InputError` outside its range, `ClockPermissionError` where not allowed."""

    def power_watts(self) -> float:
        """Instant power reading, W."""

    def energy_joules(self) -> float | None:
        """Monotonic energy counter, J; None where the GPU has none."""

    def throttle_reasons(self) -> tuple[str, ...]:
        """Names of the active reasons holding the clocks below the requested ones."""

    def temperature_c(self) -> float:
        """GPU temperature, degrees C."""

    def profile(self, workload: Workload) -> dict[str, float]:
        """Counters of one run at the current clocks.

        Component utilizations under the power model's component names, and time-model counters under
        nvprof names.
        """

    def measure(self, workload: Workload, min_seconds: float = 1.0,
                repetitions: int | None = None) -> Measurement:
        """Launch ``workload`` repeatedly at the current clocks and measure time and power.

        It runs until the measurement spans ``min_seconds`` (the power paper's protocol), or exactly
        ``repetitions`` times.
        """

    def close(self) -> None:
        """Release the device (NVML's handle); the object is not used after."""


def missing_members(device: object) -> list[str]:
    """The `Device` members ``device`` lacks, by name (an object a user passes as a device is checked with it)."""
    names = sorted({*Device.__annotations__, *(n for n in vars(Device) if not n.startswith("_"))})
    return [n for n in names if not hasattr(device, n)]


class ClockPermissionError(PermissionError):
    """Setting clocks needs a privilege the process does not have; the message says which."""
