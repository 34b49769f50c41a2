"""A recorded training run's steps replayed through the step meter and the governor, in dry run.

`RecordedSteps` is a stand-in `StepDevice`: as a step begins its virtual clock and energy counter
move to where the record's step began (its ``start_s``; its ``counter_j`` less its ``joules``, so
the energy between steps stays in the counter's total), and as it ends to where it ended, with
the clocks and throttle reasons recorded. `GovernedTraining` meters it as it metered the GPU, so
the replay's steps' sum and counter total are the record's, and its governor observes the windows
the recorded one did.
"""

from __future__ import annotations

import json
from pathlib import Path

from gpudvfs.catalog import SupportedClocks, lookup
from gpudvfs.data.jsonfile import read_json
from gpudvfs.errors import InputError
from gpudvfs.govern.integrations import GovernedTraining
from gpudvfs.hardware.device import ClockPermissionError, Measurement, Workload

#: Step-record fields the replay reads.
FIELDS = ("step", "phase", "start_s", "time_ms", "joules", "core_mhz", "mem_mhz", "throttle_reasons", "counter_j")


def read_steps(path: str | Path) -> list[dict]:
    """The step records of a `StepMeter` log (decisions left out); `InputError` naming a line that lacks a field."""
    steps = []
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"{path}: cannot be read as a JSONL log ({e})") from None
    for i, line in enumerate(lines, start=1):
        try:
            entry = json.loads(line)
        except json.JSONDecodeError as e:
            raise InputError(f"{path}: line {i}: not JSON ({e.msg})") from None
        if not isinstance(entry, dict) or entry.get("kind") != "step":
            continue
        missing = [k for k in FIELDS if entry.get(k) is None]
        if missing:
            raise InputError(f"{path}: line {i}: a step record without {missing}: the replay needs its time, energy, "
                             "clocks and counter")
        steps.append(entry)
    if not steps:
        raise InputError(f"{path}: no step records (\"kind\": \"step\")")
    return steps


class RecordedSteps:
    """The recorded steps of one run as a device (module notes); its clock lists are its catalog entry's."""

    def __init__(self, steps: list[dict], name: str, default_mhz: tuple[float, float]) -> None:
        self.steps, self.name, self._default = steps, name, default_mhz
        self._pairs = SupportedClocks.of_spec(lookup(name)).pairs
        self._next = 0
        self._now = 0.0
        self._energy = 0.0
        self._at = steps[0]

    def now(self) -> float:
        """The record's time, s since its meter began."""
        return self._now

    def begin_step(self, phase: str) -> None:
        """Move to the next record's start; `InputError` where it is of another phase or none is left."""
        if self._next >= len(self.steps):
            raise InputError(f"the record has {len(self.steps)} steps; a step {self._next + 1} was begun")
        s = self._at = self.steps[self._next]
        if s["phase"] != phase:
            raise InputError(f"recorded step {s['step']} is of phase {s['phase']!r}, replayed as {phase!r}")
        self._now, self._energy = s["start_s"], s["counter_j"] - s["joules"]

    def end_step(self) -> None:
        """Move to the record's end."""
        s = self._at
        self._now, self._energy = s["start_s"] + s["time_ms"] / 1e3, s["counter_j"]
        self._next += 1

    def energy_joules(self) -> float:
        """The record's counter, J since its meter began."""
        return self._energy

    @property
    def clocks(self) -> tuple[float, float]:
        """The clocks recorded at the step's end."""
        return float(self._at["core_mhz"]), float(self._at["mem_mhz"])

    def throttle_reasons(self) -> tuple[str, ...]:
        """Those recorded for the step."""
        return tuple(self._at["throttle_reasons"])

    def default_clocks(self) -> tuple[float, float]:
        """The run's default clocks (its summary's grid)."""
        return self._default

    def memory_clocks(self) -> list[float]:
        """The catalog's, highest first."""
        return sorted({float(m) for m in self._pairs[:, 1]}, reverse=True)

    def core_clocks(self, mem_mhz: float) -> list[float]:
        """The catalog's at ``mem_mhz``, highest first."""
        return sorted((float(c) for c in self._pairs[self._pairs[:, 1] == mem_mhz, 0]), reverse=True)

    # The rest of the Device protocol: a record runs nothing and takes no setting (a dry run).

    def sm_count(self) -> int:
        """The catalog's."""
        return lookup(self.name).sm_count

    def identity(self) -> dict[str, str | float | bool | None]:
        """The recorded GPU's catalog name."""
        return {"name": self.name, "source": "recorded steps"}

    def power_watts(self) -> float:
        """The step's mean power as recorded."""
        return float(self._at["watts"])

    def temperature_c(self) -> float:
        """Not recorded: NaN."""
        return float("nan")

    def power_limits(self) -> dict[str, float | None]:
        """Not recorded: every limit None."""
        return dict.fromkeys(("enforced", "default", "min", "max"))

    def lock_clocks(self, core_mhz: float, mem_mhz: float) -> None:
        """Refused: the clocks are the recorded ones."""
        raise ClockPermissionError("a recorded run's clocks are those it ran at")

    def lock_core_clock(self, core_mhz: float) -> None:
        """Refused: the clocks are the recorded ones."""
        raise ClockPermissionError("a recorded run's clocks are those it ran at")

    def set_power_limit(self, watts: float) -> None:
        """Refused: the record has no power limit to set."""
        raise ClockPermissionError("a recorded run's power limit is the one it ran under")

    def reset_clocks(self) -> None:
        """Nothing was set."""

    def close(self) -> None:
        """Nothing is held."""

    def check(self, workload: Workload) -> None:
        """Refused: a record runs no workload."""
        raise InputError(f"recorded steps run no workload ({workload.name})")

    def profile(self, workload: Workload) -> dict[str, float]:
        """Refused: a record runs no workload."""
        raise InputError(f"recorded steps run no workload ({workload.name})")

    def measure(self, workload: Workload, min_seconds: float = 1.0, repetitions: int | None = None) -> Measurement:
        """Refused: a record runs no workload."""
        raise InputError(f"recorded steps run no workload ({workload.name})")


def replay_run(log_path: str | Path, *, warmup_steps: int = 2, policy: str = "energy") -> tuple[dict, dict]:
    """(The replay's summary, the recorded one): the log's steps metered and observed again in dry run.

    ``warmup_steps`` is validation/dl_train.py's. The recorded summary is read from beside the log
    (``<stem>.summary.json``).

    Raises
    ------
    InputError
        Where the log or its summary is missing or malformed.
    """
    log_path = Path(log_path)
    steps = read_steps(log_path)
    summary_path = log_path.with_name(log_path.stem + ".summary.json")
    recorded = read_json(summary_path)
    try:
        name, default = recorded["device"], recorded["grid"]["default_mhz"]
    except (KeyError, TypeError) as e:
        raise InputError(f"{summary_path}: not a training summary with 'device' and 'grid.default_mhz' ({e})") from None
    device = RecordedSteps(steps, name, (float(default[0]), float(default[1])))
    gov = GovernedTraining(device, policy=policy, dry_run=True, warmup_steps=warmup_steps, distributed=None,
                           sync=None)
    with gov:
        for s in steps:
            gov.set_phase(s["phase"])
            gov.step_begin()
            gov.step_end()
    return gov.close(), recorded
