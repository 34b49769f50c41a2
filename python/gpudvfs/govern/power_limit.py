"""The power-limit knob: a GPU whose board power limit can be read and set."""

from __future__ import annotations

from typing import Protocol, runtime_checkable


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

