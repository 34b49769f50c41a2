"""A simulated GPU with processes running on it, each a sequence of phases.

A phase is a workload for so many steps, so the governor's daemon runs end to end without a
GPU: it sees what a daemon sees on a real one (the running processes, the activities of the
last interval, the energy counter, the clocks) plus the processes' progress in steps, what an
application reports.

Processes run one after another in the order they were started (a GPU time-slices
concurrent ones; the simulator does not), on the simulated device's virtual clock: `wait`
moves it on at the clocks the daemon set, so an hour's run takes seconds.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gpudvfs.data import read_measured_grid
from gpudvfs.errors import InputError
from gpudvfs.fleet.calibrate import SimFleet, calibrate_gpu
from gpudvfs.fleet.registry import ENTRY_FILE, Registry, device_uuid, gpu_dir
from gpudvfs.fleet.telemetry import activities, sample_dcgm_grid
from gpudvfs.fleet.whatif import GpuTable, gpu_table
from gpudvfs.hardware.device import Workload
from gpudvfs.hardware.simulated import SimulatedDevice, profile_of
from gpudvfs.time.dcgm import DcgmTimeModel


@dataclass(frozen=True)
class SimProcess:
    """A simulated process: its phases in order, the whole list run ``repeat`` times.

    ``name`` is what the phase detector keys phases by; ``phases``: (workload, steps) in order.
    """

    pid: int
    name: str
    phases: tuple[tuple[Workload, float], ...]
    repeat: int = 1

    def __post_init__(self) -> None:
        """Check the phases and the repeat count."""
        if not self.phases or self.repeat < 1 or any(not (s > 0 and np.isfinite(s)) for _, s in self.phases):
            raise InputError(f"process {self.name!r}: phases must be (workload, steps > 0) pairs and repeat >= 1")


def sim_activity(workload: Workload, device: SimulatedDevice) -> np.ndarray:
    """The (SM, pipe, DRAM) activity of a simulated workload (pipe: its busier of FP32 and FP64).

    Fractions in [0, 1].
    """
    sm, fp32, fp64, dram = activities(profile_of(workload, device.gpu).util)
    return np.array([sm, max(fp32, fp64), dram])


class SimulatedHost:
    """A simulated GPU running the processes given to `start`, as a daemon's monitor.

    ``time_noise``: relative standard deviation of each interval's step rate (what a real run's
    progress jitters by), in [0, 0.5).
    """

    #: Where the activities come from, as `NvmlMonitor.source` says it.
    source = "simulated"

    def __init__(self, device: SimulatedDevice | None = None, *, time_noise: float = 0.01, seed: int = 0) -> None:
        if not 0 <= time_noise < 0.5:
            raise InputError(f"time_noise must be in [0, 0.5), got {time_noise}")
        self.device = device or SimulatedDevice()
        self.time_noise = time_noise
        self._rng = np.random.default_rng(seed)
        self._queue: deque[list] = deque()  # [process, phase position, steps left in it]
        self._activity = np.zeros(3)
        self._done: dict[str, tuple[Workload, float]] = {}  # steps done per workload

    def start(self, process: SimProcess) -> None:
        """Queue ``process``: it runs once those started before it have ended."""
        for w, _ in process.phases:
            self.device.check(w)
        self._queue.append([process, 0, process.phases[0][1]])

    def processes(self) -> tuple[tuple[int, str], ...]:
        """The running process's (pid, name), as `NvmlDevice.processes` gives them; empty when none runs."""
        return ((self._queue[0][0].pid, self._queue[0][0].name),) if self._queue else ()

    def activity(self) -> np.ndarray:
        """The (SM, pipe, DRAM) activities averaged over the last `wait`."""
        return self._activity.copy()

    def progress(self) -> float:
        """The steps done by all processes, as an application reports its work."""
        return sum(steps for _, steps in self._done.values())

    def phase(self) -> Workload | None:
        """The workload running now: the ground truth a test compares with."""
        if not self._queue:
            return None
        proc, pos, _ = self._queue[0]
        return proc.phases[pos % len(proc.phases)][0]

    def wait(self, seconds: float) -> None:
        """Run the processes for ``seconds`` of virtual time at the device's clocks."""
        if not (np.isfinite(seconds) and seconds > 0):
            raise InputError(f"seconds must be finite and > 0, got {seconds}")
        dev, left = self.device, seconds
        busy = np.zeros(3)
        # One rate per interval: the jitter of a run's progress over the interval.
        slow = max(0.5, 1.0 + self.time_noise * self._rng.standard_normal())
        while left > 0 and self._queue:
            entry = self._queue[0]
            proc, pos, steps = entry
            w = proc.phases[pos % len(proc.phases)][0]
            step_s = slow * dev.true_time_ms(w, *dev.running_clocks(w)) / 1e3
            dt = min(left, steps * step_s)
            dev.run(w, dt)
            busy += dt * sim_activity(w, dev)
            self._done[w.name] = (w, self._done.get(w.name, (w, 0.0))[1] + dt / step_s)
            entry[2] -= dt / step_s
            left -= dt
            if entry[2] <= 1e-9:  # the phase is done: the next, or the next process
                entry[1] += 1
                if entry[1] == len(proc.phases) * proc.repeat:
                    self._queue.popleft()
                else:
                    entry[2] = proc.phases[entry[1] % len(proc.phases)][1]
        if left > 0:
            dev.run(None, left)
        self._activity = busy / seconds

    def truth(self, configs: Iterable[tuple[float, float]], default_index: int, power_limits: bool = False) -> dict:
        """The work done so far, costed with the true time and power.

        At the default setting and at each workload's least-energy setting among ``configs``: the
        references a run's joules and seconds are scored against.

        ``configs``: the (core, memory) MHz pairs governed; with ``power_limits``, the governor's
        power-limit rows (W, `knob.FIXED`), each costed at the clocks the default clocks run at under
        it (`SimulatedDevice.running_clocks`). Keys ``joules_default`` and ``seconds_default`` (the
        work at the default setting) and ``joules_least`` (each workload's work at its least-energy one).
        """
        dev, out = self.device, {"joules_default": 0.0, "seconds_default": 0.0, "joules_least": 0.0}
        for w, steps in self._done.values():
            pairs = [dev.running_clocks(w, dev.default_clocks(), row[0]) if power_limits else row for row in configs]
            t = np.array([dev.true_time_ms(w, fc, fm) for fc, fm in pairs]) / 1e3
            e = t * np.array([dev.true_power_w(w, fc, fm) for fc, fm in pairs])
            out["joules_default"] += steps * e[default_index]
            out["seconds_default"] += steps * t[default_index]
            out["joules_least"] += steps * e.min()
        return out


