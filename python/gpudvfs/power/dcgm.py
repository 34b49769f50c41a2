"""The power model on DCGM activities: each workload's DCGM fields at the reference clocks are its utilizations.

SM or graphics activity and the FP64/FP32/FP16/tensor pipes are the core domain, DRAM activity
the memory domain: a cluster with DCGM and no instruction counters fits the same model.
"""

from __future__ import annotations

import numpy as np

from gpudvfs.data.datasets import MeasurementGrid, PowerDataset
from gpudvfs.data.dcgm_fields import PIPES, find_fields
from gpudvfs.data.utilization import bound_utilization
from gpudvfs.errors import InputError
from gpudvfs.power.grid import grid_power_dataset


def dcgm_components(grid: MeasurementGrid) -> tuple[list[str], list[str], int]:
    """The components (canonical field names, core domain first), the grid's column of each, and how many are core.

    Fields zero in every row were not collected and are left out. Raises `InputError` if no core
    activity field has a non-zero value.
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
    """Power of every row of a DCGM grid; each workload's activities at the reference are its utilizations.

    ``reference`` is (core, memory) MHz. ``clip`` clips activities outside [0, 1] with a warning
    instead of refusing them. Raises `InputError` if the grid has no power column, no core activity
    field or no workload at the reference.
    """
    names, ref = grid.reference_rows(reference)
    comps, cols, n_core = dcgm_components(grid)
    util_ref = bound_utilization(np.column_stack([grid.columns[c][ref] for c in cols]), comps,
                                 f"{grid.path}: DCGM activities", clip=clip,
                                 hint="DCGM fields are ratios of time, not percentages")
    return grid_power_dataset(grid, reference, names, util_ref, tuple(comps), (n_core, len(comps) - n_core))

