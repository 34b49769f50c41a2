"""The power model's inputs of each launch of a profile: the profilers' utilizations, or observed activities."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from gpudvfs.catalog import DeviceSpec
from gpudvfs.data.activities import ACTIVITIES, is_activity_space, kernel_activities
from gpudvfs.data.counters import COMPONENTS
from gpudvfs.data.profilers import CounterReport
from gpudvfs.errors import InputError
from gpudvfs.power.model import PowerModel


@dataclass(frozen=True, eq=False)
class PowerInputs:
    """Each launch's inputs of a power model [n x C]: ``values``, and ``upper`` at the most the profile allows.

    ``gaps``: what the profile lacked to map them, one line each (none: exact).
    """

    values: np.ndarray
    upper: np.ndarray
    gaps: tuple[str, ...]

    def interval(self, model: PowerModel, configs: np.ndarray) -> float | None:
        """The power's 90% interval (log half-width); None where ``model`` has none.

        ``model``'s, widened in quadrature by how far the power at ``upper`` can lie above that at
        ``values``, the most over launches and pairs.
        """
        if model.interval_ is None:
            return None
        spread = np.log(model.predict_grid(self.upper, configs) / model.predict_grid(self.values, configs)).max()
        return float(np.hypot(model.interval_, spread))


def power_inputs(report: CounterReport, utilizations: Sequence[Mapping[str, float]], model: PowerModel,
                 device: DeviceSpec) -> PowerInputs:
    """Each launch's inputs of ``model``; ``utilizations`` the launches' `LaunchInputs.utilization`.

    The profilers' utilizations for a model on them (the prior, `gpudvfs power fit`); for a
    model observed on GPM's or NVML's activities (`gpudvfs power observe`), the profile's
    metrics mapped into those activities (`gpudvfs.data.activities`). Raises `InputError` for a
    model on other inputs, naming the commands whose models fit, or a profile without the
    counters the activities need.
    """
    names = model.components_
    if names == COMPONENTS:
        util = np.array([[u[c] for c in COMPONENTS] for u in utilizations])
        return PowerInputs(util, util, ())
    if is_activity_space(names):
        mapped = [kernel_activities(k, names, device.sm_count) for k in report.kernels]
        return PowerInputs(np.array([[a.values[n] for n in names] for a in mapped]),
                           np.array([[a.upper[n] for n in names] for a in mapped]),
                           tuple(dict.fromkeys(g for a in mapped for g in a.gaps)))
    raise InputError(f"the power model's components {list(names)} are neither the profilers' utilizations "
                     f"{list(COMPONENTS)} (the prior, or `gpudvfs power fit` on a sweep of this GPU) nor activities "
                     f"`gpudvfs power observe` reads ({', '.join(ACTIVITIES)}): give a model one of these makes, "
                     "or leave --power-model out for the catalog prior")
