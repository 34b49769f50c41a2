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
from gpudvfs.predict.profile import predict_profile as _predict


@dataclass(frozen=True)
class ProfilePrediction:
    """All the profile's launches together at each of ``configs`` [K x 2] (core, memory MHz).

    Attributes
    ----------
    device : str
        The catalog GPU.
    policy : str
        The policy that chose.
    configs : numpy.ndarray
        The clock pairs [K x 2].
    time_ms, watts, joules : numpy.ndarray
        All launches together at each pair [K].
    intervals : dict
        90% half-widths in log space (a value x lies in [x e^-q, x e^q]) of ``time`` and
        ``energy`` at each pair (they grow with the pair's distance from the reference) and
        of ``power``.
    chosen : int
        The index of the policy's pair.
    rests_on : str
        What the answer rests on.
    kernels : dict
        Per launch, its ``time_ms``, ``watts`` and ``joules`` [K].
    detail : PredictionDetail
        Everything `gpudvfs predict --json` prints.
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
        """The 90% interval of ``"time_ms"``, ``"watts"`` or ``"joules"`` at every pair.

        Parameters
        ----------
        what : str
            ``"time_ms"``, ``"watts"`` or ``"joules"``.

        Returns
        -------
        tuple of numpy.ndarray
            The low and high ends [K] (the value itself at both where it has no interval).

        Raises
        ------
        InputError
            For another ``what``.
        """
        key = {"time_ms": "time", "watts": "power", "joules": "energy"}.get(what)
        if key is None:
            raise InputError(f"bounds of 'time_ms', 'watts' or 'joules', not {what!r}")
        q = self.intervals[key]
        x = getattr(self, what)
        return (x, x) if q is None else (x * np.exp(-np.asarray(q)), x * np.exp(np.asarray(q)))

    def to_dict(self) -> dict:
        """What `gpudvfs predict --json` prints.

        Returns
        -------
        dict
            The detail's JSON.
        """
        return self.detail.to_dict()


def predict_profile(profile: str | Path | CounterReport, device: str | None = None, *, policy: str = "energy",
                    slowdown: float = 0.1, eta: float = 0.5, power_model: PowerModel | str | Path | None = None,
                    reference: tuple[float, float] | None = None, calibrate: bool = True,
                    clocks: SupportedClocks | None = None) -> ProfilePrediction:
    """Time, power and energy of a profile at every clock pair its GPU supports, and the pair a policy chooses.

    Parameters
    ----------
    profile : str, pathlib.Path or CounterReport
        A path to Nsight Compute or nvprof CSV output, or the output read.
    device : str, optional
        The catalog GPU (default: the one the profile names; a profile of another GPU is refused).
    policy : str
        One of `gpudvfs.policy.POLICIES` but ``power-cap``.
    slowdown : float
        The deadline policy's allowed slowdown over the highest pair.
    eta : float
        The cost policy's weight of energy against time.
    power_model : PowerModel, str or pathlib.Path, optional
        A fitted model or its file (default: the GPU's catalog prior).
    reference : tuple of float, optional
        The clocks the profile was taken at (default: each launch's SM clock as Nsight Compute
        measured it, else the GPU's default clocks; the default memory clock).
    calibrate : bool
        Calibrate the time on the profile's measured durations.
    clocks : SupportedClocks, optional
        The pairs the GPU supports (``SupportedClocks.of_device(NvmlGpu(0))`` on the GPU); the
        catalog's by default.

    Returns
    -------
    ProfilePrediction
        The prediction.

    Raises
    ------
    InputError
        Where the file is not Nsight Compute or nvprof output, lacks counters, or was taken on
        another GPU than ``device``; or ``reference`` is not a pair the GPU supports.
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
