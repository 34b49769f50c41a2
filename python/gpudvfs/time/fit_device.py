"""Fitting a device's memory parameters to a measured grid of its own kernels.

The DRAM latency (Eq. 4, both parts scaled together) and the DRAM service time per
transaction (the ``a / fm + b`` law), so a GPU without a microbenchmark campaign gets a
device from a sweep.

The parameters are multiplied by factors found by a coordinate search in log space on the
absolute (uncalibrated) prediction error, mean |log(predicted / measured)| over every row.
:func:`fit_device` also scores the fit by leave-one-kernel-out: each kernel predicted with
factors fitted on the others.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from gpudvfs.data.datasets import MeasurementGrid
from gpudvfs.errors import InputError
from gpudvfs.stats import mape
from gpudvfs.time.device import TimeDevice
from gpudvfs.time.from_grid import profiles_from_grid
from gpudvfs.time.model import TimeModel
from gpudvfs.time.profile import KernelProfile

#: Factor groups: the parameters each factor multiplies.
GROUPS = {"dm_lat": ("dm_lat_a", "dm_lat_b"), "dm_del_b": ("dm_del_b",), "dm_del_a": ("dm_del_a",)}
FACTOR_RANGE = (1 / 16, 16.0)


def _apply(base: TimeDevice, factors: dict[str, float]) -> TimeDevice:
    return replace(base, **{p: getattr(base, p) * f for g, f in factors.items() for p in GROUPS[g]})


def _predict(device: TimeDevice, profiles: list[KernelProfile], rows_of: list[np.ndarray],
             clocks: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """Each row's time (ms) at the (core, memory) ``clocks`` of the grid's rows."""
    model = TimeModel(device)
    core, mem = clocks
    out = np.empty(len(core))
    for p, rows in zip(profiles, rows_of):
        out[rows] = model.predict(p, core[rows], mem[rows])
    return out


def _search(base: TimeDevice, profiles: list[KernelProfile], rows_of: list[np.ndarray],
            clocks: tuple[np.ndarray, np.ndarray], time_ms: np.ndarray, use: list[int], groups: Sequence[str],
            sweeps: int = 6) -> dict[str, float]:
    """Coordinate search of log-factors: each factor tried at x step^(+-1), step shrinking."""
    log_t = np.log(time_ms)
    sel = np.zeros(len(time_ms), dtype=bool)
    for k in use:
        sel |= rows_of[k]

    def loss(f: dict[str, float]) -> float:
        pred = _predict(_apply(base, f), [profiles[k] for k in use], [rows_of[k] for k in use], clocks)
        return float(np.mean(np.abs(np.log(pred[sel]) - log_t[sel])))

    factors = dict.fromkeys(groups, 1.0)
    best = loss(factors)
    step = 2.0
    for _ in range(sweeps):
        for g in groups:
            for move in (step, 1 / step):
                trial = factors | {g: float(np.clip(factors[g] * move, *FACTOR_RANGE))}
                val = loss(trial)
                if val < best - 1e-12:
                    factors, best = trial, val
        step = np.sqrt(step)
    return factors


def fit_device(grid: MeasurementGrid, reference: tuple[float, float], base: TimeDevice, *,
               groups: Sequence[str] = tuple(GROUPS), name: str | None = None) -> tuple[TimeDevice, dict[str, Any]]:
    """``base`` with the memory parameters of ``groups`` (:data:`GROUPS`) fitted to a grid of its kernels, and a report.

    The grid needs two memory clocks and two kernels with nvprof counters at least. The device
    keeps the base's name (and catalog entry) unless ``name`` is given. The report holds the
    ``factors`` found and the absolute MAPE (%) ``mape_before``, ``mape_in_sample`` and
    ``mape_leave_one_kernel_out``.
    """
    unknown = set(groups) - set(GROUPS)
    if unknown or not groups:
        raise InputError(f"parameter groups must be among {sorted(GROUPS)}, got {sorted(groups)}")
    if base.dm_del_a == 0 and "dm_del_a" in groups:
        groups = tuple(g for g in groups if g != "dm_del_a")  # a zero stays zero under any factor
    mem = grid.mem_mhz
    mems = np.unique(mem) if mem is not None else np.empty(0)
    if mem is None or len(mems) < 2:  # the delay law a / fm + b, and the latency's memory part, need fm to move
        raise InputError(f"{grid.path}: fitting a device's memory parameters needs a grid over at least two memory "
                         f"clocks, got {mems.tolist() or 'none'}")
    profiles = profiles_from_grid(grid, reference, base)
    if len(profiles) < 2:
        raise InputError(f"{grid.path}: fitting a device needs at least two kernels")
    work = grid.workload
    rows_of = [work == p.name for p in profiles]
    everyone = list(range(len(profiles)))
    clocks, meas = (grid.core_mhz, mem), grid.time_ms
    factors = _search(base, profiles, rows_of, clocks, meas, everyone, groups)
    held = np.empty(len(grid))
    for k in everyone:
        f = _search(base, profiles, rows_of, clocks, meas, [i for i in everyone if i != k], groups)
        held[rows_of[k]] = _predict(_apply(base, f), [profiles[k]], [rows_of[k]], clocks)[rows_of[k]]
    fitted = replace(_apply(base, factors), name=name or base.name)  # the name keeps its catalog entry
    report = {"kernels": len(profiles), "rows": int(len(grid)), "groups": list(groups), "factors": factors,
              "mape_before": mape(_predict(base, profiles, rows_of, clocks), meas),
              "mape_in_sample": mape(_predict(fitted, profiles, rows_of, clocks), meas),
              "mape_leave_one_kernel_out": mape(held, meas)}
    return fitted, report
