"""A measurement grid as dense arrays: every workload measured at every clock configuration.

Indexed (workload, core level[, memory level]). The replay draws its traces from it and the
offline parts (counter scale, Lasso, Eq. 14) are fitted on it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from gpudvfs.data.datasets import MeasurementGrid
from gpudvfs.errors import InputError


def is_target_readout(name: str) -> bool:
    """Whether a counter is the target in disguise: an energy counter.

    A cumulative energy is power x time, so a time model fed its change would read the answer
    instead of predicting it.
    """
    return "energy" in name.lower()


@dataclass(frozen=True, eq=False)
class GridTable:
    """A measurement grid as dense arrays.

    ``levels`` are the measured MHz per domain (``core``, and ``mem`` where it moves),
    ascending; ``time_ms`` is (apps, levels of domain 0[, levels of domain 1]), ``counters``
    ``time_ms.shape + (counters,)``, energy counters left out (:func:`is_target_readout`).
    """

    path: str
    apps: tuple[str, ...]
    domains: tuple[str, ...]
    levels: tuple[np.ndarray, ...]
    time_ms: np.ndarray
    counters: np.ndarray
    counter_names: tuple[str, ...]

    @classmethod
    def from_grid(cls, grid: MeasurementGrid) -> GridTable:
        """Dense arrays of a grid; every (workload, configuration) must be measured once.

        Workloads are the grid's key columns joined (the application for the public files). Raises
        `InputError` if every row is at one configuration, the grid has no counters, or a cell is
        not measured exactly once.
        """
        work = grid.workload
        apps, app_idx = np.unique(work, return_inverse=True)
        clocks = [("core", grid.core_mhz)] + ([] if grid.mem_mhz is None else [("mem", grid.mem_mhz)])
        levels, idx = [], [app_idx]
        for _, f in clocks:
            lv, i = np.unique(f, return_inverse=True)
            levels.append(lv.astype(np.float64))
            idx.append(i)
        if all(len(lv) == 1 for lv in levels):
            raise InputError(f"{grid.path}: every row is at one clock configuration; the online model learns how "
                             "time changes between configurations and needs at least 2")
        names = tuple(k for k in grid.metrics if not is_target_readout(k))
        if not names:
            raise InputError(f"{grid.path}: the file has no counters; the online model needs them")
        shape = (len(apps),) + tuple(len(lv) for lv in levels)
        seen = np.zeros(shape, dtype=np.int64)
        np.add.at(seen, tuple(idx), 1)
        if np.any(seen != 1):
            bad = np.argwhere(seen != 1)[:5]
            where = "; ".join(
                f"{apps[b[0]]} at {'/'.join(f'{levels[d][b[d + 1]]:g}' for d in range(len(levels)))} MHz "
                f"measured {seen[tuple(b)]} times" for b in bad)
            raise InputError(f"{grid.path}: the replay needs every workload measured once at every clock "
                             f"configuration; {int(np.sum(seen != 1))} cells are not, e.g. {where}")
        time_ms = np.empty(shape)
        time_ms[tuple(idx)] = grid.time_ms
        counters = np.empty(shape + (len(names),))
        counters[tuple(idx)] = np.column_stack([grid.metrics[k] for k in names])
        return cls(grid.path, tuple(str(a) for a in apps), tuple(d for d, _ in clocks), tuple(levels),
                   time_ms, counters, names)

    def rows(self, apps: Sequence[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every configuration of the workloads ``apps`` as flat rows.

        Clocks (m, domains) MHz, time (m,) ms, counters (m, counters).
        """
        sub_t = self.time_ms[list(apps)]
        mesh = np.meshgrid(*self.levels, indexing="ij")
        f = np.stack([np.broadcast_to(g, sub_t.shape).reshape(-1) for g in mesh], axis=1)
        return f, sub_t.reshape(-1), self.counters[list(apps)].reshape(-1, len(self.counter_names))

    def shared_time_curves(self) -> list[list[str]]:
        """Groups of more than one workload whose measured time is identical at every configuration.

        The V100 file has one group of ten: an application switch there changes the counters
        but not the time.
        """
        groups: dict[bytes, list[str]] = {}
        for a, t in zip(self.apps, self.time_ms.reshape(len(self.apps), -1)):
            groups.setdefault(t.tobytes(), []).append(a)
        return [g for g in groups.values() if len(g) > 1]
