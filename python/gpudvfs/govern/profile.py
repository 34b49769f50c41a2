"""Profiles: what a job's governor learnt, kept between runs, one file per (GPU model, job, knob).

A profile is a versioned JSON file. Per phase it holds the prediction the phase started from
and, at every setting, the intervals observed there and the governor's estimates: log time per
unit of work and log power (the measured mean where observed, else the corrected prediction)
with their standard deviations, the curves over the settings, not only an optimum.

A run that finds a phase in its profile starts it from that prediction and observes each
measured setting's mean as many times as it was observed (at most `REPLAY_MAX`): the
governor's correction is then the earlier run's (its least squares forget nothing, so only the
sums count) and each setting's mean and count are too, so the phase explores only what the
earlier run left uncertain. A profile of another GPU, job, knob or set of settings is neither
used nor written.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from gpudvfs.data.jsonfile import read_json, write_json_atomic
from gpudvfs.errors import GpudvfsWarning, InputError
from gpudvfs.govern.governor import Governor

KIND, VERSION = "gpudvfs-profile", 1
#: Seconds between writes while a job runs (and one at its end): a crash loses at most this much.
WRITE_S = 60.0
#: The most times a setting's mean is observed when a phase is seeded, so that a profile of long
#: runs seeds in well under a second: its standard deviation is then 3% of one measurement's.
#: On Zeus's traces (`gpudvfs govern second-run`, seed 0) at most 1 or 10 instead of every count
#: moved the second run's cost regret by 0.011 points or less.
REPLAY_MAX = 1000


@dataclass(frozen=True, eq=False)
class PhaseCurves:
    """What one phase learnt, at each of K settings.

    ``prior_time_ms`` and ``prior_watts`` are the prediction it started from; ``runs`` the
    intervals the governor holds, observed with a time, at each setting; ``log_time`` (ms per
    unit of work) and ``log_watts`` the governor's estimates, ``sd_time`` and ``sd_watts``
    their standard deviations; ``excluded`` the settings the GPU did not hold.
    """

    prior_time_ms: np.ndarray
    prior_watts: np.ndarray
    runs: np.ndarray
    log_time: np.ndarray
    log_watts: np.ndarray
    sd_time: np.ndarray
    sd_watts: np.ndarray
    excluded: tuple[int, ...] = ()

    @classmethod
    def of(cls, gov: Governor, prior_time_ms: ArrayLike, prior_watts: ArrayLike) -> PhaseCurves:
        """The governor's current phase, which started from this prediction."""
        lt, lp, vt, vp = gov.estimates()
        runs, left = gov.measured()
        return cls(np.asarray(prior_time_ms, dtype=float), np.asarray(prior_watts, dtype=float), runs,
                   np.asarray(lt), np.asarray(lp), np.sqrt(vt), np.sqrt(vp), tuple(left))

    def seed(self, gov: Governor, key: Hashable) -> None:
        """Start phase ``key`` (new to ``gov``) from what this phase learnt (module notes)."""
        gov.phase(key, self.prior_time_ms, self.prior_watts)
        for k in np.flatnonzero(self.runs).tolist():
            t, p = math.exp(self.log_time[k]), math.exp(self.log_watts[k])
            for _ in range(min(int(self.runs[k]), REPLAY_MAX)):
                gov.observe(k, t, p)
        for left in self.excluded:
            gov.exclude(left)

    def to_dict(self) -> dict:
        """JSON values, arrays as lists."""
        return {name: (list(self.excluded) if name == "excluded" else getattr(self, name).tolist())
                for name in _FIELDS}

    @classmethod
    def from_dict(cls, doc: Any, k: int, where: str) -> PhaseCurves:
        """Read from `to_dict`'s values for K settings; InputError naming ``where`` otherwise."""
        if not isinstance(doc, dict) or set(doc) != set(_FIELDS):
            raise InputError(f"{where}: expected the fields {', '.join(_FIELDS)}")
        arrays = {}
        for name in _FIELDS[:-1]:
            try:
                x = np.asarray(doc[name], dtype=int if name == "runs" else float)
            except (TypeError, ValueError, OverflowError):
                raise InputError(f"{where}.{name}: expected {k} numbers") from None
            if x.shape != (k,) or not np.isfinite(x).all():
                raise InputError(f"{where}.{name}: expected {k} finite numbers, got shape {x.shape}")
            arrays[name] = x
        if (arrays["runs"] < 0).any() or (arrays["prior_time_ms"] <= 0).any() or (arrays["prior_watts"] <= 0).any():
            raise InputError(f"{where}: runs must be >= 0 and the prior's time and watts > 0")
        excluded = doc["excluded"]
        if not (isinstance(excluded, list) and all(isinstance(i, int) and 0 <= i < k for i in excluded)):
            raise InputError(f"{where}.excluded: expected setting indices in [0, {k})")
        return cls(**arrays, excluded=tuple(excluded))


_FIELDS = ("prior_time_ms", "prior_watts", "runs", "log_time", "log_watts", "sd_time", "sd_watts", "excluded")


