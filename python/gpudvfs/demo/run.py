"""The end-to-end job: measure, fit, profile, choose; on the simulated GPU, against its truth.

Measure a GPU with the microbenchmark suites, fit the power and time models, profile the real
workloads of `gpudvfs.hardware.apps` once at the default clocks, and choose their frequencies;
on the simulated GPU, compare with the simulator's ground truth.

Every step is a public piece of gpudvfs: `calibrate` (`run_sweep` of the power and time
suites, `PowerModel.fit`, `to_time_device`), `KernelProfile`, `TimeModel.predict`,
`PowerModel.predict_grid` and `select`.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gpudvfs.hardware.apps import APPS
from gpudvfs.hardware.calibrate import Progress, calibrate, stage
from gpudvfs.hardware.device import Device, Workload
from gpudvfs.hardware.simulated import SimulatedDevice
from gpudvfs.hardware.sweep import grid
from gpudvfs.policy import POLICIES, Selection, pareto_front, select
from gpudvfs.power.model import PowerModel
from gpudvfs.time import KernelProfile, TimeDevice, TimeModel


@dataclass(frozen=True)
class WorkloadResult:
    """One workload of the demo: its predictions [K] over the clock grid [K x 2] and each policy's choice.

    ``pareto`` indexes ``configs`` along the (time, energy) front; ``true_time_ms`` and
    ``true_watts`` are the simulator's ground truth (None on a real GPU).
    """

    name: str
    configs: np.ndarray
    time_ms: np.ndarray
    watts: np.ndarray
    choices: dict[str, Selection]
    pareto: np.ndarray
    true_time_ms: np.ndarray | None = None
    true_watts: np.ndarray | None = None

    @property
    def joules(self) -> np.ndarray:
        """[K] predicted energy (J): time x power."""
        return self.time_ms * self.watts / 1e3


@dataclass(frozen=True)
class DemoResult:
    """What the demo measured, fitted and chose.

    ``time_fit`` is the time device's fit (``dm_lat``: the DRAM latency's); ``true_volts`` the
    simulator's (core, memory) voltages at the configs (None on a real GPU); ``files`` the sweeps
    written; ``reference_mhz`` the default clocks, where the workloads were profiled.
    """

    device: str
    power_model: PowerModel
    time_device: TimeDevice
    time_fit: dict
    workloads: list[WorkloadResult]
    true_volts: np.ndarray | None
    files: list[Path]
    reference_mhz: tuple[float, float]
    slowdown: float
    power_cap_w: float | None = None


def run_demo(device: Device, *, workdir: str | Path | None = None, power_variant: str = "per-domain",
             min_seconds: float = 1.0, slowdown: float = 0.1, power_cap_w: float | None = None,
             workloads: Iterable[Workload] | None = None, resume: bool = False,
             progress: Progress | None = None) -> DemoResult:
    """Run the whole job on a device; on a `SimulatedDevice` the results carry the ground truth.

    Parameters
    ----------
    workdir : str or pathlib.Path or None
        Where the sweeps go (None: a temporary folder), replacing an earlier demo's unless
        ``resume``.
    power_cap_w : float or None
        The power-cap policy's cap (None: the median predicted power).
    workloads : iterable of Workload or None
        None: `gpudvfs.hardware.apps.APPS`.
    progress : callable or None
        ``progress(stage, done, total)`` as the sweeps and profiles go.
    """
    work = Path(workdir) if workdir is not None else Path(tempfile.mkdtemp(prefix="gpudvfs-demo-"))
    sim = device if isinstance(device, SimulatedDevice) else None
    workloads = list(workloads if workloads is not None else APPS)
    configs = np.array(grid(device))
    cal = calibrate(device, work, resume=resume, power_variant=power_variant, min_seconds=min_seconds,
                    progress=progress)
    power_model, time_device = cal.power_model, cal.time_device

    ref = device.default_clocks()
    device.lock_clocks(*ref)
    profiles, utils = [], []
    tick = stage(progress, "profile workloads")
    try:
        for i, w in enumerate(workloads):
            counters = device.profile(w)
            measured = device.measure(w, min_seconds=min_seconds)
            profiles.append(KernelProfile.from_counters(w.name, counters, device=time_device, reference_mhz=ref,
                                                        reference_time_ms=measured.time_ms))
            utils.append([counters[c] for c in power_model.components_])
            tick(i + 1, len(workloads), w.name)
    finally:
        device.reset_clocks()

    t = TimeModel(time_device).predict(profiles, configs[:, 0], configs[:, 1], calibrate=True)
    p = power_model.predict_grid(np.array(utils), configs)
    default_index = int(np.flatnonzero((configs == np.asarray(ref)).all(axis=1))[0])
    cap = power_cap_w if power_cap_w is not None else float(np.median(p))
    choices = {policy: select(t, p, configs, policy, default_index=default_index, slowdown=slowdown,
                              power_cap_w=cap) for policy in POLICIES}
    results = []
    for i, w in enumerate(workloads):
        true_t = true_p = None
        if sim:
            true_t = np.array([sim.true_time_ms(w, c, m) for c, m in configs])
            true_p = np.array([sim.true_power_w(w, c, m) for c, m in configs])
        results.append(WorkloadResult(
            w.name, configs, t[i], p[i],
            {k: _row(v, i) for k, v in choices.items()},
            pareto_front(t[i], t[i] * p[i] / 1e3), true_t, true_p))
    true_volts = np.array([sim.gpu.volts(c, m) for c, m in configs]) if sim else None
    return DemoResult(device.name, power_model, time_device, cal.time_fit, results, true_volts, cal.files, ref,
                      slowdown, cap)


def _row(s: Selection, i: int) -> Selection:
    """One workload's part of a batched selection."""
    return Selection(s.policy, s.index[i:i + 1], s.core_mhz[i:i + 1], s.mem_mhz[i:i + 1], s.time_ms[i:i + 1],
                     s.watts[i:i + 1], s.joules[i:i + 1], s.feasible[i:i + 1])
