"""`GovernedTraining`: the step meter, the phases and the governor of one training run.

The framework callbacks drive it; a plain PyTorch loop calls it itself.

Steps are named by phase: ``"train"`` by default, ``"eval"`` while evaluating (the callbacks
set it), and any region marked ``with gov.phase("name"):``. A marked region entered with no
step open is itself one step of its phase (unless steps are begun inside it: they are then
named by it); entered inside an open step, it cuts that step in two (both parts recorded with
``split: true``). Each phase is a governor phase: its prior comes from its first measured
window (`step_prior`: the measurement sets the level, the catalog's power prior and a
compute/memory time law the shape over the clocks), and then every window is observed.

A window is a run of steps of one phase (not necessarily contiguous: a phase that recurs adds
to its window) lasting ``observe_s`` at least: ``observe_s=0`` observes each step. The governor
sees steps as the meter finalizes them: on a real GPU a step's energy is interpolated at the
energy counter's update instants (every 100 ms on an H200), known only once the counter has
updated after the step's end, so a step is added to its window one or a few steps late (with
the work and the set pair of when it ran); `close` finalizes the last ones. In dry run
a window is observed at the pair nearest the clocks it ran at (the time-weighted geometric mean
of the clocks read at its steps' ends); where clocks are set, a window does not span a change.
The first ``warmup_steps`` steps of each phase (CUDA context, autotuning, compilation) are
metered but neither observed nor used for the prior.

Data parallel (``distributed="auto"``, the default: where ``torch.distributed`` is initialized
with more than one rank when the run begins): each rank meters its own GPU (its local rank's by
default) and writes its own log, rank 0 the job's one summary (`ranks`), the governor
observes each step's longest time over the ranks and their summed energy, and every rank sets
rank 0's pair (`distributed`). Every rank must then run the same steps and marked regions. If
any rank cannot set clocks, every rank runs in dry run.

Dry run (the default) never sets a clock: decisions are logged with the pair the governor
would set and the pair the GPU ran (`GovernedLoop` in dry run). Not in dry run, clocks are
set through the device (``NvmlDevice(leave_clocks=False)``: root) or through the clock service
(``clock_service=`` its socket); where that is refused (no permission, or another job owns the
GPU's clocks), the run goes on in dry run after ONE warning saying why. With
``knob="core-clock"`` the governor locks the core clock alone (`knob.CoreClock`), the memory
clock left to the driver; a dry run's window is observed at the core clock the driver ran. With
``knob="power-limit"`` it chooses among board power limits instead (`knob.PowerLimit`, each
phase's prior from its first window by `priors.limit_prior`), the clocks left to the driver;
`close` puts back the limit enforced when the run began.

A run ended by an exception or Ctrl-C (``close(interrupted=...)``), or left open at exit
(`closing`), still puts every clock back and writes its summary, waiting for no other rank.
"""

from __future__ import annotations

import json
import math
import sys
import warnings
import zlib
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from gpudvfs.data.jsonfile import json_default
from gpudvfs.errors import GpudvfsWarning, InputError
from gpudvfs.govern.advice import advice_table
from gpudvfs.govern.clock_grid import MAX_CORE_CLOCKS
from gpudvfs.govern.clockd import ClockClient
from gpudvfs.govern.governor import GOVERNOR_POLICIES, Governor
from gpudvfs.govern.integrations import closing
from gpudvfs.govern.integrations.between_runs import BetweenRuns
from gpudvfs.govern.integrations.devices import open_device
from gpudvfs.govern.integrations.distributed import Collective, StepExchange, agree_all, agree_pair, collective_of
from gpudvfs.govern.integrations.meter import StepMeter, StepRecord
from gpudvfs.govern.integrations.ranks import gather_ranks, gpu_code, rank_log_path
from gpudvfs.govern.integrations.settings import Governed, governed
from gpudvfs.govern.integrations.summary import run_advice, steps_summary
from gpudvfs.govern.integrations.window import Window
from gpudvfs.govern.knob import FIXED, KNOBS, Knob, check_knob, make_knob
from gpudvfs.govern.loop import GovernedLoop
from gpudvfs.govern.priors import MEMORY_SHARE, step_prior
from gpudvfs.hardware.cuda_sync import torch_sync
from gpudvfs.hardware.device import ClockPermissionError, Workload
from gpudvfs.hardware.kinds import DEVICE_KINDS
from gpudvfs.hardware.nvml import ClockControlError

