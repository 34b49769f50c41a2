"""What a governor replay runs on and aims at.

Per application the measured and predicted time and power at every setting (`ReplayTable`),
and the policy its strategies are scored under (`Target`).

Tables come from a grid's counters through the models (`replay_table`, `dcgm_replay_table`)
or from its time and power alone (`gpudvfs.evaluation.plain`), over clock pairs or one knob (a
core clock, a power limit: ``ReplayTable.knob``). The predictions of an application come from
models it was not in: its power from a model fitted on the other applications, its time from
the time model calibrated on its own reference time (the one measurement a governor has of a
new phase).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from gpudvfs.catalog import DeviceSpec
from gpudvfs.data.datasets import MeasurementGrid
from gpudvfs.errors import InputError
from gpudvfs.evaluation.dcgm_selection import loo_table
from gpudvfs.evaluation.regret import regret_table
from gpudvfs.govern.governor import Governor
from gpudvfs.policy.choose import fit_power_model, measured_table
from gpudvfs.policy.policies import highest_index, select
from gpudvfs.time import TimeDevice, TimeModel


@dataclass(frozen=True, eq=False)
class ReplayTable:
    """Per application [A x K]: measured and predicted time (ms) and power (W) at every setting.

    ``configs`` [K x 2] holds the settings: where ``knob`` is ``"clocks"``, the (core, memory)
    MHz pairs; for a single knob (``"core-clock"``, ``"power-limit"``), ``configs[:, 0]`` its
    values (MHz or W) and ``configs[:, 1]`` a constant 1, which the governor's log-ratio features
    read as nothing. ``default_index`` is the default setting (the highest pair of a grid);
    ``time_pred`` and ``watts_pred`` are predicted without the application. ``max_power_w``
    prices a second under the cost policy (Zeus's MAXPOWER); None derives it from the table: the
    highest power limit where the knob is one, else the most power measured at the default
    setting.
    """

    names: list[str]
    configs: np.ndarray
    default_index: int
    time_ms: np.ndarray
    watts: np.ndarray
    time_pred: np.ndarray
    watts_pred: np.ndarray
    knob: str = "clocks"
    max_power_w: float | None = None

    def __post_init__(self) -> None:
        """Derive ``max_power_w`` where it was left None."""
        if self.max_power_w is None:
            object.__setattr__(self, "max_power_w", float(
                self.configs[:, 0].max() if self.knob == "power-limit" else self.watts[:, self.default_index].max()))


@dataclass(frozen=True)
class Target:
    """What a replay's strategies aim at: the policy and its bound, cap or price of time.

    ``policy`` is one of ``gpudvfs.govern.GOVERNOR_POLICIES``; ``slowdown`` bounds `deadline`
    against the default setting; ``power_cap_w`` (W) is `power-cap`'s cap; ``eta`` is `cost`'s
    weight of energy against time (Zeus's eta).
    """

    policy: str = "energy"
    slowdown: float = 0.1
    power_cap_w: float | None = None
    eta: float = 0.5

    def objective(self, table: ReplayTable, t: np.ndarray, p: np.ndarray) -> np.ndarray:
        """What a step costs under the policy: time under a cap, Zeus's cost, else energy.

        Shaped as ``t`` (ms) and ``p`` (W). The energy x time of `edp` is scored over a phase, not
        per step; ``table.max_power_w`` prices time under `cost`.
        """
        if self.policy == "power-cap":
            return t
        if self.policy == "cost":
            price = table.max_power_w
            assert price is not None  # ReplayTable.__post_init__ sets it
            return t * (self.eta * p + (1 - self.eta) * price)
        return t * p

    def select(self, table: ReplayTable, t: np.ndarray, p: np.ndarray, configs: np.ndarray,
               default_index: int) -> np.ndarray:
        """The index among ``configs`` [K x 2] of the policy's choice for each application [A] of ``t``, ``p`` [A x K].

        ``default_index`` is the deadline's reference.
        """
        return select(t, p, configs, self.policy, default_index=default_index, slowdown=self.slowdown,
                      power_cap_w=self.power_cap_w, eta=self.eta, max_power_w=table.max_power_w).index

    def governor(self, table: ReplayTable, **constants: Any) -> Governor:
        """A new governor over ``table``'s settings aiming at this target, no phase started.

        ``**constants`` are the governor's (``prior_sd``, ``explore``, ``noise_sd``, ...).
        """
        return Governor(table.configs, table.default_index, policy=self.policy, slowdown=self.slowdown,
                        power_cap_w=self.power_cap_w, eta=self.eta, max_power_w=table.max_power_w, knob=table.knob,
                        **constants)


def replay_table(grid: MeasurementGrid, reference: tuple[float, float], device: TimeDevice, spec: DeviceSpec,
                 train: MeasurementGrid | None = None, clip: bool = False) -> ReplayTable:
    """The replay's table of a grid measured with profiler counters, over clock pairs.

    Power is predicted by a model of ``train``, or without it by a model of the grid's other
    applications; time by the time model calibrated on each application's reference time.
    The default setting is the grid's highest pair (highest core clock, then memory).
    ``clip`` clips utilizations above 1 instead of refusing them.

    Raises InputError where an application of ``grid`` is in ``train``.
    """
    if train is None:
        tab = regret_table(grid, reference, device, spec, clip)
        names, configs, t, p, p_pred, profiles = (tab.names, tab.configs, tab.time_ms, tab.watts, tab.watts_pred,
                                                  tab.profiles)
    else:
        m = measured_table(grid, reference, device, spec, clip)
        names, configs, t, p, util, profiles = m.names, m.configs, m.time_ms, m.watts, m.utilization, m.profiles
        shared = sorted(set(names) & set(train.workload.tolist()))
        if shared:
            raise InputError(f"{train.path}: the scored applications must not be in TRAIN, but {len(shared)} are "
                             f"({', '.join(shared[:3])}{', ...' if len(shared) > 3 else ''}); leave --train out "
                             "to score each application with a model of the others")
        p_pred = fit_power_model(train, reference, device, spec, clip).predict_grid(util, configs)
    t_pred = TimeModel(device).predict(profiles, configs[:, 0], configs[:, 1], calibrate=True)
    return ReplayTable(names, configs, highest_index(configs), t, p, t_pred, p_pred)


def dcgm_replay_table(grid: MeasurementGrid, reference: tuple[float, float]) -> ReplayTable:
    """The replay's table of a DCGM grid with power, each application predicted by models fitted without it.

    Time by the DCGM time model, power by the power model on DCGM activities (calibrated on
    the application's reference power). The default setting is the grid's highest pair.
    """
    tab = loo_table(grid, reference)
    return ReplayTable(tab.names, tab.configs, tab.fastest, tab.time_ms, tab.watts, tab.time_cv, tab.watts_pred)


def subset(table: ReplayTable, apps: list[int]) -> ReplayTable:
    """The table of the rows ``apps``, in that order, over the same settings and price of time."""
    return ReplayTable([table.names[a] for a in apps], table.configs, table.default_index, table.time_ms[apps],
                       table.watts[apps], table.time_pred[apps], table.watts_pred[apps], table.knob,
                       table.max_power_w)
