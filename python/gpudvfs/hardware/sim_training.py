"""`SimulatedTraining`: a simulated catalog GPU whose training steps respond to its clocks and power limit.

A step of a phase is compute ms (scaling as 1/core clock) and memory ms (1/memory clock) at the
default clocks, combined as the simulator's kernels are (`SimulatedGpu.time_ms`), then host ms
(data loading, checkpoint writes: clock independent). The GPU part draws the power model's power
at the phase's utilizations and the clocks, the host part the idle power at the clocks. Each step's
time takes a lognormal factor drawn from a generator seeded at construction (a seed gives the same
steps at any clocks). Time is virtual: `now` advances by each step and the energy counter by its
energy; nothing sleeps.

The GPU is a catalog entry: its supported and default clocks are the catalog's; its physics the
default `SimulatedGpu`'s, rescaled (the voltage break at the same fraction of the default core
clock; power scaled so that every component but FP64 at full load at the default clocks draws the
TDP: training uses no FP64, and the recorded H200 training steps drew 550-600 W of its 700).
Power limits run from `MIN_LIMIT_SHARE` of the TDP to the TDP (the default). Under a limit below
what a phase's GPU part draws at the clocks set, the driver runs the highest supported core clock
at or below the one set whose power fits (the lowest where none does), reports it as the clocks
and ``sw_power_cap`` as the throttle reason; `reset_clocks` puts back the clocks and the limit, as
NVML's does.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Protocol, runtime_checkable

import numpy as np

from gpudvfs.catalog import SupportedClocks, lookup
from gpudvfs.errors import InputError
from gpudvfs.hardware.device import ClockPermissionError
from gpudvfs.hardware.simulated import SimulatedDevice, SimulatedGpu

#: The lowest power limit a board takes, as a share of its TDP (NVML reports 100-400 W on an
#: A100 SXM4 and 200-700 W on an H100 SXM; the catalog gives the TDP alone).
MIN_LIMIT_SHARE = 0.3
#: The lognormal standard deviation of a step's time (a training step repeats within a few %).
TIME_SIGMA = 0.02


@runtime_checkable
class StepDevice(Protocol):
    """A device that runs the steps the meter times on its own virtual clock (a simulator, a replay)."""

    def now(self) -> float:
        """The device's virtual time, s."""

    def begin_step(self, phase: str) -> None:
        """A step of ``phase`` starts (`InputError` for a phase it cannot run)."""

    def end_step(self) -> None:
        """The step ends: the virtual time and the energy counter advance past it."""


@dataclass(frozen=True)
class StepShape:
    """What one step of a phase does: ms of each part at the default clocks, and the GPU part's utilizations."""

    compute_ms: float
    memory_ms: float
    host_ms: float
    util: Mapping[str, float]

    def __post_init__(self) -> None:
        """Check the parts and the utilizations."""
        parts = (self.compute_ms, self.memory_ms, self.host_ms)
        if not all(math.isfinite(p) and p >= 0 for p in parts) or self.compute_ms + self.memory_ms <= 0:
            raise InputError(f"a step's compute_ms, memory_ms and host_ms must be finite and >= 0, compute or "
                             f"memory > 0; got {parts}")
        if not all(math.isfinite(u) and 0 <= u <= 1 for u in self.util.values()):
            raise InputError(f"a step's utilizations must be in [0, 1], got {dict(self.util)}")


#: Illustrative phases, of the magnitudes of the recorded H200 steps (validation/nvidia-h200/train):
#: training compute heavy, evaluation lighter with more of its time on memory, a checkpoint mostly host.
PHASES: dict[str, StepShape] = {
    "train": StepShape(150.0, 60.0, 10.0, {"SP": 0.9, "INT": 0.4, "SFU": 0.2, "L2": 0.6, "Shared": 0.6,
                                           "DRAM": 0.6}),
    "eval": StepShape(40.0, 35.0, 10.0, {"SP": 0.4, "INT": 0.2, "L2": 0.4, "Shared": 0.2, "DRAM": 0.7}),
    "checkpoint": StepShape(5.0, 20.0, 800.0, {"L2": 0.2, "DRAM": 0.4}),
}


