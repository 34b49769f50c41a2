"""`predict_profile`: a profile (Nsight Compute or nvprof CSV) to time, power and energy at
every clock pair of its GPU, with their 90% intervals and the pair a policy chooses: what
`gpudvfs predict` prints, as arrays for a scheduler."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from gpudvfs.data import read
from gpudvfs.data.profilers import CounterReport
from gpudvfs.errors import InputError
from gpudvfs.power.model import PowerModel
from gpudvfs.predict.profile import device_of, kernel_inputs
from gpudvfs.predict.profile import predict_profile as _predict


@dataclass(frozen=True)
class ProfilePrediction:
    """All the profile's launches together at each of ``configs`` [K x 2] (core, memory MHz):
    ``time_ms``, ``watts``, ``joules`` [K]; ``intervals``: 90% half-widths in log space (a value x
    lies in [x e^-q, x e^q]) of time and energy at each pair (they grow with the pair's distance
    from the reference) and of power; ``chosen``: the index of the policy's
    pair; ``rests_on``: what the answer rests on; ``kernels``: per launch, its ``time_ms``,
    ``watts`` and ``joules`` [K]; ``detail``: everything `gpudvfs predict --json` prints."""

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
    detail: dict = field(repr=False)

    def bounds(self, what: str) -> tuple[np.ndarray, np.ndarray]:
        """The 90% interval of ``"time_ms"``, ``"watts"`` or ``"joules"`` at every pair."""
        key = {"time_ms": "time", "watts": "power", "joules": "energy"}.get(what)
        if key is None:
            raise InputError(f"bounds of 'time_ms', 'watts' or 'joules', not {what!r}")
        q = self.intervals[key]
        x = getattr(self, what)
        return (x, x) if q is None else (x * np.exp(-np.asarray(q)), x * np.exp(np.asarray(q)))

    def to_dict(self) -> dict:
        return self.detail


def predict_profile(profile, device: str | None = None, *, policy: str = "energy", slowdown: float = 0.1,
                    eta: float = 0.5, power_model: PowerModel | str | Path | None = None,
                    reference: tuple[float, float] | None = None, calibrate: bool = True) -> ProfilePrediction:
    """``profile``: a path to Nsight Compute or nvprof CSV output, or a `CounterReport`;
    ``device``: the catalog GPU (default: the one the profile names; a profile of another GPU is
    refused); ``power_model``: a fitted model or its file (default: the GPU's catalog prior)."""
    report = read(profile) if isinstance(profile, (str, Path)) else profile
    if not isinstance(report, CounterReport):
        raise InputError(f"{profile}: expected Nsight Compute or nvprof output")
    kernels = kernel_inputs(report)
    spec = device_of(report, device)
    model = PowerModel.load(power_model) if isinstance(power_model, (str, Path)) else power_model
    d = _predict(report, spec, power_model=model, reference=reference, policy=policy, slowdown=slowdown, eta=eta,
                 kernels=kernels, calibrate=calibrate)
    configs = np.array(d["configs"])
    app = d["application"]
    chosen = (app["chosen"]["core_mhz"], app["chosen"]["mem_mhz"])
    return ProfilePrediction(
        device=d["device"], policy=policy, configs=configs, time_ms=np.array(app["time_ms"]),
        watts=np.array(app["watts"]), joules=np.array(app["joules"]), intervals=d["intervals"],
        chosen=int(np.flatnonzero((configs[:, 0] == chosen[0]) & (configs[:, 1] == chosen[1]))[0]),
        rests_on=d["rests_on"],
        kernels={n: {k: np.array(v[k]) for k in ("time_ms", "watts", "joules")} for n, v in d["kernels"].items()},
        detail=d)
