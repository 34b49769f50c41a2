"""The governor embedded in a training or inference loop.

Call `GovernedLoop.step_end` at the end of every step; it observes the step's time and energy,
asks the governor for the next clocks and sets them (through the device when the process may,
or through the clock service `clockd.ClockClient` when it may not).

Dry run (``dry_run=True``), for a GPU whose clocks are not this process's to set: the loop
measures and decides exactly as it would, but never calls ``set_clocks``. Each step is
observed at the pair the GPU actually ran (the configuration nearest the measured clocks,
given as (core, memory) MHz), not at the pair the governor chose: ``governor.current`` is
the actual pair before every observation and decision, and the chosen pair is kept apart
(`would_index`). Each decision is logged with what it would set and what the GPU ran. Nothing
being explored in dry run, a decision to explore is logged as the advised pair (`advice`), the
pair it would have explored under ``explore``.
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
    """A governor that a loop drives step by step: `phase` when a workload starts, `step_end` after each step.

    Parameters
    ----------
    governor : Governor
        The governor.
    set_clocks : callable or None
        ``set_clocks(core_mhz, mem_mhz)``: e.g. ``device.lock_clocks`` or ``ClockClient.set``
        (never called in dry run, where it may be None); returning False says the setting
        was refused.
    energy_j : callable or None
        A monotonic energy counter in joules (``device.energy_joules``), read at each step's
        end when the step's watts are not given.
    clock : callable
        Seconds, for the step's time when it is not given.
    dry_run : bool
        Decide without setting (module notes); the clocks the GPU ran come from the
        ``clocks=`` argument of `phase` and `step_end`, else from ``actual_clocks``.
    actual_clocks : callable or None
        Dry run: the (core, memory) MHz the GPU runs at (e.g. ``lambda: device.clocks``).
    log : callable or None
        Called with a dict per decision: the governor's entry (its ``core_mhz``/``mem_mhz``
        the pair chosen) plus ``dry_run``, ``would_core_mhz``, ``would_mem_mhz``,
        ``would_index``, ``actual_core_mhz``, ``actual_mem_mhz`` and ``actual_index`` (in dry
        run; None otherwise), ``set`` (whether ``set_clocks`` was called and did not
        return False) and, in dry run, ``explore`` (module notes) without ``realized_saving``.
        The governor's own ``log`` still receives its entries as before.

    Raises
    ------
    InputError
        Where ``dry_run`` is not a bool, or ``set_clocks`` is missing outside dry run.
    """

    def __init__(self, governor: Governor, set_clocks: Callable[[float, float], object] | None = None,
                 energy_j: Callable[[], float | None] | None = None, clock: Callable[[], float] = time.perf_counter,
                 *, dry_run: bool = False, actual_clocks: Callable[[], Sequence[float]] | None = None,
                 log: Callable[[dict], None] | None = None) -> None:
        if not isinstance(dry_run, bool):
            raise InputError(f"dry_run must be True or False, got {dry_run!r}")
        if not dry_run and set_clocks is None:
            raise InputError("set_clocks is needed unless dry_run=True")
        self.governor, self.set_clocks, self.energy_j, self.clock = governor, set_clocks, energy_j, clock
        self.dry_run, self.actual_clocks, self.log = dry_run, actual_clocks, log
        #: Dry run: the pair the governor chose last (what it would set), and the pair the GPU ran.
        self.would_index: int | None = None
        self.actual_index: int | None = None
        #: The last decision's entry, as logged.
        self.last_decision: dict | None = None
        self._entry: dict = {}
        self._mark: tuple[float, float | None] | None = None

    def _pair(self, k: int) -> tuple[float, float]:
        core, mem = self.governor.configs[k]
        return float(core), float(mem)

    def _set(self, pair: tuple[float, float]) -> bool:
        """Set ``pair`` unless in dry run; whether it was set (``set_clocks`` not returning False)."""
        if self.dry_run or self.set_clocks is None:
            return False
        return self.set_clocks(*pair) is not False

    def _actual(self, clocks: Sequence[float] | None) -> int:
        """Dry run: the index of the pair the GPU ran, made the governor's current pair."""
        if clocks is None:
            if self.actual_clocks is None:
                raise InputError("a dry run needs the clocks the GPU ran: pass clocks=(core_mhz, mem_mhz) or "
                                 "GovernedLoop(..., actual_clocks=lambda: device.clocks)")
            clocks = self.actual_clocks()
        k = nearest_config(self.governor.configs, clocks)
        self.actual_index = self.governor.current = k
        return k

    def _decide(self) -> int:
        """The governor's decision; in dry run it is recorded apart.

        The current pair then goes back to the actual one. Logs the entry (with ``set`` filled by the
        caller).
        """
        entries: list[dict] = []
        user = self.governor.log
        self.governor.log = entries.append
        try:
            k = self.governor.decide()
        finally:
            self.governor.log = user
        entry = entries[0]
        if user is not None:
            user(entry)
        if self.dry_run:
            entry, k = advised_entry(self.governor, entry, k)
            self.would_index = k
            self.governor.current = self.actual_index
        self._entry = entry
        return k

    def _emit(self, k: int, was_set: bool) -> None:
        entry = dict(self._entry)
        core, mem = self._pair(k)
        entry |= {"dry_run": self.dry_run, "would_index": k, "would_core_mhz": core, "would_mem_mhz": mem,
                  "set": was_set}
        a = self.actual_index if self.dry_run else None
        entry |= {"actual_index": a, "actual_core_mhz": None if a is None else self._pair(a)[0],
                  "actual_mem_mhz": None if a is None else self._pair(a)[1]}
        self.last_decision = entry
        if self.log is not None:
            self.log(entry)

    def phase(self, key: Hashable, time_ms: ArrayLike | None, watts: ArrayLike | None, *,
              clocks: Sequence[float] | None = None) -> tuple[float, float]:
        """Start a workload (or a phase of it) and set (dry run: decide) its first clocks.

        The offline prediction at every pair is its prior.

        Parameters
        ----------
        key : hashable
            The phase (`Governor.phase`).
        time_ms, watts : array_like or None
            [K] the predicted time per unit of work and power (ignored for a known phase).
        clocks : sequence of float or None
            Dry run: the (core, memory) MHz the GPU runs at now.

        Returns
        -------
        tuple of (float, float)
            The (core, memory) MHz set (dry run: that would be set).
        """
        self.governor.phase(key, time_ms, watts)
        if self.dry_run:
            self._actual(clocks)
        k = self._decide()
        pair = self._pair(k)
        self._emit(k, self._set(pair))
        self._mark = (self.clock(), self.energy_j() if self.energy_j else None)
        return pair

    def step_end(self, *, time_ms: float | None = None, watts: float | None = None,
                 work: float = 1.0, clocks: Sequence[float] | None = None) -> tuple[float, float]:
        """End a step: measure what is not given, observe, and set the next clocks.

        Parameters
        ----------
        time_ms : float or None
            The step's time (None: measured with ``clock``).
        watts : float or None
            Its power (None: measured with ``energy_j``).
        work : float
            The units of work it did (its time is per unit), > 0.
        clocks : sequence of float or None
            Dry run: the (core, memory) MHz the step ran at.

        Returns
        -------
        tuple of (float, float)
            The (core, memory) MHz set next (dry run: that would be set).

        Raises
        ------
        InputError
            Before `phase`, for ``work`` not > 0, or where the watts are neither given nor
            measurable.
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
            self._actual(clocks)
        self.governor.observe(self.governor.current, time_ms / work, watts)
        before = self.governor.current
        k = self._decide()
        pair = self._pair(k)
        self._emit(k, k != before and self._set(pair))
        self._mark = (self.clock(), self.energy_j() if self.energy_j else None)
        return pair
