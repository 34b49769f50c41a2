"""A job's second run, started from the profile its first run saved, replayed on a trace.

Every job of the table runs once for ``steps`` steps, as `govern_replay` replays a trace (a new
job predicted from the other jobs' curves, 1% noise by default); its governor's curves are then
written to a profile file (`gpudvfs.govern.profile`) and read back, and the job runs again for
``steps`` steps seeded from it, under noise drawn anew. Each run drives its governor through
`GovernedLoop` (`phase`, then `step_end` per step). Per run: regret (the run's mean cost
per step at the settings chosen, over the least cost on the measured grid, minus 1; exploration
included) and the steps the governor explored.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gpudvfs.errors import InputError
from gpudvfs.evaluation.govern_replay import ReplaySetup
from gpudvfs.evaluation.replay_strategies import replay_knob
from gpudvfs.evaluation.replay_table import ReplayTable, Target
from gpudvfs.govern.loop import GovernedLoop
from gpudvfs.govern.profile import PhaseCurves, Profile, read_profile

#: Added to the seed for the second run's noise, so that it is not the first run's.
SECOND_RUN_SEED = 1_000_003


@dataclass(frozen=True)
class ProfileReplay:
    """Each job's first and second run (`profile_replay`), in the table's order.

    ``regret`` and ``explored`` are [jobs x 2]: the first run's, then the second's.
    """

    names: list[str]
    steps: int
    seed: int
    regret: np.ndarray
    explored: np.ndarray

    def to_dict(self) -> dict:
        """Means and worst over the jobs, and the second run's explored steps over the first's."""
        out: dict = {"jobs": len(self.names), "steps": self.steps, "seed": self.seed}
        for i, run in enumerate(("first", "second")):
            out[run] = {"regret_mean": float(self.regret[:, i].mean()), "regret_max": float(self.regret[:, i].max()),
                        "explored_steps": int(self.explored[:, i].sum())}
        out["second"]["jobs_within_0.2%"] = float(np.mean(self.regret[:, 1] <= 0.002))
        out["explored_ratio"] = float(self.explored[:, 1].sum() / max(self.explored[:, 0].sum(), 1))
        return out


def _run(loop: GovernedLoop, table: ReplayTable, target: Target, a: int, noise: np.ndarray) -> tuple[float, int]:
    """Job ``a``'s run (its phase started on ``loop``), a step per row of ``noise``: regret, explored steps."""
    truth = target.objective(table, table.time_ms[a], table.watts[a])
    spent, explored = 0.0, 0
    for dt, dp in noise:
        k, decision = loop.held, loop.last_decision  # the decision the step runs by
        assert k is not None and decision is not None  # the phase decided
        explored += decision["explored"]
        loop.step_end(time_ms=table.time_ms[a, k] * (1 + dt), watts=table.watts[a, k] * (1 + dp))
        spent += truth[k]
    best = truth[target.select(table, table.time_ms[[a]], table.watts[[a]], table.configs, table.default_index)[0]]
    return float(spent / len(noise) / best - 1.0), explored


def profile_replay(table: ReplayTable, gpu: str, *, policy: str = "cost", eta: float = 0.5, slowdown: float = 0.1,
                   power_cap_w: float | None = None, steps: int = 2000, seed: int = 0,
                   noise: float = 0.01, **governor: float | None) -> ProfileReplay:
    """Each job's first run, its profile saved and read back, and its second run from it (module notes).

    ``gpu`` names the table's GPU in the profiles; the policy's arguments are `replay`'s; ``governor``:
    constants other than the defaults (``recheck_z``, ...; None: the default), the same in both runs.

    Raises
    ------
    InputError
        As `ReplaySetup.draw`, or where a profile read back is not the job's.
    """
    target = Target(policy, slowdown, power_cap_w, eta)
    first = ReplaySetup.draw(table, target, steps, steps, seed, noise, each_once=True)
    second = ReplaySetup.draw(table, target, steps, steps, seed + SECOND_RUN_SEED, noise, each_once=True)
    regret, explored = np.zeros((len(table.names), 2)), np.zeros((len(table.names), 2), dtype=int)
    gov1, gov2 = (target.governor(table, noise_sd=max(noise, 1e-3), **governor) for _ in range(2))
    loop1, loop2 = GovernedLoop(gov1, replay_knob), GovernedLoop(gov2, replay_knob)
    with tempfile.TemporaryDirectory() as folder:
        for i, (a, _) in enumerate(first.plan):
            name = table.names[a]
            loop1.phase(name, table.time_pred[a], table.watts_pred[a])
            regret[a, 0], explored[a, 0] = _run(loop1, table, target, a, first.draws[i * steps:(i + 1) * steps])
            path = Path(folder) / f"{i}.json"
            Profile(gpu, name, table.knob, table.configs,
                    {"train": PhaseCurves.of(gov1, table.time_pred[a], table.watts_pred[a])}).write(path)
            profile = read_profile(path)
            if (why := profile.mismatch(gpu, name, table.knob, table.configs)) is not None:
                raise InputError(f"{path}: {why}")
            profile.phases["train"].seed(gov2, name)
        for i, (a, _) in enumerate(second.plan):
            loop2.phase(table.names[a], None, None)
            regret[a, 1], explored[a, 1] = _run(loop2, table, target, a, second.draws[i * steps:(i + 1) * steps])
    return ProfileReplay(table.names, steps, seed, regret, explored)
