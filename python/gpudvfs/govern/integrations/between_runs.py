"""What a training run keeps between runs: its profile (`gpudvfs.govern.profile`) and, resumed, its log's history.

`GovernedTraining` holds one `BetweenRuns`: a new phase is seeded from the profile where the
profile holds it, every observation updates the profile (written at most every
`profile.WRITE_S` seconds and at close, by rank 0 alone in a data-parallel job), and a resumed
run continues its log (`resume`).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from numpy.typing import ArrayLike

from gpudvfs.errors import InputError
from gpudvfs.govern.governor import Governor
from gpudvfs.govern.integrations.meter import StepMeter, StepRecord
from gpudvfs.govern.integrations.resume import History, read_history, run_line
from gpudvfs.govern.profile import ProfileKeeper
from gpudvfs.limits import is_count


class BetweenRuns:
    """A run's profile and history (module notes).

    ``profile_path`` with ``job``: the profile kept (None: none). ``gpu``, ``knob`` and
    ``settings`` [K x 2] say what it is of; ``settings`` None (no governor): no profile is
    kept, and a note says so.
    """

    def __init__(self, profile_path: str | Path | None, job: str | None, *, gpu: str | None, knob: str,
                 settings: ArrayLike | None, notes: list[str]) -> None:
        self.knob, self.gpu = knob, gpu
        self.history = History()
        self.resumed = False
        self.profile: ProfileKeeper | None = None
        if profile_path is None:
            if job is not None:
                raise InputError("job names the profile's job: give profile_path too")
            return
        if job is None:
            raise InputError("profile_path needs job= (the name of the training job the profile is of)")
        if settings is None or gpu is None:
            notes.append(f"no governor: the profile {profile_path} is neither read nor written")
            return
        self.profile = ProfileKeeper(profile_path, gpu=gpu, job=job, knob=knob, settings=settings)

    def resume(self, meter: StepMeter, begun: bool, steps: int | None, knob: str | None) -> None:
        """Continue the log's earlier runs (`resume`): ``steps`` taken before (where no log counts them).

        ``knob``: the one a checkpoint says the earlier run turned (None: unknown).
        """
        if begun:
            raise InputError("resume() must come before the run's first step")
        if steps is not None and not is_count(steps):
            raise InputError(f"resume: steps must be an integer >= 0, got {steps!r}")
        history = History() if meter.log_path is None else read_history(meter.log_path)
        for where, theirs in (("the checkpoint", knob), (str(meter.log_path), history.knob)):
            if theirs is not None and theirs != self.knob:
                raise InputError(f"resume: {where} is of knob {theirs!r}, this run's is {self.knob!r}: resume with "
                                 f"knob={theirs!r}, or start a new log")
        meter.stopped = max(history.last_step, steps or 0)
        self.history, self.resumed = replace(history, last_step=meter.stopped), True

    def begin(self, meter: StepMeter, rank: int | None) -> None:
        """The run begins: its line in the log; only rank 0 (or a lone process) writes the profile."""
        meter.write(run_line(meter.stopped + 1, self.knob, self.gpu, self.history if self.resumed else None))
        if self.profile is not None and rank not in (None, 0):
            self.profile.writes = False

    def start(self, gov: Governor, phase: str, time_ms: ArrayLike, watts: ArrayLike) -> None:
        """A phase new to ``gov`` begins, from the profile where it holds it (`ProfileKeeper.start`)."""
        if self.profile is not None:
            self.profile.start(gov, phase, time_ms, watts)

    def observed(self, gov: Governor, phase: str) -> None:
        """``gov``'s current phase observed an interval (`ProfileKeeper.observed`)."""
        if self.profile is not None:
            self.profile.observed(gov, phase)

    def close(self) -> None:
        """The run ends: the profile written."""
        if self.profile is not None:
            self.profile.write()

    def merged(self, records: list[StepRecord], decisions: list[dict],
               counter_total_j: float | None) -> tuple[list[StepRecord], list[dict], float | None]:
        """The steps, decisions and counter total of every run of the log (`History.merged`)."""
        return self.history.merged(records, decisions, counter_total_j)
