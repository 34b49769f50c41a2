"""What a sweep is and the record beside its CSV: its plan and the workloads' profiles.

``OUT.sweep.json`` (rewritten atomically) records what the sweep measures (its *plan*: device
identity, workloads, clock pairs, measurement length, columns), the reference clocks and the
counters of each workload, profiled once at the reference (default) configuration. A sweep
resumes only where its record's plan is this run's (`plan_differences`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from gpudvfs.data.jsonfile import read_versioned, write_json_atomic
from gpudvfs.errors import InputError
from gpudvfs.hardware.device import Device, Workload
from gpudvfs.limits import is_number

#: The columns of a sweep's CSV (the `tidy` format), in order.
COLUMNS = ("workload", "core_mhz", "mem_mhz", "time_ms", "watts", "joules", "repetitions",
           "duration_s", "power_source", "throttled", "throttle_reasons", "temperature_c", "result")
RECORD_VERSION = 1


def record_path(out: str | Path) -> Path:
    """``OUT.sweep.json`` beside a sweep's CSV: its plan and the workloads' reference profiles."""
    out = Path(out)
    return out.with_name(out.name + ".sweep.json")


def workload_record(w: Workload) -> dict:
    """What a workload is, as plain data: two sweeps of equal records measure the same thing."""
    fn = w.spec or (None if w.fn is None else f"{w.fn.__module__}:{w.fn.__qualname__}")
    # The kernel a profile reads decides the record's profiles (absent: the first launched).
    which = {"profile_kernel": w.profile_kernel} if w.profile_kernel else {}
    return {"name": w.name, "kernel": w.kernel, "params": dict(w.params), "callable": fn,
            "counters": dict(w.counters), **which}


def sweep_plan(device: Device, workloads: Sequence[Workload], configs: Sequence[tuple[float, float]],
               min_seconds: float, repetitions: int | None, profile: bool = True, leave_clocks: bool = False) -> dict:
    """Everything that decides a sweep's rows, as plain JSON (a plan read back compares equal); a resume must match it.

    ``configs`` is empty for a sweep at the driver's clocks (``leave_clocks``, which the plan says).
    """
    # The key only where clocks are left: records written before it still resume.
    left = {"leave_clocks": True} if leave_clocks else {}
    return json.loads(json.dumps({"device": device.identity(), "workloads": [workload_record(w) for w in workloads],
            "configs": [[float(c), float(m)] for c, m in configs],
            "protocol": {"min_seconds": None if repetitions is not None else float(min_seconds),
                         "repetitions": repetitions},
            "columns": list(COLUMNS), "profiled": profile, **left}))


def plan_differences(old: dict, new: dict) -> list[str]:
    """How the record's plan (`load_record`) differs from this run's (`sweep_plan`), a phrase each; empty: none."""
    diffs = []
    if old.get("device") != new["device"]:
        diffs.append(f"device {old.get('device')} != {new['device']}")
    # load_record checked that every workload of a record has a name.
    old_w: dict[str, dict] = {w["name"]: w for w in old["workloads"]}
    new_w: dict[str, dict] = {w["name"]: w for w in new["workloads"]}
    if old_w != new_w:
        added, removed = sorted(set(new_w) - set(old_w)), sorted(set(old_w) - set(new_w))
        changed = sorted(n for n in set(old_w) & set(new_w) if old_w[n] != new_w[n])
        parts = [f"{k} {v}" for k, v in (("not in the sweep:", added), ("missing here:", removed),
                                        ("defined differently:", changed)) if v]
        diffs.append("workloads " + "; ".join(parts))
    if old.get("configs") != new["configs"]:
        diffs.append(f"clock pairs ({len(old.get('configs') or [])} in the sweep, {len(new['configs'])} here)")
    for key in ("protocol", "columns"):
        if old.get(key) != new[key]:
            diffs.append(f"{key} {old.get(key)} != {new[key]}")
    if old.get("leave_clocks", False) != new.get("leave_clocks", False):
        diffs.append("clocks left to the driver" if old.get("leave_clocks") else "clocks locked per pair")
    if old.get("profiled", True) != new["profiled"]:  # records before the option profiled
        diffs.append("profiled at the reference" if old.get("profiled", True) else "not profiled")
    return diffs


def load_record(out: str | Path) -> dict:
    """``plan``, ``reference_mhz`` and ``profiles`` (workload -> counters) of a sweep's CSV, checked.

    `InputError` where the record is missing, of another version, or not the shape of a sweep record.
    """
    path = record_path(out)
    doc = read_versioned(path, "sweep", RECORD_VERSION)
    plan, profiles, ref = doc.get("plan"), doc.get("profiles"), doc.get("reference_mhz")
    shapes = isinstance(plan, dict) and _is_plan(plan) and isinstance(profiles, dict) and _numbers(ref, 2) and all(
        isinstance(v, dict) and all(_numbers([x], 1) for x in v.values()) for v in profiles.values())
    if not shapes:
        raise InputError(f"{path}: not a sweep record gpudvfs can use (it needs a plan with workloads and clock "
                         "pairs, the reference clocks and profiles of numbers): damaged?")
    return doc


def _is_plan(plan: dict) -> bool:
    """Whether a record's plan has named workloads and clock pairs."""
    workloads, configs = plan.get("workloads"), plan.get("configs")
    return (isinstance(workloads, list) and all(isinstance(w, dict) and isinstance(w.get("name"), str)
                                                for w in workloads)
            and isinstance(configs, list) and all(_numbers(c, 2) for c in configs))


def _numbers(values: object, n: int) -> bool:
    return (isinstance(values, list) and len(values) == n
            and all(is_number(v) for v in values))


def save_record(out: Path, plan: dict, device: Device, profiles: dict[str, dict[str, float]]) -> None:
    """Write a sweep's record beside its CSV, atomically, with the counters profiled at the reference so far."""
    write_json_atomic(record_path(out), {"kind": "sweep", "version": RECORD_VERSION, "plan": plan,
                                         "reference_mhz": list(device.default_clocks()), "profiles": profiles})
