"""Phases of a running workload, detected from its counters.

A daemon that watches a GPU does not hear from the workload when it moves from one part to the
next (a data-loading stretch, an evaluation pass), but the GPU's activities (SM, pipes, DRAM)
move with it.

Each process set (the GPU's running processes) has its own phases, each known by the mean
activity vector of its intervals (its centroid). An interval belongs to the current phase
while its activities lie within ``threshold`` of the centroid (largest absolute difference
over the fields); ``confirm`` intervals in a row outside it end the phase: the workload
resumes the nearest earlier phase within the threshold (what that phase learnt is kept), or
starts a new one. A single outlying interval (a checkpoint write, a sampling glitch) does
not switch.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike

from gpudvfs.errors import InputError


@dataclass
class _Cluster:
    centroid: np.ndarray
    count: int = 1


@dataclass
class PhaseDetector:
    """The phases of a GPU's intervals.

    `update` per interval gives the phase key, (the process set, the phase's number within it);
    ``inside`` then says whether the interval lay within the threshold of that phase (one that
    straddles a change does not: a daemon does not learn from it).

    ``threshold``: activity distance (fractions in [0, 1]) that separates phases, in (0, 1);
    ``confirm``: intervals in a row beyond it that make a change, at least 1.
    """

    threshold: float = 0.1
    confirm: int = 2
    _clusters: dict[tuple, list[_Cluster]] = field(default_factory=dict, init=False)
    _current: tuple | None = field(default=None, init=False)
    _outside: int = field(default=0, init=False)
    inside: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        """Check the threshold and the confirmation count."""
        if not 0 < self.threshold < 1:
            raise InputError(f"threshold must be in (0, 1), got {self.threshold}")
        if self.confirm < 1:
            raise InputError(f"confirm must be at least 1, got {self.confirm}")

    def update(self, processes: Iterable[Hashable], activity: ArrayLike) -> tuple | None:
        """The phase of an interval.

        ``processes``: a description of the GPU's running processes (empty: none); ``activity``: the
        activity fields' fractions over the interval. None where nothing runs. `InputError` where
        ``activity`` is not a finite vector of the fields the process set's earlier intervals had.
        """
        a = np.asarray(activity, dtype=np.float64)
        if a.ndim != 1 or len(a) == 0 or not np.all(np.isfinite(a)):
            raise InputError(f"activity must be a finite vector, got {activity!r}")
        procs = tuple(processes)
        self.inside = False
        if not procs:
            self._current, self._outside = None, 0
            return None
        clusters = self._clusters.setdefault(procs, [])
        if clusters and a.shape != clusters[0].centroid.shape:
            raise InputError(f"activity has {len(a)} fields, earlier intervals {len(clusters[0].centroid)}")
        if self._current is not None and self._current[0] == procs:
            c = clusters[self._current[1]]
            if np.max(np.abs(a - c.centroid)) <= self.threshold:
                self._join(c, a)
                return self._current
            self._outside += 1
            if self._outside < self.confirm:
                return self._current
        # A new process set, or the current phase ended: the nearest known phase, or a new one.
        dist = [float(np.max(np.abs(a - c.centroid))) for c in clusters]
        if dist and min(dist) <= self.threshold:
            k = int(np.argmin(dist))
            self._join(clusters[k], a)
        else:
            clusters.append(_Cluster(a.copy()))
            k = len(clusters) - 1
            self._outside, self.inside = 0, True
        self._current = (procs, k)
        return self._current

    def _join(self, c: _Cluster, a: np.ndarray) -> None:
        c.count += 1
        c.centroid += (a - c.centroid) / c.count
        self._outside, self.inside = 0, True