def catalog_gpu(name: str) -> SimulatedGpu:
    """The default `SimulatedGpu`'s physics on a catalog GPU's clocks (module notes).

    Memory voltage falls linearly to 0.9 at no memory clock, as the default GPU's does to its lowest.
    """
    spec = lookup(name)
    base = SimulatedGpu()
    pairs = SupportedClocks.of_spec(spec).pairs
    clocks = {float(m): tuple(sorted({float(c) for c in pairs[pairs[:, 1] == m, 0]}, reverse=True))
              for m in sorted(set(pairs[:, 1]), reverse=True)}
    fc0, fm0 = float(spec.default_mhz[0]), float(spec.default_mhz[1])
    gpu = replace(base, name=spec.name, default_mhz=(fc0, fm0), clocks=clocks,
                  v_break_mhz=fc0 * base.v_break_mhz / base.default_mhz[0],
                  mem_volts={m: min(1.0, 0.9 + 0.1 * m / fm0) for m in clocks})
    full = np.array([n != "DP" for n in gpu.components], dtype=float)
    scale = spec.tdp_w / gpu.power(full, fc0, fm0)
    return replace(gpu, static_w=tuple(scale * w for w in base.static_w),
                   idle_w=tuple(scale * w for w in base.idle_w), weights_w=tuple(scale * w for w in base.weights_w))


@dataclass(frozen=True)
class StepTruth:
    """A step without noise: its time (ms), mean power (W), the GPU part's power and the core clock it ran (MHz)."""

    time_ms: float
    watts: float
    busy_watts: float
    core_mhz: float

    @property
    def joules(self) -> float:
        """Its energy."""
        return self.watts * self.time_ms / 1e3


