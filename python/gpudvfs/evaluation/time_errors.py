"""Evaluating the time model on measured grids (NV-DVFS nvprof CSVs).

Profiles from the reference rows, errors over all clock pairs, and the baselines it must beat.
"""

from __future__ import annotations

import numpy as np

from gpudvfs import _core
from gpudvfs.data.datasets import MeasurementGrid
from gpudvfs.errors import InputError
from gpudvfs.stats import mape
from gpudvfs.time.from_grid import profiles_from_grid
from gpudvfs.time.model import KernelProfile, TimeDevice, TimeModel


def core_share(profile: KernelProfile, device: TimeDevice, reference: tuple[float, float]) -> float:
    """Share s of the core-clock cycles in core + DRAM cycles at the reference pair, from the counters.

    The split of the two-term baseline T = T_ref (s fc_ref/fc + (1-s) fm_ref/fm), costed by
    the model's own terms (Rust ``KernelInputs::core_share``).

    Raises InputError for a profile the model cannot cost.
    """
    try:
        return float(_core.time_core_share(np.array([profile.inputs()], dtype=np.float64), float(reference[1]),
                                           device.params())[0])
    except ValueError as e:
        raise InputError(f"kernel {profile.name!r}: {e}") from None


def two_term(profile: KernelProfile, device: TimeDevice, reference: tuple[float, float],
             core_mhz: np.ndarray, mem_mhz: np.ndarray) -> np.ndarray:
    """The baseline the model must beat: T_ref (s fc_ref/fc + (1-s) fm_ref/fm), s from counters.

    Time (ms) at each pair; s is :func:`core_share`.

    Raises InputError for a profile without a reference time to scale.
    """
    if profile.reference_time_ms is None:
        raise InputError(f"kernel {profile.name!r}: the two-term baseline scales the reference time, which the "
                         "profile lacks")
    s = core_share(profile, device, reference)
    return profile.reference_time_ms * (s * reference[0] / core_mhz + (1 - s) * reference[1] / mem_mhz)


def evaluate(grid: MeasurementGrid, model: TimeModel, reference: tuple[float, float], *,
             calibrate: bool = False, baselines: bool = False) -> dict:
    """MAPE of the model over every row of the grid, predicted from the reference rows alone.

    Also over the rows with both clocks >= 500 MHz, and per kernel. ``calibrate`` calibrates
    each kernel on its measured reference time; ``baselines`` adds the time-unchanged and
    two-term baselines.

    Returns
    -------
    dict
        ``mape``, ``mape_ge500``, ``per_kernel``, ``mode``, ``calibrated``, ``n``,
        ``reference_mhz``, and with ``baselines`` their figures.
    """
    profiles = profiles_from_grid(grid, reference, model.device)
    work, mem = grid.workload, grid.mem_mhz
    assert mem is not None  # profiles_from_grid refuses a grid without memory clocks
    preds = {"model": np.empty(len(grid))}
    if baselines:
        preds |= {"unchanged": np.empty(len(grid)), "two_term": np.empty(len(grid))}
    for p in profiles:
        rows = work == p.name
        fc, fm = grid.core_mhz[rows], mem[rows]
        preds["model"][rows] = model.predict(p, fc, fm, calibrate=calibrate)
        if baselines:
            preds["unchanged"][rows] = p.reference_time_ms
            preds["two_term"][rows] = two_term(p, model.device, reference, fc, fm)
    meas = grid.time_ms
    ge500 = (grid.core_mhz >= 500) & (mem >= 500)

    def summary(pred: np.ndarray) -> dict:
        return {"mape": mape(pred, meas), "mape_ge500": mape(pred, meas, ge500),
                "per_kernel": {p.name: mape(pred, meas, work == p.name) for p in profiles}}

    out = summary(preds["model"]) | {"mode": model.mode, "calibrated": calibrate, "n": int(len(grid)),
                                     "reference_mhz": list(reference)}
    if baselines:
        out["baselines"] = {k: summary(preds[k]) for k in ("unchanged", "two_term")}
        out["baselines"]["two_term"]["core_share"] = {p.name: core_share(p, model.device, reference)
                                                      for p in profiles}
    return out
