"""The tensor pipe's activity in a profile: the power prior's tensor component.

Kept beside :data:`gpudvfs.data.counters.COMPONENTS` rather than among them: no public power
data holds a tensor utilization, so the fitted power models have no such column; only the
prior's tensor weight (:mod:`gpudvfs.power.prior_pipes`) reads it.
"""

from __future__ import annotations

from gpudvfs.data.counters import COUNTER_UTIL_TOLERANCE, Counters, map_counters
from gpudvfs.data.recipes import Table, percent
from gpudvfs.errors import InputError

#: Nsight Compute's tensor-pipe activity, the fraction of active cycles the pipe is busy.
TENSOR_METRICS = ("sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
                  "smsp__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active")
_TABLE: Table = {"Tensor": [percent(m) for m in TENSOR_METRICS]}


def tensor_activity(counters: Counters) -> float | None:
    """The tensor pipe's activity in [0, 1] from an Nsight Compute record; None where it lacks the metric.

    Raises
    ------
    InputError
        If the metric is there but not a finite number in percent, or outside [0, 100]% by more
        than counter noise (:data:`gpudvfs.data.counters.COUNTER_UTIL_TOLERANCE`).
    """
    mapped = map_counters(counters, _TABLE, "ncu")
    value = mapped.values["Tensor"]
    if value is None:
        return None
    if not -COUNTER_UTIL_TOLERANCE <= value <= 1 + COUNTER_UTIL_TOLERANCE:
        raise InputError(f"the tensor pipe's activity {mapped.formulas['Tensor']} is {value:g}, expected a "
                         "percentage of peak in [0, 100]")
    return min(1.0, max(0.0, value))
