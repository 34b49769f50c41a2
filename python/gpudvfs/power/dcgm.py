"""The power model on DCGM activities: each workload's DCGM fields at the reference clocks are its utilizations.

The components: SM or graphics-engine activity and the FP64/FP32/FP16/tensor pipes in the
core domain, DRAM activity in the memory domain; so a cluster with DCGM and no instruction
counters fits and applies the same model (Guerreiro et al.'s equations).
"""

from __future__ import annotations

import numpy as np

from gpudvfs.data.datasets import MeasurementGrid, PowerDataset
from gpudvfs.data.dcgm_fields import PIPES, find_fields
from gpudvfs.data.utilization import bound_utilization
from gpudvfs.errors import InputError
from gpudvfs.power.grid import grid_power_dataset


def dcgm_components(grid: MeasurementGrid) -> tuple[list[str], list[str], int]:
    """The power model's components on a DCGM grid.

    Fields zero in every row were not collected and are left out.

    Parameters
    ----------
    grid : MeasurementGrid
        A grid with DCGM activity fields.

    Returns
    -------
    names : list of str
        The components (canonical field names), core domain first.
    columns : list of str
        The grid's column of each.
    n_core : int
        How many belong to the core domain.

    Raises
    ------
    InputError
        If the grid has no core activity field with a non-zero value.
    """
    found = find_fields(grid.columns)
    sm = "sm_active" if "sm_active" in found else "gr_engine_active" if "gr_engine_active" in found else None
    core = ([sm] if sm else []) + [p for p in PIPES if p in found]
    if not core:
        raise InputError(f"{grid.path}: no DCGM core activity field with a non-zero value (sm_active, "
                         f"gr_engine_active or a pipe: {', '.join(PIPES)})")
    names = core + (["dram_active"] if "dram_active" in found else [])
    return names, [found[n] for n in names], len(core)


def dcgm_power_dataset(grid: MeasurementGrid, reference: tuple[float, float], clip: bool = False) -> PowerDataset:
    """Power of every row of a DCGM grid, with each workload's activities at the reference pair as its utilizations.

    Parameters
    ----------
    grid : MeasurementGrid
        A DCGM grid with a power column.
    reference : tuple of (float, float)
        The reference (core, memory) clocks in MHz.
    clip : bool
        Clip activities outside [0, 1] (they are ratios) with a warning, rather than refuse them.

    Returns
    -------
    PowerDataset
        A row per grid row of a workload measured at the reference.

    Raises
    ------
    InputError
        If the grid has no power column, no core activity field, no workload at the
        reference, or an activity is outside [0, 1] and ``clip`` is not set.
    """
    names, ref = grid.reference_rows(reference)
    comps, cols, n_core = dcgm_components(grid)
    util_ref = bound_utilization(np.column_stack([grid.columns[c][ref] for c in cols]), comps,
                                 f"{grid.path}: DCGM activities", clip=clip,
                                 hint="DCGM fields are ratios of time, not percentages")
    return grid_power_dataset(grid, reference, names, util_ref, tuple(comps), (n_core, len(comps) - n_core))

