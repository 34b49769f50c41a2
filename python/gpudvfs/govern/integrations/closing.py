"""How a training run ends: the line it prints, and runs left open closed at exit.

A run begun and not closed (a plain loop without ``with``, or a Hugging Face ``Trainer`` left by
Ctrl-C, which has no exception hook) is closed by an `atexit` hook, as interrupted, so that its
clocks are put back and its summary written. ``atexit`` with a registry of open runs rather
than ``weakref.finalize``: closing needs the run itself (its meter, governor and device), which
a finalizer's callback must not hold, and a run kept open until exit is always closed.
"""

from __future__ import annotations

import atexit
import sys
from typing import Any

from gpudvfs.govern.integrations.meter import StepRecord

_OPEN: set[Any] = set()


def track(run: Any) -> None:
    """Close ``run`` (a `GovernedTraining` begun) at exit unless it is closed first."""
    _OPEN.add(run)


def forget(run: Any) -> None:
    """``run`` is being closed."""
    _OPEN.discard(run)


@atexit.register
def _close_open_runs() -> None:
    last = getattr(sys, "last_type", None)  # the exception that ended the program, if any
    why = last.__name__ if last is not None else "the process exited without close()"
    for run in list(_OPEN):
        try:
            if not run.meter.stopped:
                run.quiet = True  # begun, no step: nothing to say
            run.close(interrupted=why)
        except Exception as e:  # one run's failure must not keep the others' clocks set
            print(f"gpudvfs: closing a training run at exit failed: {type(e).__name__}: {e}", file=sys.stderr)


def why_no_decision(summary: dict, records: list[StepRecord], observe_s: float, warmup_steps: int) -> str:
    """Why a run made no decision.

    A phase's first window (``observe_s`` of steps past warmup, with energy and clocks read) sets
    its prior and makes its first decision.
    """
    if summary["grid"] is None:
        return "no governor on this device (the summary's notes say why)"
    if not records:
        return "no step was metered"
    if all(r.joules is None for r in records):
        return "no step's energy could be read"
    if all(r.core_mhz is None or r.mem_mhz is None for r in records):
        return "no step's clocks could be read"
    counted: dict[str, list[float]] = {}
    for r in records:
        if r.phase_step > warmup_steps and r.joules is not None:
            counted.setdefault(r.phase, []).append(r.time_ms)
    if not counted:
        return f"every phase ran at most warmup_steps={warmup_steps} steps"
    phase, times = max(counted.items(), key=lambda kv: sum(kv[1]))
    return (f"a phase's first observe_s={observe_s:g} s of steps makes its first decision, and the longest, "
            f"{phase!r}, ran {sum(times) / 1e3:.3g} s in {len(times)} steps past warmup: pass a smaller observe_s "
            "or run longer")


def end_line(summary: dict, records: list[StepRecord], observe_s: float, warmup_steps: int) -> str:
    """One line: the steps per phase, their time and energy (the job's where data parallel), the decisions.

    And whether clocks were set, and why no decision where none was made.
    """
    steps = summary["steps"]
    head = "gpudvfs: " + (f"run interrupted ({summary['interrupted']}): " if summary["interrupted"] else "")
    ranks = summary["ranks"] or {}
    joules = ranks.get("job_energy_j", summary["energy_j"]["step_sum"])
    energy = "energy unread" if joules is None else f"{joules:.4g} J" + (
        f" over {ranks['world_size']} ranks" if "job_energy_j" in ranks else "")
    clocks = ("clocks set" if summary["clocks_set"] else
              "dry run: no clock set" if summary["dry_run"] else "no clock set")
    line = (f"{head}{sum(steps.values())} steps ({', '.join(f'{k} {v}' for k, v in steps.items()) or 'none'}) "
            f"in {sum(r.time_ms for r in records) / 1e3:.3g} s, {energy}; {summary['decisions']} decisions ({clocks})")
    if summary["decisions"] == 0:
        line += "; no decision: " + why_no_decision(summary, records, observe_s, warmup_steps)
    return line


def say(summary: dict, records: list[StepRecord], observe_s: float, warmup_steps: int) -> None:
    """Print `end_line` to standard error."""
    print(end_line(summary, records, observe_s, warmup_steps), file=sys.stderr)
