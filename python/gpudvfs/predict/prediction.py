"""`predict_profile`: a profile to time, power and energy at every clock pair of its GPU, as arrays for a scheduler.

From Nsight Compute or nvprof CSV, with their 90% intervals and the pair a policy chooses:
what `gpudvfs predict` prints.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from gpudvfs.catalog.clocks import SupportedClocks
from gpudvfs.data import read
from gpudvfs.data.profilers import CounterReport
from gpudvfs.errors import InputError
from gpudvfs.power.model import PowerModel
from gpudvfs.predict.profile import PredictionDetail, device_of, kernel_inputs
from gpudvfs.predict.profile import predict_detail as _predict


@dataclass(frozen=True)
class ProfilePrediction:
    """All the profile's launches together at each of ``configs`` [K x 2] (core, memory MHz).

    ``time_ms``, ``watts`` and ``joules`` are [K], also per launch in ``kernels``; ``chosen`` is
    the index of the policy's pair. ``intervals`` holds 90% half-widths in log space (a value x
    lies in [x e^-q, x e^q]) of ``time`` and ``energy`` at each pair (growing with the pair's
    distance from the reference) and of ``power``.
    ``detail`` is everything `gpudvfs predict --json` prints.
    """

    device: str
    policy: str
    configs: np.ndarray
    time_ms: np.ndarray
    watts: np.ndarray
    joules: np.ndarray
    intervals: dict
    chosen: int
    rests_on: str
    kernels: dict = field(repr=False)
    detail: PredictionDetail = field(repr=False)

    def bounds(self, what: str) -> tuple[np.ndarray, np.ndarray]:
        """The low and high ends [K] of the 90% interval of ``"time_ms"``, ``"watts"`` or ``"joules"``.

        The value itself at both where it has no interval; `InputError` for another ``what``.
        """
        key = {"time_ms": "time", "watts": "power", "joules": "energy"}.get(what)
        if key is None:
            raise InputError(f"bounds of 'time_ms', 'watts' or 'joules', not {what!r}")
        q = self.intervals[key]
        x = getattr(self, what)
        return (x, x) if q is None else (x * np.exp(-np.asarray(q)), x * np.exp(np.asarray(q)))

    def to_dict(self) -> dict:
        """What `gpudvfs predict --json` prints."""
        return self.detail.to_dict()


def predict_profile(profile: str | Path | CounterReport, device: str | None = None, *, policy: str = "energy",
                    slowdown: float = 0.1, eta: float = 0.5, power_model: PowerModel | str | Path | None = None,
                    reference: tuple[float, float] | None = None, calibrate: bool = True,
                    clocks: SupportedClocks | None = None) -> ProfilePrediction:
    """Time, power and energy of a profile at every clock pair its GPU supports, and the pair a policy chooses.

    ``profile`` is Nsight Compute or nvprof CSV output, or that output read; ``device`` the
    catalog GPU, by default the one the profile names (a profile of another GPU is refused).
    ``policy`` is one of `gpudvfs.policy.POLICIES` but ``power-cap``; ``slowdown`` the deadline
    policy's allowed slowdown over the highest pair, ``eta`` the cost policy's weight of energy
    against time. ``power_model`` (a model or its file) defaults to the GPU's catalog prior;
    ``reference`` to each launch's SM clock as Nsight Compute measured it, else the GPU's default
    clocks (the default memory clock); ``clocks`` to the catalog's pairs
    (``SupportedClocks.of_device(NvmlGpu(0))`` on the GPU). Raises `InputError` where the file is
    not Nsight Compute or nvprof output, lacks counters, or was taken on another GPU than
    ``device``; or ``reference`` is not a pair the GPU supports.

    Examples
    --------
    A bf16 GEMM profiled with Nsight Compute on an H200 (the profile names its GPU):

    >>> from gpudvfs import predict_profile
    >>> p = predict_profile("validation/nvidia-h200/kernels/gemm_bf16.ncu.csv")
    >>> p.device, p.policy, p.configs.shape
    ('h200', 'energy', (220, 2))
    >>> p.configs[p.chosen]
    array([1200., 2201.])
    >>> low, high = p.bounds("joules")
    >>> bool(low[p.chosen] < p.joules[p.chosen] < high[p.chosen])
    True
    """
    report = read(profile) if isinstance(profile, (str, Path)) else profile
    if not isinstance(report, CounterReport):
        raise InputError(f"{profile}: expected Nsight Compute or nvprof output")
    kernels = kernel_inputs(report)
    spec = device_of(report, device)
    model = PowerModel.load(power_model) if isinstance(power_model, (str, Path)) else power_model
    d = _predict(report, spec, power_model=model, reference=reference, policy=policy, slowdown=slowdown, eta=eta,
                 kernels=kernels, calibrate=calibrate, clocks=clocks)
    app = d.application
    chosen = (app.chosen.core_mhz, app.chosen.mem_mhz)
    return ProfilePrediction(
        device=d.device, policy=policy, configs=d.configs, time_ms=app.time_ms, watts=app.watts, joules=app.joules,
        intervals=d.intervals.to_dict(),
        chosen=int(np.flatnonzero((d.configs[:, 0] == chosen[0]) & (d.configs[:, 1] == chosen[1]))[0]),
        rests_on=d.rests_on,
        kernels={n: {"time_ms": k.time_ms, "watts": k.watts, "joules": k.joules} for n, k in d.kernels.items()},
        detail=d)
