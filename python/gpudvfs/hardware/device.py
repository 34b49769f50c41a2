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

    A microbenchmark from the kernel manifest (``kernel`` + template ``params``) or a user
    callable that launches work and waits for it (``fn``). ``counters`` carries what the
    workload does for the simulated GPU (a real GPU ignores it); a workload with counters alone
    runs only there.

    Parameters
    ----------
    name : str
        The workload's name (a sweep's rows are keyed by it).
    kernel : str, optional
        A benchmark of the kernel manifest.
    params : Mapping of str to number
        The benchmark's launch settings (``bytes``, ``elements``, ``reps``, ...).
    fn : callable, optional
        Launches the work once and waits for it.
    counters : Mapping of str to float
        What the workload does, for the simulated GPU (`gpudvfs.hardware.simulated.profile_of`).
    spec : str, optional
        ``module:function`` of ``fn``, so a profiler can launch it in a process of its own.
    profile_kernel : str, optional
        Which kernel of the launch a profiler reads (Nsight Compute's ``--kernel-name``, e.g.
        ``regex:gemm``); None: the first one launched.

    Raises
    ------
    ValueError
        Where both ``kernel`` and ``fn`` are given, or none of ``kernel``, ``fn`` and
        ``counters``.
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
    """One workload measured at one clock configuration.

    Parameters
    ----------
    workload : str
        The workload's name.
    core_mhz, mem_mhz : float
        The clocks it ran at.
    time_ms : float
        Time per launch.
    watts : float
        The average power over the whole measurement, from the energy counter where the GPU
        has one (``power_source="energy-counter"``) or from power samples integrated over time
        (``"sampled"``, ``"sampled-instant"``).
    joules : float
        The energy over the whole measurement.
    power_source : str
        Where ``watts`` came from.
    throttled : bool
        Whether the GPU reported any throttle reason during the measurement.
    temperature_c : float, optional
        The mean temperature; None where the device cannot read it.
    result : Mapping of str to float
        What the benchmark measured itself: ``cycles_per_access`` (latency suite), ``bytes``
        moved per launch (bandwidth benchmark).
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
    """A GPU whose clocks can be set and whose power and time can be measured."""

    name: str

    def memory_clocks(self) -> list[float]:
        """Supported memory clocks.

        Returns
        -------
        list of float
            MHz, descending.
        """

    def core_clocks(self, mem_mhz: float) -> list[float]:
        """Supported core clocks at a memory clock.

        Parameters
        ----------
        mem_mhz : float
            A supported memory clock, MHz.

        Returns
        -------
        list of float
            MHz, descending.

        Raises
        ------
        InputError
            Where ``mem_mhz`` is not supported.
        """

    def default_clocks(self) -> tuple[float, float]:
        """The configuration the GPU runs at by default: the reference.

        Returns
        -------
        tuple of float
            (core, memory) MHz.
        """

    def sm_count(self) -> int:
        """Number of streaming multiprocessors (a device query, not a measurement)."""

    def identity(self) -> dict[str, str | float | bool | None]:
        """What tells this GPU (and, simulated, its settings) apart.

        Recorded with a sweep so a resume on another GPU is refused.
        """

    def check(self, workload: Workload) -> None:
        """Refuse a workload this device cannot run, before any work starts.

        Raises
        ------
        InputError
            Where this device cannot run it.
        """

    def lock_clocks(self, core_mhz: float, mem_mhz: float) -> None:
        """Pin both clocks.

        Parameters
        ----------
        core_mhz : float
            Core clock, MHz.
        mem_mhz : float
            Memory clock, MHz.

        Raises
        ------
        ClockPermissionError
            Where the process may not set clocks.
        """

    def reset_clocks(self) -> None:
        """Return the clocks to the driver's control."""

    def power_watts(self) -> float:
        """Instant power reading.

        Returns
        -------
        float
            W.
        """

    def energy_joules(self) -> float | None:
        """Monotonic energy counter.

        Returns
        -------
        float or None
            J; None where the GPU has none.
        """

    def throttle_reasons(self) -> tuple[str, ...]:
        """Active reasons that hold the clocks below the requested ones.

        Returns
        -------
        tuple of str
            Reason names; empty: none.
        """

    def temperature_c(self) -> float:
        """GPU temperature.

        Returns
        -------
        float
            Degrees C.
        """

    def profile(self, workload: Workload) -> dict[str, float]:
        """Counters of one run at the current clocks.

        Returns
        -------
        dict
            Component utilizations under the power model's component names, and time-model
            counters under nvprof names.
        """

    def measure(self, workload: Workload, min_seconds: float = 1.0,
                repetitions: int | None = None) -> Measurement:
        """Launch ``workload`` repeatedly at the current clocks and measure time and power.

        Parameters
        ----------
        min_seconds : float
            Launch until the measurement spans this long (the power paper's protocol).
        repetitions : int, optional
            Launch exactly this often instead.

        Returns
        -------
        Measurement
            Time per launch, power and energy.
        """


class ClockPermissionError(PermissionError):
    """Setting clocks needs a privilege the process does not have; the message says which."""