class SimulatedTraining(SimulatedDevice):
    """A catalog GPU running training steps (module notes); the rest of the `Device` protocol as `SimulatedDevice`.

    Parameters
    ----------
    gpu : str
        The catalog GPU (a key, NVML name or alias).
    phases : mapping of str to StepShape or None
        The phases it runs (None: `PHASES`).
    time_sigma : float
        Each step's lognormal time noise.

    Raises
    ------
    InputError
        For a GPU the catalog lacks, a negative ``time_sigma``, or a phase's utilization of a component the
        simulated GPU lacks.
    """

    def __init__(self, gpu: str = "h200", *, phases: Mapping[str, StepShape] | None = None, seed: int = 0,
                 time_sigma: float = TIME_SIGMA, permission: bool = True) -> None:
        if not (math.isfinite(time_sigma) and time_sigma >= 0):
            raise InputError(f"time_sigma must be a finite number >= 0, got {time_sigma!r}")
        super().__init__(catalog_gpu(gpu), seed=seed, permission=permission)
        self.catalog_name = gpu
        self.phases = MappingProxyType(dict(PHASES if phases is None else phases))  # read-only: `true_step` caches
        for name, shape in self.phases.items():
            unknown = set(shape.util) - set(self.gpu.components)
            if unknown:
                raise InputError(f"phase {name!r}: no power component {sorted(unknown)}; the simulated GPU's are "
                                 f"{list(self.gpu.components)}")
        self.time_sigma = time_sigma
        self._steps = np.random.default_rng(seed)
        tdp = lookup(gpu).tdp_w
        self._limits = {"default": float(tdp), "min": MIN_LIMIT_SHARE * tdp, "max": float(tdp)}
        self._limit_w = float(tdp)
        self._phase: str | None = None  # the step running or last run
        self._running = False
        # true_step's results: a step's truth is read at its end and again for its clocks and throttle
        # reasons; each costs power-model evaluations over the clocks.
        self._truths: dict[tuple[str, float, float, float | None], StepTruth] = {}

    # power limit
    def power_limits(self) -> dict[str, float | None]:
        """``enforced``, ``default``, ``min`` and ``max``, W."""
        return {"enforced": self._limit_w, **self._limits}

    def set_power_limit(self, watts: float) -> None:
        """Set the board's power limit, W, until `reset_clocks`.

        Raises
        ------
        InputError
            Where ``watts`` is outside `power_limits`' ``min`` to ``max``.
        ClockPermissionError
            Where made with ``permission=False``.
        """
        if not self.permission:
            raise ClockPermissionError("setting the power limit needs root (simulated: permission=False)")
        low, high = self._limits["min"], self._limits["max"]
        if not (isinstance(watts, (int, float)) and math.isfinite(watts) and low <= watts <= high):
            raise InputError(f"power limit {watts!r} W is outside the {low:g}-{high:g} W {self.name} takes")
        self._limit_w = float(watts)

    def reset_clocks(self) -> None:
        """The default clocks and power limit."""
        super().reset_clocks()
        self._limit_w = self._limits["default"]

    # steps
    def shape(self, phase: str) -> StepShape:
        """The phase's step; `InputError` naming the phases run where unknown."""
        if phase not in self.phases:
            raise InputError(f"the simulated training GPU runs no phase {phase!r}; it runs {sorted(self.phases)} "
                             "(add one with SimulatedTraining(phases={**PHASES, name: StepShape(...)}))")
        return self.phases[phase]

    def true_step(self, phase: str, core_mhz: float, mem_mhz: float, limit_w: float | None = None) -> StepTruth:
        """A step of ``phase`` at the clocks set (MHz) under ``limit_w`` (None: no limit), without noise."""
        key = (phase, core_mhz, mem_mhz, limit_w)
        if key not in self._truths:
            self._truths[key] = self._true_step(self.shape(phase), core_mhz, mem_mhz, limit_w)
        return self._truths[key]

    def _true_step(self, s: StepShape, core_mhz: float, mem_mhz: float, limit_w: float | None) -> StepTruth:
        g = self.gpu
        util = np.array([float(s.util.get(n, 0.0)) for n in g.components])
        idle = np.zeros(len(g.components))
        fc = g.capped_core(util, core_mhz, mem_mhz, limit_w)
        busy_ms = g.time_ms(s.compute_ms, s.memory_ms, fc, mem_mhz)
        busy_w = g.power(util, fc, mem_mhz)
        time_ms = busy_ms + s.host_ms
        watts = (busy_ms * busy_w + s.host_ms * g.power(idle, fc, mem_mhz)) / time_ms
        return StepTruth(time_ms, watts, busy_w, fc)

    def now(self) -> float:
        """The virtual time, s."""
        return self._now_s

    def begin_step(self, phase: str) -> None:
        """`InputError` for a phase it does not run."""
        self.shape(phase)
        self._phase, self._running = phase, True

    def end_step(self) -> None:
        """Run the step begun, with its noise: the virtual time and the counter advance by it."""
        if not self._running or self._phase is None:
            raise InputError("end_step without begin_step")
        self._running = False
        t = self.true_step(self._phase, *self._clocks, self._limit_w)
        seconds = t.time_ms / 1e3 * math.exp(self.time_sigma * self._steps.standard_normal())
        self._running_w = t.watts
        self._now_s += seconds
        self._energy_j += t.watts * seconds

    @property
    def clocks(self) -> tuple[float, float]:
        """The clocks set, the core clock lowered where the power limit holds the phase last run below it."""
        if self._phase is None:
            return self._clocks
        return self.true_step(self._phase, *self._clocks, self._limit_w).core_mhz, self._clocks[1]

    def throttle_reasons(self) -> tuple[str, ...]:
        """``("sw_power_cap",)`` while the power limit lowers the core clock of the phase last run."""
        return ("sw_power_cap",) if self.clocks[0] < self._clocks[0] else ()
