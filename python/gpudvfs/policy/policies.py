"""Choosing frequencies from predicted time and power.

Given, per workload, time and power at every configuration (predicted by the time and
power models, or measured), energy is ``watts * time`` and the policies choose:

| policy      | chooses, per workload                                                        |
|-------------|------------------------------------------------------------------------------|
| `energy`    | minimum energy                                                               |
| `edp`       | minimum energy x delay                                                       |
| `ed2p`      | minimum energy x delay^2                                                     |
| `deadline`  | minimum energy among configurations within ``(1 + slowdown)`` x the time at the default configuration |
| `power-cap` | minimum time among configurations whose power is at most ``power_cap_w``     |
| `cost`      | minimum ``eta * energy + (1 - eta) * max_power_w * time`` (Zeus's cost)      |

A constrained policy with no feasible configuration for a workload falls back to the
configuration that violates its constraint least (the fastest one for `deadline`, the
lowest-power one for `power-cap`) and marks that workload infeasible.

Uncertainty (``error``: the relative error of each predicted energy, e.g. from
cross-validated residuals): ``rule="worst"`` minimizes the upper end of each energy's error
band instead of the prediction; ``rule="expected"`` minimizes its expectation, the error read
as one standard deviation of a log-normal (the prediction times exp(log(1 + error)^2 / 2));
``near_ties=True`` takes, among the configurations whose
objective lies within the chosen one's error band, the one nearest the default
configuration (distance in log-clock space), so a flat surface cannot move a workload far
from the default on a difference smaller than the error.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from gpudvfs.errors import InputError
from gpudvfs.limits import clock_array

POLICIES = ("energy", "edp", "ed2p", "deadline", "power-cap", "cost")
RULES = ("point", "worst", "expected")


@dataclass(frozen=True)
class Selection:
    """Chosen configuration per workload, with its time, power and energy there.

    ``index`` is the chosen configuration's index; ``feasible`` (bool) whether any
    configuration met the policy's constraint.
    """

    policy: str
    index: np.ndarray
    core_mhz: np.ndarray
    mem_mhz: np.ndarray
    time_ms: np.ndarray
    watts: np.ndarray
    joules: np.ndarray
    feasible: np.ndarray


def _grid(name: str, x: ArrayLike) -> np.ndarray:
    a = np.asarray(x, dtype=np.float64)
    if a.ndim == 1:
        a = a[None, :]
    if a.ndim != 2 or a.shape[1] == 0:
        raise InputError(f"{name} must be [n_workloads x n_configs], got shape {a.shape}")
    if not np.all(np.isfinite(a)) or np.any(a <= 0):
        raise InputError(f"{name} must be positive and finite")
    return a


def select(time_ms: ArrayLike, watts: ArrayLike, configs: ArrayLike, policy: str = "energy", *,
           default_index: int | None = None, slowdown: float = 0.1, power_cap_w: float | None = None,
           eta: float = 0.5, max_power_w: float | None = None, error: ArrayLike | None = None, rule: str = "point",
           near_ties: bool = False) -> Selection:
    """Choose a configuration per workload (module notes).

    Parameters
    ----------
    time_ms, watts : array_like
        [n_workloads x n_configs] (a 1-D row is one workload).
    configs : array_like
        [n_configs x 2] (core, memory MHz).
    policy : str
        One of :data:`POLICIES`.
    default_index : int, optional
        `deadline`'s slowdown is relative to it, and ``near_ties`` moves toward it.
    slowdown : float
        `deadline`: at most this slower than at the default configuration.
    power_cap_w : float, optional
        `power-cap`: the cap (W).
    eta : float
        `cost`: the weight of energy against time.
    max_power_w : float, optional
        `cost`: the price of time, Zeus's MAXPOWER (the highest power limit; None: each
        workload's highest power over the configurations).
    error : array_like, optional
        The relative error of each predicted energy (broadcast to the same shape), used by
        ``rule="worst"`` or ``"expected"`` and ``near_ties``.
    rule : str
        One of :data:`RULES`.
    near_ties : bool
        Take the configuration nearest the default within the chosen one's error band.

    Raises
    ------
    InputError
        For an unknown policy or rule, arrays of the wrong shape or not positive and finite, or
        an option the policy or rule needs missing or out of range.
    """
    if policy not in POLICIES:
        raise InputError(f"unknown policy {policy!r}; expected one of {POLICIES}")
    if rule not in RULES:
        raise InputError(f"unknown rule {rule!r}; expected one of {RULES}")
    t, p = _grid("time_ms", time_ms), _grid("watts", watts)
    cfg = clock_array(configs, "configs")
    if t.shape != p.shape:
        raise InputError(f"time_ms {t.shape} and watts {p.shape} must have the same shape")
    if cfg.shape != (t.shape[1], 2):
        raise InputError(f"configs must be [{t.shape[1]} x 2] (core, memory MHz), got {cfg.shape}")
    err = _error(error, t.shape, needed=rule != "point" or near_ties)
    if policy == "deadline" or near_ties:
        default = _default(default_index, t.shape[1], "deadline policy" if policy == "deadline" else "near_ties rule")
    e = p * t / 1e3
    # The quantity each policy minimizes, and where it may choose.
    ok = np.ones(t.shape, dtype=bool)
    if policy in ("energy", "deadline"):
        objective = e
    elif policy == "edp":
        objective = e * t
    elif policy == "ed2p":
        objective = e * t * t
    elif policy == "cost":
        if not (0 <= eta <= 1 and (max_power_w is None or 0 < max_power_w < np.inf)):
            raise InputError(f"the cost policy needs eta in [0, 1] and max_power_w > 0, got {eta} and {max_power_w}")
        price = p.max(axis=1, keepdims=True) if max_power_w is None else max_power_w
        objective = eta * e + (1 - eta) * price * t / 1e3
    else:
        objective = t
    if policy == "deadline":
        if not slowdown >= 0:
            raise InputError(f"slowdown must be >= 0, got {slowdown}")
        ok = t <= t[:, [default]] * (1.0 + slowdown)
    elif policy == "power-cap":
        if power_cap_w is None or not power_cap_w > 0:
            raise InputError(f"the power-cap policy needs power_cap_w > 0, got {power_cap_w}")
        ok = p <= power_cap_w
    if rule == "worst":
        objective = objective * (1.0 + err)
    elif rule == "expected":
        objective = objective * np.exp(np.log1p(err) ** 2 / 2)
    masked = np.where(ok, objective, np.inf)
    idx = np.argmin(masked, axis=1)
    if near_ties:
        idx = _nearest_within_band(masked, idx, err, cfg, default)
    feasible = np.any(ok, axis=1)
    # Nothing feasible: violate the constraint least (fastest for deadline, least power for the cap).
    fallback = np.argmin(t if policy == "deadline" else p, axis=1)
    idx = np.where(feasible, idx, fallback)
    rows = np.arange(t.shape[0])
    return Selection(policy, idx, cfg[idx, 0], cfg[idx, 1], t[rows, idx], p[rows, idx], e[rows, idx], feasible)


def _default(default_index: int | None, n: int, what: str) -> int:
    if default_index is None or not 0 <= default_index < n:
        raise InputError(f"the {what} needs default_index in [0, {n}), got {default_index}")
    return default_index


def _error(error: ArrayLike | None, shape: tuple[int, int], needed: bool) -> np.ndarray:
    if error is None:
        if needed:
            raise InputError("rule='worst', rule='expected' and near_ties need error= (relative error of each "
                             "predicted energy)")
        return np.zeros(shape)
    try:
        err = np.broadcast_to(np.asarray(error, dtype=np.float64), shape)
    except ValueError:
        raise InputError(f"error must broadcast to {shape}, got shape {np.shape(error)}") from None
    if not np.all(np.isfinite(err)) or np.any(err < 0):
        raise InputError("error must be finite and >= 0")
    return err


def _nearest_within_band(objective: np.ndarray, idx: np.ndarray, err: np.ndarray, cfg: np.ndarray,
                         default_index: int) -> np.ndarray:
    """Per workload, among configurations within the chosen one's error band, the one nearest the default."""
    log = np.log(cfg)
    dist = np.linalg.norm(log - log[default_index], axis=1)
    rows = np.arange(len(idx))
    band = objective <= (objective[rows, idx] * (1.0 + err[rows, idx]))[:, None]
    return np.argmin(np.where(band, dist[None, :], np.inf), axis=1)


def highest_index(configs: np.ndarray) -> int:
    """Index of the highest pair of [K x 2] (core, memory MHz): highest core clock, then memory.

    A grid that lost its top corner to a failed run still has one.
    """
    return int(np.lexsort((configs[:, 1], configs[:, 0]))[-1])


def pareto_front(time_ms: ArrayLike, joules: ArrayLike) -> np.ndarray:
    """Indices of the configurations no other beats in both time and energy [K], by time.

    Raises InputError for vectors not of one length, empty, or not finite.
    """
    t = np.asarray(time_ms, dtype=np.float64)
    e = np.asarray(joules, dtype=np.float64)
    if t.ndim != 1 or t.shape != e.shape or len(t) == 0:
        raise InputError(f"time_ms and joules must be equal-length non-empty vectors, got {t.shape}, {e.shape}")
    if not (np.all(np.isfinite(t)) and np.all(np.isfinite(e))):
        raise InputError("time_ms and joules must be finite")
    order = np.lexsort((e, t))  # by time, ties by energy
    front, best = [], np.inf
    for i in order:
        if e[i] < best:
            front.append(i)
            best = e[i]
    return np.array(front, dtype=np.int64)
