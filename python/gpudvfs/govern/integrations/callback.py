"""`SessionCallback`: what the framework callbacks share (no framework imported here).

A callback meters one trainer's run: registered twice with one trainer (or two of them in one
trainer) it would count every step twice, so the run's start is refused (`claim`).
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from gpudvfs.errors import InputError
from gpudvfs.govern.integrations.meter import StepRecord
from gpudvfs.govern.integrations.session import GovernedTraining

#: id(run) -> (run, the callback metering it), while that callback's session is open. The run
#: (a trainer, or its state) is held so that its id is not reused meanwhile.
_CLAIMS: dict[int, tuple[object, SessionCallback]] = {}


class SessionCallback:
    """What the framework callbacks share: their `GovernedTraining` session, marked regions, the records.

    The constructor takes `GovernedTraining`'s arguments (``device``: ``"nvml"``, ``"sim"`` or a
    device object; dry run by default). Each framework's hooks map its events onto the session: a
    step's begin and end (or a lap, where the framework reports only ends), its phase (``"train"``
    or ``"eval"``; ``with callback.phase("name"):`` a region of its own), and the run's end, which
    closes the session and keeps its summary as ``callback.summary``. The hooks read none of the
    framework's arguments but the trainer or its state (`claim`, a resumed step count), and do
    nothing once the session is closed.
    """

    def __init__(self, device: Any = "nvml", policy: str = "energy", *, dry_run: bool = True,
                 log_path: str | Path | None = None, knob: str = "clocks", **options) -> None:
        super().__init__()
        self.session = GovernedTraining(device, policy, dry_run=dry_run, log_path=log_path, knob=knob, **options)
        self.summary: dict | None = None

    def phase(self, name: str) -> AbstractContextManager[GovernedTraining]:
        """Mark a region of a phase of its own: ``with callback.phase("name"):`` (`GovernedTraining.phase`)."""
        return self.session.phase(name)

    def state_dict(self) -> dict:
        """What a checkpoint keeps of the run (Lightning's callback state): its steps and knob."""
        return {"steps": self.session.meter.stopped, "knob": self.session.kept.knob}

    def load_state_dict(self, state_dict: dict) -> None:
        """Resume from a checkpoint's state (`GovernedTraining.resume`): Lightning calls it before the run begins."""
        if not self.session.closed:
            self.session.resume(steps=state_dict.get("steps"), knob=state_dict.get("knob"))

    @property
    def records(self) -> list[StepRecord]:
        """The steps metered so far."""
        return self.session.meter.records

    def claim(self, run: object) -> None:
        """Meter ``run`` (the framework's trainer, or its state for this run) with this callback alone.

        `InputError` where this callback, or another one of its kind, already meters ``run``: both
        sessions are then closed (the run is refused before it counts a step twice).
        """
        for key, (_, owner) in list(_CLAIMS.items()):
            if owner.session.closed:
                del _CLAIMS[key]
        held = _CLAIMS.get(id(run))
        if held is not None:
            owner = held[1]
            for cb in (owner, self):
                cb.summary = cb.session.close(interrupted="InputError")
            name = type(self).__name__
            what = (f"{name} is registered twice with this trainer" if owner is self
                    else f"this trainer has two {name}s")
            raise InputError(f"{what}, which would count every step twice: pass one in callbacks=[...]")
        _CLAIMS[id(run)] = (run, self)
