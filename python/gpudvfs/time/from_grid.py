"""Kernel profiles from a measured grid: each workload's counters, launch geometry and time at the reference clocks."""

from __future__ import annotations

from gpudvfs.data.datasets import MeasurementGrid
from gpudvfs.data.grid_csv import launch_geometry
from gpudvfs.errors import InputError
from gpudvfs.time.device import TimeDevice
from gpudvfs.time.profile import KernelProfile


def profiles_from_grid(grid: MeasurementGrid, reference: tuple[float, float],
                       device: TimeDevice) -> list[KernelProfile]:
    """One profile per workload measured at ``reference`` (core, memory MHz), from that row.

    The grid needs nvprof counters and a memory clock column; launch geometry is read where the
    grid has it. Raises `InputError` if the grid has no workload at the reference, or a workload
    lacks counters the model needs.
    """
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
