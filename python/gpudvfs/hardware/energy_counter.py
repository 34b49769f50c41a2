"""An energy counter read between its updates.

NVML's total-energy counter does not count continuously: an H200 advances it once every 100 ms
(validation/nvidia-h200: 0.1 s windows read 75 W and now and then 150 W at idle, and training
steps of 175 ms took 54 J or 118 J, one update or two). Its difference between two arbitrary
instants is then off by up to one update's energy: 20% over half a second. Read at the
instants it updates, it is exact: `CounterTrace` keeps each update (the time of the first poll
that saw the new value, the value) and gives the energy between any two instants by linear
interpolation between the updates around them, exact where the power was steady over the
update periods that contain them; and the mean power between two updates exactly.
`CounterPoller` polls a counter in a thread to build one.
"""

from __future__ import annotations

import bisect
import threading
import time
from collections.abc import Callable

from gpudvfs.errors import GpudvfsError

#: How often a poller reads the counter (s): the update instants are known to within this.
POLL_S = 0.002


class CounterTrace:
    """Updates of a monotonic counter, read between them.

    `add` every poll; `energy` between two instants that lie between the first and the last
    update seen (else None).
    """

    def __init__(self) -> None:
        self.times: list[float] = []
        self.values: list[float] = []
        self._last: float | None = None

    def add(self, t: float, value: float) -> None:
        """Record a poll at ``t`` s: an update where its value differs from the last poll's.

        The first poll only sets where counting starts: when that value came is unknown.
        `GpudvfsError` where the counter went backwards, or polls come out of time order.
        """
        if self._last is not None and value < self._last:
            raise GpudvfsError("the energy counter went backwards (driver reloaded?)")
        if self._last is not None and value != self._last:
            if self.times and t <= self.times[-1]:
                raise GpudvfsError("counter polls must come in time order")
            self.times.append(t)
            self.values.append(value)
        self._last = value

    def at(self, t: float) -> float | None:
        """The counter's value at ``t`` s, interpolated between the updates around it; None outside them."""
        ts = self.times
        if len(ts) < 2 or not ts[0] <= t <= ts[-1]:
            return None
        i = min(bisect.bisect_right(ts, t), len(ts) - 1)
        t0, t1, v0, v1 = ts[i - 1], ts[i], self.values[i - 1], self.values[i]
        return v0 + (v1 - v0) * (t - t0) / (t1 - t0)

    def energy(self, t0: float, t1: float) -> float | None:
        """The counter's advance between two instants (s); None where either lies outside the updates seen so far."""
        a, b = self.at(t0), self.at(t1)
        return None if a is None or b is None else b - a

    def mean_power(self, t0: float, t1: float) -> float | None:
        """The counter's mean rate (per second) between the first and the last update inside a window (s).

        Exact for what ran there, with no interpolation; None where fewer than two updates came.
        """
        i, j = bisect.bisect_left(self.times, t0), bisect.bisect_right(self.times, t1) - 1
        if j - i < 1:
            return None
        return (self.values[j] - self.values[i]) / (self.times[j] - self.times[i])

    def covers(self, t: float) -> bool:
        """Whether an update at or after ``t`` s has been seen (then `energy` up to it is known)."""
        return bool(self.times) and self.times[-1] >= t


class CounterPoller:
    """Polls a counter in a daemon thread into a `CounterTrace`; use ``with``, or `start` and `stop`.

    Its queries are the trace's, read under a lock while the thread adds to it. ``read`` reads the
    counter (e.g. ``NvmlDevice.energy_joules``; None: no reading this time) every ``interval``
    seconds; ``clock`` times the polls, s.
    """

    def __init__(self, read: Callable[[], float | None], interval: float = POLL_S,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.read, self.interval, self.clock = read, interval, clock
        self.trace = CounterTrace()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        #: What ended the polling thread, kept for the caller: a training run is not stopped by its meter.
        self.error: BaseException | None = None

    def poll(self) -> None:
        """Read the counter once into the trace."""
        value = self.read()
        t = self.clock()
        if value is not None:
            with self._lock:
                self.trace.add(t, float(value))

    def _run(self) -> None:
        try:
            while not self._stop.wait(self.interval):
                self.poll()
        except BaseException as e:
            self.error = e

    def start(self) -> CounterPoller:
        """Poll once, then every ``interval`` in a daemon thread."""
        self.poll()
        self._thread = threading.Thread(target=self._run, name="gpudvfs-energy-poller", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop polling."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def energy(self, t0: float, t1: float) -> float | None:
        """`CounterTrace.energy`, under the lock."""
        with self._lock:
            return self.trace.energy(t0, t1)

    def mean_power(self, t0: float, t1: float) -> float | None:
        """`CounterTrace.mean_power`, under the lock."""
        with self._lock:
            return self.trace.mean_power(t0, t1)

    def covers(self, t: float) -> bool:
        """`CounterTrace.covers`, under the lock."""
        with self._lock:
            return self.trace.covers(t)

    def wait_past(self, t: float, timeout: float = 1.0) -> bool:
        """Wait at most ``timeout`` s for an update at or after ``t`` s; False where none came or the thread failed."""
        end = self.clock() + timeout
        while not self.covers(t):
            if self.clock() > end or self.error is not None:
                return False
            time.sleep(self.interval)
        return True

    def __enter__(self) -> CounterPoller:
        """Start polling."""
        return self.start()

    def __exit__(self, *exc: object) -> None:
        """Stop polling."""
        self.stop()
