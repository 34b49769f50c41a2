"""`gpudvfs govern run` as a service (`serve`).

The daemon wired to its GPU, its prior, its decision log and Prometheus metrics, SIGTERM and
Ctrl-C.

The clock pairs' phases start from the fleet registry's models (a registry and a DCGM time
model; on the simulated GPU its calibration), else from the catalog's prior; the core clock alone
from the catalog's prior at its core clocks, the board's power limit from its own. On the
simulated GPU (``device_kind="sim"``) a process cycles through the demo's workloads on a virtual
clock, the GPU calibrated first (kept in ``workdir``), and the run is scored against the
simulator's truth.
"""

from __future__ import annotations

import contextlib
import dataclasses
import signal
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from gpudvfs.data.jsonfile import JsonLines
from gpudvfs.errors import InputError
from gpudvfs.fleet.model_prior import ModelPrior
from gpudvfs.fleet.registry import Registry, device_uuid
from gpudvfs.fleet.simhost import SimulatedHost, calibrated, phased_process
from gpudvfs.fleet.whatif import gpu_table
from gpudvfs.govern.daemon import Daemon, DaemonStats, NvmlMonitor
from gpudvfs.govern.integrations.devices import SIM_CATALOG_NAME
from gpudvfs.govern.knob import KNOBS, CoreClock
from gpudvfs.govern.metrics import GovernorMetrics
from gpudvfs.govern.phases import PhaseDetector
from gpudvfs.govern.priors import CatalogPrior, CoreClockPrior, PowerLimitPrior, Prior, core_clock_pairs
from gpudvfs.hardware.apps import APPS
from gpudvfs.hardware.kinds import DEVICE_KINDS
from gpudvfs.hardware.nvml import NvmlDevice
from gpudvfs.hardware.simulated import SimulatedDevice
from gpudvfs.time.dcgm import DcgmTimeModel

#: Virtual seconds a simulated run lasts where no duration is given.
SIM_DURATION_S = 1200.0


@dataclass(frozen=True)
class ServiceSettings:
    """The settings of one daemon run, one per option of `gpudvfs govern run`.

    Its errors give the options' names; the settings are checked as a whole on construction.

    ``device_kind``: ``"nvml"``, a GPU through NVML, or ``"sim"``, the simulated GPU running a
    process of ``sim_phases`` of the demo's workloads, each for about ``sim_phase_s`` seconds at the
    default clocks (at least ``interval_s``), on a virtual clock. ``duration_s`` None: NVML until
    stopped, the simulator `SIM_DURATION_S`. ``threshold``: the activity change (largest over the
    fields) that starts a new phase. NVML only: ``registry`` with ``time_model`` start each phase
    from these models (without both, from the catalog's prior); ``progress_file``, where the
    application keeps its number of work units done (without it the power is learnt and the time is
    the model's). Simulator only: ``catalog_prior`` starts the clock pairs from the catalog's prior,
    as NVML does without a registry, not the simulated GPU's calibration; ``workdir`` keeps its
    calibration (None: a temporary folder). ``knob``: one of `KNOBS`. `InputError` where a setting
    does not apply to the device or the knob, ``registry`` comes without ``time_model``, or a
    simulated phase is shorter than an interval.
    """

    device_kind: str = "nvml"
    index: int = 0
    policy: str = "energy"
    slowdown: float = 0.1
    power_cap_w: float | None = None
    interval_s: float = 1.0
    duration_s: float | None = None
    threshold: float = 0.1
    dry_run: bool = True
    knob: str = "clocks"
    registry: str | Path | None = None
    time_model: str | Path | None = None
    progress_file: str | Path | None = None
    catalog_prior: bool = False
    sim_phases: int = 4
    sim_phase_s: float = 60.0
    workdir: str | Path | None = None
    log_path: str | Path | None = None
    metrics_port: int | None = None

    def __post_init__(self) -> None:
        """Check the settings as a whole."""
        if self.device_kind not in DEVICE_KINDS:
            raise InputError(f"unknown device {self.device_kind!r}; expected one of {DEVICE_KINDS}")
        if self.knob not in KNOBS:
            raise InputError(f"unknown knob {self.knob!r}; expected one of {KNOBS}")
        if self.device_kind == "sim":
            self._check_sim()
        else:
            self._check_nvml()

    def _check_sim(self) -> None:
        if self.sim_phase_s < self.interval_s:
            # A phase shorter than an interval is not one the daemon can see, and a simulated
            # interval costs a loop turn per phase it spans.
            raise InputError(f"--sim-phase-s ({self.sim_phase_s:g}) must be at least --interval "
                             f"({self.interval_s:g})")
        if self.progress_file:
            raise InputError("--progress is for --device nvml: the simulated process reports its own")
        if self.registry or self.time_model:
            raise InputError("--device sim calibrates its own GPU: leave --registry and --time-model out")
        if self.catalog_prior and self.knob != "clocks":
            raise InputError(f"--catalog-prior is the clock pairs' prior: --knob {self.knob} starts from its own "
                             "(leave --catalog-prior out)")

    def _check_nvml(self) -> None:
        if self.catalog_prior:
            raise InputError("--catalog-prior is for --device sim: nvml starts from the catalog's prior whenever "
                             "--registry and --time-model are left out")
        if bool(self.registry) != bool(self.time_model):
            raise InputError("--registry and --time-model go together (the models' prior); leave both out to "
                             "start from the catalog's prior")
        if self.knob != "clocks" and self.registry:
            raise InputError(f"--knob {self.knob}: the models predict clock pairs; leave --registry and --time-model "
                             "out")