#: Seconds of steps of one phase at one pair per observation (see the module notes).
OBSERVE_S = 0.5


class GovernedTraining:
    """The governor of one training run (see the module notes).

    ``device``: ``"nvml"``, ``"sim"`` or a device object (`open_device`); ``policy``: one of
    `GOVERNOR_POLICIES` (``slowdown`` and ``power_cap_w`` go in ``governor_options``, further
    `Governor` settings). ``log_path``: a JSONL file of step records (``"kind": "step"``) and
    decisions (``"kind": "decision"``), flushed per line, opened when the run begins (a rank > 0's
    beside it: `ranks`); ``summary_path`` defaults to ``<stem>.summary.json`` beside it, rank 0's
    alone. ``index``: the NVML GPU (None: the local rank's). ``catalog_name``: the catalog GPU
    whose power prior shapes the prior (None: the device's name). ``clock_service``: the socket of
    `gpudvfs govern clockd`, to set clocks through. ``observe_s``: seconds of steps per observation
    (0: each step); the first ``warmup_steps`` of each phase are metered, neither observed nor used
    for the prior. ``prior_sd``: the governor's prior error (None: the knob's prior's,
    `STEP_PRIOR_SD` or `LIMIT_PRIOR_SD`); ``memory_share``: the step prior's share of time that
    scales with the memory clock; ``util``: the utilizations its power shape is taken at (None:
    `GENERIC_UTIL`). ``max_core_clocks``: core clocks per memory clock governed (`clock_grid`).
    ``workload``: what a plain `SimulatedDevice` runs per step (None: `SIM_STEP`). ``sync``: called
    at each step boundary before the sensors are read (``"auto"``: ``torch.cuda.synchronize`` where
    the process already uses CUDA through torch). ``distributed``: ``"auto"``, None (this process
    alone) or a `distributed.Collective`. ``quiet``: print nothing at close (else the per-phase
    advice table and one line, to stderr). ``profile_path`` and ``job``: keep what the governor
    learns of the job in this file, read at start (`between_runs`). ``knob``: one of `KNOBS`
    (``"clocks"``, ``"core-clock"``, ``"power-limit"``).

    `InputError` for a setting out of its range, a log folder that does not exist, a device that
    is none, or a knob the device cannot turn (`close` is then not needed).

    Examples
    --------
    On the simulated H200, in dry run (the default); closing the run prints the advice to stderr
    (columns cut here):

    >>> from gpudvfs.govern.integrations import GovernedTraining
    >>> with GovernedTraining(device="sim") as gov:
    ...     for _ in range(40):
    ...         with gov.step():
    ...             pass  # forward, backward, optimizer step
    gpudvfs: dry run, policy energy; advised pair per phase, its saving against the pair it ran at ...
    phase  steps  time_s  energy_j  mean_w    ran_mhz  advised_mhz          energy_saving  ...
    train     40    6.43    3039.3   472.6  1980/3201     930/2201  +21.8% [-33.4, +54.2]  ...
    gpudvfs: 40 steps (train 40) in 6.43 s, 3039 J; 10 decisions (dry run: no clock set)
    >>> advice = gov.summary_["advice"]["train"]
    >>> advice["core_mhz"], advice["mem_mhz"], round(advice["energy_saving"], 3)
    (930.0, 2201.0, 0.218)
    """

    def __init__(self, device: Any = "nvml", policy: str = "energy", *, dry_run: bool = True,
                 log_path: str | Path | None = None, summary_path: str | Path | None = None, index: int | None = None,
                 catalog_name: str | None = None, clock_service: str | Path | None = None,
                 observe_s: float = OBSERVE_S, warmup_steps: int = 0, prior_sd: float | None = None,
                 memory_share: float = MEMORY_SHARE, util: Mapping[str, float] | None = None,
                 max_core_clocks: int = MAX_CORE_CLOCKS, workload: Workload | None = None,
                 sync: Callable[[], None] | str | None = "auto", governor_options: dict | None = None,
                 distributed: Collective | str | None = "auto", quiet: bool = False,
                 profile_path: str | Path | None = None, job: str | None = None, knob: str = "clocks") -> None:
        check_knob(knob)
        if policy not in GOVERNOR_POLICIES:
            raise InputError(f"unknown policy {policy!r}; expected one of {GOVERNOR_POLICIES}")
        for name, flag in (("dry_run", dry_run), ("quiet", quiet)):
            if not isinstance(flag, bool):
                raise InputError(f"{name} must be True or False, got {flag!r}")
        if not (isinstance(observe_s, (int, float)) and math.isfinite(observe_s) and observe_s >= 0):
            raise InputError(f"observe_s must be a finite number of seconds >= 0, got {observe_s!r}")
        if not (isinstance(warmup_steps, int) and not isinstance(warmup_steps, bool) and warmup_steps >= 0):
            raise InputError(f"warmup_steps must be an integer >= 0, got {warmup_steps!r}")
        if sync not in ("auto", None) and not callable(sync):
            raise InputError(f"sync must be 'auto', None or a callable, got {sync!r}")
        for name, path in (("log_path", log_path), ("summary_path", summary_path)):
            if path is not None and not Path(path).parent.is_dir():
                raise InputError(f"{name} {str(path)!r}: the folder {str(Path(path).parent)!r} does not exist")
        if distributed != "auto":
            collective_of(distributed)  # checked now; "auto" is looked up when the run begins
        if isinstance(device, str) and device not in DEVICE_KINDS:
            raise InputError(f"device must be one of {DEVICE_KINDS} or a device object, got {device!r}")
        # The step prior's shapes, checked now rather than at the first window mid-training.
        step_prior([[1.0, 1.0]], (1.0, 1.0), 1.0, 1.0, lambda u, c, m: np.ones(len(c)), util=util,
                   memory_share=memory_share)
        self.policy, self.dry_run_requested, self.quiet = policy, dry_run, quiet
        self.observe_s, self.warmup_steps = observe_s, warmup_steps
        self.memory_share, self.util, self.knob_name = memory_share, util, knob
        self.notes: list[str] = []
        self._warned: set[str] = set()
        self._own_device = isinstance(device, str)
        self.device, self.device_kind, why = open_device(device, dry_run=dry_run, index=index)
        if why is not None:
            self._warn("device", f"gpudvfs: {why}: metering step times only, in dry run")
        try:
            self.meter = StepMeter(self.device, workload=workload,
                                   sync=torch_sync if isinstance(sync, str) else sync)
        except BaseException:
            self._close_device()
            raise
        self.log_path = None if log_path is None else Path(log_path)
        if summary_path is None and self.log_path is not None:
            summary_path = self.log_path.with_name(self.log_path.stem + ".summary.json")
        self.summary_path = None if summary_path is None else Path(summary_path)
        self.decisions: list[dict] = []
        self.governor: Governor | None = None
        self.loop: GovernedLoop | None = None
        self.knob: Knob | None = None
        self.power_prior: str | None = "none"
        self.settings: Governed | None = None
        self._client: ClockClient | None = None
        self._set_any = False
        self._distributed = distributed
        self._comm: Collective | None = None
        self._exchange: StepExchange | None = None
        self._joined = False
        self._per_rank: dict = {}
        self._log_opened = False
        try:
            if self.device is not None:
                self._make_governor(catalog_name, max_core_clocks, prior_sd, governor_options or {}, clock_service)
            self.kept = BetweenRuns(profile_path, job, gpu=getattr(self.device, "name", None), knob=self.knob_name,
                                    settings=None if self.governor is None else self.governor.configs, notes=self.notes)
        except BaseException:
            self._release()
            raise
        self._base = "train"
        self._stack: list[tuple[str, tuple[str, bool] | None]] = []  # (region, what it interrupted)
        self._pending = False  # the open step is a marked region's own step
        self._known: set[str] = set()
        self._active: str | None = None
        self._windows: dict[str, Window] = {}
        self._ended: dict[int, tuple[float, int | None]] = {}  # step -> (work, set pair) until finalized
        self.observations = 0
        self.summary_: dict | None = None
        self.closed = False
        #: Why the run ended early (the exception's name), None where it ended normally.
        self.interrupted: str | None = None

    # ----------------------------------------------------------------- set-up
    def _warn(self, kind: str, message: str) -> None:
        self.notes.append(message)
        if kind not in self._warned:
            self._warned.add(kind)
            warnings.warn(GpudvfsWarning(message), stacklevel=3)

    def _make_governor(self, catalog_name: str | None, max_core_clocks: int, prior_sd: float | None, options: dict,
                       clock_service: str | Path | None) -> None:
        g, warns, notes = governed(self.knob_name, self.device, catalog_name, max_core_clocks)
        for kind, message in warns:
            self._warn(kind, message)
        self.notes += notes
        if g is None:
            return
        self.settings, self.power_prior = g, g.power_prior
        self.governor = Governor(g.configs, g.default_index, policy=self.policy, knob=g.knob,
                                 prior_sd=g.prior_sd if prior_sd is None else prior_sd, **options)
        via = None if self.dry_run_requested or clock_service is None else self._connect(clock_service)
        self.knob = make_knob(self.knob_name, self.device, via)
        dry = self.dry_run_requested or (clock_service is not None and via is None)
        self.loop = GovernedLoop(self.governor, None if dry else partial(self._set, self.knob), dry_run=dry,
                                 log=self._on_decision)

    def _connect(self, clock_service: str | Path) -> ClockClient | None:
        """The clock service's client; None where it cannot be reached (one warning: dry run)."""
        try:
            self._client = ClockClient(clock_service)
        except InputError as e:
            self._warn("knob", f"gpudvfs: {e}; running in dry run (measuring and logging the {self.knob_name} it "
                               "would set)")
        return self._client

    def _open_log(self) -> None:
        """Find the job's ranks (no exchange) and open this rank's log (`ranks`), once."""
        if self._log_opened:
            return
        self._log_opened = True
        self._comm = collective_of(self._distributed)
        if self._comm is not None and self._comm.rank > 0:
            self.summary_path, self.log_path = None, rank_log_path(self.log_path, self._comm.rank)
        if self.log_path is not None:
            self.meter.open_log(self.log_path)

    def _join(self) -> None:
        """The run begins: the job's ranks agree on the governor, its grid and the knob."""
        self._joined = True
        closing.track(self)
        self._open_log()
        if self._comm is None:
            return
        loop = self.loop
        grid = -1.0 if loop is None else float(zlib.crc32(np.ascontiguousarray(loop.governor.configs,
                                                                                dtype=np.float64).tobytes()))
        rows = self._comm.all_gather(np.array([loop is not None, grid, loop is not None and not loop.dry_run,
                                               gpu_code(self.device), KNOBS.index(self.knob_name)],
                                              dtype=np.float64))
        if (rows[:, 4] != rows[0, 4]).any():
            ranks = [int(r) for r in np.flatnonzero(rows[:, 4] != rows[0, 4])]
            raise InputError(f"rank(s) {ranks} of the job govern another knob than rank 0's "
                             f"{KNOBS[int(rows[0, 4])]!r}: "
                             "give every rank the same knob=")
        gpus = rows[:, 3]
        shared = [int(r) for r in np.flatnonzero((gpus >= 0) & (np.sum(gpus[:, None] == gpus[None, :], axis=1) > 1))]
        if shared:
            self._warn("shared", f"gpudvfs: rank(s) {shared} of the job meter one and the same GPU: pass each rank "
                                 "its own NVML index (index=, e.g. the local rank where a node's GPUs are all visible)")
        if loop is None or not rows[:, 0].all():
            ranks = [int(r) for r in np.flatnonzero(rows[:, 0] == 0)]
            self._warn("ranks", f"gpudvfs: rank(s) {ranks} of the job have no governor (see their notes): every "
                                "rank meters only")
            self.loop = self.governor = None
            return
        if (rows[:, 1] != rows[0, 1]).any():
            ranks = [int(r) for r in np.flatnonzero(rows[:, 1] != rows[0, 1])]
            raise InputError(f"rank(s) {ranks} of the job have another clock grid than rank 0 (another kind of GPU?): "
                             "every rank of a data-parallel job must run one pair, on one kind of GPU")
        if not loop.dry_run and not rows[:, 2].all():
            ranks = [int(r) for r in np.flatnonzero(rows[:, 2] == 0)]
            self._warn("knob", f"gpudvfs: rank(s) {ranks} of the job cannot set clocks; every rank runs in dry run "
                               "(measuring and logging the clocks it would set)")
            loop.dry_run = True
        self._exchange = StepExchange(self._comm)

    def _set(self, knob: Knob, core: float, mem: float) -> bool:
        """Set a row (core, mem) with ``knob``; where refused, go on in dry run (one warning) and return False.

        In a data-parallel job, rank 0's pair, on every rank; refused on any rank is refused.
        """
        loop = self.loop
        assert loop is not None  # the loop calls this
        gov = loop.governor
        if self._comm is not None:
            k = agree_pair(self._comm, gov.current)
            if k != gov.current:
                self.notes.append(f"rank 0 chose pair {k} where this rank chose {gov.current}: set rank 0's")
                gov.current = k
            core, mem = (float(x) for x in gov.configs[k])
        refused = self._refused(knob, core, mem)
        if self._comm is not None:
            ok, ranks = agree_all(self._comm, refused is None)
            if refused is None and not ok:
                refused = f"rank(s) {ranks} of the job could not set the clocks"
                self._put_back()
        if refused is not None:
            self._warn("knob", f"gpudvfs: {refused}; running in dry run (measuring and logging the clocks it would "
                               "set)")
            loop.dry_run = True
            return False
        self._set_any = True
        return True

    def _refused(self, knob: Knob, core: float, mem: float) -> str | None:
        """Set the row here; why not, where refused."""
        try:
            knob.set_row(core, mem)
        except (PermissionError, ClockPermissionError, ClockControlError, InputError) as e:
            msg = str(e).splitlines()[0] if str(e) else type(e).__name__
            if "another client owns" in msg:
                msg = (f"another job holds this GPU's clocks (the clock service answered: {msg}); this job cannot "
                       "set them")
            return msg
        return None

    @property
    def dry_run(self) -> bool:
        """Whether no clock is set (requested, or fallen back to)."""
        return self.loop is None or self.loop.dry_run

    @property
    def step_open(self) -> bool:
        """Whether a step was begun and not ended (a marked region's own step does not count)."""
        return self.meter.open and not self._pending

    # ----------------------------------------------------------------- phases
    @property
    def current_phase(self) -> str:
        """The phase of the next step: the innermost marked region's, else the one set."""
        return self._stack[-1][0] if self._stack else self._base

    def set_phase(self, name: str) -> None:
        """Set the phase (``"train"``, ``"eval"``, ...) of the steps that follow outside marked regions."""
        self._base = _phase_name(name)

    @contextmanager
    def phase(self, name: str) -> Iterator[GovernedTraining]:
        """Mark a region of a phase of its own (module notes): ``with gov.phase("name"):``; yields this session."""
        name = _phase_name(name)
        self._live()
        resume: tuple[str, bool] | None = None
        interrupted = self.meter.phase  # the open step's, None where none is open
        if interrupted is not None:
            resume = (interrupted, self._pending)
            self._stop(split=True)
        self._stack.append((name, resume))
        self._open(name, pending=True)
        try:
            yield self
        finally:
            if self.meter.open and not self.closed:
                self._stop()
            self._pending = False
            self._stack.pop()
            if resume is not None and not self.closed:
                self._open(resume[0], pending=resume[1], split=True)

    # ------------------------------------------------------------------ steps
    def _live(self) -> None:
        if self.closed:
            raise InputError("this GovernedTraining is closed")
        if not self._joined:
            self._join()
            self.kept.begin(self.meter, None if self._comm is None else self._comm.rank)
        self.meter.begin()

    def resume(self, steps: int | None = None, knob: str | None = None) -> None:
        """Continue this log's earlier runs, before the first step (`BetweenRuns.resume`)."""
        self._open_log()
        self.kept.resume(self.meter, self._joined, steps, knob)

    def begin(self) -> None:
        """Start the run: the energy counter's total is counted from here (else from the first step).

        `InputError` where the ranks of a data-parallel job have other grids.
        """
        self._live()

    def _open(self, phase: str, *, pending: bool = False, split: bool = False) -> None:
        self._switch(phase)
        self.meter.start(phase, split=split)
        self._pending = pending

    def step_begin(self) -> None:
        """Start a step of the current phase (one left open is ended first)."""
        self._live()
        if self.meter.open:
            if self._pending:
                self.meter.discard()  # a region's own step gives way to the steps inside it
            else:
                self._stop()  # a step left open
        self._open(self.current_phase)

    def step_end(self, work: float = 1.0) -> list[StepRecord]:
        """End the open step.

        ``work``: the units of work it did (its time per unit is observed), finite and > 0. Returns
        the records the meter finalized now (`StepMeter.stop`): this step's and earlier pending
        ones', or none yet where the energy counter has not updated since.
        """
        if not (isinstance(work, (int, float)) and math.isfinite(work) and work > 0):
            raise InputError(f"work must be a finite number > 0, got {work!r}")
        self._live()
        if not self.meter.open or self._pending:
            raise InputError("step_end without step_begin")
        return self._stop(work=work)

    @contextmanager
    def step(self, work: float = 1.0) -> Iterator[GovernedTraining]:
        """One step doing ``work`` units: ``with gov.step():``, recorded even where it raises; yields this session."""
        self.step_begin()
        try:
            yield self
        finally:
            if self.meter.open and not self._pending and not self.closed:
                self.step_end(work)

    def lap(self, phase: str | None = None) -> list[StepRecord]:
        """Record a step that began when the last one ended.

        For frameworks that report only steps' ends (Hugging Face's prediction steps).

        Returns the records finalized now, as `step_end`.
        """
        phase = self.current_phase if phase is None else _phase_name(phase)
        self._live()
        if self.meter.open:
            if self._pending:
                self.meter.discard()
            else:
                self._stop()
        self._switch(phase)
        self.meter.start_from_last(phase)
        return self._stop()

    # --------------------------------------------------------------- governor
    def _setting_now(self, w: Window | None = None) -> tuple[float, float] | None:
        """The governor's row the GPU runs at (dry run): its clocks (over ``w``'s steps), or its power limit now."""
        if self.knob is not None and self.knob_name == "power-limit":
            return self.meter._read(self.knob_name, self.knob.row)
        core, mem = w.clocks if w is not None else self.meter._clocks()
        if core is None or mem is None:
            return None
        return (core, mem) if self.knob_name == "clocks" else (core, FIXED)

    def _switch(self, phase: str) -> None:
        """A step of ``phase`` starts: a known phase other than the governor's gets its clocks."""
        loop = self.loop
        if loop is None or phase == self._active or phase not in self._known:
            return
        clocks = self._setting_now() if loop.dry_run else None
        if loop.dry_run and clocks is None:
            loop.governor.phase(phase, None, None)
        else:
            loop.phase(phase, None, None, clocks=clocks)
        self._active = phase

    def _stop(self, *, work: float = 1.0, split: bool = False) -> list[StepRecord]:
        """End the open step and take the steps finalized.

        Its work and the pair set while it ran are kept until the meter finalizes it.
        """
        set_index = None if self.loop is None or self.loop.dry_run else self.loop.governor.current
        recs = self.meter.stop(split=split)
        self._ended[self.meter.stopped] = (work, set_index)
        self._take(recs if self._exchange is None else self._exchange.exchange(recs))
        return recs

    def _take(self, recs: list[StepRecord]) -> None:
        for rec in recs:
            work, set_index = self._ended.pop(rec.step, (1.0, None))
            self._finish(rec, work, set_index)

    def _finish(self, rec: StepRecord, work: float, set_index: int | None) -> None:
        """Add a finalized step to its phase's window; observe the window once it is long enough."""
        if (self.loop is None or rec.phase_step <= self.warmup_steps or rec.joules is None
                or rec.core_mhz is None or rec.mem_mhz is None or not rec.time_ms > 0):
            return
        if set_index is not None and set_index != self.loop.governor.current:
            return  # it ran at a pair set before the last decision (finalized late): not this pair's
        w = self._windows.get(rec.phase)
        if w is None or w.set_index != set_index:  # the clocks were set since: start again
            w = self._windows[rec.phase] = Window(set_index)
        w.add(rec.time_ms, rec.joules, (rec.core_mhz, rec.mem_mhz), work)
        if w.time_ms >= 1e3 * self.observe_s and w.joules > 0:
            del self._windows[rec.phase]
            self._observe(self.loop, rec.phase, w)

    def _observe(self, loop: GovernedLoop, phase: str, w: Window) -> None:
        t, watts = w.time_ms / w.work, w.joules / (w.time_ms / 1e3)
        at = self._setting_now(w)
        if at is None:
            return  # the power limit could not be read (noted): not this window
        if phase not in self._known:
            assert self.settings is not None  # with the loop
            pt, pw = self.settings.prior(at, t, watts, util=self.util, memory_share=self.memory_share)
            self._known.add(phase)
            self._active = phase
            self.kept.start(loop.governor, phase, pt, pw)
            loop.phase(phase, pt, pw, clocks=at)
            return
        if self._active != phase:
            loop.governor.phase(phase, None, None)
            self._active = phase
        self.observations += 1
        loop.step_end(time_ms=t, watts=watts, clocks=at)
        self.kept.observed(loop.governor, phase)

    def _on_decision(self, entry: dict) -> None:
        entry = {"kind": "decision", "step": self.kept.history.last_step + len(self.meter.records), **entry}
        if self.knob_name != "clocks":  # a knob of one value: a row's second column is no clock
            entry = {k: v for k, v in entry.items() if not k.endswith("mem_mhz")}
        if self.knob_name == "power-limit":  # its first column is the limit
            entry = {k.replace("core_mhz", "limit_w"): v for k, v in entry.items()}
        self.decisions.append(entry)
        self.meter.write(entry)

    # ---------------------------------------------------------------- summary
    def summary(self) -> dict:
        """What the run measured and decided so far, as `close` returns it."""
        records, decisions, counter = self.kept.merged(self.meter.records, self.decisions, self.meter.counter_total_j)
        steps = steps_summary(records, decisions, counter)
        grid = None if self.settings is None else self.settings.summary()
        return {
            "kind": "summary", "device": getattr(self.device, "name", None), "device_kind": self.device_kind,
            "dry_run": self.dry_run, "dry_run_requested": self.dry_run_requested, "policy": self.policy,
            "knob": self.knob_name, "power_prior": self.power_prior, "grid": grid,
            "steps": steps["steps"], "energy_j": steps["energy_j"], "phases": steps["phases"],
            "clocks_seen": steps["clocks_seen"], "throttle_reasons_seen": steps["throttle_reasons_seen"],
            "decisions": len(decisions), "observations": self.observations, "resumed": self.kept.history.note(),
            "advice": run_advice(self.governor, self.meter.records, self._known, self.decisions),
            "clocks_set": self._set_any,
            "ranks": None if self._comm is None else {
                "rank": self._comm.rank, "world_size": self._comm.world_size,
                "merged_steps": None if self._exchange is None else self._exchange.merged, **self._per_rank},
            "interrupted": self.interrupted,
            "notes": self.notes + [f"{k} failed: {v}" for k, v in self.meter.notes.items()],
            "log_path": None if self.log_path is None else str(self.log_path),
            "summary_path": None if self.summary_path is None else str(self.summary_path),
        }

    def close(self, interrupted: str | None = None) -> dict:
        """End the run; a second call returns the same summary.

        Close an open step, finalize the pending ones (`StepMeter.flush`: waiting at most 0.5 s for
        the energy counter), put back any clocks set, write the summary (to ``summary_path``) and
        print its line (unless quiet). ``interrupted`` (why the run ends early, e.g. an
        exception's name): the governor sees no more steps and the other ranks are not waited for.

        The summary: steps per phase, total energy by the steps' sum and by the counter's total
        delta (and their relative difference), mean step time and power per phase, the clocks and
        throttle reasons seen, and per phase the pair the governor would set with its predicted
        saving and its ``advice`` (printed as a table to stderr unless ``quiet``, by rank 0 alone in
        a data-parallel job).
        """
        if self.closed:
            return self.summary_ if self.summary_ is not None else self.summary()
        self.interrupted = interrupted
        closing.forget(self)
        try:
            if self.meter.open and not self._pending:
                (self.meter.stop if interrupted else self._stop)()
            self.meter.discard()
            recs = self.meter.flush()
            if interrupted is None:
                if self._exchange is not None:
                    recs = self._exchange.exchange(recs) + self._exchange.drain(self.meter.stopped)
                self._take(recs)
                if self._comm is not None:
                    self._per_rank = gather_ranks(self._comm, self.meter.records, self.meter.counter_total_j)
            self.kept.close()
        finally:
            self.closed = True
            self._release()
        self.summary_ = self.summary()
        if self.summary_path is not None:
            self.summary_path.write_text(json.dumps(self.summary_, indent=1, default=json_default) + "\n",
                                         encoding="utf-8")
        if not self.quiet and (self._comm is None or self._comm.rank == 0):
            print(advice_table(self.summary_), file=sys.stderr)
            closing.say(self.summary_, self.meter.records, self.observe_s, self.warmup_steps)
        return self.summary_


    def _release(self) -> None:
        try:
            if self.meter.poller is not None:
                self.meter.poller.stop()  # before the device is closed under it
            if self._set_any:
                self._put_back()
            if self._client is not None:
                self._client.close()
            self._close_device()
        finally:
            self.meter.close()

    def _close_device(self) -> None:
        """Close the device this session opened (not one it was given)."""
        if self._own_device and self.device is not None:
            self.device.close()

    def _put_back(self) -> None:
        """The knob back as found (`Knob.restore`)."""
        try:
            if self.knob is not None:
                self.knob.restore()
        except Exception as e:
            self.notes.append(f"restoring the {self.knob_name} failed: {e}")

    def __enter__(self) -> GovernedTraining:
        """Begin the run for a ``with`` block (`begin`), closed at its end."""
        self.begin()
        return self

    def __exit__(self, kind: type[BaseException] | None, *exc: object) -> None:
        """Close the run (`close`; interrupted where an exception leaves the block)."""
        self.close(None if kind is None else kind.__name__)


def _phase_name(name: Any) -> str:
    if not isinstance(name, str) or not name:
        raise InputError(f"a phase name must be a non-empty string, got {name!r}")
    return name
