"""Utilizations outside [0, 1]: refused, or clipped with a warning.

Counter noise puts some a hair outside (1.0039 on a Volta L2), counters of another vendor or a
wrong peak rate far outside (1.42 on AMD write counters). They are refused, naming the worst,
unless the user asks for clipping; clipping warns with how many values moved per component
and the farthest, so nothing changes silently.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike

from gpudvfs.data.source import UTIL_TOLERANCE
from gpudvfs.errors import GpudvfsWarning, InputError


def bound_utilization(u: ArrayLike, components: Sequence[str], where: str, *, clip: bool = False,
                      tolerance: float = UTIL_TOLERANCE, hint: str = "") -> np.ndarray:
    """[..., components] utilizations as float64, unchanged within ``tolerance`` of [0, 1]; further, refused or clipped.

    With ``clip`` values outside [0, 1] are clipped with a `GpudvfsWarning`; without, they raise
    `InputError` naming ``where`` they came from and ``hint``, a likely cause.
    """
    u = np.asarray(u, dtype=np.float64)
    outside = (u < -tolerance) | (u > 1 + tolerance)
    if not outside.any():
        return u
    flat = u.reshape(-1, len(components))
    per = {}
    for j, comp in enumerate(components):
        col = flat[:, j]
        bad = (col < 0) | (col > 1)
        if bad.any():
            far = col[bad][np.argmax(np.abs(col[bad] - 0.5))]
            per[comp] = (int(bad.sum()), float(far))
    listing = ", ".join(f"{c} {n} (farthest {v:.4g})" for c, (n, v) in per.items())
    if not clip:
        raise InputError(f"{where}: utilizations outside [0, 1] (tolerance {tolerance:g}): {listing}; "
                         + (f"{hint}; " if hint else "")
                         + "where counter noise or a peak rate explains it, --clip-utilization clips them")
    warnings.warn(GpudvfsWarning(f"{where}: clipped {sum(n for n, _ in per.values())} of {u.size} utilizations "
                                 f"into [0, 1]: {listing}"), stacklevel=2)
    return np.clip(u, 0.0, 1.0)
