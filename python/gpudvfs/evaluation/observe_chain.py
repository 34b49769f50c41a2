"""Observe, then predict, scored: each kernel's power from its profile, by a model observed without its windows.

The recorded run (validation/nvidia-h200: `observe-varied/`, `kernels/`) ran each kernel in
turn while `gpudvfs power observe` read the GPU; the load logged each phase's start and end on
its own clock, which started a few seconds after the readings' (its process imported PyTorch
first). The offset is found from the readings: the one that best lines the SM activity up with
the phases of work (`phase_offset`). Each kernel is then held out: the model is observed on
every window but those that overlap its phase, maps the kernel's profile into the activities
(`gpudvfs.predict.profile.power_inputs`, as `gpudvfs predict` does) and predicts its power at
the clock the driver ran it at while its power was measured, beside the catalog prior's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gpudvfs.data import read
from gpudvfs.data.profilers import CounterReport
from gpudvfs.errors import InputError
from gpudvfs.hardware.observer import Observation, read_readings
from gpudvfs.power.model import PowerModel
from gpudvfs.power.observe import fit_readings
from gpudvfs.predict.inputs import power_inputs
from gpudvfs.predict.profile import device_of, kernel_inputs
from gpudvfs.records import Record

#: The load's phase without work.
IDLE = "idle"
#: Offsets tried between the load's clock and the readings' (s): this far either way, this finely.
OFFSET_RANGE_S, OFFSET_STEP_S = 30.0, 0.01


@dataclass(frozen=True)
class Phase:
    """One phase of the observed load, on the load's clock (s)."""

    name: str
    start_s: float
    end_s: float


@dataclass(frozen=True)
class ChainRow(Record):
    """One kernel held out: its measured power and the predictions at the clocks it ran at (W).

    ``observed_w`` from its profile's activities (``mapped``), ``as_read_w`` from those the
    observation read over its windows (``read``, their median): the difference is the mapping's.
    ``observed_q`` and ``prior_q``: their 90% intervals as `gpudvfs predict` gives them (log
    half-widths). ``windows_left_out`` counts the readings that overlap its phase; ``gaps``
    says what its profile lacked to map the activities.
    """

    kernel: str
    core_mhz: float
    mem_mhz: float
    measured_w: float
    observed_w: float
    as_read_w: float
    prior_w: float
    observed_q: float
    prior_q: float
    mapped: tuple[float, ...]
    read: tuple[float, ...]
    windows_left_out: int
    gaps: tuple[str, ...]


def read_phases(path: str | Path) -> list[Phase]:
    """The load's phases: a JSON list of ``{"phase", "start_s", "end_s"}`` (`validation/dl_kernels.py load`).

    Raises InputError for a file that is not such a list.
    """
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
        phases = [Phase(str(p["phase"]), float(p["start_s"]), float(p["end_s"])) for p in doc]
    except OSError as e:
        raise InputError(f"{path}: cannot be read ({e.strerror})") from None
    except (ValueError, TypeError, KeyError):
        raise InputError(f"{path}: expected a JSON list of {{\"phase\", \"start_s\", \"end_s\"}}") from None
    if not phases or any(not p.start_s <= p.end_s for p in phases):
        raise InputError(f"{path}: expected phases that each end after they start")
    return phases


def _windows(obs: Observation) -> np.ndarray:
    """Each reading's window [n x 2] (start, end, s): from the previous reading's end, the first as long as the next."""
    t = np.array([r.t_s for r in obs.readings])
    first = t[0] - (t[1] - t[0]) if len(t) > 1 else 0.0
    return np.column_stack([np.r_[first, t[:-1]], t])