def phased_process(device: SimulatedDevice, workloads: Iterable[Workload], phase_s: float, repeat: int,
                   pid: int = 1, name: str = "train") -> SimProcess:
    """A process that runs each of ``workloads`` for about ``phase_s`` seconds in turn, ``repeat`` times.

    The seconds are at ``device``'s default clocks.
    """
    if not phase_s > 0:
        raise InputError(f"phase length must be > 0 s, got {phase_s}")
    fc, fm = device.default_clocks()
    return SimProcess(pid, name, tuple((w, 1e3 * phase_s / device.true_time_ms(w, fc, fm)) for w in workloads),
                      repeat)


def calibrated(workdir: str | Path) -> tuple[SimulatedDevice, GpuTable, DcgmTimeModel]:
    """Simulated GPU 0 of fleet 0, with what the daemon needs of it.

    Made in ``workdir`` (reused when there): its registry entry (`gpudvfs fleet calibrate`) and a
    DCGM time model fitted on a simulated DCGM grid of the power suite.

    Returns the GPU, its power model over its calibrated pairs and the time model.
    """
    root = Path(workdir)
    registry_dir, grid_path, model_path = root / "registry", root / "dcgm-grid.csv", root / "time-dcgm.json"
    device = SimFleet()(0)
    uuid = device_uuid(device)
    if not (gpu_dir(registry_dir, uuid) / ENTRY_FILE).exists():  # an entry is written last: complete
        calibrate_gpu(SimFleet(), 0, str(registry_dir), 1.0, "per-domain")
    if not model_path.exists():
        sample_dcgm_grid(grid_path, device)
        grid = read_measured_grid(grid_path, "the DCGM time model", ("grid",))
        DcgmTimeModel().fit(grid, device.default_clocks()).save(model_path)
    return device, gpu_table(Registry.load(registry_dir), uuid), DcgmTimeModel.load(model_path)
