"""Evaluating the time model on measured grids (NV-DVFS nvprof CSVs): profiles from the
reference rows, errors over all clock pairs, and the baselines it must beat."""

from __future__ import annotations

import numpy as np

from .. import _core
from ..errors import InputError
from ..io.datasets import MeasurementGrid
from ..io.grid_csv import launch_geometry
from .model import KernelProfile, TimeDevice, TimeModel


def profiles_from_grid(grid: MeasurementGrid, reference: tuple[float, float],
                       device: TimeDevice) -> list[KernelProfile]:
    """One profile per workload, from the counters, launch geometry (where the grid has it)
    and time of its reference-clock row."""
    if not isinstance(grid, MeasurementGrid):
        raise InputError(f"profiles come from a MeasurementGrid (gpudvfs.read of a grid file), got "
                         f"{type(grid).__name__}")
    if grid.mem_mhz is None:
        raise InputError(f"{grid.path}: the time model needs core and memory clocks per row")
    geometry = launch_geometry(grid)
    profiles = []
    for name, i in zip(*grid.reference_rows(reference)):
        counters = {k: float(v[i]) for k, v in grid.metrics.items()}
        launch = None if geometry is None else (float(geometry[0][i].prod()), float(geometry[1][i].prod()))
        profiles.append(KernelProfile.from_counters(name, counters, device=device, reference_mhz=reference,
                                                    reference_time_ms=float(grid.time_ms[i]), launch=launch))
    return profiles


def core_share(profile: KernelProfile, device: TimeDevice, reference: tuple[float, float]) -> float:
    """Share of the core-clock cycles in core + DRAM cycles at the reference, from the
    counters: the split of the two-term baseline T = T_ref (s fc_ref/fc + (1-s) fm_ref/fm),
    costed by the model's own terms (Rust ``KernelInputs::core_share``)."""
    try:
        return float(_core.time_core_share(np.array([profile.inputs()], dtype=np.float64), float(reference[1]),
                                           device.params())[0])
    except ValueError as e:
        raise InputError(f"kernel {profile.name!r}: {e}") from None


def two_term(profile: KernelProfile, device: TimeDevice, reference: tuple[float, float], core_mhz, mem_mhz):
    """The baseline the model must beat: T_ref (s fc_ref/fc + (1-s) fm_ref/fm), s from counters."""
    s = core_share(profile, device, reference)
    return profile.reference_time_ms * (s * reference[0] / core_mhz + (1 - s) * reference[1] / mem_mhz)


def mape(pred, meas, mask=None) -> float:
    """Mean absolute percentage error of ``pred`` against ``meas`` (over ``mask``'s rows)."""
    e = np.abs(pred - meas) / meas
    return float(100.0 * (e if mask is None else e[mask]).mean())


def evaluate(grid: MeasurementGrid, model: TimeModel, reference: tuple[float, float], *,
             calibrate: bool = False, baselines: bool = False) -> dict:
    """MAPE of the model over every row of the grid (and over rows with both clocks >= 500
    MHz), per kernel, predicted from the reference rows alone."""
    profiles = profiles_from_grid(grid, reference, model.device)
    work = grid.workload
    preds = {"model": np.empty(len(grid))}
    if baselines:
        preds |= {"unchanged": np.empty(len(grid)), "two_term": np.empty(len(grid))}
    for p in profiles:
        rows = work == p.name
        fc, fm = grid.core_mhz[rows], grid.mem_mhz[rows]
        preds["model"][rows] = model.predict(p, fc, fm, calibrate=calibrate)
        if baselines:
            preds["unchanged"][rows] = p.reference_time_ms
            preds["two_term"][rows] = two_term(p, model.device, reference, fc, fm)
    meas = grid.time_ms
    ge500 = (grid.core_mhz >= 500) & (grid.mem_mhz >= 500)

    def summary(pred):
        return {"mape": mape(pred, meas), "mape_ge500": mape(pred, meas, ge500),
                "per_kernel": {p.name: mape(pred, meas, work == p.name) for p in profiles}}

    out = summary(preds["model"]) | {"mode": model.mode, "calibrated": calibrate, "n": int(len(grid)),
                                     "reference_mhz": list(reference)}
    if baselines:
        out["baselines"] = {k: summary(preds[k]) for k in ("unchanged", "two_term")}
        out["baselines"]["two_term"]["core_share"] = {p.name: core_share(p, model.device, reference)
                                                      for p in profiles}
    return out
