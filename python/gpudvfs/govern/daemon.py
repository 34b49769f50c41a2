"""The governor as a daemon that follows a GPU's running processes (`gpudvfs govern run`).

Every interval the daemon reads what the GPU did: the energy counter (watts over the
interval), the running processes, their activities (SM, pipe, DRAM: DCGM's on the
simulator; NVML's GPM metrics on a Hopper or newer GPU; on older ones NVML's kernel and
memory busy fractions, a coarser view) and, where the application reports it, its progress
in units of work. The phase detector maps (processes, activities) to a phase. A new phase's
prior is its first interval carried to every pair: with a fleet registry and a DCGM time
model (`gpudvfs.fleet.model_prior.ModelPrior`), as `gpudvfs fleet whatif` carries a telemetry
sample, its power by the GPU's registry model and its time by the time model's shares; without
them (`priors.CatalogPrior`), over the clocks the GPU lists, its power by the shape of the
catalog's power prior and its time by a generic two-part law, a wider prior the governor
corrects by measuring. Then the governor observes the interval, and the control loop
(`loop.GovernedLoop`) decides and sets the knob (dry run: logs what it would set).

An interval is observed only when the daemon held the clocks through it and it lay inside
its phase (not one that straddles a phase change). Where the GPU reports a throttle reason
at an interval's end (power cap, thermal), the pair was not held: the phase does not run
there again (`Governor.exclude`). Without a progress signal the time per unit of work is
not measured: the governor learns the power and keeps the predicted time ratios. Dry run
(``dry_run``): nothing is set; an interval is observed at the governed pair the driver's own
clocks were at (within DRY_RUN_TOLERANCE on each clock, through the whole interval); the log
says what the governor would set, never a pair it would explore (`advice.advised_entry`), and
the run ends with each phase's advice (`advice.Advice`). When no process runs, the clocks go back to the
driver; whichever way `run` ends (its duration, a stop event, an exception, a signal turned
into one), the clocks are reset. After a SIGKILL, `gpudvfs govern reset`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import numpy as np

from gpudvfs.errors import InputError
from gpudvfs.govern.advice import advice_table, phase_advice
from gpudvfs.govern.governor import Governor
from gpudvfs.govern.knob import make_knob
from gpudvfs.govern.loop import GovernedLoop, nearest_config
from gpudvfs.govern.phases import PhaseDetector
from gpudvfs.govern.priors import Prior
from gpudvfs.hardware.nvml import NvmlDevice
from gpudvfs.hardware.simulated import SimulatedDevice

#: Dry run: how far (relative, on each clock) the driver's clocks may be from a governed pair
#: for an interval to count as that pair's.
DRY_RUN_TOLERANCE = 0.02
#: The shortest interval `gpudvfs govern run` takes: NVML's power and energy readings refresh
#: every 20-100 ms, so a shorter one measures the sensor, not the clocks; and a simulated run
#: takes a step per interval of its (virtual) duration.
MIN_DAEMON_INTERVAL_S = 0.1


class Monitor(Protocol):
    """What the daemon reads of a GPU besides its device: `NvmlMonitor`, `gpudvfs.fleet.simhost.SimulatedHost`.

    ``source``: where the activities come from (``"gpm"``, ``"utilization"``, ``"simulated"``).
    """

    source: str

    def processes(self) -> tuple[tuple[int, str], ...]:
        """(pid, name) of each compute process running."""

    def activity(self) -> np.ndarray:
        """(SM, pipe, DRAM) activity over the last `wait`."""

    def progress(self) -> float | None:
        """Work units the application says it has done (None: not reported)."""

    def wait(self, seconds: float) -> None:
        """Let one interval pass."""


class NvmlMonitor:
    """What the daemon reads of an `NvmlDevice`.

    Its compute processes; its activities, from GPM where the GPU has it (Hopper and newer: SM,
    pipe and DRAM utilization over each interval, ``source == "gpm"``), else NVML's utilization
    rates as (kernel busy, 0, memory busy) (``"utilization"``); and the progress an application
    keeps in ``progress_file``, the number of work units it has done (None: the time is not
    measured).
    """

    def __init__(self, device: NvmlDevice, progress_file: str | Path | None = None) -> None:
        self.device = device
        self.progress_file = None if progress_file is None else Path(progress_file)
        self._gpm = device.gpm()
        self.source = "utilization" if self._gpm is None else "gpm"
        self._started = False
        self._activity = np.zeros(3)

    def processes(self) -> tuple[tuple[int, str], ...]:
        """(pid, name) of each of the GPU's compute processes."""
        return self.device.processes()

    def activity(self) -> np.ndarray:
        """(SM, pipe, DRAM) over the last `wait` (GPM); without GPM (kernel busy, 0, memory busy) now."""
        if self._gpm is not None:
            return self._activity.copy()
        kernel, memory = self.device.utilization()
        return np.array([kernel, 0.0, memory])

    def wait(self, seconds: float) -> None:
        """Sleep through one interval; with GPM, measure its activities over it."""
        if self._gpm is not None and not self._started:
            self._gpm.start()
            self._started = True
        time.sleep(seconds)
        if self._gpm is not None:
            self._activity = self._gpm.read()

    def close(self) -> None:
        """Stop the GPM sampling (the device stays open)."""
        if self._gpm is not None:
            self._gpm.close()
            self._gpm = None

    def progress(self) -> float | None:
        """The number in the progress file; None without a file or before the application has written it.

        `InputError` where the file holds anything but a finite number >= 0.
        """
        if self.progress_file is None:
            return None
        try:
            text = self.progress_file.read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            return None  # the application has not started reporting yet
        try:
            value = float(text)
        except ValueError:
            raise InputError(f"{self.progress_file}: expected a number of work units done, got {text[:40]!r}") from None
        if not (np.isfinite(value) and value >= 0):
            raise InputError(f"{self.progress_file}: the work done must be finite and >= 0, got {value}")
        return value


