"""The power-limit knob before any limit is measured.

Under a limit L below the power P a phase draws, the driver lowers the clock until the board
draws L, so the phase draws L and its time grows as the clock falls, as the cube root of the
power (dynamic power goes as the clock times the voltage squared, the voltage about with the
clock); at or above P nothing changes. A cold start, not fitted: the governor corrects it by
measuring.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np
from numpy.typing import ArrayLike


@runtime_checkable
class PowerLimitKnob(Protocol):
    """A GPU whose board power limit can be read and set (`NvmlDevice`)."""

    name: str

    def power_limits(self) -> dict[str, float | None]:
        """The board's power limits.

        Returns
        -------
        dict of str to float or None
            ``enforced``, ``default``, ``min`` and ``max``, in W (None: not reported).
        """

    def set_power_limit(self, watts: float) -> None:
        """Set the board's power limit.

        Parameters
        ----------
        watts : float
            The limit (W).
        """


def limit_curves(limits: ArrayLike, watts: float) -> tuple[np.ndarray, np.ndarray]:
    """A phase's time and power under each power limit, relative to its own unlimited.

    Parameters
    ----------
    limits : array_like
        Power limits (W).
    watts : float
        The phase's power unlimited.

    Returns
    -------
    tuple of (numpy.ndarray, numpy.ndarray)
        Log time and log power at each limit, relative to the phase's own.
    """
    log_p = np.minimum(np.log(np.asarray(limits, dtype=np.float64) / watts), 0.0)
    return -log_p / 3, log_p
