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


def advised_entry(governor: Governor, entry: dict, k: int) -> tuple[dict, int]:
    """A decision's entry (`Governor.decide`, ``k`` its pair) as logged in dry run, and the pair it would set.

    A pair chosen to explore becomes ``explore`` and the advised pair (`best_index`) the one it
    would set. Nothing was set, so no saving was realized: ``realized_saving`` is left out.
    """
    entry = {key: v for key, v in entry.items() if key != "realized_saving"} | {"explore": None}
    if not entry["explored"]:
        return entry, k
    lt, lp, _, _ = governor.estimates()
    a, d, cfg = best_index(governor, lt, lp), governor.default_index, governor.configs
    entry |= {"index": a, "core_mhz": float(cfg[a, 0]), "mem_mhz": float(cfg[a, 1]), "explored": False,
              "predicted_saving": float(-np.expm1(lt[a] + lp[a] - lt[d] - lp[d])),
              "explore": {"index": k} | setting_fields(governor.knob, (cfg[k, 0], cfg[k, 1]))}
    return entry, a


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


def _pct(x: float, interval: list[float]) -> str:
    return f"{100 * x:+.1f}% [{100 * interval[0]:+.1f}, {100 * interval[1]:+.1f}]"


def _setting(advice: dict, prefix: str, knob: str) -> str:
    if knob == "power-limit":
        return f"{advice[prefix + 'limit_w']:.0f}"
    return setting_text(knob, (advice[prefix + "core_mhz"], advice.get(prefix + "mem_mhz", 0.0)))


def advice_table(summary: dict, counted: str = "steps") -> str:
    """The table printed when a run ends: per phase what it measured and the advice (`integrations.summary.run_advice`).

    ``counted``: what a phase's ``steps`` are (the daemon's are intervals).
    """
    knob = summary.get("knob", "clocks")
    unit = "w" if knob == "power-limit" else "mhz"
    head = ("phase", counted, "time_s", "energy_j", "mean_w", f"ran_{unit}", f"advised_{unit}", "energy_saving",
            "time_cost", "rests_on")
    rows = [head]
    for name, ph in summary["phases"].items():
        a = None if summary["advice"] is None else summary["advice"].get(name)
        cells = [name, str(ph["steps"]), f"{ph['steps'] * ph['mean_time_ms'] / 1e3:.2f}",
                 "-" if ph["energy_j"] is None else f"{ph['energy_j']:.1f}",
                 "-" if ph["mean_watts"] is None else f"{ph['mean_watts']:.1f}"]
        if a is None:
            cells += ["-", "-", "-", "-", "no governor" if summary["advice"] is None else "no window yet"]
        else:
            cells += [_setting(a, "ran_", knob), _setting(a, "", knob),
                      _pct(a["energy_saving"], a["energy_interval"]), _pct(a["time_cost"], a["time_interval"]),
                      a["rests_on"]]
        rows.append(tuple(cells))
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    mode = "dry run" if summary["dry_run"] else f"{knob} set"
    what = "pair" if knob == "clocks" else knob.replace("-", " ")
    lines = [f"gpudvfs: {mode}, policy {summary['policy']}; advised {what} per phase, its saving against the {what} "
             "it ran at (90% interval):"]
    lines += ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip()
              for r in rows]
    return "\n".join(lines)