@dataclass
class DaemonStats:
    """What a run did.

    ``governed``: intervals in which a process ran; ``observed``: those the governor learnt from;
    ``throttled``: those in which the GPU did not hold the clocks set. ``clock_changes``: a pair
    set, or the driver's clocks given back while no process ran (not the reset on the way out,
    after which the GPU ran at ``clocks_restored``, (core, memory) MHz; None until a run has
    ended). ``would_change``: dry run, the changes the governor would have made. ``phases`` and
    ``phase_joules``: intervals and joules of each phase met (`phase_name`); ``advice``: per
    phase its advice (`gpudvfs.govern.advice.Advice.as_dict`) against the setting it ran at most,
    once a run has ended.
    """

    intervals: int = 0
    governed: int = 0
    observed: int = 0
    throttled: int = 0
    clock_changes: int = 0
    joules: float = 0.0
    work: float = 0.0
    phases: dict[str, int] = field(default_factory=dict)
    phase_joules: dict[str, float] = field(default_factory=dict)
    clocks_restored: tuple[float, float] | None = None
    would_change: int = 0
    advice: dict[str, dict] = field(default_factory=dict)


def phase_name(key: tuple) -> str:
    """A phase key (`PhaseDetector.update`: process names, the phase's number) as ``name+name#k``."""
    names, k = key
    return f"{'+'.join(names)}#{k}"


def advice_report(report: dict) -> str:
    """The advice table (`advice_table`) of a `govern run` report (`fleet.govern_service.serve`), per interval."""
    s, joules = report["interval_s"], report["phase_joules"]
    phases = {name: {"steps": n, "mean_time_ms": 1e3 * s, "energy_j": joules[name],
                     "mean_watts": joules[name] / (n * s)} for name, n in report["phases"].items()}
    return advice_table(report | {"phases": phases}, counted="intervals")


