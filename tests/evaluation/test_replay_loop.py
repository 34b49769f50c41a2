"""The replays run the governor through its one control loop, `GovernedLoop`: its log sees every decision."""

from __future__ import annotations

import numpy as np

from gpudvfs.evaluation import advice_sim
from gpudvfs.evaluation.govern_replay import ReplaySetup, _run
from gpudvfs.evaluation.profile_replay import _run as run_job
from gpudvfs.evaluation.replay_strategies import GovernorStrategy, replay_knob
from gpudvfs.evaluation.replay_table import Target
from gpudvfs.govern.loop import GovernedLoop

from toy_replay import power_limit_table


def test_the_governor_replay_decides_each_steps_setting_through_the_loop():
    table, target = power_limit_table(), Target("energy")
    setup = ReplaySetup.draw(table, target, 600, 100, 0, 0.01)
    entries: list[dict] = []
    gov = GovernorStrategy(target.governor(table, noise_sd=0.01), table, log=entries.append)
    _, chosen, phase_of = _run(gov, table, setup.plan, setup.draws)
    # One decision as each phase starts and one as each step ends; a phase's last sets no step of it.
    assert len(entries) == len(chosen) + len(setup.plan) == len(gov.decision_s)
    last = np.cumsum([n + 1 for _, n in setup.plan]) - 1
    ran = [e["would_index"] for i, e in enumerate(entries) if i not in set(last)]
    assert ran == chosen.tolist()
    starts = np.r_[0, last[:-1] + 1]
    assert all(entries[i]["set"] for i in starts)  # a phase's first setting is set even where held
    assert not any(e["dry_run"] for e in entries) and all(s > 0 for s in gov.decision_s)
    assert len(set(chosen.tolist())) > 1 and phase_of[-1] == len(setup.plan) - 1


def test_the_second_run_replay_counts_the_steps_set_by_an_exploring_decision():
    table, target = power_limit_table(), Target("cost")
    gov = target.governor(table, noise_sd=0.01)
    entries: list[dict] = []
    loop = GovernedLoop(gov, replay_knob, log=entries.append)
    loop.phase("c", table.time_pred[2], table.watts_pred[2])
    noise = 0.01 * np.random.default_rng(0).standard_normal((50, 2))
    regret, explored = run_job(loop, table, target, 2, noise)
    assert len(entries) == 51  # the phase's decision, then one per step's end
    assert explored == sum(e["explored"] for e in entries[:50]) > 0 and regret >= -1e-12


def test_the_advice_replay_observes_through_the_loop_in_dry_run(monkeypatch):
    loops: list[GovernedLoop] = []

    class Logged(GovernedLoop):
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            self.entries: list[dict] = []
            self.log = self.entries.append
            loops.append(self)

    monkeypatch.setattr(advice_sim, "GovernedLoop", Logged)
    advice_sim.score("compute", 0, windows=6, second=0.85)
    [loop] = loops
    gov = loop.governor
    assert loop.dry_run and len(loop.entries) == 7 and not any(e["set"] for e in loop.entries)
    # The prior's window, then windows alternating between the driver's default pair and the one it
    # pulled the core clock down to.
    d, down = gov.default_index, loop.entries[2]["actual_index"]
    assert [e["actual_index"] for e in loop.entries] == [d, d, down, d, down, d, down] and down != d
    assert gov.runs("train").tolist().count(3) == 2 and gov.runs("train").sum() == 6
