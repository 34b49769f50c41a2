"""A clock for tests that moves only when the test says, so a timed assertion holds on a loaded machine.

`t` is set directly, or moved by `sleep`, which goes in ticks and runs the `on_tick` callbacks
after each (a counter poller's poll, in place of its thread): what polls sees every instant a
tick apart, as an idle machine's thread would, whatever the machine's load (`TickPoller`).
"""

from __future__ import annotations

from collections.abc import Callable

from gpudvfs.hardware.energy_counter import CounterPoller
from gpudvfs.hardware.nvml.sampler import Monitor


class VirtualClock:
    def __init__(self, t: float = 0.0, tick_s: float = 0.002) -> None:
        self.t, self.tick_s = t, tick_s
        self.on_tick: list[Callable[[], None]] = []

    def __call__(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        for _ in range(round(seconds / self.tick_s)):
            self.t += self.tick_s
            for f in list(self.on_tick):
                f()


class TickPoller(CounterPoller):
    """A `CounterPoller` polled at each tick of its clock (a `VirtualClock`) in place of its thread."""

    def start(self) -> TickPoller:
        self.poll()
        self.clock.on_tick.append(self.poll)  # type: ignore[attr-defined]
        return self

    def stop(self) -> None:
        if self.poll in self.clock.on_tick:  # type: ignore[attr-defined]
            self.clock.on_tick.remove(self.poll)  # type: ignore[attr-defined]


class TickMonitor(Monitor):
    """`Monitor` polled on its schedule (every ``interval`` from `start`) at the ticks of ``clock``, not in a thread."""

    def __init__(self, *args: object, clock: VirtualClock, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.clock = clock

    def _tick(self) -> None:
        if self.clock.t >= self._next:
            self.poll()
            self._next += self.interval

    def start(self) -> None:
        self._next = self.clock.t + self.interval
        self.clock.on_tick.append(self._tick)

    def stop(self) -> None:
        if self._tick in self.clock.on_tick:
            self.clock.on_tick.remove(self._tick)
