"""The replay's table of a grid read without its counters.

Time and power measured at each setting of one knob (clock pairs, a core clock, or a power
limit), as Zeus's and Perseus's traces and any time-and-power grid give them. With no counters
there is no model of a workload; what a governor knows of a new one before it runs is how the
others moved: its prediction is the mean of the other workloads' log curves (each less its
value at the default setting), placed on its own time and power at the default setting (the
one measurement a governor has of a new phase). The other workloads are the grid's others
(leave-one-out), or a training grid's.
"""

from __future__ import annotations

import warnings

import numpy as np

from gpudvfs.data.datasets import MeasurementGrid
from gpudvfs.errors import GpudvfsWarning, InputError
from gpudvfs.evaluation.replay_table import ReplayTable
from gpudvfs.govern.knob import FIXED
from gpudvfs.policy.policies import highest_index


def _measured(grid: MeasurementGrid) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray, str]:
    if grid.watts is None:
        raise InputError(f"{grid.path}: the replay needs power (or energy) at every setting; this grid has time "
                         "alone")
    names = _complete(grid)
    configs, (t, p) = grid.table(names, grid.time_ms, grid.watts, mem_mhz=FIXED)
    knob = "power-limit" if grid.knob == "power-limit" else "core-clock" if grid.mem_mhz is None else "clocks"
    return names, configs, t, p, knob


def _complete(grid: MeasurementGrid) -> list[str]:
    """The workloads to replay: those measured at every setting that most workloads were measured at.

    Most: at least half. One measured at fewer is left out with a warning, rather than every
    setting it lacks (`MeasurementGrid.table` then leaves out, with a warning, the settings some
    of the others lack).
    """
    mem = np.full(len(grid), FIXED) if grid.mem_mhz is None else grid.mem_mhz
    settings, of = np.unique(np.column_stack([grid.core_mhz, mem]), axis=0, return_inverse=True)
    work = grid.workload
    names = list(dict.fromkeys(work.tolist()))
    index = {n: i for i, n in enumerate(names)}
    has = np.zeros((len(names), len(settings)), dtype=bool)
    has[[index[w] for w in work.tolist()], of.ravel()] = True
    common = has.mean(axis=0) >= 0.5
    keep = np.asarray(has[:, common].all(axis=1))
    if not keep.all():
        gone = [n for n, k in zip(names, keep) if not k]
        warnings.warn(GpudvfsWarning(
            f"{grid.path}: {len(gone)} of {len(names)} workloads lack settings most others have and are left out "
            f"({', '.join(gone[:3])}{', ...' if len(gone) > 3 else ''})"), stacklevel=4)
    return [n for n, k in zip(names, keep) if k]


def _curves(t: np.ndarray, p: np.ndarray, d: int) -> tuple[np.ndarray, np.ndarray]:
    return np.log(t) - np.log(t[:, [d]]), np.log(p) - np.log(p[:, [d]])


def plain_table(grid: MeasurementGrid, train: MeasurementGrid | None = None) -> ReplayTable:
    """A grid's replay table without counters: each workload predicted from the others' curves.

    See the module notes.

    Parameters
    ----------
    grid : MeasurementGrid
        Time and power of its workloads at each setting.
    train : MeasurementGrid or None
        A grid of other workloads at the same settings, whose curves predict ``grid``'s
        (None: each workload of ``grid`` from the grid's others).

    Returns
    -------
    ReplayTable
        The workloads measured and predicted at every setting.

    Raises
    ------
    InputError
        Where a grid has no power, ``train`` has other settings or shares a workload, or
        ``grid`` has one workload and no ``train``.
    """
    names, configs, t, p, knob = _measured(grid)
    d = highest_index(configs)
    lt, lp = _curves(t, p, d)
    if train is not None:
        t_names, t_configs, tt, tp, _ = _measured(train)
        if t_configs.shape != configs.shape or not np.allclose(t_configs, configs):
            raise InputError(f"{train.path}: the training grid must have the settings of {grid.path} "
                             f"({len(configs)}), got {len(t_configs)} others")
        if shared := sorted(set(names) & set(t_names)):
            raise InputError(f"{train.path}: the scored workloads must not be in TRAIN, but {len(shared)} are "
                             f"({', '.join(shared[:3])}{', ...' if len(shared) > 3 else ''})")
        shape = [np.broadcast_to(c.mean(axis=0), lt.shape) for c in _curves(tt, tp, d)]
    elif len(names) < 2:
        raise InputError(f"{grid.path}: one workload, no other to predict it from: give a training grid")
    else:
        shape = [(c.sum(axis=0) - c) / (len(names) - 1) for c in (lt, lp)]
    if knob != "clocks":
        configs = configs.copy()
        configs[:, 1] = FIXED
    return ReplayTable(names, configs, d, t, p, t[:, [d]] * np.exp(shape[0]), p[:, [d]] * np.exp(shape[1]), knob)
