"""The prior's tensor-pipe power on a GPU with tensor cores, or the interval it widens where a profile lacks it."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from gpudvfs.catalog import DeviceSpec
from gpudvfs.data.tensor_counters import TENSOR_METRICS
from gpudvfs.power.model import PowerModel
from gpudvfs.power.prior_pipes import has_tensor_cores, pipes_document, share_widening, tensor_watts


def with_tensor(device: DeviceSpec, model: PowerModel, activity: Sequence[float | None], configs: np.ndarray,
                watts: np.ndarray, q: float | None) -> tuple[np.ndarray, float | None, str]:
    """``watts`` [n x K] with the tensor pipe's power, the widened power interval, and what rests on it.

    Only the prior has a tensor weight, so other models' power is returned as it is. A launch
    without the tensor metric may have kept the pipe busy all along: the interval then widens
    by the power full tensor activity would add at the reference (the largest over launches).
    """
    if model.source_ != "prior" or q is None or not has_tensor_cores(device):
        return watts, q, ""
    pipes = pipes_document()
    volts = model.voltage(configs[:, 0], configs[:, 1])[:, 0]
    full = tensor_watts(pipes, device, np.ones(1), volts, configs[:, 0] / model.reference_mhz_[0])[0]
    ref = int(np.argmin(np.abs(configs - np.asarray(model.reference_mhz_)).sum(axis=1)))
    if any(a is None for a in activity):
        widen = max(math.log1p(full[ref] / w) for w in watts[:, ref])
        return watts, math.hypot(q, widen), (
            f"the profile lacks the tensor pipe's activity (collect {TENSOR_METRICS[0]}): power without it, "
            f"widened by x/{math.exp(widen):.2f}")
    out = watts + np.array(activity, dtype=np.float64)[:, None] * full[None, :]
    share = float(np.max(1 - watts[:, ref] / out[:, ref]))
    widen = share_widening(pipes["tensor_spread"], share)
    if share == 0:
        return out, q, ""
    return out, math.hypot(q, widen), (f"the tensor pipe's weight rests on one GPU's kernels: widened by "
                                       f"x/{math.exp(widen):.2f}")
