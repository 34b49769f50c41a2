"""The end-to-end job: measure a GPU with the microbenchmark suites, fit the power and time
models, profile a few contrasting workloads once at the default clocks, and choose their
frequencies; on the simulated GPU, compare with the simulator's ground truth.

Every step is a public piece of gpudvfs: `run_sweep` of the power and time suites,
`PowerModel.fit`, `to_time_device`, `KernelProfile`, `TimeModel.predict`,
`PowerModel.predict_grid` and `select`.
"""

from __future__ import annotations

import tempfile
import warnings
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from .errors import GpudvfsWarning
from .measure.device import Device, Workload
from .measure.simulated import SimulatedDevice
from .measure.sweep import (grid, profiles_path, run_sweep, suite_workloads, to_power_dataset,
                            to_time_device)
from .power_model import PowerModel
from .select import POLICIES, Selection, pareto_front, select
from .time_model import KernelProfile, TimeDevice, TimeModel

#: Contrasting workloads for the simulated GPU: nvprof counters of one launch (the time
#: model's inputs) and component utilizations (the power model's).
SIM_WORKLOADS = (
    Workload("sgemm (compute-bound)", counters={
        "warps": 65536, "achieved_occupancy": 0.5, "l2_read_transactions": 2.0e6,
        "l2_write_transactions": 2.0e5, "dram_read_transactions": 5.0e5, "dram_write_transactions": 1.0e5,
        "shared_load_transactions": 6.0e6, "shared_store_transactions": 2.0e6, "inst_issued": 4.0e7,
        "util:SP": 0.85, "util:INT": 0.2, "util:L2": 0.2, "util:Shared": 0.5, "util:DRAM": 0.1}),
    Workload("stream (memory-bound)", counters={
        "warps": 131072, "achieved_occupancy": 0.9, "l2_read_transactions": 4.2e6,
        "l2_write_transactions": 4.2e6, "dram_read_transactions": 4.1e6, "dram_write_transactions": 4.1e6,
        "shared_load_transactions": 0, "shared_store_transactions": 0, "inst_issued": 2.6e6,
        "util:INT": 0.1, "util:L2": 0.4, "util:DRAM": 0.85}),
    Workload("stencil (mixed)", counters={
        "warps": 65536, "achieved_occupancy": 0.75, "l2_read_transactions": 3.0e6,
        "l2_write_transactions": 1.0e6, "dram_read_transactions": 2.0e6, "dram_write_transactions": 1.0e6,
        "shared_load_transactions": 3.0e6, "shared_store_transactions": 1.0e6, "inst_issued": 1.5e7,
        "util:SP": 0.4, "util:INT": 0.3, "util:L2": 0.4, "util:Shared": 0.4, "util:DRAM": 0.5}),
    Workload("histogram (latency-bound)", counters={
        "warps": 8192, "achieved_occupancy": 0.25, "l2_read_transactions": 1.0e6,
        "l2_write_transactions": 1.0e6, "dram_read_transactions": 3.0e5, "dram_write_transactions": 3.0e5,
        "shared_load_transactions": 1.5e6, "shared_store_transactions": 5.0e5, "inst_issued": 3.0e6,
        "util:INT": 0.3, "util:L2": 0.3, "util:Shared": 0.3, "util:DRAM": 0.2}),
)

Progress = Callable[[str, int, int], None]


@dataclass(frozen=True)
class WorkloadResult:
    name: str
    configs: np.ndarray           # [K x 2] MHz
    time_ms: np.ndarray           # predicted [K]
    watts: np.ndarray             # predicted [K]
    choices: dict[str, Selection]
    pareto: np.ndarray            # indices into configs
    true_time_ms: np.ndarray | None = None   # simulator's ground truth [K]
    true_watts: np.ndarray | None = None

    @property
    def joules(self) -> np.ndarray:
        return self.time_ms * self.watts / 1e3


@dataclass(frozen=True)
class DemoResult:
    device: str
    power_model: PowerModel
    time_device: TimeDevice
    time_fit: dict
    workloads: list[WorkloadResult]
    true_volts: np.ndarray | None      # simulator's true (core, mem) voltages at the configs
    files: list[Path]


def _stage(progress: Progress | None, name: str):
    def update(done: int, total: int, label: str) -> None:
        if progress:
            progress(name, done, total)
    return update


