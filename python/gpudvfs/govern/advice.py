"""What a phase would run and save, from the governor's posterior: the advice of a dry run.

Nothing is explored in dry run, so the advice rests on the prior and on the windows observed at
the pairs the driver's own clocks ran (passive observation). The advised pair is the policy's best
under the posterior mean (`gpudvfs.policy.select` on the estimates), never a pair chosen to
explore; its saving is against the pair the phase ran at. The 90% interval is the log ratio of the
two pairs' estimates plus or minus 1.645 standard deviations, their variances summed as if
independent (they share the RLS correction, so the width is if anything overstated), mapped back
to a relative change.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

import numpy as np

from gpudvfs.govern.governor import Governor
from gpudvfs.policy.policies import select

#: The standard normal quantile of a two-sided 90% interval.
NORMAL_Z90 = 1.6448536269514722


def setting_fields(knob: str, row: tuple[float, float], prefix: str = "") -> dict:
    """A governor row as fields in its knob's unit: ``core_mhz`` and ``mem_mhz``, ``core_mhz`` alone, or ``limit_w``."""
    if knob == "power-limit":
        return {f"{prefix}limit_w": float(row[0])}
    if knob == "core-clock":
        return {f"{prefix}core_mhz": float(row[0])}
    return {f"{prefix}core_mhz": float(row[0]), f"{prefix}mem_mhz": float(row[1])}


def setting_text(knob: str, row: tuple[float, float]) -> str:
    """A governor row as printed: ``core/mem`` MHz, or the one value of a knob of one value."""
    return f"{row[0]:.0f}/{row[1]:.0f}" if knob == "clocks" else f"{row[0]:.0f}"


@dataclass(frozen=True)
class Advice:
    """One phase's advice.

    ``setting`` and ``ran_setting`` are governor rows of ``knob`` (`gpudvfs.govern.knob.knob_rows`).
    ``energy_saving`` is 1 - E(advised) / E(ran), ``time_cost`` T(advised) / T(ran) - 1, each
    with its 90% interval (low, high). ``windows``: intervals observed; ``pairs``: how many
    distinct settings they ran at.
    """

    knob: str
    index: int
    setting: tuple[float, float]
    ran_index: int
    ran_setting: tuple[float, float]
    energy_saving: float
    energy_interval: tuple[float, float]
    time_cost: float
    time_interval: tuple[float, float]
    windows: int
    pairs: int

    @property
    def rests_on(self) -> str:
        """``"prior only"`` or ``"N windows at K pairs"`` (settings, for a knob of one value)."""
        if self.windows == 0:
            return "prior only"
        what = "pair" if self.knob == "clocks" else "setting"
        return f"{self.windows} window{'s' * (self.windows != 1)} at {self.pairs} {what}{'s' * (self.pairs != 1)}"

    def as_dict(self) -> dict:
        """The advice as JSON-ready values, its settings in the knob's unit (`setting_fields`), with `rests_on`."""
        return ({"knob": self.knob, "index": self.index} | setting_fields(self.knob, self.setting)
                | {"ran_index": self.ran_index} | setting_fields(self.knob, self.ran_setting, "ran_")
                | {"energy_saving": self.energy_saving, "energy_interval": list(self.energy_interval),
                   "time_cost": self.time_cost, "time_interval": list(self.time_interval),
                   "windows": self.windows, "pairs": self.pairs, "rests_on": self.rests_on})


def best_index(governor: Governor, log_time: np.ndarray, log_watts: np.ndarray) -> int:
    """The pair the governor's policy chooses on estimates of log time and log watts ([K] each)."""
    g = governor
    return int(select(np.exp(log_time), np.exp(log_watts), g.configs, g.policy, default_index=g.default_index,
                      slowdown=g.slowdown, power_cap_w=g.power_cap_w, eta=g.eta, max_power_w=g.max_power_w).index[0])


def advise(governor: Governor, estimates: tuple[np.ndarray, ...], ran_index: int, runs: np.ndarray) -> Advice:
    """The advice on a phase's ``estimates`` (`Governor.estimates`) against ``ran_index``.

    ``runs``: [K] the windows observed at each pair (`Governor.runs`).
    """
    lt, lp, vt, vp = (np.asarray(x, dtype=np.float64) for x in estimates)
    a, r = best_index(governor, lt, lp), int(ran_index)
    both = [a, r] if a != r else []
    log_t, sd_t = lt[a] - lt[r], float(np.sqrt(np.sum(vt[both])))
    log_e, sd_e = log_t + (lp[a] - lp[r]), float(np.sqrt(np.sum(vt[both] + vp[both])))
    cfg = governor.configs
    return Advice(
        knob=governor.knob, index=a, setting=(float(cfg[a, 0]), float(cfg[a, 1])),
        ran_index=r, ran_setting=(float(cfg[r, 0]), float(cfg[r, 1])),
        energy_saving=float(-np.expm1(log_e)),
        energy_interval=(float(-np.expm1(log_e + NORMAL_Z90 * sd_e)), float(-np.expm1(log_e - NORMAL_Z90 * sd_e))),
        time_cost=float(np.expm1(log_t)),
        time_interval=(float(np.expm1(log_t - NORMAL_Z90 * sd_t)), float(np.expm1(log_t + NORMAL_Z90 * sd_t))),
        windows=int(np.sum(runs)), pairs=int(np.count_nonzero(runs)))


def phase_advice(governor: Governor, key: Hashable, ran_index: int) -> Advice:
    """The advice for phase ``key`` of ``governor`` against the pair it ran at."""
    return advise(governor, governor.estimates(key), ran_index, governor.runs(key))
