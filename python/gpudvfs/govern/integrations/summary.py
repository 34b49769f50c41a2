"""What a training run's steps measured and its governor decided, per phase.

The body of `GovernedTraining.close`'s summary.
"""

from __future__ import annotations

from collections import Counter

from gpudvfs.govern.integrations.meter import StepRecord


def steps_summary(records: list[StepRecord], decisions: list[dict], counter_total_j: float | None) -> dict:
    """The steps and decisions of a run, per phase.

    Parameters
    ----------
    records : list of StepRecord
        The steps metered.
    decisions : list of dict
        The governor's decisions, as logged (``phase``, ``would_core_mhz``, ...).
    counter_total_j : float or None
        The energy counter's total delta over the run (None without one).

    Returns
    -------
    dict
        ``steps`` per phase; ``energy_j``: the steps' sum and the counter's total, their
        relative difference and the energy sources; ``phases``: per phase its steps, mean time
        and power, energy, decisions and the pair the governor would set with its predicted
        saving; ``clocks_seen`` and ``throttle_reasons_seen``.
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
                "core_mhz": last["would_core_mhz"], "mem_mhz": last["would_mem_mhz"],
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