def serve(settings: ServiceSettings, *, started: Callable[[Daemon], None] | None = None,
          progress: Callable[[DaemonStats, int | None], None] | None = None) -> dict:
    """Govern a GPU's clocks while processes run on it, until the duration has passed, SIGTERM or Ctrl-C.

    Each interval observe its energy, activities and (with a progress file) work done, detect the
    phase, and set what the governor chooses. The clocks go back to the driver when no process
    runs and on every exit (`Daemon.run`).

    ``started`` is called with the daemon once it is built, before the first interval;
    ``progress(stats, intervals)`` after every interval, with the number of intervals the run will
    take (None: until stopped). Returns the run's `DaemonStats` (``clocks_restored``: the (core,
    memory) MHz the GPU runs at after the last reset, not one of the clock changes) with ``device``,
    ``policy``, ``interval_s``, ``prior``, ``knob`` and ``dry_run``; on the simulator also
    ``sim_truth``, the true joules and seconds at the default clocks and at the least-energy pairs,
    and ``energy_over_least``, ``energy_saving`` and ``time_change`` against them. `InputError`
    where the GPU, its registry entry or the time model cannot be had (the GPU is closed again
    first).
    """
    log_file = JsonLines(settings.log_path) if settings.log_path else None
    logs: list[Callable[[dict], None]] = [log_file.write] if log_file else []
    if settings.metrics_port:
        metrics = GovernorMetrics(labels={"gpu": f"{settings.device_kind}{settings.index}"})
        metrics.serve(settings.metrics_port)
        logs.append(metrics.record)
    with _governed(settings) as (device, monitor, prior, duration), log_file or contextlib.nullcontext():
        daemon = Daemon(device, monitor, prior, policy=settings.policy, slowdown=settings.slowdown,
                        power_cap_w=settings.power_cap_w, interval_s=settings.interval_s,
                        detector=PhaseDetector(settings.threshold), dry_run=settings.dry_run,
                        log=_each(logs) if logs else None)
        if started is not None:
            started(daemon)
        stats = _run_until_stopped(daemon, duration, progress)
    out = dataclasses.asdict(stats) | {"device": device.name, "policy": settings.policy,
                                       "interval_s": settings.interval_s, "prior": prior.name,
                                       "knob": settings.knob, "dry_run": settings.dry_run}
    if isinstance(monitor, SimulatedHost):
        out["sim_truth"] = _sim_truth(monitor, daemon, settings.interval_s)
    return out


