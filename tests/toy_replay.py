"""A toy replay table shared by the replay tests: three jobs at four power limits."""

from __future__ import annotations

import numpy as np

from gpudvfs.evaluation.replay_table import ReplayTable


def power_limit_table() -> ReplayTable:
    """Three jobs at four power limits, each predicted from another's curves (a prior to correct)."""
    limits = np.array([[100.0, 1.0], [150.0, 1.0], [200.0, 1.0], [250.0, 1.0]])
    t = np.array([[1.6, 1.25, 1.08, 1.0], [1.3, 1.1, 1.02, 1.0], [2.0, 1.4, 1.1, 1.0]]) * 100
    p = np.array([[100, 145, 180, 190], [100, 150, 170, 175], [100, 148, 195, 240]], dtype=float)
    return ReplayTable(["a", "b", "c"], limits, 3, t, p, t[[1, 2, 0]], p[[1, 2, 0]], "power-limit")
