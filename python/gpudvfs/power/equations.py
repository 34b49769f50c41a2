"""The power model's equations (Guerreiro et al., Eq. 6-7) evaluated over a grid.

For each V-F domain d with normalized voltage V_d and frequency f_d:
``P_d = s_d V_d + V_d^2 f_d (i_d + sum_{c in d} w_c U_c)``, and ``P = sum_d P_d``.
:func:`power_grid` runs in the Rust core (GIL released); :func:`power_grid_numpy` is the
plain numpy evaluation it is tested and benchmarked against.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike

from gpudvfs import _core
from gpudvfs.errors import InputError


def _matrix(name: str, x: ArrayLike, cols: int | None = None) -> np.ndarray:
    a = np.ascontiguousarray(x, dtype=np.float64)
    if a.ndim != 2:
        raise InputError(f"{name} must be a 2-D array, got shape {a.shape}")
    if cols is not None and a.shape[1] != cols:
        raise InputError(f"{name} must have {cols} columns, got shape {a.shape}")
    if not np.all(np.isfinite(a)):
        raise InputError(f"{name} contains NaN or infinite values")
    return a


def _vector(name: str, x: ArrayLike, n: int) -> np.ndarray:
    a = np.ascontiguousarray(x, dtype=np.float64)
    if a.shape != (n,):
        raise InputError(f"{name} must have shape ({n},), got {a.shape}")
    if not np.all(np.isfinite(a)):
        raise InputError(f"{name} contains NaN or infinite values")
    return a


def _check(utilization: ArrayLike, domain_sizes: Sequence[int], static_coef: ArrayLike, idle_coef: ArrayLike,
           weights: ArrayLike, freqs: ArrayLike, volts: ArrayLike
           ) -> tuple[np.ndarray, list[int], np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    sizes = [int(s) for s in domain_sizes]
    if not sizes or any(s < 0 for s in sizes):
        raise InputError(f"domain_sizes must be non-negative counts, got {list(domain_sizes)}")
    nd, nc = len(sizes), sum(sizes)
    u = _matrix("utilization", utilization, nc)
    f = _matrix("freqs", freqs, nd)
    v = _matrix("volts", volts, nd)
    if f.shape != v.shape:
        raise InputError(f"freqs {f.shape} and volts {v.shape} must have the same shape")
    return (u, sizes, _vector("static_coef", static_coef, nd), _vector("idle_coef", idle_coef, nd),
            _vector("weights", weights, nc), f, v)


def power_grid(utilization: ArrayLike, domain_sizes: Sequence[int], static_coef: ArrayLike, idle_coef: ArrayLike,
               weights: ArrayLike, freqs: ArrayLike, volts: ArrayLike) -> np.ndarray:
    """Watts [n_workloads x n_configs] of each workload at each configuration, in the Rust core (GIL released).

    ``utilization`` is [n_workloads x n_components], domain 0's components first
    (``domain_sizes`` counts them per domain); ``static_coef`` and ``idle_coef`` are per domain,
    s_d and i_d, ``weights`` per component, w_c (W at the reference clocks); ``freqs`` and
    ``volts`` [n_configs x n_domains], normalized to the reference. Raises `InputError` if a
    shape does not match the domain sizes, or a value is not finite.
    """
    u, sizes, s, i, w, f, v = _check(utilization, domain_sizes, static_coef, idle_coef, weights, freqs, volts)
    return _core.power_grid(u, sizes, s, i, w, f, v)


def power_grid_numpy(utilization: ArrayLike, domain_sizes: Sequence[int], static_coef: ArrayLike,
                     idle_coef: ArrayLike, weights: ArrayLike, freqs: ArrayLike, volts: ArrayLike) -> np.ndarray:
    """:func:`power_grid` written plainly in numpy, the reference it is tested and benchmarked against."""
    u, sizes, s, i, w, f, v = _check(utilization, domain_sizes, static_coef, idle_coef, weights, freqs, volts)
    out = np.zeros((u.shape[0], f.shape[0]))
    start = 0
    for d, size in enumerate(sizes):
        activity = u[:, start:start + size] @ w[start:start + size]
        start += size
        out += s[d] * v[:, d] + (v[:, d] ** 2 * f[:, d]) * (i[d] + activity[:, None])
    return out