def run_demo(device: Device, *, workdir: str | Path | None = None, power_variant: str = "per-domain",
             min_seconds: float = 1.0, slowdown: float = 0.1, power_cap_w: float | None = None,
             workloads=None, resume: bool = False, progress: Progress | None = None) -> DemoResult:
    """Run the whole job on ``device``; sweep files go to ``workdir`` (a temporary folder
    by default), replacing an earlier demo's unless ``resume`` continues them. On a
    `SimulatedDevice` the results carry the ground truth."""
    work = Path(workdir) if workdir is not None else Path(tempfile.mkdtemp(prefix="gpudvfs-demo-"))
    work.mkdir(parents=True, exist_ok=True)
    sim = device if isinstance(device, SimulatedDevice) else None
    workloads = list(workloads if workloads is not None else (SIM_WORKLOADS if sim else suite_workloads("power")[::20]))
    configs = np.array(grid(device))
    files = []

    power_csv, time_csv = work / "power-suite.csv", work / "time-suite.csv"
    if not resume:
        for f in (power_csv, time_csv):
            f.unlink(missing_ok=True)
            profiles_path(f).unlink(missing_ok=True)
    run_sweep(device, suite_workloads("power"), power_csv, resume=power_csv.exists(), min_seconds=min_seconds,
              progress=_stage(progress, "power suite"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GpudvfsWarning)  # bound hits show in the model's notes
        power_model = PowerModel(power_variant).fit(to_power_dataset(power_csv))
    run_sweep(device, suite_workloads("time"), time_csv, resume=time_csv.exists(), min_seconds=min_seconds,
              progress=_stage(progress, "time suite"))
    # Latencies and delays come from the suite; the SM count from the device; the issue
    # rate and overlap exponent stay at the GTX 980 preset's (no benchmark measures them).
    base = replace(TimeDevice.gtx980(), sm_count=float(device.sm_count()))
    time_device, time_fit = to_time_device(time_csv, base)
    files += [power_csv, time_csv]

    ref = device.default_clocks()
    device.lock_clocks(*ref)
    profiles, utils = [], []
    tick = _stage(progress, "profile workloads")
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
    return DemoResult(device.name, power_model, time_device, time_fit, results, true_volts, files)


def _row(s: Selection, i: int) -> Selection:
    """One workload's part of a batched selection."""
    return Selection(s.policy, s.index[i:i + 1], s.core_mhz[i:i + 1], s.mem_mhz[i:i + 1], s.time_ms[i:i + 1],
                     s.watts[i:i + 1], s.joules[i:i + 1], s.feasible[i:i + 1])


def plot_demo(result: DemoResult, out_dir: str | Path) -> list[Path]:
    """Heatmaps of predicted time, power and energy over the clock grid per workload, the
    fitted voltage curves (with the truth on the simulator) and the Pareto fronts."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for r in result.workloads:
        cores, mems = np.unique(r.configs[:, 0]), np.unique(r.configs[:, 1])
        fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
        for ax, (label, values) in zip(axes, (("time (ms)", r.time_ms), ("power (W)", r.watts),
                                               ("energy (J)", r.joules))):
            img = np.full((len(mems), len(cores)), np.nan)
            for (c, m), v in zip(r.configs, values):
                img[np.searchsorted(mems, m), np.searchsorted(cores, c)] = v
            im = ax.imshow(img, aspect="auto", origin="lower", cmap="viridis")
            ax.set_xticks(range(len(cores))[::3], [f"{c:g}" for c in cores[::3]])
            ax.set_yticks(range(len(mems)), [f"{m:g}" for m in mems])
            ax.set_xlabel("core MHz")
            ax.set_ylabel("memory MHz")
            ax.set_title(f"predicted {label}")
            fig.colorbar(im, ax=ax)
        best = r.choices["energy"]
        axes[2].plot(np.searchsorted(cores, best.core_mhz[0]), np.searchsorted(mems, best.mem_mhz[0]), "r*", ms=14)
        fig.suptitle(r.name)
        fig.tight_layout()
        path = out / f"heatmaps-{_slug(r.name)}.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        written.append(path)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    cfg = result.workloads[0].configs
    v = result.power_model.voltage(cfg[:, 0], cfg[:, 1])
    for m in np.unique(cfg[:, 1]):
        sel = cfg[:, 1] == m
        ax1.plot(cfg[sel, 0], v[sel, 0], "o-", label=f"fitted, memory {m:g} MHz")
    if result.true_volts is not None:
        order = np.argsort(cfg[:, 0])
        ax1.plot(cfg[order, 0], result.true_volts[order, 0], "k--", label="simulator's truth")
    ax1.set_xlabel("core MHz")
    ax1.set_ylabel("normalized core voltage")
    ax1.legend(fontsize=7)
    ax1.set_title("voltage curve")
    for r in result.workloads:
        e = r.joules
        ax2.plot(r.time_ms[r.pareto], e[r.pareto], "o-", label=r.name)
    ax2.set_xlabel("predicted time (ms)")
    ax2.set_ylabel("predicted energy (J)")
    ax2.set_title("Pareto fronts (time, energy)")
    ax2.legend(fontsize=7)
    fig.tight_layout()
    path = out / "voltage-and-pareto.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    written.append(path)
    return written


def _slug(name: str) -> str:
    return "".join(ch if ch.isalnum() else "-" for ch in name).strip("-").lower()
