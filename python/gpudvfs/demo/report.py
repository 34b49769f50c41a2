"""The demo's report: the whole job on a device, its figures and its summary (`gpudvfs demo`)."""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from gpudvfs.demo.plots import plot_demo
from gpudvfs.demo.run import DemoResult, run_demo
from gpudvfs.hardware.calibrate import Progress
from gpudvfs.hardware.device import Device


def demo_report(device: Device, workdir: str | Path, *, min_seconds: float = 1.0, slowdown: float = 0.1,
                power_cap_w: float | None = None, resume: bool = False, progress: Progress | None = None) -> dict:
    """Run the demo on a device (`run_demo`, whose arguments it takes) and return `demo_summary`.

    Its figures are drawn where matplotlib is installed.
    """
    result = run_demo(device, workdir=workdir, min_seconds=min_seconds, slowdown=slowdown, power_cap_w=power_cap_w,
                      resume=resume, progress=progress)
    plots = plot_demo(result, workdir) if importlib.util.find_spec("matplotlib") else []
    return demo_summary(result, plots)


def demo_summary(result: DemoResult, plots: Sequence[Path] = ()) -> dict:
    """A demo's result and the figures drawn as JSON values (`gpudvfs demo --json`).

    Returns
    -------
    dict
        ``device``; ``power_model`` (``variant``, ``train_mape``, ``iterations``);
        ``time_device_fit``; ``choices``: per workload and policy the pair, whether feasible,
        the predicted time, power and energy, and on the simulator their true values and the
        true least energy; ``files`` (sweeps and figures); on the simulator
        ``voltage_error_max``, the fitted voltages' largest relative error.
    """
    rows = []
    for w in result.workloads:
        for policy, s in w.choices.items():
            k = int(s.index[0])
            row = {"workload": w.name, "policy": policy, "core_mhz": float(s.core_mhz[0]),
                   "mem_mhz": float(s.mem_mhz[0]), "feasible": bool(s.feasible[0]),
                   "time_ms": float(s.time_ms[0]), "watts": float(s.watts[0]), "joules": float(s.joules[0])}
            if w.true_time_ms is not None and w.true_watts is not None:
                true_e = w.true_time_ms * w.true_watts / 1e3
                row |= {"true_time_ms": float(w.true_time_ms[k]), "true_watts": float(w.true_watts[k]),
                        "true_joules": float(true_e[k]), "true_min_joules": float(true_e.min())}
            rows.append(row)
    pm = result.power_model
    summary: dict[str, Any] = {
        "device": result.device,
        "power_model": {"variant": pm.variant, "train_mape": pm.train_mape_, "iterations": pm.iterations_},
        "time_device_fit": result.time_fit, "choices": rows, "files": [str(f) for f in [*result.files, *plots]]}
    if result.true_volts is not None:
        cfg = result.workloads[0].configs
        err = np.abs(pm.voltage(cfg[:, 0], cfg[:, 1]) / result.true_volts - 1)
        summary["voltage_error_max"] = float(err.max())
    return summary
