"""`GovernedTraining`: the step meter, the phases and the governor of one training run, which
the framework callbacks drive and a plain PyTorch loop calls itself.

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
with more than one rank when the run begins): each rank meters its own GPU, the governor
observes each step's longest time over the ranks and their summed energy, and every rank sets
rank 0's pair (`distributed`). Every rank must then run the same steps and marked regions. If
any rank cannot set clocks, every rank runs in dry run.

Dry run (the default) never sets a clock: decisions are logged with the pair the governor
would set and the pair the GPU ran (`GovernedLoop` in dry run). Not in dry run, clocks are
set through the device (``NvmlDevice(leave_clocks=False)``: root) or through the clock service
(``clock_service=`` its socket); where that is refused (no permission, or another job owns the
GPU's clocks), the run goes on in dry run after ONE warning saying why.
"""

from __future__ import annotations

import json
import math
import sys
import warnings
import zlib
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gpudvfs.errors import GpudvfsWarning, InputError
from gpudvfs.govern.governor import POLICIES, Governor
from gpudvfs.govern.integrations.configs import MAX_CORE_CLOCKS, ClockGrid, clock_grid
from gpudvfs.govern.integrations.distributed import Collective, StepExchange, agree_all, agree_pair, collective_of
from gpudvfs.govern.integrations.meter import StepMeter, StepRecord, is_simulated
from gpudvfs.govern.integrations.prior import MEMORY_SHARE, PRIOR_SD, catalog_power_shape, step_prior
from gpudvfs.govern.loop import GovernedLoop

DEVICES = ("nvml", "sim")
#: The catalog GPU whose power prior shapes the simulated GPU's (it is modelled on one).
SIM_CATALOG_NAME = "gtx-titan-x"
#: Seconds of steps of one phase at one pair per observation (see the module notes).
OBSERVE_S = 0.5


def _torch_sync() -> None:
    """``torch.cuda.synchronize()`` where this process already uses CUDA through torch (torch is
    never imported here), else nothing."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def open_device(device, *, dry_run: bool = True, index: int = 0) -> tuple[object | None, str, str | None]:
    """(device, kind, why not) for ``device``: ``"nvml"`` (an `NvmlDevice` of GPU ``index``,
    opened with ``leave_clocks=dry_run``), ``"sim"`` (a `SimulatedDevice`) or a device object
    (anything with ``clocks``, ``energy_joules()`` or ``power_watts()``). Where NVML cannot be
    opened (no driver, no GPU, no nvidia-ml-py), (None, "none", the reason)."""
    if isinstance(device, str):
        if device == "sim":
            from gpudvfs.hardware.simulated import SimulatedDevice

            return SimulatedDevice(), "simulated", None
        if device == "nvml":
            from gpudvfs.hardware.nvml import NvmlDevice

            try:
                return NvmlDevice(index, leave_clocks=dry_run), "nvml", None
            except Exception as e:  # ImportError, NVML init, no GPU: metered on what can be read
                first = str(e).splitlines()[0] if str(e) else ""
                return None, "none", f"no NVML GPU {index} ({type(e).__name__}: {first})"
        raise InputError(f"device must be one of {DEVICES} or a device object, got {device!r}")
    if device is None or not any(hasattr(device, a) for a in ("clocks", "energy_joules", "power_watts")):
        raise InputError(f"device must be one of {DEVICES} or a device object (with clocks, energy_joules() or "
                         f"power_watts()), got {device!r}")
    kind = "simulated" if is_simulated(device) else type(device).__name__
    return device, kind, None


@dataclass
class _Window:
    """Steps of one phase not yet observed (at one set pair, where clocks are set)."""

    set_index: int | None
    time_ms: float = 0.0
    joules: float = 0.0
    work: float = 0.0
    steps: int = 0
    log_clocks: tuple[float, float] = (0.0, 0.0)  # time-weighted sums of log core, log memory MHz

    def add(self, rec: StepRecord, work: float) -> None:  # a finalized step
        self.time_ms += rec.time_ms
        self.joules += rec.joules
        self.work += work
        self.steps += 1
        self.log_clocks = (self.log_clocks[0] + rec.time_ms * math.log(rec.core_mhz),
                           self.log_clocks[1] + rec.time_ms * math.log(rec.mem_mhz))

    @property
    def clocks(self) -> tuple[float, float]:
        """The clocks the window ran at: the time-weighted geometric mean of its steps'."""
        return tuple(math.exp(x / self.time_ms) for x in self.log_clocks)