class Daemon:
    """Governs a GPU from what its monitor reports, each new phase's prediction from a prior (module notes).

    ``prior``: the settings governed, the knob that sets them, and a phase's time and power over
    them from its first interval. ``slowdown`` (deadline) is against the default setting;
    ``power_cap_w`` is for the power-cap policy. ``log`` gets each decision's entry (`Governor`;
    in dry run `gpudvfs.govern.advice.advised_entry`'s). Further ``governor`` options go to
    `Governor` (prior_sd, explore, hysteresis, noise_sd). `InputError` where the interval is not
    > 0 or the GPU has no energy counter.
    """

    def __init__(self, device: NvmlDevice | SimulatedDevice, monitor: Monitor, prior: Prior, *,
                 policy: str = "energy", slowdown: float = 0.1, power_cap_w: float | None = None,
                 interval_s: float = 1.0, detector: PhaseDetector | None = None,
                 log: Callable[[dict], None] | None = None, dry_run: bool = False, **governor) -> None:
        if not (np.isfinite(interval_s) and interval_s > 0):
            raise InputError(f"interval must be > 0 s, got {interval_s}")
        if device.energy_joules() is None:
            raise InputError(f"{device.name} has no energy counter: the daemon measures each interval's energy "
                             "with it (Volta and newer)")
        self.device, self.monitor, self.prior, self.dry_run = device, monitor, prior, bool(dry_run)
        self.interval_s = float(interval_s)
        self.detector = detector or PhaseDetector()
        governor = {"prior_sd": prior.prior_sd} | governor
        self.knob = make_knob(prior.knob, device)
        self.governor = Governor(prior.configs, prior.default_index, policy=policy, slowdown=slowdown, knob=prior.knob,
                                 power_cap_w=power_cap_w, **governor)
        self.loop = GovernedLoop(self.governor, self.knob.set_row, dry_run=self.dry_run, actual_clocks=self.knob.row,
                                 log=log, restore=self.knob.restore, tolerance=DRY_RUN_TOLERANCE)
        self.stats = DaemonStats()
        self._key: tuple | None = None
        self._ran: dict[tuple, dict[int, int]] = {}  # phase -> intervals at each setting

    def _joules(self) -> float:
        """The energy counter (checked on construction: it stops reporting only if it fails)."""
        e = self.device.energy_joules()
        if e is None:
            raise InputError(f"{self.device.name}: the energy counter stopped reporting")
        return e

    def _prior(self, watts: float, activity: np.ndarray, time_ms: float) -> tuple[np.ndarray, np.ndarray]:
        """The interval's time and power carried to every governed pair."""
        return self.prior(watts, activity, time_ms, self.device.clocks)

    def step(self) -> None:
        """Govern one interval: wait, read, observe, decide, set."""
        loop = self.loop
        e0, w0 = self._joules(), self.monitor.progress()
        held = loop.ran()
        self.monitor.wait(self.interval_s)
        e1, w1 = self._joules(), self.monitor.progress()
        if self.dry_run and loop.ran() != held:
            held = None  # the driver moved its clocks within the interval: no one pair's
        procs, activity = self.monitor.processes(), self.monitor.activity()
        watts = (e1 - e0) / self.interval_s
        work = None if w0 is None or w1 is None else w1 - w0
        self.stats.intervals += 1
        self.stats.joules += e1 - e0
        # Phases are learnt per program (process names), so a rerun resumes what it learnt.
        key = self.detector.update(tuple(sorted(name for _, name in procs)), activity)
        if key is None:  # nothing runs: the driver's clocks
            self._key = None
            loop.release()
            self._count()
            return
        self.stats.governed += 1
        self.stats.work += work or 0.0
        name = phase_name(key)
        self.stats.phases[name] = self.stats.phases.get(name, 0) + 1
        self.stats.phase_joules[name] = self.stats.phase_joules.get(name, 0.0) + e1 - e0
        ran = nearest_config(self.governor.configs, self.knob.row()) if self.dry_run else loop.held
        if ran is not None:
            at = self._ran.setdefault(key, {})
            at[ran] = at.get(ran, 0) + 1
        # Time per unit of work; without progress, the interval itself is the unit (a prior's
        # scale only: such a time is never observed).
        time_ms = 1e3 * self.interval_s / work if work else None
        if key != self._key:
            t, p = self._prior(max(watts, 1e-3), activity, time_ms or 1e3 * self.interval_s)
            self.governor.phase(key, t, p)
            self._key = key
        if held is not None and not self.dry_run and self.knob.name != "power-limit" and self.device.throttle_reasons():
            # The GPU pulled the clocks below the pair set (its power or thermal limit): what
            # was measured is not that pair's, and the phase is not run there again.
            self.governor.exclude(held)
            self.stats.throttled += 1
        elif held is not None and self.detector.inside and watts > 0 and (work is None or work > 0):
            self.governor.observe(held, time_ms, watts)
            self.stats.observed += 1
        if self.dry_run:
            loop.note_actual()
        loop.apply_next()
        self._count()

    def _count(self) -> None:
        self.stats.clock_changes, self.stats.would_change = self.loop.changes, self.loop.would_changes

    def run(self, duration_s: float | None = None, stop: threading.Event | None = None,
            progress: Callable[[DaemonStats, int | None], None] | None = None) -> DaemonStats:
        """Govern until ``duration_s`` (of the monitor's clock) has passed or ``stop`` is set.

        The clocks are reset on the way out, however it is left (``stats.clocks_restored``).
        ``progress(stats, intervals)`` after every interval, ``intervals`` the run's (None: until
        stopped). `InputError` for a ``duration_s`` not finite and > 0.
        """
        if duration_s is not None and not (np.isfinite(duration_s) and duration_s > 0):
            raise InputError(f"duration must be finite and > 0 s, got {duration_s}")
        steps = None if duration_s is None else max(1, round(duration_s / self.interval_s))
        try:
            while (steps is None or self.stats.intervals < steps) and not (stop is not None and stop.is_set()):
                self.step()
                if progress is not None:
                    progress(self.stats, steps)
        except BaseException:
            self._restore(failing=True)
            raise
        self._restore()
        return self.stats

    def _restore(self, failing: bool = False) -> None:
        """Give the clocks back to the driver, note the clocks the GPU then runs at and each phase's advice.

        The end of governing, not a governor's clock change. ``failing``: an exception is on its way
        out, which a failed read of the clocks must not replace.
        """
        self.loop.release(counted=False)
        try:
            core, mem = self.device.clocks
            self.stats.clocks_restored = (float(core), float(mem))
            self.stats.advice = {phase_name(key): phase_advice(self.governor, key, max(at, key=at.__getitem__))
                                 .as_dict() for key, at in self._ran.items()}
        except Exception:
            if not failing:
                raise
