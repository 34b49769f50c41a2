"""A simulated GPU left to its driver, which chooses the clocks as a real one does.

The user's work runs phase after phase, and the driver chooses the clocks: idle clocks when
nothing runs, the boost clock under load, lower clocks while the power would pass the power
limit or the temperature its slowdown point. Nothing here sets a clock from outside: it is what
`gpudvfs power observe` watches, with the simulator's truth to score what it recovers.

Readings are NVML's: the clocks, the power (an energy counter integrating the true power), the
GPM-like activities (SM, the busiest pipe, DRAM) and the active throttle reasons. Time is
virtual: a minute of observation costs no real minute.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np
from numpy.typing import ArrayLike

from gpudvfs.errors import InputError
from gpudvfs.hardware.observer import GPM_ACTIVITIES, Reading
from gpudvfs.hardware.simulated import SimulatedGpu
from gpudvfs.power.model import PowerModel

#: One phase of work: (label, seconds, utilization per power component).
Phase = tuple[str, float, Sequence[float]]

#: The user's work, repeated: (label, seconds, utilization per power component of the
#: simulated GPU, in its order SP, INT, DP, SFU, L2, Shared, DRAM). Idle gaps between jobs let
#: the driver drop to its idle clock; the heavy ones pass the power limit at the boost clock.
WORK = (
    ("idle", 4.0, (0, 0, 0, 0, 0, 0, 0)),
    ("training step", 6.0, (0.85, 0.35, 0.0, 0.05, 0.5, 0.6, 0.45)),
    ("data loading", 2.0, (0.05, 0.1, 0.0, 0.0, 0.1, 0.0, 0.15)),
    ("inference", 5.0, (0.45, 0.3, 0.0, 0.1, 0.35, 0.3, 0.6)),
    ("idle", 3.0, (0, 0, 0, 0, 0, 0, 0)),
    ("stream", 4.0, (0.05, 0.2, 0.0, 0.0, 0.6, 0.0, 0.95)),
    ("fp64 solver", 5.0, (0.1, 0.2, 0.9, 0.0, 0.3, 0.2, 0.3)),
    ("light kernels", 3.0, (0.2, 0.15, 0.0, 0.0, 0.15, 0.1, 0.2)),
)
#: How often the driver lowers the clock one more level while the GPU stays too hot (s).
THERMAL_STEP_S = 0.5


def activities(util: ArrayLike) -> tuple[float, float, float]:
    """(SM, pipe, DRAM) activity fractions of a simulated workload's component utilizations (in the GPU's order).

    The SM is active while any of its units works, the pipe is the busiest arithmetic pipe.
    """
    u = np.asarray(util, dtype=np.float64)
    return (float(min(1.0, 1.2 * u[:6].max())), float(max(u[0], u[2])), float(u[6]))


class DriverManagedGpu:
    """A `SimulatedGpu` under its driver's own DVFS, running its work round after round.

    Its prior is the catalog's GTX Titan X's (the board the simulator is modelled on), at its
    default clocks.

    Parameters
    ----------
    work : iterable of tuple
        (label, seconds > 0, utilizations) phases (default :data:`WORK`).
    power_limit_w : float, optional
        The driver's power cap (default: a little under what the heaviest work draws at boost).
    slowdown_c : float
        The temperature where the driver lowers the clocks.
    noise : float
        Relative noise of a power reading.
    boost_levels : tuple of float
        Core clocks above the default the driver may boost to, MHz.

    Raises
    ------
    InputError
        Where there is no work, or a phase lasts no time.
    """

    catalog_key = "gtx-titan-x"
    activities = GPM_ACTIVITIES
    n_core = 2
    power_reading = "exact"

    def __init__(self, gpu: SimulatedGpu | None = None, work: Iterable[Phase] = WORK, *,
                 power_limit_w: float | None = None, slowdown_c: float = 65.0, noise: float = 0.01, seed: int = 0,
                 boost_levels: tuple[float, ...] = (1164.0, 1126.0, 1088.0, 1050.0, 1013.0)) -> None:
        self.gpu = gpu or SimulatedGpu()
        self.work = tuple(work)
        if not self.work or any(not (s > 0) for _, s, _ in self.work):
            raise InputError("the driver-managed GPU needs work: (label, seconds > 0, utilizations) phases")
        self.mem_mhz = self.gpu.default_mhz[1]
        self.levels = sorted({*self.gpu.clocks[self.mem_mhz], *boost_levels}, reverse=True)
        self.idle_mhz = min(self.levels)
        heaviest = max(self.gpu.power(np.array(u, float), self.levels[0], self.mem_mhz) for _, _, u in self.work)
        self.power_limit_w = 0.9 * heaviest if power_limit_w is None else float(power_limit_w)
        self.slowdown_c = float(slowdown_c)
        self.noise = float(noise)
        self._rng = np.random.default_rng(seed)
        self._t = 0.0
        self._core = self.idle_mhz
        self._temp = 40.0
        self._reasons: tuple[str, ...] = ()
        self._thermal_t = -math.inf

    @property
    def default_mhz(self) -> tuple[float, float]:
        """The GPU's default (core, memory) clocks, MHz."""
        return self.gpu.default_mhz

    def phase_at(self, t: float) -> tuple[str, np.ndarray]:
        """The label and utilizations of the phase running at virtual time ``t``, s."""
        period = sum(s for _, s, _ in self.work)
        t = t % period
        for label, s, u in self.work:
            if t < s:
                return label, np.array(u, dtype=np.float64)
            t -= s
        return self.work[-1][0], np.array(self.work[-1][2], dtype=np.float64)

    def true_volts(self, core_mhz: ArrayLike) -> np.ndarray:
        """The simulator's core voltage at each core clock (MHz), relative to the default clock's (the truth)."""
        return self.gpu.core_volts(core_mhz) / self.gpu.core_volts(self.gpu.default_mhz[0])

    def _choose(self, util: np.ndarray) -> tuple[float, tuple[str, ...]]:
        """The driver's clock for ``util``, and the throttle reasons active.

        The idle clock when idle, else the highest level whose power stays under the limit and,
        when hot, one level below the last clock.
        """
        if not util.any():
            return self.idle_mhz, ()
        reasons: list[str] = []
        watts = self.gpu.power_at(util, self.levels, self.mem_mhz)
        allowed = [c for c, w in zip(self.levels, watts) if w <= self.power_limit_w]
        core = allowed[0] if allowed else self.levels[-1]
        if core < self.levels[0]:
            reasons.append("sw_power_cap")
        if self._temp > self.slowdown_c:
            # Hot: hold a level under the last clock, one more level each THERMAL_STEP_S.
            floor = min(core, self._core)
            if self._t - self._thermal_t >= THERMAL_STEP_S:
                lower = [c for c in self.levels if c < floor]
                floor, self._thermal_t = (lower[0] if lower else floor), self._t
            core = floor
            reasons.append("sw_thermal_slowdown")
        return core, tuple(reasons)

    def read(self, seconds: float, step_s: float = 0.01) -> Reading:
        """Run ``seconds`` of virtual time, the driver deciding the clock every ``step_s``, and read the GPU.

        Power and activities are the means over those seconds. `InputError` where ``seconds`` is not
        finite and positive.
        """
        if not (math.isfinite(seconds) and seconds > 0):
            raise InputError(f"seconds must be finite and > 0, got {seconds}")
        n = max(1, int(round(seconds / step_s)))
        dt = seconds / n
        joules, act = 0.0, np.zeros(3)
        start = self._core
        for _ in range(n):
            _, util = self.phase_at(self._t)
            self._core, self._reasons = self._choose(util)
            watts = self.gpu.power(util, self._core, self.mem_mhz)
            # First-order heating: 0.25 K/W above a 30 C ambient, 20 s time constant.
            self._temp += (30.0 + 0.25 * watts - self._temp) * dt / 20.0
            joules += watts * dt
            act += np.array(activities(util)) * dt
            self._t += dt
        mean_w = joules / seconds * (1.0 + self.noise * self._rng.standard_normal())
        return Reading(t_s=self._t, core_mhz_start=start, core_mhz=self._core, mem_mhz=self.mem_mhz,
                       watts=float(mean_w), activity=tuple((act / seconds).tolist()),
                       throttle_reasons=self._reasons)

    def truth_scores(self, model: PowerModel, clocks_seen: Iterable[float]) -> dict:
        """How near a power model fitted to this GPU's activities comes to the truth.

        ``voltage_error_max``: the largest relative error of the model's core voltage (relative to the
        default clock's) at ``clocks_seen`` (MHz; None where none was); ``unseen_clocks``: the driver's
        clocks never seen; ``power_mape_unseen``: the model's power MAPE, %, over the work's phases at
        those clocks (None where none).
        """
        seen = np.asarray(sorted(clocks_seen), dtype=np.float64)
        v = model.voltage(seen, self.mem_mhz)[:, 0]
        unseen = [c for c in self.levels if c not in set(seen.tolist())]
        busy = [np.array(u, dtype=np.float64) for _, _, u in self.work if any(u)]
        errors = [model.predict(np.array(activities(u)), c, self.mem_mhz) / self.gpu.power(u, c, self.mem_mhz) - 1
                  for u in busy for c in unseen]
        return {"voltage_error_max": float(np.max(np.abs(v / self.true_volts(seen) - 1))) if len(seen) else None,
                "unseen_clocks": unseen,
                "power_mape_unseen": float(100 * np.mean(np.abs(errors))) if errors else None}