@dataclass(eq=False)
class Profile:
    """What a job learnt on a GPU model through a knob: per phase (by name), its curves over ``settings`` [K x 2]."""

    gpu: str
    job: str
    knob: str
    settings: np.ndarray
    phases: dict[str, PhaseCurves]

    def to_dict(self) -> dict:
        """The profile file's document."""
        return {"kind": KIND, "version": VERSION, "gpu": self.gpu, "job": self.job, "knob": self.knob,
                "settings": self.settings.tolist(), "phases": {k: v.to_dict() for k, v in self.phases.items()}}

    def write(self, path: str | Path) -> None:
        """Write through a temporary file and a rename: a crash leaves the earlier file whole."""
        write_json_atomic(path, self.to_dict())

    def mismatch(self, gpu: str, job: str, knob: str, settings: np.ndarray) -> str | None:
        """Why this profile is not one of ``gpu``, ``job`` and ``knob`` over ``settings``; None where it is."""
        for what, mine, theirs in (("GPU", self.gpu, gpu), ("job", self.job, job), ("knob", self.knob, knob)):
            if mine != theirs:
                return f"it is of {what} {mine!r}, this run's is {theirs!r}"
        if self.settings.shape != settings.shape or not np.allclose(self.settings, settings):
            return f"its {len(self.settings)} settings are not this run's {len(settings)}"
        return None


def read_profile(path: str | Path) -> Profile:
    """Read a profile file; anything wrong with it is one `InputError` naming the file."""
    doc = read_json(path)
    if not isinstance(doc, dict) or doc.get("kind") != KIND:
        raise InputError(f"{path}: not a gpudvfs profile (no \"kind\": \"{KIND}\")")
    if doc.get("version") != VERSION:
        raise InputError(f"{path}: unknown profile version {doc.get('version')!r}; this gpudvfs reads {VERSION}")
    for name in ("gpu", "job", "knob"):
        if not isinstance(doc.get(name), str) or not doc[name]:
            raise InputError(f"{path}: {name} must be a non-empty string")
    try:
        settings = np.asarray(doc.get("settings"), dtype=float)
    except (TypeError, ValueError, OverflowError):
        raise InputError(f"{path}: settings must be [K x 2] numbers") from None
    if settings.ndim != 2 or settings.shape[1] != 2 or len(settings) == 0 or not (settings > 0).all():
        raise InputError(f"{path}: settings must be [K x 2] positive numbers, got shape {settings.shape}")
    phases = doc.get("phases")
    if not isinstance(phases, dict):
        raise InputError(f"{path}: phases must be an object of phase name to curves")
    curves = {str(name): PhaseCurves.from_dict(v, len(settings), f"{path}: phases.{name}")
              for name, v in phases.items()}
    return Profile(doc["gpu"], doc["job"], doc["knob"], settings, curves)


class ProfileKeeper:
    """A running job's profile: read at start, phases seeded from it, written as the job runs.

    A missing file starts empty. A corrupt one is refused (`InputError`) and never written. One
    of another GPU, job, knob or set of settings is neither used nor written (one
    `GpudvfsWarning` saying why); ``used`` is then False. ``write_s``: seconds between writes.
    """

    def __init__(self, path: str | Path, *, gpu: str, job: str, knob: str, settings: ArrayLike,
                 write_s: float = WRITE_S, clock: Callable[[], float] = time.monotonic) -> None:
        if not isinstance(job, str) or not job:
            raise InputError(f"job must be a non-empty string (the training job the profile is of), got {job!r}")
        self.path = Path(path)
        if not self.path.parent.is_dir():
            raise InputError(f"profile_path {str(path)!r}: the folder {str(self.path.parent)!r} does not exist")
        cfg = np.asarray(settings, dtype=float)
        self.profile = Profile(gpu, job, knob, cfg, {})
        self.used, self.writes = True, True
        if self.path.exists():
            found = read_profile(self.path)
            why = found.mismatch(gpu, job, knob, cfg)
            if why is None:
                self.profile = found
            else:
                self.used = self.writes = False
                warnings.warn(GpudvfsWarning(
                    f"gpudvfs: profile {self.path} not used, nor written: {why}; pass a profile_path of this "
                    "GPU model, job and knob's own"), stacklevel=3)
        self.write_s, self.clock = write_s, clock
        self._priors: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._last_write = clock()

    @property
    def known(self) -> list[str]:
        """The phases the profile holds."""
        return list(self.profile.phases)

    def start(self, gov: Governor, phase: str, time_ms: ArrayLike, watts: ArrayLike) -> bool:
        """Phase ``phase`` (new to ``gov``) begins: seeded from the profile where it holds it (True).

        Else nothing is done here, and ``time_ms`` and ``watts`` are kept as its prior.
        """
        curves = self.profile.phases.get(phase) if self.used else None
        if curves is None:
            self._priors[phase] = (np.asarray(time_ms, dtype=float), np.asarray(watts, dtype=float))
            return False
        curves.seed(gov, phase)
        self._priors[phase] = (curves.prior_time_ms, curves.prior_watts)
        return True

    def observed(self, gov: Governor, phase: str) -> None:
        """``gov``'s current phase ``phase`` observed an interval: keep its curves; write if due."""
        if phase not in self._priors:
            return
        self.profile.phases[phase] = PhaseCurves.of(gov, *self._priors[phase])
        if self.clock() - self._last_write >= self.write_s:
            self.write()

    def write(self) -> None:
        """Write the profile now (not where it is another's)."""
        if self.writes and self._priors:
            self.profile.write(self.path)
            self._last_write = self.clock()
