"""`StepMeter`: what each training step cost.

Its wall time, energy, mean power, the clocks at its end and the throttle reasons seen at its
start or end.

Energy comes from the device's energy counter. NVML's does not count continuously: an H200
advances it once every 100 ms (validation/nvidia-h200: steps of 175 ms read 54 J or 118 J, one
update or two, though each drew about the same), so its difference between a step's start and
end is off by up to one update's energy. On a real device the meter therefore polls the counter
in a thread (`CounterPoller`, from `begin` to `close`) and takes a step's energy from the
counter's update instants, interpolated linearly between the updates around the step's start
and end (``energy_source`` ``"counter-interpolated"``). That is known only once an update at or
after the step's end has been seen: a step ending before that is PENDING, and is finalized (its
record built, appended to `records` and written to the log) by a later `stop` once covered, or
by `flush`/`close`, which wait at most `FLUSH_WAIT_S` for the last update and else take the raw
counter difference (``"counter-raw"``, as for a step that began before the first update seen).
Steps are finalized in order; `stop` never waits for the counter. The meter also keeps the
counter's raw total delta since `begin`, against which the sum of the steps' energies is
checked (the difference is the energy between steps plus the counter's granularity).

A device without a counter gives the mean of the power readings polled at the step's start and
end (``"power-readings"``). A `StepDevice` (the training simulator ``device="sim"``, a replay)
runs each step itself on its virtual clock, which then times the steps: a step's time and energy
are the device's at the clocks and power limit in force, whatever the CPU took; the wall clock
is kept only for waiting on a real counter. A plain `SimulatedDevice` (exact counter: ``"counter"``,
no poller) runs a fixed `Workload` for each step's measured wall time at its current clocks, so
that the counter moves (the time between steps is not simulated). A sensor that fails is
recorded as None and named in `notes`, never raised: a training run is not stopped by its meter.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from gpudvfs.data.jsonfile import JsonLines
from gpudvfs.errors import InputError
from gpudvfs.hardware.device import Workload
from gpudvfs.hardware.energy_counter import POLL_S, CounterPoller
from gpudvfs.hardware.sim_training import StepDevice
from gpudvfs.hardware.simulated import SimulatedDevice

#: How long `StepMeter.flush` (and `close`) wait for the counter's update after the last step (s).
FLUSH_WAIT_S = 0.5
#: How long `StepMeter.begin` waits for the counter's first update (s), so that the first steps'
#: energies can be interpolated too (an H200's comes within 0.1 s).
FIRST_UPDATE_WAIT_S = 0.25

#: What a simulated GPU runs during a step (for tests and demos): a busy, mostly compute-bound
#: step. Generic, not measured.
SIM_STEP = Workload(name="dl-train-step", counters={
    "util:SP": 0.6, "util:INT": 0.3, "util:L2": 0.4, "util:Shared": 0.3, "util:DRAM": 0.4,
    "compute_ms": 1.0, "memory_ms": 0.5})


@dataclass(frozen=True)
class StepRecord:
    """One metered step: one line of the log.

    ``step`` and ``phase_step`` count from 1 among the meter's and the phase's steps;
    ``start_s``: seconds since the meter's `begin`; ``joules`` and ``watts`` None where nothing
    could be read; the clocks are read at its end, the throttle reasons at its start or end.
    ``energy_source``: ``"counter-interpolated"`` (a real counter read at its update instants),
    ``"counter-raw"`` (its difference between the step's start and end: no update seen around
    them), ``"counter"`` (the simulated GPU's exact counter, or ``poll=False``),
    ``"power-readings"`` (the mean of the readings at start and end: no counter) or ``"none"``.
    ``counter_j``: the counter's raw total delta since `begin` at the step's end. ``split``: cut
    in two by a marked region (`GovernedTraining.phase`).
    """

    step: int
    phase: str
    phase_step: int
    start_s: float
    time_ms: float
    joules: float | None
    watts: float | None
    energy_source: str
    core_mhz: float | None
    mem_mhz: float | None
    throttle_reasons: tuple[str, ...]
    counter_j: float | None
    split: bool = False
    kind: str = "step"

    def to_dict(self) -> dict:
        """The record as JSON values."""
        d = asdict(self)
        d["throttle_reasons"] = list(self.throttle_reasons)
        return d


@dataclass
class _Ended:
    """A step ended and not yet finalized: what was read at its start and end."""

    step: int
    phase: str
    phase_step: int
    t0: float
    t1: float
    e0: float | None
    e1: float | None
    p0: float | None
    p1: float | None
    core: float | None
    mem: float | None
    reasons: tuple[str, ...]
    counter_j: float | None
    split: bool


def is_simulated(device: object) -> bool:
    """Whether ``device`` is a simulated GPU whose counter the meter moves itself (not a `StepDevice`)."""
    return isinstance(device, SimulatedDevice) and not isinstance(device, StepDevice)


class StepMeter:
    """Meters the steps of a device (module notes).

    ``device``: any object with some of ``energy_joules()``, ``power_watts()``, ``clocks``,
    ``throttle_reasons()`` (None: wall time only). ``clock``: seconds, for the steps' times (None:
    a `StepDevice`'s ``now``, else `time.perf_counter`). ``sync``: called at each step boundary
    before reading anything (e.g. ``torch.cuda.synchronize``, so a step's time is its GPU work's).
    ``poll``: on a real device with an energy counter, poll it every ``poll_interval`` s from
    `begin` to `close` and interpolate steps' energies at its update instants; False: the raw
    difference at each step's start and end, each step final at `stop`.
    """

    def __init__(self, device: Any = None, *, log_path: str | Path | None = None, workload: Workload | None = None,
                 clock: Callable[[], float] | None = None, sync: Callable[[], None] | None = None,
                 poll: bool = True, poll_interval: float = POLL_S) -> None:
        if not (isinstance(poll_interval, (int, float)) and math.isfinite(poll_interval) and poll_interval > 0):
            raise InputError(f"poll_interval must be a finite number of seconds > 0, got {poll_interval!r}")
        self.stepped = isinstance(device, StepDevice)
        self.device, self.sync = device, sync
        self.clock = clock or (device.now if self.stepped else time.perf_counter)
        self.workload = workload or SIM_STEP
        self.simulated = is_simulated(device)
        self.poll, self.poll_interval = bool(poll), float(poll_interval)
        #: The counter's poller (running from `begin` to `close`), None where not polled.
        self.poller: CounterPoller | None = None
        #: Steps stopped so far (finalized or pending): the last one's ``step`` number.
        self.stopped = 0
        self._closed = False
        self._queue: deque[_Ended] = deque()
        #: Finalized steps, in order.
        self.records: list[StepRecord] = []
        #: Sensors that failed, with the first error of each.
        self.notes: dict[str, str] = {}
        self._write: Callable[[dict], None] | None = None
        self._close: Callable[[], None] | None = None
        self.log_path: Path | None = None
        if log_path is not None:
            self.open_log(log_path)
        self._begin: tuple[float, float | None] | None = None
        self._start: tuple[str, float, float | None, float | None, tuple[str, ...], bool] | None = None
        self._counts: dict[str, int] = {}
        self._last_counter: float | None = None
        self._last_end: tuple[float, float | None, float | None] | None = None

    # sensors: each failure is noted once and read as None
    def _read(self, what: str, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except Exception as e:  # NVML errors of any kind: the step is still recorded
            self.notes.setdefault(what, f"{type(e).__name__}: {e}")
            return None

    def _energy(self) -> float | None:
        d = self.device
        if d is None:
            return None
        e = self._read("energy_joules", d.energy_joules)
        return None if e is None or not math.isfinite(float(e)) else float(e)

    def _power(self) -> float | None:
        d = self.device
        if d is None:
            return None
        p = self._read("power_watts", d.power_watts)
        return None if p is None or not math.isfinite(float(p)) else float(p)

    def _clocks(self) -> tuple[float | None, float | None]:
        if self.device is None:
            return None, None
        c = self._read("clocks", lambda: self.device.clocks)
        if c is None:
            return None, None
        return float(c[0]), float(c[1])

    def _reasons(self) -> tuple[str, ...]:
        d = self.device
        if d is None:
            return ()
        r = self._read("throttle_reasons", d.throttle_reasons)
        return tuple(r or ())

    def _sync(self) -> None:
        if self.sync is not None:
            self._read("sync", self.sync)

    # steps
    def begin(self) -> None:
        """Start the run: the total counter delta is counted from here.

        Done by the first `start` where not called. On a real device with an energy counter, start
        polling it and wait for its first update (at most `FIRST_UPDATE_WAIT_S`).
        """
        if self._begin is not None:
            return
        self._begin = (self.clock(), self._energy())
        if self._begin[1] is None or self.simulated or self.stepped or not self.poll:
            return
        poller = CounterPoller(self.device.energy_joules, self.poll_interval, clock=self.clock)
        try:
            poller.start()
        except Exception as e:  # the first read failed: raw differences, as without a poller
            self.notes.setdefault("energy_poller", f"{type(e).__name__}: {e}")
            return
        self.poller = poller
        self._await(lambda: poller.covers(-math.inf), FIRST_UPDATE_WAIT_S)

    def _began(self) -> tuple[float, float | None]:
        """(time, energy counter) at `begin`, which every step's start comes after."""
        if self._begin is None:
            raise InputError("StepMeter: no run begun")
        return self._begin

    def _await(self, done: Callable[[], bool], timeout: float) -> bool:
        """Wait (real time, whatever `clock` is) until ``done()``, the poller fails or ``timeout``."""
        end = time.monotonic() + timeout
        while not done():
            if time.monotonic() > end or self._poller_failed():
                return False
            time.sleep(self.poll_interval)
        return True

    def _poller_failed(self) -> bool:
        p = self.poller
        if p is None or p.error is None:
            return False
        self.notes.setdefault("energy_poller", f"{type(p.error).__name__}: {p.error}")
        return True

    @property
    def pending(self) -> int:
        """Steps stopped and not yet finalized (waiting for the counter's next update)."""
        return len(self._queue)

    @property
    def counter_total_j(self) -> float | None:
        """The energy counter's delta from `begin` to the last step's end (None without one)."""
        if self._begin is None or self._begin[1] is None or self._last_counter is None:
            return None
        return self._last_counter - self._begin[1]

    @property
    def open(self) -> bool:
        """Whether a step is open (started and not stopped)."""
        return self._start is not None

    @property
    def phase(self) -> str | None:
        """The open step's phase (None: no step open)."""
        return None if self._start is None else self._start[0]

    def start(self, phase: str = "train", *, split: bool = False) -> None:
        """Start a step (one left open is replaced: see `discard`); ``split``: the second part of a cut step."""
        self.begin()
        self._sync()
        if self.stepped:
            self.device.begin_step(str(phase))
        self._start = (str(phase), self.clock(), self._energy(), None, self._reasons(), split)
        if self._energy_less():
            self._start = (*self._start[:3], self._power(), *self._start[4:])

    def _energy_less(self) -> bool:
        return self._start is not None and self._start[2] is None

    def start_from_last(self, phase: str) -> None:
        """Open a step that started when the last one ended (or at `begin`).

        For frameworks that report a step's end only (Hugging Face's prediction steps).
        """
        self.begin()
        if self.stepped:
            self.device.begin_step(str(phase))
        t, e, p = self._last_end or (*self._began(), None)
        if e is None and p is None:
            p = self._power()
        self._start = (str(phase), t, e, p, (), False)

    def discard(self) -> None:
        """Forget the open step (nothing is recorded)."""
        self._start = None

    def stop(self, *, split: bool = False) -> list[StepRecord]:
        """End the open step (``split``: the first part of a cut step); never waits for the counter.

        Returns the records finalized by this call, in order (each also appended to `records` and
        the log): this step's where its energy is known now (always on the simulated GPU or
        without a poller), earlier pending steps' that the counter has now covered; possibly none.
        """
        if self._start is None:
            raise InputError("StepMeter.stop without a step started")
        phase, t0, e0, p0, reasons0, split0 = self._start
        self._start = None
        self._sync()
        if self.stepped:
            self.device.end_step()
        t1 = self.clock()
        dt = max(t1 - t0, 0.0)
        if self.simulated:
            self.device.run(self.workload, dt)
        e1 = self._energy()
        p1 = self._power() if e1 is None else None
        self._last_end = (t1, e1, p1)
        if e1 is not None:
            self._last_counter = e1
        core, mem = self._clocks()
        reasons = tuple(sorted({*reasons0, *self._reasons()}))
        n = self._counts[phase] = self._counts.get(phase, 0) + 1
        self.stopped += 1
        self._queue.append(_Ended(step=self.stopped, phase=phase, phase_step=n, t0=t0, t1=t1, e0=e0, e1=e1, p0=p0,
                                  p1=p1, core=core, mem=mem, reasons=reasons, counter_j=self.counter_total_j,
                                  split=split0 or split))
        return self._drain()

    def _covered(self, s: _Ended) -> bool:
        p = self.poller
        return p is None or self._closed or self._poller_failed() or p.covers(s.t1)

    def _drain(self, force: bool = False) -> list[StepRecord]:
        out = []
        while self._queue and (force or self._covered(self._queue[0])):
            out.append(self._finalize(self._queue.popleft()))
        return out

    def flush(self, timeout: float = FLUSH_WAIT_S) -> list[StepRecord]:
        """Finalize every pending step, waiting at most ``timeout`` s for the counter's update after the last.

        Those still not covered then take the raw counter difference.
        ``timeout`` in seconds; returns the records finalized, in order.
        """
        p = self.poller
        if self._queue and p is not None:
            last = self._queue[-1].t1
            self._await(lambda: p.covers(last), timeout)
        return self._drain(force=True)

    def _finalize(self, s: _Ended) -> StepRecord:
        dt = max(s.t1 - s.t0, 0.0)
        joules, source = None, "none"
        if self.poller is not None:
            e = self.poller.energy(s.t0, s.t1)
            if e is not None:
                joules, source = e, "counter-interpolated"
        if joules is None:
            if s.e0 is not None and s.e1 is not None:
                joules, source = s.e1 - s.e0, "counter" if self.poller is None else "counter-raw"
            elif s.p0 is not None and s.p1 is not None:
                joules, source = 0.5 * (s.p0 + s.p1) * dt, "power-readings"
        rec = StepRecord(step=s.step, phase=s.phase, phase_step=s.phase_step, start_s=s.t0 - self._began()[0],
                         time_ms=1e3 * dt, joules=joules,
                         watts=None if joules is None or dt <= 0 else joules / dt, energy_source=source,
                         core_mhz=s.core, mem_mhz=s.mem, throttle_reasons=s.reasons, counter_j=s.counter_j,
                         split=s.split)
        self.records.append(rec)
        if self._write is not None:
            self._write(rec.to_dict())
        return rec

    def open_log(self, path: str | Path) -> None:
        """Append the records finalized from now on, and `write`'s entries, to the JSONL file ``path``."""
        log = JsonLines(path)
        self._write, self._close = log.write, log.close
        self.log_path = Path(path)

    def write(self, entry: dict) -> None:
        """Append another entry (a decision, JSON values) to the log, if any."""
        if self._write is not None:
            self._write(entry)

    def close(self) -> list[StepRecord]:
        """Finalize the pending steps (`flush`: the records finalized), stop the poller and close the log."""
        try:
            recs = self.flush()
        finally:
            self._closed = True
            if self.poller is not None:
                self.poller.stop()
                self._poller_failed()
            if self._close is not None:
                self._close()
                self._write = self._close = None
        return recs
