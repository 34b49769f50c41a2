"""Running jobs on calibrated GPUs, and the clocks that keep a cluster within its power budget.

A jobs file names, for each GPU (by UUID), the job running on it and that job's profile at
the GPU's reference (default) clocks: component utilizations under the power model's names
and the time model's nvprof counters (what `Device.profile` returns), and the measured time
per launch there:

```json
{"jobs": [{"gpu": "GPU-...", "name": "train-a", "counters": {"SP": 0.8, "DRAM": 0.3, "warps": 65536, ...},
           "time_ms": 2.41}]}
```
Each GPU's own models (from the registry) predict the job's time and power at each of its
clock pairs; `budget.solve_budget` picks one pair per GPU. The objectives add up across jobs
of different lengths because each job's time is taken relative to its time at the default
clocks: ``time`` minimizes the sum of slowdown factors; ``energy`` the energy of one
default-clock second of every job's work (watts x relative time).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gpudvfs.data.jsonfile import read_json, write_json_atomic
from gpudvfs.errors import InputError
from gpudvfs.fleet.budget import solve_budget
from gpudvfs.fleet.registry import Registry
from gpudvfs.hardware.apps import APPS
from gpudvfs.hardware.chips import chip_device
from gpudvfs.hardware.device import Workload
from gpudvfs.limits import is_finite_number, is_number
from gpudvfs.time import KernelProfile, TimeModel

OBJECTIVES = ("time", "energy")


@dataclass(frozen=True)
class Job:
    """The job running on GPU ``gpu`` (UUID), profiled at its default clocks.

    ``counters``: component utilizations (the power model's names) and time-model counters
    (nvprof's); ``time_ms``: measured time per launch there (None: not measured).
    """

    gpu: str
    name: str
    counters: dict[str, float]
    time_ms: float | None


def read_jobs(path: str | Path) -> list[Job]:
    """Read a jobs file (module notes): one job per GPU, in the file's order.

    `InputError` where the file is not a non-empty list of jobs with a GPU, a name and counters, a
    positive time where given, one job per GPU.
    """
    doc = read_json(path)
    items = doc.get("jobs") if isinstance(doc, dict) else None
    if not isinstance(items, list) or not items:
        raise InputError(f"{path}: expected an object with a non-empty list 'jobs'")
    jobs: list[Job] = []
    seen: dict[str, int] = {}
    for i, item in enumerate(items):
        where = f"{path}: jobs[{i}]"
        if not isinstance(item, dict) or not all(isinstance(item.get(k), str) and item[k] for k in ("gpu", "name")):
            raise InputError(f"{where}: expected an object with a non-empty 'gpu' (UUID) and 'name'")
        counters, t = item.get("counters"), item.get("time_ms")
        if not isinstance(counters, dict) or not counters or not all(is_number(v) for v in counters.values()):
            raise InputError(f"{where}: 'counters' must be a non-empty object of numbers")
        if t is not None and not (is_finite_number(t) and t > 0):
            raise InputError(f"{where}: 'time_ms' must be a positive number, got {t!r}")
        if item["gpu"] in seen:
            raise InputError(f"{where}: GPU {item['gpu']} already runs jobs[{seen[item['gpu']]}]; one job per GPU")
        seen[item["gpu"]] = i
        jobs.append(Job(item["gpu"], item["name"], {k: float(v) for k, v in counters.items()},
                        None if t is None else float(t)))
    return jobs


@dataclass(frozen=True)
class JobGrid:
    """Per job, its GPU's clock pairs and the predicted power, time and relative time there.

    ``configs`` [jobs x pairs x 2] (core, memory) MHz, padded with NaN to the longest grid;
    ``watts``, ``time_ms`` (per launch) and ``relative_time`` (to the default clocks') [jobs x pairs];
    ``default_watts`` [jobs] at the GPU's default clocks.
    """

    configs: np.ndarray    # [jobs x pairs x 2]
    watts: np.ndarray      # [jobs x pairs]
    time_ms: np.ndarray
    relative_time: np.ndarray
    default_watts: np.ndarray  # [jobs]: at the GPU's default clocks


def predict_jobs(registry: Registry, jobs: list[Job]) -> JobGrid:
    """Each job's time and power at each of its GPU's clock pairs, by its GPU's own models.

    `InputError` where a GPU is not in the registry, or a job lacks a power model component.
    """
    rows = []
    for j in jobs:
        pm, td = registry.power_model(j.gpu), registry.time_device(j.gpu)
        ref = tuple(registry.entries[j.gpu]["reference_mhz"])
        cfg = pm.configs_
        missing = [c for c in pm.components_ if c not in j.counters]
        if missing:
            raise InputError(f"job {j.name!r} on {j.gpu}: no utilization for {missing} (the power model's components)")
        util = np.array([[j.counters[c] for c in pm.components_]])
        prof = KernelProfile.from_counters(j.name, j.counters, device=td, reference_mhz=ref,
                                           reference_time_ms=j.time_ms)
        at = np.vstack([cfg, ref])  # the pairs, then the default clocks
        t = TimeModel(td).predict(prof, at[:, 0], at[:, 1], calibrate=j.time_ms is not None)
        watts = pm.predict_grid(util, at)[0]
        rows.append((cfg, watts[:-1], t[:-1], t[:-1] / t[-1], watts[-1]))
    width = max(len(r[0]) for r in rows)

    def pad(k: int, fill: float) -> np.ndarray:
        return np.stack([np.concatenate([r[k], np.full((width - len(r[k]), *r[k].shape[1:]), fill)]) for r in rows])

    return JobGrid(pad(0, np.nan), pad(1, np.nan), pad(2, np.nan), pad(3, np.nan), np.array([r[4] for r in rows]))


def plan_budget(registry: Registry, jobs: list[Job], budget_w: float, objective: str = "time",
                slowdown: float | None = None) -> dict:
    """One clock pair per GPU: total predicted power within ``budget_w`` (W), the objective least.

    ``objective`` is one of `OBJECTIVES` (module notes); ``slowdown`` forbids pairs more than this
    fraction slower than the default clocks. The plan: ``watts``, ``objective_value``, ``bound``,
    ``gap_bound``, ``default_watts`` and per job (``jobs``) its pair, watts, time and relative time.
    `InputError` for an unknown objective, a negative slowdown, or a budget no choice meets.
    """
    if objective not in OBJECTIVES:
        raise InputError(f"unknown objective {objective!r}; expected one of {OBJECTIVES}")
    if slowdown is not None and not slowdown >= 0:
        raise InputError(f"slowdown must be >= 0, got {slowdown}")
    g = predict_jobs(registry, jobs)
    value = g.relative_time if objective == "time" else g.watts * g.relative_time
    if slowdown is not None:
        value = np.where(g.relative_time <= 1.0 + slowdown + 1e-12, value, np.nan)
    watts = np.where(np.isnan(g.watts), 0.0, g.watts)  # padding: forbidden by its NaN value
    try:
        sol = solve_budget(watts, value, budget_w)
    except InputError as e:
        raise InputError(f"budget {budget_w:g} W: {e}") from None
    rows = np.arange(len(jobs))
    k = sol.choice
    return {"objective": objective, "budget_w": budget_w, "slowdown": slowdown, "gpus": len(jobs),
            "watts": float(g.watts[rows, k].sum()), "objective_value": sol.value, "bound": sol.bound,
            "gap_bound": sol.gap_bound, "default_watts": float(g.default_watts.sum()),
            "jobs": [{"gpu": j.gpu, "job": j.name, "core_mhz": float(g.configs[i, k[i], 0]),
                      "mem_mhz": float(g.configs[i, k[i], 1]), "watts": float(g.watts[i, k[i]]),
                      "time_ms": float(g.time_ms[i, k[i]]), "relative_time": float(g.relative_time[i, k[i]])}
                     for i, j in enumerate(jobs)]}


def simulated_jobs(registry: Registry, workloads: Iterable[Workload] | None = None) -> list[Job]:
    """Jobs for a registry of simulated chips: workload i % len(workloads) on GPU i, profiled and timed there.

    ``workloads`` None: the demo's real workloads (`gpudvfs.hardware.apps.APPS`). `InputError` where
    a GPU of the registry is not simulated.
    """
    workloads = list(workloads or APPS)
    jobs = []
    for i, (uuid, entry) in enumerate(registry.entries.items()):
        if entry["identity"].get("kind") != "simulated":
            raise InputError(f"GPU {uuid} is not simulated: profile its job on it")
        device, w = chip_device(uuid), workloads[i % len(workloads)]
        device.lock_clocks(*device.default_clocks())
        jobs.append(Job(uuid, w.name, device.profile(w), device.measure(w).time_ms))
    return jobs


def write_jobs(jobs: list[Job], path: str | Path) -> None:
    """Write a jobs file (module notes), atomically."""
    write_json_atomic(path, {"jobs": [{"gpu": j.gpu, "name": j.name, "counters": j.counters, "time_ms": j.time_ms}
                                      for j in jobs]})