class GovernedTraining:
    """The governor of one training run (see the module notes).

    ``device``: ``"nvml"``, ``"sim"`` or a device object; ``policy``: one of `POLICIES`
    (``slowdown`` and ``power_cap_w`` in ``governor_options``, with any other `Governor`
    setting); ``dry_run``: never set a clock (default); ``log_path``: a JSONL file of step
    records (``"kind": "step"``) and decisions (``"kind": "decision"``), flushed per line; the
    summary goes to ``summary_path`` (default: beside the log, ``<stem>.summary.json``).
    ``index``: the NVML GPU; ``catalog_name``: the catalog GPU whose power prior shapes the
    prior (default: the device's name); ``clock_service``: the socket of `gpudvfs govern
    clockd`, to set clocks through when not in dry run; ``prior_sd``: the governor's prior
    error (wide: see `PRIOR_SD`); ``memory_share``/``util``: the step prior's time and power
    shapes; ``workload``: what the simulated GPU runs per step; ``sync``: called at each step
    boundary before the sensors are read (default ``"auto"``: ``torch.cuda.synchronize`` where
    the process already uses CUDA through torch; None: nothing); ``distributed``: the job's
    ranks (module notes): ``"auto"`` (``torch.distributed`` where initialized with more than one
    rank when the run begins), None (this process alone) or a `distributed.Collective`.
    """

    def __init__(self, device="nvml", policy: str = "energy", *, dry_run: bool = True, log_path=None,
                 summary_path=None, index: int = 0, catalog_name: str | None = None, clock_service=None,
                 observe_s: float = OBSERVE_S, warmup_steps: int = 0, prior_sd: float = PRIOR_SD,
                 memory_share: float = MEMORY_SHARE, util: dict | None = None,
                 max_core_clocks: int = MAX_CORE_CLOCKS, workload=None, sync: Callable[[], None] | str | None = "auto",
                 governor_options: dict | None = None, distributed: Collective | str | None = "auto"):
        if policy not in POLICIES:
            raise InputError(f"unknown policy {policy!r}; expected one of {POLICIES}")
        if not isinstance(dry_run, bool):
            raise InputError(f"dry_run must be True or False, got {dry_run!r}")
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
        if isinstance(device, str) and device not in DEVICES:
            raise InputError(f"device must be one of {DEVICES} or a device object, got {device!r}")
        # The step prior's shapes, checked now rather than at the first window mid-training.
        step_prior([[1.0, 1.0]], (1.0, 1.0), 1.0, 1.0, lambda u, c, m: np.ones(len(c)), util=util,
                   memory_share=memory_share)
        self.policy, self.dry_run_requested = policy, dry_run
        self.observe_s, self.warmup_steps = observe_s, warmup_steps
        self.memory_share, self.util = memory_share, util
        self.notes: list[str] = []
        self._warned: set[str] = set()
        self._own_device = isinstance(device, str)
        self.device, self.device_kind, why = open_device(device, dry_run=dry_run, index=index)
        if why is not None:
            self._warn("device", f"gpudvfs: {why}: metering step times only, in dry run")
        self.meter: StepMeter | None = None
        try:
            self.meter = StepMeter(self.device, log_path=log_path, workload=workload,
                                   sync=_torch_sync if sync == "auto" else sync)
        except BaseException:
            self._release()
            raise
        self.log_path = None if log_path is None else Path(log_path)
        if summary_path is None and log_path is not None:
            summary_path = self.log_path.with_name(self.log_path.stem + ".summary.json")
        self.summary_path = None if summary_path is None else Path(summary_path)
        self.decisions: list[dict] = []
        self.grid: ClockGrid | None = None
        self.governor: Governor | None = None
        self.loop: GovernedLoop | None = None
        self.power_prior: str = "none"
        self._power_shape = None
        self._knob: Callable[[float, float], None] | None = None
        self._client = None
        self._set_any = False
        self._distributed = distributed
        self._comm: Collective | None = None
        self._exchange: StepExchange | None = None
        self._joined = False
        try:
            if self.device is not None and hasattr(self.device, "clocks"):
                self._make_governor(catalog_name, max_core_clocks, prior_sd, governor_options or {}, clock_service)
        except BaseException:
            self._release()
            raise
        self._base = "train"
        self._stack: list[tuple[str, tuple[str, bool] | None]] = []  # (region, what it interrupted)
        self._pending = False  # the open step is a marked region's own step
        self._known: set[str] = set()
        self._active: str | None = None
        self._windows: dict[str, _Window] = {}
        self._ended: dict[int, tuple[float, int | None]] = {}  # step -> (work, set pair) until finalized
        self.observations = 0
        self.summary_: dict | None = None
        self.closed = False

    # ----------------------------------------------------------------- set-up
    def _warn(self, kind: str, message: str) -> None:
        self.notes.append(message)
        if kind not in self._warned:
            self._warned.add(kind)
            warnings.warn(GpudvfsWarning(message), stacklevel=3)

    def _make_governor(self, catalog_name, max_core_clocks, prior_sd, options, clock_service) -> None:
        try:
            self.grid = clock_grid(self.device, catalog_name, max_core_clocks)
        except InputError as e:
            self._warn("grid", f"gpudvfs: no clock grid for {getattr(self.device, 'name', 'the device')} ({e}): "
                               "metering only, no governor")
            return
        self.notes += list(self.grid.notes)
        name = catalog_name or (SIM_CATALOG_NAME if is_simulated(self.device) else getattr(self.device, "name", None))
        self._power_shape = self._make_power_shape(name)
        self.governor = Governor(self.grid.configs, self.grid.default_index, policy=self.policy, prior_sd=prior_sd,
                                 **options)
        dry = self.dry_run_requested
        if not dry:
            dry = not self._make_knob(clock_service)
        self.loop = GovernedLoop(self.governor, None if dry else self._set, dry_run=dry, log=self._on_decision)

    def _make_power_shape(self, name):
        if not name:
            self._warn("prior", "gpudvfs: the device has no name for the catalog: flat power prior")
            return None
        try:
            shape, self.power_prior = catalog_power_shape(name, self.grid.default_mhz)
        except InputError as e:
            self._warn("prior", f"gpudvfs: no catalog power prior for {name!r} ({str(e).split('. ')[0]}): "
                                "flat power prior")
            return None
        return shape

    def _make_knob(self, clock_service) -> bool:
        """Whether clocks can be set (else: one warning, and dry run)."""
        if clock_service is not None:
            from gpudvfs.govern.clockd import ClockClient

            try:
                self._client = ClockClient(clock_service)
            except InputError as e:
                self._warn("knob", f"gpudvfs: {e}; running in dry run (measuring and logging the clocks it would set)")
                return False
            self._knob = self._client.set
            return True
        if not hasattr(self.device, "lock_clocks"):
            self._warn("knob", "gpudvfs: the device cannot set clocks; running in dry run")
            return False
        self._knob = self.device.lock_clocks
        return True

    def _join(self) -> None:
        """The run begins: find the job's ranks; they agree on the governor, its grid and the knob."""
        self._joined = True
        self._comm = collective_of(self._distributed)
        if self._comm is None:
            return
        has = self.loop is not None
        grid = float(zlib.crc32(np.ascontiguousarray(self.grid.configs, dtype=np.float64).tobytes())) if has else -1.0
        rows = self._comm.all_gather(np.array([has, grid, has and not self.loop.dry_run, self._gpu_code()],
                                              dtype=np.float64))
        gpus = rows[:, 3]
        shared = [int(r) for r in np.flatnonzero((gpus >= 0) & (np.sum(gpus[:, None] == gpus[None, :], axis=1) > 1))]
        if shared:
            self._warn("shared", f"gpudvfs: rank(s) {shared} of the job meter one and the same GPU: pass each rank "
                                 "its own NVML index (index=, e.g. the local rank where a node's GPUs are all visible)")
        if not rows[:, 0].all():
            ranks = [int(r) for r in np.flatnonzero(rows[:, 0] == 0)]
            self._warn("ranks", f"gpudvfs: rank(s) {ranks} of the job have no governor (see their notes): every "
                                "rank meters only")
            self.loop = self.governor = None
            return
        if (rows[:, 1] != rows[0, 1]).any():
            ranks = [int(r) for r in np.flatnonzero(rows[:, 1] != rows[0, 1])]
            raise InputError(f"rank(s) {ranks} of the job have another clock grid than rank 0 (another kind of GPU?): "
                             "every rank of a data-parallel job must run one pair, on one kind of GPU")
        if not self.loop.dry_run and not rows[:, 2].all():
            ranks = [int(r) for r in np.flatnonzero(rows[:, 2] == 0)]
            self._warn("knob", f"gpudvfs: rank(s) {ranks} of the job cannot set clocks; every rank runs in dry run "
                               "(measuring and logging the clocks it would set)")
            self.loop.dry_run = True
        self._exchange = StepExchange(self._comm)

    def _gpu_code(self) -> float:
        """A real GPU's UUID as a number the ranks can compare (-1: none, or simulated)."""
        try:
            ident = self.device.identity()
        except Exception:  # no device, or one without identity(): nothing to compare
            return -1.0
        if ident.get("kind") != "nvml" or not ident.get("uuid"):
            return -1.0
        return float(zlib.crc32(str(ident["uuid"]).encode()))

    def _set(self, core: float, mem: float) -> bool:
        """Set the clocks (in a data-parallel job, rank 0's pair, on every rank); where refused
        (on any rank), go on in dry run (one warning) and return False."""
        if self._comm is not None:
            k = agree_pair(self._comm, self.governor.current)
            if k != self.governor.current:
                self.notes.append(f"rank 0 chose pair {k} where this rank chose {self.governor.current}: set rank 0's")
                self.governor.current = k
            core, mem = (float(x) for x in self.grid.configs[k])
        refused = self._refused(core, mem)
        if self._comm is not None:
            ok, ranks = agree_all(self._comm, refused is None)
            if refused is None and not ok:
                refused = f"rank(s) {ranks} of the job could not set the clocks"
                self._put_back()
        if refused is not None:
            self._warn("knob", f"gpudvfs: {refused}; running in dry run (measuring and logging the clocks it would "
                               "set)")
            self.loop.dry_run = True
            return False
        self._set_any = True
        return True

    def _refused(self, core: float, mem: float) -> str | None:
        """Set the clocks here; why not, where refused."""
        from gpudvfs.hardware.device import ClockPermissionError
        from gpudvfs.hardware.nvml import ClockControlError

        try:
            self._knob(core, mem)
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
        return self._stack[-1][0] if self._stack else self._base

    def set_phase(self, name: str) -> None:
        """The phase of the steps that follow outside marked regions (``"train"``, ``"eval"``)."""
        self._base = _phase_name(name)

    @contextmanager
    def phase(self, name: str) -> Iterator[GovernedTraining]:
        """Mark a region of phase ``name`` (see the module notes)."""
        name = _phase_name(name)
        self._live()
        resume = None
        if self.meter.open:
            resume = (self.meter.phase, self._pending)
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
        self.meter.begin()

    def begin(self) -> None:
        """The run starts: the energy counter's total is counted from here (else from the first step)."""
        self._live()

    def _open(self, phase: str, *, pending: bool = False, split: bool = False) -> None:
        self._switch(phase)
        self.meter.start(phase, split=split)
        self._pending = pending

    def step_begin(self) -> None:
        """A step of the current phase starts."""
        self._live()
        if self.meter.open:
            if self._pending:
                self.meter.discard()  # a region's own step gives way to the steps inside it
            else:
                self._stop()  # a step left open
        self._open(self.current_phase)

    def step_end(self, work: float = 1.0) -> list[StepRecord]:
        """The open step ends, having done ``work`` units (its time per unit is observed).
        Returns the records the meter finalized now (`StepMeter.stop`): this step's and
        earlier pending ones', or none yet where the energy counter has not updated since."""
        if not (isinstance(work, (int, float)) and math.isfinite(work) and work > 0):
            raise InputError(f"work must be a finite number > 0, got {work!r}")
        self._live()
        if not self.meter.open or self._pending:
            raise InputError("step_end without step_begin")
        return self._stop(work=work)

    @contextmanager
    def step(self, work: float = 1.0) -> Iterator[GovernedTraining]:
        """``with gov.step():`` one step (recorded even where it raises)."""
        self.step_begin()
        try:
            yield self
        finally:
            if self.meter.open and not self._pending and not self.closed:
                self.step_end(work)

    def lap(self, phase: str | None = None) -> list[StepRecord]:
        """A step of ``phase`` (default: the current one) that began when the last one ended:
        for frameworks that report only steps' ends (Hugging Face's prediction steps). Returns
        the records finalized now, as `step_end`."""
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
    def _clocks_now(self) -> tuple[float, float] | None:
        c = self.meter._clocks()
        return None if c[0] is None else c

    def _switch(self, phase: str) -> None:
        """A step of ``phase`` starts: a known phase other than the governor's gets its clocks."""
        if self.loop is None or phase == self._active or phase not in self._known:
            return
        clocks = self._clocks_now() if self.loop.dry_run else None
        if self.loop.dry_run and clocks is None:
            self.governor.phase(phase, None, None)
        else:
            self.loop.phase(phase, None, None, clocks=clocks)
        self._active = phase

    def _stop(self, *, work: float = 1.0, split: bool = False) -> list[StepRecord]:
        """End the open step (its work and the pair set while it ran kept until the meter
        finalizes it) and take the steps finalized."""
        set_index = None if self.loop is None or self.loop.dry_run else self.governor.current
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
                or rec.core_mhz is None or not rec.time_ms > 0):
            return
        if set_index is not None and set_index != self.governor.current:
            return  # it ran at a pair set before the last decision (finalized late): not this pair's
        w = self._windows.get(rec.phase)
        if w is None or w.set_index != set_index:  # the clocks were set since: start again
            w = self._windows[rec.phase] = _Window(set_index)
        w.add(rec, work)
        if w.time_ms >= 1e3 * self.observe_s and w.joules > 0:
            del self._windows[rec.phase]
            self._observe(rec.phase, w)

    def _observe(self, phase: str, w: _Window) -> None:
        t, watts = w.time_ms / w.work, w.joules / (w.time_ms / 1e3)
        if phase not in self._known:
            pt, pw = step_prior(self.grid.configs, w.clocks, t, watts, self._power_shape, util=self.util,
                                memory_share=self.memory_share)
            self._known.add(phase)
            self._active = phase
            self.loop.phase(phase, pt, pw, clocks=w.clocks)
            return
        if self._active != phase:
            self.governor.phase(phase, None, None)
            self._active = phase
        self.observations += 1
        self.loop.step_end(time_ms=t, watts=watts, clocks=w.clocks)

    def _on_decision(self, entry: dict) -> None:
        entry = {"kind": "decision", "step": len(self.meter.records), **entry}
        self.decisions.append(entry)
        self.meter.write(entry)

    # ---------------------------------------------------------------- summary
    def summary(self) -> dict:
        """What the run measured and decided (see `GovernedTraining.close`)."""
        recs = self.meter.records
        by_phase: dict[str, list[StepRecord]] = {}
        for r in recs:
            by_phase.setdefault(r.phase, []).append(r)
        step_sum = sum(r.joules for r in recs if r.joules is not None) if any(r.joules is not None for r in recs) \
            else None
        total = self.meter.counter_total_j
        phases = {}
        for name, rs in by_phase.items():
            e = [r.joules for r in rs if r.joules is not None]
            t = sum(r.time_ms for r in rs)
            last = next((d for d in reversed(self.decisions) if d.get("phase") == name), None)
            phases[name] = {
                "steps": len(rs), "mean_time_ms": t / len(rs),
                "mean_watts": sum(e) / (t / 1e3) if e and len(e) == len(rs) and t > 0 else None,
                "energy_j": sum(e) if e else None,
                "decisions": sum(d.get("phase") == name for d in self.decisions),
                "would_set": None if last is None else {
                    "core_mhz": last["would_core_mhz"], "mem_mhz": last["would_mem_mhz"],
                    "predicted_saving": last["predicted_saving"], "explored": last["explored"]}}
        clocks = Counter((r.core_mhz, r.mem_mhz) for r in recs if r.core_mhz is not None)
        reasons = Counter(x for r in recs for x in r.throttle_reasons)
        sources = Counter(r.energy_source for r in recs)
        grid = None if self.grid is None else {
            "pairs": len(self.grid.configs), "source": self.grid.source, "default_mhz": list(self.grid.default_mhz),
            "default_source": self.grid.default_source}
        return {
            "kind": "summary", "device": getattr(self.device, "name", None), "device_kind": self.device_kind,
            "dry_run": self.dry_run, "dry_run_requested": self.dry_run_requested, "policy": self.policy,
            "power_prior": self.power_prior, "grid": grid,
            "steps": {k: len(v) for k, v in by_phase.items()},
            "energy_j": {"step_sum": step_sum, "counter_total": total,
                         "relative_difference": None if step_sum is None or not total else (step_sum - total) / total,
                         "sources": dict(sources)},
            "phases": phases,
            "clocks_seen": [{"core_mhz": c, "mem_mhz": m, "steps": n} for (c, m), n in clocks.most_common()],
            "throttle_reasons_seen": dict(reasons),
            "decisions": len(self.decisions), "observations": self.observations,
            "clocks_set": self._set_any,
            "ranks": None if self._comm is None else {
                "rank": self._comm.rank, "world_size": self._comm.world_size,
                "merged_steps": None if self._exchange is None else self._exchange.merged},
            "notes": self.notes + [f"{k} failed: {v}" for k, v in self.meter.notes.items()],
            "log_path": None if self.log_path is None else str(self.log_path),
            "summary_path": None if self.summary_path is None else str(self.summary_path),
        }

    def close(self) -> dict:
        """End the run: close an open step, finalize the pending ones (`StepMeter.flush`:
        waiting at most 0.5 s for the energy counter), put back any clocks set, write the summary (to
        ``summary_path``) and return it: steps per phase, total energy by the steps' sum and by
        the counter's total delta (and their relative difference), mean step time and power per
        phase, the clocks and throttle reasons seen, and per phase the pair the governor would
        set with its predicted saving. A second call returns the same summary."""
        if self.closed:
            return self.summary_
        try:
            if self.meter.open and not self._pending:
                self._stop()
            self.meter.discard()
            recs = self.meter.flush()
            if self._exchange is not None:
                recs = self._exchange.exchange(recs) + self._exchange.drain(self.meter.stopped)
            self._take(recs)
        finally:
            self.closed = True
            self._release()
        self.summary_ = self.summary()
        if self.summary_path is not None:
            self.summary_path.write_text(json.dumps(self.summary_, indent=1, default=_plain) + "\n", encoding="utf-8")
        return self.summary_

    def _release(self) -> None:
        try:
            if self.meter is not None and self.meter.poller is not None:
                self.meter.poller.stop()  # before the device is closed under it
            if getattr(self, "_set_any", False):
                self._put_back()
            if getattr(self, "_client", None) is not None:
                self._client.close()
            if self._own_device and hasattr(self.device, "close"):
                self.device.close()
        finally:
            if self.meter is not None:
                self.meter.close()

    def _put_back(self) -> None:
        """The clocks back to the driver's defaults."""
        try:
            (self._client.reset if self._client is not None else self.device.reset_clocks)()
        except Exception as e:
            self.notes.append(f"resetting the clocks failed: {e}")

    def __enter__(self) -> GovernedTraining:
        self.begin()
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _plain(x):
    if isinstance(x, np.generic):
        return x.item()
    raise TypeError(f"{type(x).__name__} is not JSON serializable")


def _phase_name(name) -> str:
    if not isinstance(name, str) or not name:
        raise InputError(f"a phase name must be a non-empty string, got {name!r}")
    return name


class SessionCallback:
    """What the framework callbacks share (no framework imported here): their `GovernedTraining`
    session, regions the user marks, and the records."""

    def __init__(self, device="nvml", policy: str = "energy", *, dry_run: bool = True, log_path=None, **options):
        super().__init__()
        self.session = GovernedTraining(device, policy, dry_run=dry_run, log_path=log_path, **options)
        self.summary: dict | None = None

    def phase(self, name: str):
        """``with callback.phase("name"):`` a region of phase ``name``."""
        return self.session.phase(name)

    @property
    def records(self):
        return self.session.meter.records
