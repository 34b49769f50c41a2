"""A measured grid as the power model's dataset.

Every row's power at its clocks, with its workload's utilizations at the reference clocks.
"""

from __future__ import annotations

import numpy as np

from gpudvfs.data.datasets import MeasurementGrid, PowerDataset
from gpudvfs.errors import InputError


def grid_power_dataset(grid: MeasurementGrid, reference: tuple[float, float], names: list[str], util: np.ndarray,
                       components: tuple[str, ...], domain_sizes: tuple[int, int]) -> PowerDataset:
    """A row per grid row of the workloads in ``names``, with their utilizations ``util`` [workloads x components].

    ``domain_sizes`` counts the components (core domain first) of each domain. A grid without a
    memory clock column was measured at one memory clock: the reference's is given to every row.
    Raises `InputError` if the grid has no power column.
    """
    if grid.watts is None:
        raise InputError(f"{grid.path}: the power model is fitted on measured power; the grid has no power column")
    work = grid.workload
    rows = np.isin(work, names)
    index = {n: a for a, n in enumerate(names)}
    bench = np.array([index[w] for w in work[rows].tolist()], dtype=np.int64)
    mem = grid.mem_mhz if grid.mem_mhz is not None else np.full(len(grid), float(reference[1]))
    return PowerDataset(path=grid.path, reference_mhz=(float(reference[0]), float(reference[1])),
                        domain_sizes=tuple(domain_sizes), components=tuple(components),
                        watts=np.asarray(grid.watts, dtype=np.float64)[rows],
                        freqs_mhz=np.column_stack([grid.core_mhz, mem])[rows], utilization=util[bench],
                        row_names=tuple(work[rows].tolist()), benchmark=bench, benchmarks=tuple(names),
                        format=grid.format)
