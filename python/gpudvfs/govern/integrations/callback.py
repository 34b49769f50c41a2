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

    No framework is imported here.

    Parameters
    ----------
    device : str or object
        ``"nvml"``, ``"sim"`` or a device object.
    policy : str
        One of `GOVERNOR_POLICIES`.
    dry_run : bool
        Set no clock (the default).
    log_path : str or pathlib.Path or None
        A JSONL file of the steps and decisions.
    knob : str
        ``"clocks"`` or ``"power-limit"`` (`GovernedTraining`).
    **options
        Any other option of `GovernedTraining`.
    """

    def __init__(self, device: Any = "nvml", policy: str = "energy", *, dry_run: bool = True,
                 log_path: str | Path | None = None, knob: str = "clocks", **options) -> None:
        super().__init__()
        self.session = GovernedTraining(device, policy, dry_run=dry_run, log_path=log_path, knob=knob, **options)
        self.summary: dict | None = None

    def phase(self, name: str) -> AbstractContextManager[GovernedTraining]:
        """Mark a region of a phase of its own: ``with callback.phase("name"):``.

        Parameters
        ----------
        name : str
            The region's phase.

        Returns
        -------
        contextlib.AbstractContextManager
            The region (`GovernedTraining.phase`).
        """
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

        Raises
        ------
        InputError
            Where this callback, or another one of its kind, already meters ``run``: both sessions
            are closed (the run is refused before it counts a step twice).
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
