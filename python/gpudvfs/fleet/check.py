"""Drift checks: whether a chip has moved away from its model (aging, cooling).

Each GPU re-measures a few power-suite benchmarks at a few of its clock pairs, and its registry
model predicts them from the utilizations profiled at calibration. Aging and a changed cooling
shift power one way on every point, so the statistic is the mean signed error; the GPU is
flagged when it leaves the model's error band: BAND_FACTOR x the 95th percentile of the model's
cross-validated errors at calibration, and never below BAND_FLOOR_PCT (sensor noise and
re-measurement).
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from gpudvfs.errors import InputError
from gpudvfs.fleet.registry import ENTRY_FILE, POWER_FILE, device_uuid, gpu_dir, read_entry
from gpudvfs.fleet.tasks import Progress, per_gpu
from gpudvfs.hardware.calibrate import POWER_CSV
from gpudvfs.hardware.device import Device, Workload
from gpudvfs.hardware.sweep import load_record
from gpudvfs.power.model import PowerModel

BAND_FACTOR = 2.0
BAND_FLOOR_PCT = 1.0


def _spread(n: int, k: int) -> np.ndarray:
    """Indices spread evenly over 0 .. n-1, k of them (all of them when k >= n)."""
    return np.unique(np.linspace(0, n - 1, min(k, n)).round().astype(int))


def check_gpu(devices: Callable[[int], Device], slot: int, root: str, pairs: int, benchmarks: int,
              min_seconds: float) -> dict:
    """Check one GPU against its registry entry: the body of a Ray task, which runs without Ray too.

    ``benchmarks`` power-suite benchmarks are re-measured at each of ``pairs`` pairs. Returns
    ``uuid``, ``points``, ``drift_pct`` (the mean signed error), ``error_max_pct``, ``band_pct``
    and ``flagged`` (the drift outside the band); `InputError` where the GPU is not registered.
    """
    device = devices(slot)
    uuid = device_uuid(device)
    folder = gpu_dir(root, uuid)
    if not (folder / ENTRY_FILE).exists():
        raise InputError(f"GPU {uuid} is not in the registry {root}: calibrate it first")
    entry = read_entry(folder)
    model = PowerModel.load(folder / POWER_FILE)
    profiles = load_record(folder / POWER_CSV)["profiles"]
    names = sorted(profiles)
    chosen = [names[i] for i in _spread(len(names), benchmarks)]
    configs = model.configs_[_spread(len(model.configs_), pairs)]
    errors = []
    try:
        for fc, fm in configs:
            device.lock_clocks(float(fc), float(fm))
            for name in chosen:
                util = np.array([profiles[name][c] for c in model.components_])
                measured = device.measure(Workload(name, kernel=name), min_seconds=min_seconds).watts
                errors.append(100.0 * (measured / float(model.predict(util, fc, fm)) - 1.0))
    finally:
        device.reset_clocks()
    band = max(BAND_FACTOR * entry["power"]["cv_ape_p95"], BAND_FLOOR_PCT)
    drift = float(np.mean(errors))
    return {"uuid": uuid, "points": len(errors), "drift_pct": drift, "error_max_pct": float(np.max(np.abs(errors))),
            "band_pct": band, "flagged": abs(drift) > band}


def check_fleet(devices: Callable[[int], Device], root: str | Path, *, gpus: int | None = None,
                ray_address: str = "local", pairs: int = 4, benchmarks: int = 3, min_seconds: float = 1.0,
                progress: Progress | None = None) -> dict:
    """Check every GPU of the Ray cluster against its registry entry, one task each (`per_gpu`).

    Returns ``gpus``, ``flagged`` (their UUIDs) and ``per_gpu`` (`check_gpu`'s results).
    `InputError` for ``pairs`` or ``benchmarks`` below 1, a missing registry, or checks that failed.
    """
    if pairs < 1 or benchmarks < 1:
        raise InputError(f"pairs and benchmarks must be at least 1, got {pairs} and {benchmarks}")
    if not Path(root).is_dir():
        raise InputError(f"{root}: no such registry folder")
    results = per_gpu(check_gpu, devices, (str(root), pairs, benchmarks, min_seconds), gpus=gpus,
                      ray_address=ray_address, progress=progress, what="checks")
    return {"gpus": len(results), "flagged": [r["uuid"] for r in results if r["flagged"]], "per_gpu": results}
