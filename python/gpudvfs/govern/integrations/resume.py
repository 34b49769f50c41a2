"""A training run resumed on its log: what the earlier runs metered and decided, read back.

Every run writes a ``"kind": "run"`` line when it begins (its first step number, knob, GPU
and whether it resumed). A resumed run reads its log back: its step numbers go on from the
log's last, its lines are appended (a last line torn by a crash, never a whole record, is
cut off and kept in the resumed run's ``"run"`` line as ``torn_line``), and its summary is
computed over the log's earlier steps and decisions and its own, its counter total the sum of
each earlier run's (the last step's ``counter_j`` of each run) and its own: the energy between
the runs is not counted.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from gpudvfs.errors import InputError
from gpudvfs.govern.integrations.meter import StepRecord


@dataclass(frozen=True)
class History:
    """What a log holds of the runs before this one (empty: a run not resumed).

    ``counter_j`` is the sum of the earlier runs' counter totals (None where one had no
    counter); ``knob`` the last run's (None where its log names none).
    """

    steps: list[StepRecord] = field(default_factory=list)
    decisions: list[dict] = field(default_factory=list)
    counter_j: float | None = 0.0
    runs: int = 0
    knob: str | None = None
    last_step: int = 0
    torn_line: str | None = None

    def merged(self, records: list[StepRecord], decisions: list[dict],
               counter_total_j: float | None) -> tuple[list[StepRecord], list[dict], float | None]:
        """The earlier runs' steps, decisions and counter total, then this run's."""
        if not self.runs:
            return records, decisions, counter_total_j
        total = None if self.counter_j is None or counter_total_j is None else self.counter_j + counter_total_j
        return self.steps + records, self.decisions + decisions, total

    def note(self) -> dict | None:
        """The summary's account of the earlier runs (None: not resumed)."""
        if not self.runs:
            return None
        return {"earlier_runs": self.runs, "earlier_steps": len(self.steps), "first_step": self.last_step + 1,
                "counted": "the summary covers every run's steps and decisions read back from the log; the "
                           "counter total is the sum of the runs' (the energy between runs is not counted)"}


def read_history(path: str | Path) -> History:
    """Read a run's log back (module notes); cuts a torn last line off (``torn_line``).

    A line that is not JSON, or a step line without a step's fields, is an `InputError` naming
    the file and line; a missing or empty log is no history.
    """
    path = Path(path)
    if not path.exists():
        return History()
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"{path}: the log cannot be read to resume ({e})") from None
    lines = text.split("\n")
    torn = lines.pop()
    if torn:  # a crash mid-line: cut off, so that the log stays one JSON document a line
        os.truncate(path, len(text.encode("utf-8")) - len(torn.encode("utf-8")))
    steps: list[StepRecord] = []
    decisions: list[dict] = []
    last: dict[int, float | None] = {}  # run -> its last step's counter_j
    runs, knob = 0, None
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except json.JSONDecodeError as e:
            raise InputError(f"{path}:{n}: not a JSON line ({e.msg}); the log cannot be resumed") from None
        kind = entry.get("kind") if isinstance(entry, dict) else None
        if kind == "run":
            runs += 1
            knob = entry.get("knob")
        elif kind == "decision":
            decisions.append(entry)
        elif kind == "step":
            try:
                rec = StepRecord(**{**entry, "throttle_reasons": tuple(entry["throttle_reasons"])})
            except (KeyError, TypeError) as e:
                raise InputError(f"{path}:{n}: a step line without a step's fields ({e})") from None
            steps.append(rec)
            last[max(runs, 1)] = rec.counter_j
    runs = max(runs, 1 if steps else 0)
    counters = [last.get(r) for r in range(1, runs + 1) if r in last]
    total = None if any(c is None for c in counters) else float(sum(c for c in counters if c is not None))
    return History(steps, decisions, total, runs, knob, max((s.step for s in steps), default=0), torn or None)


def run_line(first_step: int, knob: str, device: str | None, history: History | None) -> dict:
    """The line a run writes to its log when it begins (``history``: resumed)."""
    line = {"kind": "run", "first_step": first_step, "knob": knob, "device": device, "resumed": history is not None}
    return line if history is None or history.torn_line is None else line | {"torn_line": history.torn_line}
