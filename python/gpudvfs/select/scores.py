"""How the selection reports sum up a regret over workloads."""

from __future__ import annotations

import numpy as np


def mean_max(r: np.ndarray) -> dict:
    """A regret's mean and max, as the reports give them."""
    return {"mean": float(r.mean()), "max": float(r.max())}
