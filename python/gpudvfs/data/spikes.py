"""Spikes of a measured grid: single cells a sensor glitch made, not the workload.

A workload's time and power move smoothly with its clocks. A cell whose value departs from
both its neighbours along one clock (same workload, the other clock the same) by more than a
factor ``1 + threshold``, from their geometric mean, while those two neighbours agree with
each other within the same factor, and which departs more than either neighbour does from
its own, is a spike: a step in the physics would move a neighbour too. Each cell is judged
along the core clock and, on a grid of three or more memory clocks, along the memory clock
(fewer clocks, farther apart: the coarser judge, but the only one of a series' first and
last core clock). The first and last clock of a series have one neighbour and are not judged
along it; where neighbours two steps apart differ by more than the factor, no cell is judged.

Why it matters: a grid is the ground truth a choice is scored against. In
`nsfcac/v100_spec_dev.csv`, bfs draws 57 W at 1200 MHz between 75 and 76 W at its
neighbours (its energy column disagrees with power x time there too): that cell is the
grid's minimum-energy pair for bfs, 8% below any other, a target no governor or model can
reach but by chance. ``drop_spikes`` leaves such cells out; a command's ``--drop-spikes``
applies it and warns what went. `gpudvfs data spikes FILE` lists them.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, replace

import numpy as np

from gpudvfs.data.datasets import MeasurementGrid
from gpudvfs.errors import GpudvfsWarning, InputError, Problem
from gpudvfs.limits import is_finite_number


@dataclass(frozen=True)
class Spike:
    """One spike: a cell of a grid and the neighbours it departs from.

    ``mem_mhz`` is None where the grid has no memory clock column; ``quantity`` is ``time`` (ms)
    or ``power`` (W), the unit of ``value`` and ``neighbours``; ``neighbour_mhz`` are the
    neighbours' clocks along ``axis`` (``core`` or ``memory``); ``deviation`` is the value over
    the neighbours' geometric mean, minus 1.
    """

    row: int
    workload: str
    core_mhz: float
    mem_mhz: float | None
    quantity: str
    value: float
    neighbours: tuple[float, float]
    neighbour_mhz: tuple[float, float]
    deviation: float
    axis: str = "core"

    def __str__(self) -> str:
        """The spike in a sentence: the cell, how far above or below its neighbours, and theirs."""
        unit = "ms" if self.quantity == "time" else "W"
        at = f"{self.core_mhz:g}" + ("" if self.mem_mhz is None else f"/{self.mem_mhz:g}")
        lo, hi = self.neighbours
        return (f"{self.workload!r} at {at} MHz: {self.quantity} {self.value:.4g} {unit} is "
                f"{100 * abs(self.deviation):.0f}% {'above' if self.deviation > 0 else 'below'} its neighbours' "
                f"{lo:.4g} and {hi:.4g} {unit} (at {self.neighbour_mhz[0]:g} and {self.neighbour_mhz[1]:g} MHz "
                f"{self.axis})")


def _check_threshold(threshold: float) -> float:
    if not (is_finite_number(threshold) and threshold > 0):
        raise InputError(f"the spike threshold must be a number > 0 (0.1: a factor 1.1 from the neighbours), "
                         f"got {threshold!r}")
    return float(threshold)


def _series(work: np.ndarray, along: np.ndarray,
            other: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Rows (before, cell, after), a cell's neighbours beside it, and whether the three are one series.

    One series: same workload, same ``other`` clock, in rising ``along`` clock.
    """
    order = np.lexsort((along, other, work))
    prev, mid, nxt = order[:-2], order[1:-1], order[2:]
    same = ((work[prev] == work[mid]) & (work[mid] == work[nxt]) & (other[prev] == other[mid])
            & (other[mid] == other[nxt]) & (along[prev] < along[mid]) & (along[mid] < along[nxt]))
    return prev, mid, nxt, same


def find_spikes(grid: MeasurementGrid, threshold: float = 0.1) -> list[Spike]:
    """Every spike of a grid's time and (where it has one) power column, by row and quantity.

    A spike departs from both neighbours by more than a factor ``1 + threshold``. A cell that is
    one along both clocks is listed once, along the core clock. Raises `InputError` if
    ``threshold`` is not a number > 0.
    """
    limit = np.log1p(_check_threshold(threshold))
    work, core, mem = np.unique(grid.workload, return_inverse=True)[1].ravel(), grid.core_mhz, grid.mem_mhz
    axes = [("core", core, np.zeros(len(grid)) if mem is None else mem)]
    if mem is not None and len(np.unique(mem)) > 2:
        axes.append(("memory", mem, core))
    series = [(axis, along, *_series(work, along, other)) for axis, along, other in axes]
    found: dict[tuple[int, str], Spike] = {}
    for quantity, values in (("time", grid.time_ms), ("power", grid.watts)):
        if values is None:
            continue
        with np.errstate(divide="ignore", invalid="ignore"):
            x = np.log(np.where(values > 0, values, np.nan))
        for axis, along, prev, mid, nxt, same in series:
            # Departure from the neighbours' geometric mean; 0 where a cell has not two in its series.
            dev = np.where(same, x[mid] - (x[prev] + x[nxt]) / 2, 0.0)
            d = np.abs(dev)
            # The largest departure of its neighbourhood: a cell beside a spike departs too (by half
            # as much, or more where a coarse grid's slope adds to it), and is not the glitch.
            largest = (d > np.concatenate([[0.0], d[:-1]])) & (d > np.concatenate([d[1:], [0.0]]))
            hit = same & largest & (d > limit) & (np.abs(x[nxt] - x[prev]) < limit)
            for i in np.flatnonzero(hit):
                r, a, b = int(mid[i]), int(prev[i]), int(nxt[i])
                found.setdefault((r, quantity), Spike(
                    r, str(grid.workload[r]), float(core[r]), None if mem is None else float(mem[r]), quantity,
                    float(values[r]), (float(values[a]), float(values[b])), (float(along[a]), float(along[b])),
                    float(np.expm1(dev[i])), axis))
    return [found[k] for k in sorted(found)]


def drop_spikes(grid: MeasurementGrid, threshold: float = 0.1) -> MeasurementGrid:
    """The grid without its spikes' rows (:func:`find_spikes`), each recorded in ``skipped``.

    The grid itself where it has no spike, else a copy, with a warning that names them. A grid's
    table then leaves their clock pairs out for every workload (with its own warning), since
    tables compare workloads pair by pair.
    """
    spikes = find_spikes(grid, threshold)
    if not spikes:
        return grid
    gone = sorted({s.row for s in spikes})
    keep = np.ones(len(grid), dtype=bool)
    keep[gone] = False
    problems = tuple(Problem(grid.path, None, None, None, f"left out as a spike: {s}") for s in spikes)
    warnings.warn(GpudvfsWarning(
        f"{grid.path}: {len(gone)} row(s) left out as spikes (a factor {1 + threshold:g} from both neighbours, "
        f"which agree): {spikes[0]}{'; ...' if len(spikes) > 1 else ''} (gpudvfs data spikes lists them)"),
        stacklevel=2)
    return replace(grid, columns={k: v[keep] for k, v in grid.columns.items()}, skipped=grid.skipped + problems)
