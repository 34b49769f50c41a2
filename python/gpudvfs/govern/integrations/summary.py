"""What a training run's steps measured and its governor decided and advises, per phase.

The body of `GovernedTraining.close`'s summary.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection

from gpudvfs.govern.advice import phase_advice
from gpudvfs.govern.governor import Governor
from gpudvfs.govern.integrations.meter import StepRecord
from gpudvfs.govern.knob import FIXED
from gpudvfs.govern.loop import nearest_config


def steps_summary(records: list[StepRecord], decisions: list[dict], counter_total_j: float | None) -> dict:
    """The steps and decisions of a run, per phase.

    ``decisions`` as logged (``phase``, ``would_core_mhz``, ...); ``counter_total_j``: the energy
    counter's total delta over the run. Returns ``steps`` per phase; ``energy_j``: the steps' sum
    and the counter's total, their relative difference and the energy sources; ``phases``: per phase
    its steps, mean time and power, energy, decisions and the pair the governor would set with its
    predicted saving; ``clocks_seen`` and ``throttle_reasons_seen``.
    """
    by_phase: dict[str, list[StepRecord]] = {}
    for r in records:
        by_phase.setdefault(r.phase, []).append(r)
    measured = [r.joules for r in records if r.joules is not None]
    step_sum = sum(measured) if measured else None
    total = counter_total_j
    phases = {}
    for name, rs in by_phase.items():
        e = [r.joules for r in rs if r.joules is not None]
        t = sum(r.time_ms for r in rs)
        last = next((d for d in reversed(decisions) if d.get("phase") == name), None)
        phases[name] = {
            "steps": len(rs), "mean_time_ms": t / len(rs),
            "mean_watts": sum(e) / (t / 1e3) if e and len(e) == len(rs) and t > 0 else None,
            "energy_j": sum(e) if e else None,
            "decisions": sum(d.get("phase") == name for d in decisions),
            "would_set": None if last is None else {
                **{k.removeprefix("would_"): v for k, v in last.items()
                   if k in ("would_limit_w", "would_core_mhz", "would_mem_mhz")},
                "predicted_saving": last["predicted_saving"], "explored": last["explored"]}}
    clocks = Counter((r.core_mhz, r.mem_mhz) for r in records if r.core_mhz is not None)
    return {
        "steps": {k: len(v) for k, v in by_phase.items()},
        "energy_j": {"step_sum": step_sum, "counter_total": total,
                     "relative_difference": None if step_sum is None or not total else (step_sum - total) / total,
                     "sources": dict(Counter(r.energy_source for r in records))},
        "phases": phases,
        "clocks_seen": [{"core_mhz": c, "mem_mhz": m, "steps": n} for (c, m), n in clocks.most_common()],
        "throttle_reasons_seen": dict(Counter(x for r in records for x in r.throttle_reasons)),
    }


def run_advice(governor: Governor | None, records: list[StepRecord], known: Collection[str],
               decisions: list[dict]) -> dict | None:
    """Per phase the governor knows, its advice (`gpudvfs.govern.advice`) as a dict; None without a governor.

    Against the setting the phase ran at most: for clocks (the core clock), the pair (core clock)
    nearest the clocks of most of its metered time; for the power limit (which the steps do not
    record), the one most of its decisions found (dry run) or set.
    """
    if governor is None:
        return None
    at: dict[str, dict[int, float]] = {}
    if governor.knob != "power-limit":
        for r in records:
            if r.phase in known and r.core_mhz is not None and r.mem_mhz is not None:
                k = nearest_config(governor.configs, (r.core_mhz, r.mem_mhz if governor.knob == "clocks" else FIXED))
                at.setdefault(r.phase, {})[k] = at.get(r.phase, {}).get(k, 0.0) + r.time_ms
    else:
        for d in decisions:
            if d.get("phase") in known:
                k = d["index"] if d.get("actual_index") is None else d["actual_index"]
                at.setdefault(d["phase"], {})[k] = at.get(d["phase"], {}).get(k, 0.0) + 1.0
    return {name: phase_advice(governor, name, max(n, key=n.__getitem__)).as_dict() for name, n in at.items()}
