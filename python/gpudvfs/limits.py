"""Physical bounds, and the checks that apply them where numbers enter gpudvfs.

A value outside these bounds is not a measurement of a GPU but a typo, a unit mistake or a
damaged file, so it is rejected rather than fitted: one 1e300 W row would otherwise steer a
whole power model.
"""

from __future__ import annotations

import math
from typing import TypeGuard

import numpy as np
from numpy.typing import ArrayLike

from gpudvfs.errors import InputError

#: No GPU board draws more (today's largest are about 1.2 kW).
MAX_WATTS = 10_000.0
#: No GPU clock reaches this: core clocks stay below 4 GHz; memory clocks as NVML reports
#: them (GDDR data rates included) below 40 GHz.
MAX_MHZ = 100_000.0
#: No count, byte total or time a GPU run measures reaches this in any unit a file uses (a day
#: at 8 TB/s moves 7e17 bytes); it keeps sums and products of measurements finite.
MAX_COUNT = 1e18


def is_number(v: object) -> TypeGuard[int | float | np.integer | np.floating]:
    """Whether a value is a real number as JSON, a CLI or numpy gives one.

    Numpy scalars count; a bool, which Python counts as an int, does not.
    """
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)


def is_finite_number(v: object, least: float = -math.inf) -> bool:
    """Whether a value is :func:`is_number`, finite and at least ``least``; an int beyond any float is not."""
    if not is_number(v):
        return False
    try:
        x = float(v)
    except OverflowError:
        return False
    return math.isfinite(x) and x >= least


def is_integer(v: object) -> TypeGuard[int | np.integer]:
    """Whether a value is an int or a numpy integer; a bool is not."""
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def is_count(v: object, least: int = 0) -> bool:
    """Whether a value is :func:`is_integer` and at least ``least``."""
    return is_integer(v) and bool(v >= least)


def clock_array(value: ArrayLike, name: str) -> np.ndarray:
    """Clocks in MHz as float64 of ``value``'s shape, checked; ``name`` says what they are in the error.

    Raises InputError if a clock is not a number (strings, booleans, objects), not finite, <= 0 or above
    :data:`MAX_MHZ`.
    """
    return _bounded_array(value, name, "clocks", "MHz", MAX_MHZ)


def watts_array(value: ArrayLike, name: str) -> np.ndarray:
    """Power in W as float64 of ``value``'s shape, checked as `clock_array` checks MHz (at most :data:`MAX_WATTS`)."""
    return _bounded_array(value, name, "power", "W", MAX_WATTS)


def _bounded_array(value: ArrayLike, name: str, what: str, unit: str, most: float) -> np.ndarray:
    a = np.asarray(value)
    if a.dtype.kind not in "iuf":
        raise InputError(f"{name} must be numbers ({unit}), got {a.dtype.name} values such as {a.ravel()[:1].tolist()}")
    a = a.astype(np.float64, copy=False)
    bad = ~np.isfinite(a) | (a <= 0) | (a > most)
    if bad.any():
        raise InputError(f"{name} must be finite {what} in (0, {most:g}] {unit}, got {float(a[bad].ravel()[0])!r}")
    return a


def check_watts(watts: np.ndarray, where: str) -> None:
    """Check measured power (W), one per row: finite, > 0 (a GPU at work never draws 0 W) and at most :data:`MAX_WATTS`.

    Raises InputError if a row's power is out of bounds, naming ``where`` the rows came from.
    """
    bad = ~np.isfinite(watts) | (watts <= 0) | (watts > MAX_WATTS)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InputError(f"{where}: row {i + 1} has {float(watts[i])!r} W; a GPU's power is in (0, {MAX_WATTS:g}] W")
