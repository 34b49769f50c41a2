"""The governor embedded in a training or inference loop: call `GovernedLoop.step_end` at the
end of every step; it observes the step's time and energy, asks the governor for the next
clocks and sets them (through the device when the process may, or through the clock service
`clockd.ClockClient` when it may not).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ..errors import InputError
from .governor import Governor


class GovernedLoop:
    """``set_clocks(core_mhz, mem_mhz)``: e.g. ``device.lock_clocks`` or ``ClockClient.set``.
    ``energy_j``: a monotonic energy counter in joules (``device.energy_joules``), read at each
    step's end when the step's watts are not given. ``clock``: seconds, for the step's time
    when it is not given."""

    def __init__(self, governor: Governor, set_clocks: Callable[[float, float], None],
                 energy_j: Callable[[], float | None] | None = None, clock: Callable[[], float] = time.perf_counter):
        self.governor, self.set_clocks, self.energy_j, self.clock = governor, set_clocks, energy_j, clock
        self._mark: tuple[float, float | None] | None = None

    def _pair(self, k: int) -> tuple[float, float]:
        return tuple(float(x) for x in self.governor.configs[k])

    def phase(self, key, time_ms, watts) -> tuple[float, float]:
        """A workload (or a phase of it) starts, with the offline prediction at every pair;
        sets and returns its first clocks."""
        self.governor.phase(key, time_ms, watts)
        pair = self._pair(self.governor.decide())
        self.set_clocks(*pair)
        self._mark = (self.clock(), self.energy_j() if self.energy_j else None)
        return pair

    def step_end(self, *, time_ms: float | None = None, watts: float | None = None,
                 work: float = 1.0) -> tuple[float, float]:
        """One step ended, having done ``work`` units (its time is per unit). Measures what is
        not given, observes, and sets the next clocks (returned)."""
        if self._mark is None:
            raise InputError("call GovernedLoop.phase(...) before the first step")
        if not work > 0:
            raise InputError(f"work must be > 0, got {work}")
        now, joules = self.clock(), self.energy_j() if self.energy_j else None
        elapsed = now - self._mark[0]
        if time_ms is None:
            time_ms = 1e3 * elapsed
        if watts is None:
            if joules is None or self._mark[1] is None or not elapsed > 0:
                raise InputError("no watts given and no energy counter to measure them")
            watts = (joules - self._mark[1]) / elapsed
        self.governor.observe(self.governor.current, time_ms / work, watts)
        before = self.governor.current
        k = self.governor.decide()
        pair = self._pair(k)
        if k != before:
            self.set_clocks(*pair)
        self._mark = (self.clock(), self.energy_j() if self.energy_j else None)
        return pair
