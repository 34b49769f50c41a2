"""The governor's one control loop: decide, apply (or log in dry run), release.

The daemon (`daemon.Daemon`, per interval) and the training integrations (`GovernedTraining`,
per step through `GovernedLoop.step_end`) drive it: they observe, it asks the governor for the
next setting and sets it (through a `knob.Knob`, the device, or the clock service
`clockd.ClockClient` when this process may not).

Dry run (``dry_run=True``), for a GPU whose clocks are not this process's to set: the loop
decides exactly as it would, but never calls ``set_clocks``. Each step is observed at the row
the GPU actually ran (the one nearest the measured clocks or power limit, or within
``tolerance``), not at the one the governor chose: ``governor.current`` is the actual row
before every observation and decision, and the chosen row is kept apart (`would_index`). Each
decision is logged with what it would set and what the GPU ran; nothing being explored in dry
run, a decision to explore is logged as the advised row, the one it would have explored under
``explore`` (`advice.advised_entry`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Hashable, Sequence

import numpy as np
from numpy.typing import ArrayLike

from gpudvfs.errors import InputError
from gpudvfs.govern.advice import advised_entry
from gpudvfs.govern.governor import Governor


def nearest_config(configs: ArrayLike, clocks: Sequence[float]) -> int:
    """The pair of ``configs`` nearest ``clocks`` in log-frequency distance; ties go to the lower index.

    The distance is the sum of both clocks' squared log ratios.

    Parameters
    ----------
    configs : array_like
        [K x 2] (core, memory) MHz pairs.
    clocks : sequence of float
        (core, memory) MHz.

    Returns
    -------
    int
        The nearest pair's index.

    Raises
    ------
    InputError
        Where ``clocks`` is not two positive finite MHz.
    """
    try:
        core, mem = (float(x) for x in clocks)
    except (TypeError, ValueError):
        raise InputError(f"clocks must be (core_mhz, mem_mhz), got {clocks!r}") from None
    if not (math.isfinite(core) and math.isfinite(mem) and core > 0 and mem > 0):
        raise InputError(f"clocks must be positive and finite MHz, got ({core}, {mem})")
    cfg = np.asarray(configs, dtype=np.float64)
    d = np.log(cfg[:, 0] / core) ** 2 + np.log(cfg[:, 1] / mem) ** 2
    return int(np.argmin(d))


class GovernedLoop:
    """A governor that a loop drives: `phase` when a workload starts, `step_end` after each step.

    ``set_clocks(core_mhz, mem_mhz)`` sets a governor row (e.g. ``Knob.set_row``; never called in
    dry run, where it may be None); returning False says the setting was refused. ``restore``
    gives the knob back to the driver (`release`). ``energy_j``: a monotonic energy counter in
    joules, read at each step's end when the step's watts are not given; ``clock``: seconds, for
    its time when not given. In dry run (module notes) the setting the GPU ran comes from the
    ``clocks=`` argument of `phase` and `step_end`, else from ``actual_clocks()``; the nearest
    row is taken, or with ``tolerance`` only one within it on each column (relative), else none.

    ``log`` gets a dict per decision: the governor's entry (its ``core_mhz``/``mem_mhz`` the row
    chosen) plus ``dry_run``, ``would_core_mhz``, ``would_mem_mhz``, ``would_index``,
    ``actual_core_mhz``, ``actual_mem_mhz`` and ``actual_index`` (dry run; None otherwise),
    ``set`` (whether ``set_clocks`` was called and did not return False) and, in dry run,
    ``explore`` without ``realized_saving`` (`advice.advised_entry`). The governor's own ``log``
    still receives its entries. `InputError` where ``dry_run`` is not a bool, or ``set_clocks``
    is missing outside dry run.
    """

    def __init__(self, governor: Governor, set_clocks: Callable[[float, float], object] | None = None,
                 energy_j: Callable[[], float | None] | None = None, clock: Callable[[], float] = time.perf_counter,
                 *, dry_run: bool = False, actual_clocks: Callable[[], Sequence[float]] | None = None,
                 log: Callable[[dict], None] | None = None, restore: Callable[[], object] | None = None,
                 tolerance: float | None = None) -> None:
        if not isinstance(dry_run, bool):
            raise InputError(f"dry_run must be True or False, got {dry_run!r}")
        if not dry_run and set_clocks is None:
            raise InputError("set_clocks is needed unless dry_run=True")
        self.governor, self.set_clocks, self.energy_j, self.clock = governor, set_clocks, energy_j, clock
        self.dry_run, self.actual_clocks, self.log = dry_run, actual_clocks, log
        self.restore, self.tolerance = restore, tolerance
        #: Dry run: the row the governor chose last (what it would set), and the row the GPU ran.
        self.would_index: int | None = None
        self.actual_index: int | None = None
        #: The row set and held (None: the driver's setting); settings made (`release` included);
        #: dry run, those it would have made.
        self.held: int | None = None
        self.changes = 0
        self.would_changes = 0
        #: The last decision's entry, as logged, and its time in seconds (`apply_next`).
        self.last_decision: dict | None = None
        self.decision_s: float | None = None
        self._mark: tuple[float, float | None] | None = None
        # Each row as floats: read every step, where indexing the array would cost more than the decision.
        self._pairs: list[tuple[float, float]] = [(c, m) for c, m in governor.configs.tolist()]

    def _row(self, clocks: Sequence[float] | None) -> int | None:
        """Dry run: the row the GPU ran at ``clocks`` (None: ``actual_clocks()``), None where none is near enough."""
        if clocks is None:
            if self.actual_clocks is None:
                raise InputError("a dry run needs the clocks the GPU ran: pass clocks=(core_mhz, mem_mhz) or "
                                 "GovernedLoop(..., actual_clocks=lambda: device.clocks)")
            clocks = self.actual_clocks()
        k = nearest_config(self.governor.configs, clocks)
        if self.tolerance is not None and np.abs(np.log(self.governor.configs[k] / np.asarray(clocks))).max() > \
                self.tolerance:
            return None
        return k

    def ran(self, clocks: Sequence[float] | None = None) -> int | None:
        """The row the GPU runs at: the one held, or in dry run the driver's (`_row`)."""
        return self._row(clocks) if self.dry_run else self.held

    def note_actual(self, clocks: Sequence[float] | None = None) -> None:
        """Dry run: the row the GPU ran, made the governor's current row (where there is one)."""
        self.actual_index = self._row(clocks)
        if self.actual_index is not None:
            self.governor.current = self.actual_index

    def apply_next(self, *, force: bool = False) -> int:
        """Decide the next row, set it where it is not the one held (or ``force``) and log the decision.

        Dry run: the row it would set (`advice.advised_entry`), set nothing; the governor's current row
        goes back to the one the GPU ran. ``decision_s``: the time of `Governor.decide` (its entry
        included) and, in dry run, of the advice; not of setting or logging.
        """
        entries: list[dict] = []
        gov = self.governor
        user, gov.log = gov.log, entries.append
        start = time.perf_counter()
        try:
            k = gov.decide()
        finally:
            gov.log = user
        entry = entries[0]
        if self.dry_run:
            entry, k = advised_entry(gov, entry, k)
        self.decision_s = time.perf_counter() - start
        if user is not None:
            user(entries[0])
        was_set, a = False, None
        if self.dry_run:
            self.would_changes += k != self.would_index
            self.would_index, a = k, self.actual_index
            if a is not None:
                gov.current = a
        elif (force or k != self.held) and self.set_clocks is not None:
            was_set = self.set_clocks(*self._pairs[k]) is not False
            if was_set:
                self.changes += k != self.held
                self.held = k
        core, mem = self._pairs[k]
        actual = (None, None) if a is None else self._pairs[a]
        entry = {**entry, "dry_run": self.dry_run, "would_index": k, "would_core_mhz": core, "would_mem_mhz": mem,
                 "set": was_set, "actual_index": a, "actual_core_mhz": actual[0], "actual_mem_mhz": actual[1]}
        self.last_decision = entry
        if self.log is not None:
            self.log(entry)
        return k

    def release(self, counted: bool = True) -> None:
        """Give the knob back to the driver (``restore``); ``counted``: one of the run's changes."""
        if self.dry_run or self.held is None:
            return
        if self.restore is not None:
            self.restore()
        self.changes += counted
        self.held = None

    def phase(self, key: Hashable, time_ms: ArrayLike | None, watts: ArrayLike | None, *,
              clocks: Sequence[float] | None = None) -> tuple[float, float]:
        """Start a workload (or a phase of it) and set (dry run: decide) its first clocks.

        ``time_ms`` and ``watts``: [K] the offline prediction of the time per unit of work and the
        power at every row, its prior (ignored for a known phase). ``clocks``: dry run, the (core,
        memory) MHz the GPU runs at now. Returns the (core, memory) MHz set (dry run: that would be).
        """
        self.governor.phase(key, time_ms, watts)
        if self.dry_run:
            self.note_actual(clocks)
        pair = self._pairs[self.apply_next(force=True)]
        self._mark = (self.clock(), self.energy_j() if self.energy_j else None)
        return pair

    def step_end(self, *, time_ms: float | None = None, watts: float | None = None,
                 work: float = 1.0, clocks: Sequence[float] | None = None) -> tuple[float, float]:
        """End a step: measure what is not given, observe, and set the next clocks.

        ``time_ms`` (None: measured with ``clock``) and ``watts`` (None: measured with ``energy_j``)
        are the step's; ``work`` its units of work (its time is per unit), > 0; ``clocks``: dry
        run, the (core, memory) MHz it ran at. Returns the (core, memory) MHz set next (dry run:
        that would be). `InputError` before `phase`, for ``work`` not > 0, or where the watts are
        neither given nor measurable.
        """
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
        if self.dry_run:
            self.note_actual(clocks)
        self.governor.observe(self.governor.current, time_ms / work, watts)
        pair = self._pairs[self.apply_next()]
        self._mark = (self.clock(), self.energy_j() if self.energy_j else None)
        return pair
