"""The synthetic phase the governor benchmarks share: a 200-pair grid (20 core x 10 memory clocks)."""

from __future__ import annotations

import numpy as np


def synthetic_phase() -> tuple[np.ndarray, int, np.ndarray, np.ndarray]:
    """[200 x 2] (core, memory) MHz, the index of the highest pair (the default), and [200] time (ms) and power (W).

    Time is 60% core- and 40% memory-bound; power grows as the core clock to the 2.5th power.
    """
    configs = np.array([[c, m] for m in np.linspace(800, 3500, 10) for c in np.linspace(600, 2000, 20)])
    top = len(configs) - 1
    f = configs / configs[top]
    return configs, top, 5.0 * (0.6 / f[:, 0] + 0.4 / f[:, 1]), 60 + 180 * f[:, 0] ** 2.5 + 40 * f[:, 1]