def _each(logs: list[Callable[[dict], None]]) -> Callable[[dict], None]:
    def log(entry: dict) -> None:
        for f in logs:
            f(entry)
    return log


def _run_until_stopped(daemon: Daemon, duration: float | None,
                       progress: Callable[[DaemonStats, int | None], None] | None) -> DaemonStats:
    """The daemon's run, ended early by SIGTERM or Ctrl-C.

    The SIGTERM handler is put back after; on Ctrl-C the run so far is returned. The clocks are
    reset either way.
    """
    stop = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        return daemon.run(duration, stop, progress=progress)
    except KeyboardInterrupt:
        return daemon.stats
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def _governed(settings: ServiceSettings) -> Iterator[tuple[NvmlDevice | SimulatedDevice, NvmlMonitor | SimulatedHost,
                                                         Prior, float | None]]:
    """(device, monitor, prior, seconds to run) of the run.

    An NVML GPU and its monitor are closed on the way out.
    """
    if settings.device_kind == "sim":
        duration = settings.duration_s or SIM_DURATION_S
        with tempfile.TemporaryDirectory() as tmp:
            yield (*_simulated(settings, duration, settings.workdir or tmp), duration)
        return
    device = NvmlDevice(index=settings.index, leave_clocks=settings.dry_run)
    monitor = None
    try:
        prior = _nvml_prior(device, settings)
        monitor = NvmlMonitor(device, settings.progress_file)
        yield device, monitor, prior, settings.duration_s
    finally:
        if monitor is not None:
            monitor.close()
        device.close()


def _simulated(settings: ServiceSettings, duration: float,
               workdir: str | Path) -> tuple[SimulatedDevice, SimulatedHost, Prior]:
    """The calibrated simulated GPU running a process that cycles through the demo's workloads.

    The process lasts the whole run.
    """
    device, gpu, model = calibrated(workdir)
    if settings.knob == "clocks":
        prior: Prior = CatalogPrior.of(device, SIM_CATALOG_NAME) if settings.catalog_prior else ModelPrior(gpu, model)
    else:
        prior = _knob_prior(device, settings.knob, SIM_CATALOG_NAME)
    host = SimulatedHost(device)
    cycle = settings.sim_phase_s * settings.sim_phases
    host.start(phased_process(device, APPS[:settings.sim_phases], settings.sim_phase_s,
                              repeat=max(1, int(duration // cycle) + 1)))
    return device, host, prior


def _knob_prior(device: NvmlDevice | SimulatedDevice, knob: str, catalog_name: str | None = None) -> Prior:
    """The prior of the core clock alone or of the power limit."""
    return PowerLimitPrior(device) if knob == "power-limit" else CoreClockPrior(device, catalog_name)


def _nvml_prior(device: NvmlDevice, settings: ServiceSettings) -> Prior:
    """The core clock's or power limit's prior, the models' (its registry entry, the time model) or the catalog's."""
    if settings.knob != "clocks":
        return _knob_prior(device, settings.knob)
    if settings.registry and settings.time_model:
        table = gpu_table(Registry.load(settings.registry), device_uuid(device))
        return ModelPrior(table, DcgmTimeModel.load(settings.time_model))
    return CatalogPrior.of(device)


def _sim_truth(host: SimulatedHost, daemon: Daemon, interval_s: float) -> dict:
    """The simulated run scored against the simulator's truth.

    The true energy at the least-energy settings, and the true energy and time at the default one.
    """
    stats, g, knob = daemon.stats, daemon.governor, daemon.knob
    configs = core_clock_pairs(g.configs, knob.mem_mhz) if isinstance(knob, CoreClock) else g.configs
    truth = host.truth(configs, g.default_index, power_limits=knob.name == "power-limit")
    return truth | {"energy_over_least": stats.joules / truth["joules_least"] - 1.0,
                    "energy_saving": 1.0 - stats.joules / truth["joules_default"],
                    "time_change": stats.intervals * interval_s / truth["seconds_default"] - 1.0}
