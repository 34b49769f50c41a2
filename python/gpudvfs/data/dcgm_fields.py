"""DCGM profiling fields under the three spellings tools print them in.

The spellings: `dcgmi dmon` tags (SMACT), dcgm-exporter names (DCGM_FI_PROF_SM_ACTIVE) and
DCGM's lowercase short names (sm_active). Each field is a ratio in [0, 1] of elapsed time (or,
for occupancy, of the warp slots) averaged over the sampling period.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from gpudvfs.data.datasets import MeasurementGrid
from gpudvfs.errors import InputError

#: canonical (lowercase) name -> (dmon tag, exporter name)
FIELDS: dict[str, tuple[str, str]] = {
    "gr_engine_active": ("GRACT", "DCGM_FI_PROF_GR_ENGINE_ACTIVE"),
    "sm_active": ("SMACT", "DCGM_FI_PROF_SM_ACTIVE"),
    "sm_occupancy": ("SMOCC", "DCGM_FI_PROF_SM_OCCUPANCY"),
    "tensor_active": ("TENSO", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"),
    "dram_active": ("DRAMA", "DCGM_FI_PROF_DRAM_ACTIVE"),
    "fp64_active": ("FP64A", "DCGM_FI_PROF_PIPE_FP64_ACTIVE"),
    "fp32_active": ("FP32A", "DCGM_FI_PROF_PIPE_FP32_ACTIVE"),
    "fp16_active": ("FP16A", "DCGM_FI_PROF_PIPE_FP16_ACTIVE"),
}
#: Fields of the core clock domain that say how busy the SMs' pipes are.
PIPES = ("fp64_active", "fp32_active", "fp16_active", "tensor_active")


def spellings(name: str) -> tuple[str, str, str]:
    """A field's (short name, dmon tag, exporter name), from its canonical name (a key of :data:`FIELDS`)."""
    tag, exporter = FIELDS[name]
    return name, tag, exporter


def find_fields(columns: Mapping[str, np.ndarray], *, nonzero: bool = True) -> dict[str, str]:
    """Canonical field -> the column that holds it among ``columns`` (matched case-insensitively).

    ``nonzero`` counts a field zero in every row as not collected (DCGM writes 0 for a profiling
    field its GPU or settings do not sample). Raises `InputError` if a field appears under two
    spellings.
    """
    lower = {c.lower(): c for c in columns}
    found = {}
    for name in FIELDS:
        hits = [lower[s.lower()] for s in spellings(name) if s.lower() in lower]
        if len(hits) > 1:
            raise InputError(f"DCGM field {name} appears twice, as columns {hits}: keep one")
        if hits and (not nonzero or np.any(np.asarray(columns[hits[0]]) > 0)):
            found[name] = hits[0]
    return found


def is_dcgm_grid(grid: MeasurementGrid) -> bool:
    """Whether a grid goes down the DCGM path.

    True for the nsfcac export, or a `grid` CSV whose counters include DCGM fields (one with
    nvprof counters alone goes the nvprof way).
    """
    return grid.format == "dcgm" or (grid.format == "grid" and bool(find_fields(grid.metrics)))