def phase_offset(obs: Observation, phases: list[Phase]) -> float:
    """The readings' time of the load's zero (s): where the SM activity best matches the phases of work.

    The first activity (GPM's SM, NVML's GPU busy fraction) at each window's middle against 1
    inside a phase of work, 0 elsewhere; the mean absolute difference is least at the offset.

    Raises InputError for fewer than two readings, or a load without a phase of work.
    """
    if len(obs.readings) < 2 or all(p.name == IDLE for p in phases):
        raise InputError("the offset needs two readings or more and a phase of work")
    mid = _windows(obs).mean(axis=1)
    busy = np.array([r.activity[0] for r in obs.readings])
    work = [(p.start_s, p.end_s) for p in phases if p.name != IDLE]
    offsets = np.arange(-OFFSET_RANGE_S, OFFSET_RANGE_S + OFFSET_STEP_S / 2, OFFSET_STEP_S)
    t = mid[None, :] - offsets[:, None]
    inside = np.zeros(t.shape, dtype=bool)
    for a, b in work:
        inside |= (t >= a) & (t <= b)
    cost = np.abs(busy[None, :] - inside).mean(axis=1)
    best = np.flatnonzero(cost <= cost.min() + 1e-12)
    return float(offsets[best[len(best) // 2]])


def phase_windows(obs: Observation, phases: list[Phase], offset_s: float) -> dict[str, set[int]]:
    """Per phase name, the readings whose window overlaps one of its phases (a window at a change belongs to both)."""
    w = _windows(obs)
    out: dict[str, set[int]] = {}
    for p in phases:
        hit = np.flatnonzero((w[:, 1] > p.start_s + offset_s) & (w[:, 0] < p.end_s + offset_s))
        out.setdefault(p.name, set()).update(hit.tolist())
    return out


def _measured(path: Path) -> tuple[float, float, float]:
    """(watts, core MHz, memory MHz) of a kernel's power run: its mean power, the median of its clock polls."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        polls = doc["polls"]
        return (float(doc["watts"]), float(np.median([p["core_mhz"] for p in polls])),
                float(np.median([p["mem_mhz"] for p in polls])))
    except OSError as e:
        raise InputError(f"{path}: cannot be read ({e.strerror})") from None
    except (ValueError, TypeError, KeyError):
        raise InputError(f"{path}: expected `dl_kernels.py power` output (watts, polls of core_mhz and "
                         "mem_mhz)") from None


def chain_table(readings: str | Path, phases: str | Path, kernels: str | Path) -> list[ChainRow]:
    """Every kernel of the load held out in turn (module docs).

    ``kernels`` holds ``NAME.ncu.csv`` (its profile) and ``NAME.power.json`` (its measured
    power, `dl_kernels.py power`) for each phase NAME of work.

    Raises InputError for a file missing or unreadable, a profile of another GPU than the readings', or
    one whose counters do not map.
    """
    obs, load = read_readings(readings), read_phases(phases)
    offset = phase_offset(obs, load)
    held = phase_windows(obs, load, offset)
    prior_obs = PowerModel.prior(obs.catalog_key, reference=obs.default_mhz)
    rows = []
    for name in dict.fromkeys(p.name for p in load if p.name != IDLE):
        report = read(Path(kernels) / f"{name}.ncu.csv")
        if not isinstance(report, CounterReport):
            raise InputError(f"{Path(kernels) / f'{name}.ncu.csv'}: expected Nsight Compute or nvprof output")
        spec = device_of(report, obs.catalog_key)
        launches = kernel_inputs(report)
        watts, core, mem = _measured(Path(kernels) / f"{name}.power.json")
        observed = fit_readings(prior_obs, obs, leave_out=held[name]).model
        utilizations = [k.utilization for k in launches]
        activity = power_inputs(report, utilizations, observed, spec)
        read_ = np.nanmedian([obs.readings[i].activity for i in sorted(held[name])], axis=0)
        prior = PowerModel.prior(spec)
        util = power_inputs(report, utilizations, prior, spec)
        rows.append(ChainRow(
            name, core, mem, watts, float(np.mean(observed.predict(activity.values, core, mem))),
            float(observed.predict(read_, core, mem)), float(np.mean(prior.predict(util.values, core, mem))),
            activity.interval(observed, observed.configs_) or 0.0, util.interval(prior, prior.configs_) or 0.0,
            tuple(activity.values.mean(axis=0).tolist()), tuple(read_.tolist()), len(held[name]), activity.gaps))
    return rows

