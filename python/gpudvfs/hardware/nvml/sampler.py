"""What a GPU reports while a measurement runs, polled in a thread.

Power (when sampled), throttle reasons, temperature and clocks; and the mean of sampled power
over a window.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol

import numpy as np

# Throttle/temperature polling period when power comes from the energy counter.
MONITOR_INTERVAL_S = 0.01
# Power samples no closer than this: a reading that changes at every call (an instantaneous
# field) must not make the sampler spin.
MIN_SAMPLE_INTERVAL_S = 0.001
# Where the sensor's period could not be inferred: well under the 0.1 s an H100's instant
# field was seen to update at (validation/), so no update is missed.
UNKNOWN_PERIOD_INTERVAL_S = 0.005


class Polled(Protocol):
    """What the monitor reads of a GPU."""

    def power_watts(self) -> float:
        """As `Device.power_watts`."""

    def throttle_mask(self) -> int:
        """NVML's raw throttle reason bits active now."""

    def temperature_c(self) -> float:
        """As `Device.temperature_c`."""

    @property
    def clocks(self) -> tuple[float, float]:
        """The (core, memory) MHz the GPU runs at now."""


def sample_interval(sampled: bool, period: float | None) -> float:
    """Seconds between the monitor's polls, given the power reading's refresh period (s; None: unknown).

    Half the refresh period when power is ``sampled`` (not from the energy counter), so no update
    is missed (5 ms where the period is unknown); 10 ms for throttle reasons and temperature alone.
    """
    if not sampled:
        return MONITOR_INTERVAL_S
    return UNKNOWN_PERIOD_INTERVAL_S if period is None else max(period / 2, MIN_SAMPLE_INTERVAL_S)


class Monitor:
    """Polls power (when sampled), throttle reasons, temperature and clocks (where none are locked) in a thread."""

    def __init__(self, device: Polled, interval: float, power: bool, clocks: bool) -> None:
        self.device = device
        self.interval = interval
        self.power = power
        self.clocks = clocks
        #: When each power sample was taken (``time.perf_counter``), and its watts.
        self.times: list[float] = []
        self.watts: list[float] = []
        #: Every throttle reason bit seen.
        self.mask = 0
        self.temps: list[float] = []
        self.core: list[float] = []
        self.mem: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="gpudvfs-nvml-monitor",
                                        daemon=True)
        self._error: BaseException | None = None

    def poll(self) -> None:
        """Read the GPU once (also called before and after the thread runs)."""
        d = self.device
        if self.power:
            w = d.power_watts()
            self.times.append(time.perf_counter())
            self.watts.append(w)
        self.mask |= d.throttle_mask()
        self.temps.append(d.temperature_c())
        if self.clocks:
            core, mem = d.clocks
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
        """Start polling in a daemon thread."""
        self._thread.start()

    def stop(self) -> None:
        """Stop polling; an error the thread met is raised here."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        if self._error is not None:
            raise self._error


def mean_between(t: list[float], y: list[float], a: float, b: float) -> float:
    """Mean over ``[a, b]`` (``a < b``) of readings taken at ascending times, joined by straight lines.

    The trapezoid rule: a reading taken before the launches began, or after they ended, counts
    only as far as the line to it reaches into ``[a, b]``.
    """
    times, readings = np.asarray(t), np.asarray(y)
    ts = np.concatenate(([a], times[(times > a) & (times < b)], [b]))
    ys = np.interp(ts, times, readings)
    return float(np.sum(np.diff(ts) * (ys[1:] + ys[:-1])) / (2 * (b - a)))
