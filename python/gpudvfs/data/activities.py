"""Nsight Compute's metrics -> the device activities `gpudvfs power observe` reads.

So a model observed on a GPU predicts a profile. An observed power model is fitted on GPM's
activities (Hopper on) or NVML's busy fractions; a profile has per-kernel metrics. Each
activity is mapped from what it means, over the kernel's run:

- ``sm`` (GPM: elapsed cycles an SM had work): sm__cycles_active.avg / sm__cycles_elapsed.avg;
  else min(1, blocks / SMs).
- ``pipe`` (GPM: the busiest of the FP16, FP32, FP64 and tensor pipes over elapsed cycles):
  sm x the largest of the FMA, FP64 and tensor pipes' pct_of_peak_sustained_active / 100.
- ``tensor`` (GPM: the tensor pipe over elapsed cycles): sm x
  sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active / 100.
- ``dram`` (GPM: DRAM bandwidth over its peak) and ``memory`` (NVML: time device memory was
  read or written): dram__throughput.avg.pct_of_peak_sustained_elapsed / 100.
- ``gpu`` (NVML: time a kernel ran): 1, the profile being of the kernel's own run.

Nsight Compute's pipe percentages are of the *active* cycles, GPM's of the elapsed ones: hence
the factor sm. Where the profile lacks the SM's active cycles, an SM without a block is idle and
one with a block is taken as busy all along (tail waves left out); where it lacks the tensor
pipe, the pipe activity leaves tensor work out, and its bound is the SM activity (a pipe is
busy only while its SM is): :attr:`Activities.upper`. Both are named in :attr:`Activities.gaps`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gpudvfs.data.counters import COUNTER_UTIL_TOLERANCE
from gpudvfs.data.profilers.records import KernelCounters
from gpudvfs.data.recipes import GRID_SIZE
from gpudvfs.data.tensor_counters import TENSOR_METRICS, tensor_activity
from gpudvfs.errors import InputError

SM_ACTIVE, SM_ELAPSED = "sm__cycles_active.avg", "sm__cycles_elapsed.avg"
DRAM = "dram__throughput.avg.pct_of_peak_sustained_elapsed"
#: Per-active-cycle percentages of the pipes GPM's pipe activity takes the busiest of (the FP16 and
#: FP32 pipes are the FMA pipe on Volta and newer); each with its sm__ twin.
PIPES = (("smsp__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active",
          "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active"),
         ("smsp__inst_executed_pipe_fp64.avg.pct_of_peak_sustained_active",
          "sm__inst_executed_pipe_fp64.avg.pct_of_peak_sustained_active",
          "sm__pipe_fp64_cycles_active.avg.pct_of_peak_sustained_active"),
         TENSOR_METRICS)
#: Every activity this module maps.
ACTIVITIES = ("sm", "pipe", "tensor", "dram", "gpu", "memory")
#: What the mapping reads beyond `predict`'s own counters: `profile-command` asks for them.
METRICS = (SM_ACTIVE, SM_ELAPSED, TENSOR_METRICS[0])


@dataclass(frozen=True)
class Activities:
    """One kernel's activities and what the profile lacked to map them exactly.

    Attributes
    ----------
    values : dict of str to float
        Activity -> fraction in [0, 1].
    gaps : tuple of str
        One line per approximation, each naming the metric to collect.
    upper : dict of str to float
        The values at the most the profile allows: the pipe and tensor activities at the SM's
        where the tensor pipe is missing; ``values`` otherwise.
    """

    values: dict[str, float]
    gaps: tuple[str, ...]
    upper: dict[str, float]


def is_activity_space(names: Sequence[str]) -> bool:
    """Whether every name is an activity this module maps (an observed model's components)."""
    return len(names) > 0 and all(n in ACTIVITIES for n in names)


def _fraction(k: KernelCounters, name: str, v: float) -> float:
    """``v`` in [0, 1]: counter noise within `COUNTER_UTIL_TOLERANCE` of it clipped, further refused."""
    if not -COUNTER_UTIL_TOLERANCE <= v <= 1 + COUNTER_UTIL_TOLERANCE:
        raise InputError(f"kernel {k.name!r}: {name} gives an activity of {v:g}, not a fraction in [0, 1]")
    return min(max(v, 0.0), 1.0)


def _pct(k: KernelCounters, names: Sequence[str]) -> float | None:
    for n in names:
        v = k.metrics.get(n)
        if v is not None:
            if k.units.get(n, "%") not in ("%", ""):
                raise InputError(f"kernel {k.name!r}: {n} is in {k.units[n]!r}, not %")
            return _fraction(k, n, v / 100.0)
    return None


def kernel_activities(k: KernelCounters, names: Sequence[str], sm_count: int) -> Activities:
    """The activities ``names`` of one kernel over its run.

    Raises
    ------
    InputError
        For a name not in :data:`ACTIVITIES`, or a kernel without the DRAM throughput or
        (where its SM activity is asked for and its active cycles absent) the grid size.
    """
    unknown = [n for n in names if n not in ACTIVITIES]
    if unknown:
        raise InputError(f"no mapping from Nsight Compute's metrics to the activities {unknown}; "
                         f"those mapped: {list(ACTIVITIES)}")
    core = bool({"sm", "pipe", "tensor"} & set(names))
    gaps = []
    active, elapsed = k.metrics.get(SM_ACTIVE), k.metrics.get(SM_ELAPSED)
    sm = None
    if active is not None and elapsed:
        sm = _fraction(k, f"{SM_ACTIVE} / {SM_ELAPSED}", active / elapsed)
    elif GRID_SIZE in k.metrics:
        sm = min(k.metrics[GRID_SIZE] / sm_count, 1.0)
        if core:
            gaps.append(f"SM activity from the grid's blocks per SM (collect {SM_ACTIVE} and {SM_ELAPSED})")
    pipes = [p for alternatives in PIPES if (p := _pct(k, alternatives)) is not None]
    tensor = tensor_activity(k)
    if tensor is None and {"pipe", "tensor"} & set(names):
        gaps.append(f"the tensor pipe left out (collect {TENSOR_METRICS[0]})")
    dram = _pct(k, (DRAM,))
    values = {"sm": sm, "pipe": None if sm is None or not pipes else sm * max(pipes),
              "tensor": None if sm is None else sm * (tensor or 0.0), "dram": dram, "gpu": 1.0, "memory": dram}
    lacking = [n for n in names if values[n] is None]
    if lacking:
        need = {"sm": f"{SM_ACTIVE} and {SM_ELAPSED}, or {GRID_SIZE}", "dram": DRAM, "memory": DRAM,
                "pipe": f"{PIPES[0][0]} and the SM activity's", "tensor": "the SM activity's"}
        raise InputError(f"kernel {k.name!r}: no counters for the activities {lacking}: collect "
                         + "; ".join(need[n] for n in lacking))
    out = {n: float(v) for n in names if (v := values[n]) is not None}
    upper = {n: sm if tensor is None and n in ("pipe", "tensor") and sm is not None else v for n, v in out.items()}
    return Activities(out, tuple(gaps), upper)
