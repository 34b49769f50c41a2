"""The prior's special-function and tensor weights for GPUs Nsight Compute profiles (Volta on).

The rule (:mod:`gpudvfs.power.prior`) is fitted mostly on Maxwell, Pascal and Kepler, whose
special-function utilization is nvprof's; Nsight Compute's XU pipe (SM >= 7.0) is another
measure, and the rule weighs it far too high on Hopper (its special-function sweep +77% to
+175%). No public power data holds a tensor utilization. So both weights come from what does
hold them (``catalog/power_prior_pipes.json``, refitted by :func:`fit_pipes`):

- ``sfu_per_tdp``: the H100's 32 kernels at the driver's clocks (validation/), the rule's other
  coefficients kept, relative least squares;
- ``tensor_per_tdp``: the H200's two tensor-core kernels (bf16 GEMM, attention) at the clocks
  the driver ran them at, their tensor activity GPM's busiest-pipe activity while each ran (a
  stand-in: the recorded profiles lack the tensor metric).

Each rests on one GPU and a few kernels: its ``*_spread`` is the largest |ln| change of the
weight when one of its kernels is left out, and widens the interval by the share of the power
the weight gives.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from gpudvfs.catalog import DeviceSpec
from gpudvfs.catalog.shipped import shipped_json
from gpudvfs.data.counters import COMPONENTS
from gpudvfs.errors import InputError

PIPES_KIND = "power-prior-pipes"
PIPES_VERSION = 1
_KEYS = ("from_compute_capability", "sfu_per_tdp", "sfu_spread", "tensor_per_tdp", "tensor_spread")


def pipes_document() -> dict[str, Any]:
    """The shipped weights (``catalog/power_prior_pipes.json``), checked."""
    return check_pipes(*shipped_json("power_prior_pipes.json"))


def check_pipes(doc: Any, where: str) -> dict[str, Any]:
    """``doc`` itself if it is a pipes document of this version with finite numbers >= 0.

    Raises `InputError` naming ``where`` and what was expected.
    """
    if not isinstance(doc, dict) or doc.get("kind") != PIPES_KIND or doc.get("version") != PIPES_VERSION:
        raise InputError(f"{where}: not a gpudvfs {PIPES_KIND} file of version {PIPES_VERSION}")
    for key in _KEYS:
        v = doc.get(key)
        if not (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0):
            raise InputError(f"{where}: {key} must be a finite number >= 0, got {v!r}")
    return doc


def applies(spec: DeviceSpec, pipes: dict[str, Any]) -> bool:
    """Whether ``spec`` is profiled through Nsight Compute's XU pipe (the weights' compute capabilities)."""
    return float(spec.compute_capability) >= pipes["from_compute_capability"]


def has_tensor_cores(spec: DeviceSpec) -> bool:
    """Whether the catalog gives ``spec`` tensor-core throughput."""
    return spec.issue_per_sm_per_cycle.get("tensor_fp16_flops", 0) > 0


def with_pipe_weights(state: dict[str, Any], spec: DeviceSpec, pipes: dict[str, Any] | None = None) -> dict[str, Any]:
    """A prior's state (:func:`gpudvfs.power.prior.prior_state`) with the SFU weight of ``pipes`` where it applies."""
    pipes = pipes_document() if pipes is None else pipes
    if not applies(spec, pipes):
        return state
    weights = list(state["weights"])
    weights[COMPONENTS.index("SFU")] = pipes["sfu_per_tdp"] * float(spec.tdp_w)
    note = (f"SFU weight {weights[COMPONENTS.index('SFU')]:g} W: Nsight Compute's XU pipe, fitted on the H100's "
            f"kernels (compute capability >= {pipes['from_compute_capability']:g})")
    return state | {"weights": weights, "notes": [*state["notes"], note]}


def tensor_watts(pipes: dict[str, Any], spec: DeviceSpec, activity: np.ndarray, core_volts: np.ndarray,
                 core_ratio: np.ndarray) -> np.ndarray:
    """The tensor pipe's dynamic power [n x K] (W): weight x activity x V^2 f, as the model's other core components.

    ``activity`` [n] in [0, 1]; ``core_volts`` and ``core_ratio`` [K]: the normalized core
    voltage and the core clock over the reference at each pair.
    """
    per_unit = pipes["tensor_per_tdp"] * float(spec.tdp_w) * core_volts ** 2 * core_ratio
    return np.asarray(activity, dtype=np.float64)[:, None] * per_unit[None, :]


def share_widening(spread: float, share: float) -> float:
    """The log half-width a weight off by up to x/e^spread adds to a power it gives ``share`` of."""
    return math.log1p(share * math.expm1(spread))
