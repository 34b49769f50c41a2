"""The power-limit knob before any limit is measured: under a limit L below the power P a
phase draws, the driver lowers the clock until the board draws L, so the phase draws L and
its time grows as the clock falls, as the cube root of the power (dynamic power goes as the
clock times the voltage squared, the voltage about with the clock); at or above P nothing
changes. A cold start, not fitted: the governor corrects it by measuring.
"""

from __future__ import annotations

import numpy as np


def limit_curves(limits: np.ndarray, watts: float) -> tuple[np.ndarray, np.ndarray]:
    """(log time, log power) at each of ``limits`` (W) of a phase drawing ``watts`` unlimited,
    relative to that phase's own."""
    log_p = np.minimum(np.log(np.asarray(limits, dtype=np.float64) / watts), 0.0)
    return -log_p / 3, log_p
