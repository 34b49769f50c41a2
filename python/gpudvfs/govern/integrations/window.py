"""An observation window: steps of one phase, at one set pair where clocks are set.

They are summed until they are long enough for the governor to observe (`GovernedTraining`'s
``observe_s``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass
class Window:
    """Steps of one phase not yet observed.

    ``set_index``: the pair set while they ran (None: dry run, the clocks are the driver's);
    ``time_ms``, ``joules``, ``work``: their sums; ``log_clocks``: time-weighted sums of their log
    core and log memory MHz.
    """

    set_index: int | None
    time_ms: float = 0.0
    joules: float = 0.0
    work: float = 0.0
    steps: int = 0
    log_clocks: tuple[float, float] = (0.0, 0.0)

    def add(self, time_ms: float, joules: float, clocks: tuple[float, float], work: float) -> None:
        """Add a finalized step.

        ``clocks``: the (core, memory) MHz it ran at.
        """
        self.time_ms += time_ms
        self.joules += joules
        self.work += work
        self.steps += 1
        self.log_clocks = (self.log_clocks[0] + time_ms * math.log(clocks[0]),
                           self.log_clocks[1] + time_ms * math.log(clocks[1]))

    @property
    def clocks(self) -> tuple[float, float]:
        """The clocks the window ran at: the time-weighted geometric mean of its steps'."""
        core, mem = self.log_clocks
        return math.exp(core / self.time_ms), math.exp(mem / self.time_ms)
