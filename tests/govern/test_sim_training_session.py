"""GovernedTraining on the training-step simulator (``device="sim"``): step times and energies follow the
clocks and the power limit in force, on a virtual clock."""

from __future__ import annotations

import time

import numpy as np
import pytest

from gpudvfs.errors import InputError
from gpudvfs.govern.integrations import GovernedTraining
from gpudvfs.hardware.sim_training import TIME_SIGMA, SimulatedTraining


def _run(gov: GovernedTraining, steps: int, every: int = 0) -> dict:
    for i in range(steps):
        with gov.step():
            pass
        if every and i % every == every - 1:
            with gov.phase("checkpoint"):
                pass
    return gov.close()


def test_step_times_follow_the_clocks_the_governor_sets(tmp_path):
    gov = GovernedTraining("sim", dry_run=False, observe_s=0.0, log_path=tmp_path / "s.jsonl")
    dev = gov.device
    assert isinstance(dev, SimulatedTraining)
    t0 = time.perf_counter()
    s = _run(gov, 150, every=50)
    wall = time.perf_counter() - t0
    recs = gov.meter.records
    assert sum(r.time_ms for r in recs) / 1e3 > 2 * wall  # virtual time: the steps' times are not the CPU's
    assert s["clocks_set"] and not s["dry_run"] and s["device_kind"] == "simulated"
    pairs = {(r.core_mhz, r.mem_mhz) for r in recs if r.phase == "train"}
    assert len(pairs) > 3  # the governor explored and settled
    for r in recs:  # each step took the simulator's time at the pair it ran, within its noise
        truth = dev.true_step(r.phase, r.core_mhz, r.mem_mhz, 700.0)
        assert r.time_ms == pytest.approx(truth.time_ms, rel=6 * TIME_SIGMA)
        assert r.watts == pytest.approx(truth.watts, rel=1e-9) and r.energy_source == "counter"
    by_pair: dict[tuple, list[float]] = {}
    for r in recs:
        if r.phase == "train":
            by_pair.setdefault((r.core_mhz, r.mem_mhz), []).append(r.time_ms)
    means = {p: np.mean(v) for p, v in by_pair.items()}
    assert max(means.values()) > 1.2 * min(means.values())
    # Virtual time: the counter moves only during steps, so the steps' sum is its total.
    assert s["energy_j"]["step_sum"] == pytest.approx(s["energy_j"]["counter_total"], rel=1e-12)
    assert dev.clocks == dev.default_clocks()  # put back at close


def test_a_power_limit_slows_the_steps_and_shows_as_a_power_cap():
    free = _run(GovernedTraining("sim", observe_s=0.0), 20)
    dev = SimulatedTraining("h200")
    dev.set_power_limit(300.0)
    gov = GovernedTraining(dev, observe_s=0.0)
    capped = _run(gov, 20)
    assert capped["throttle_reasons_seen"] == {"sw_power_cap": 20} and free["throttle_reasons_seen"] == {}
    assert all(r.core_mhz < 1980.0 for r in gov.meter.records)
    f, c = free["phases"]["train"], capped["phases"]["train"]
    assert c["mean_time_ms"] > 1.5 * f["mean_time_ms"] and c["mean_watts"] < 0.7 * f["mean_watts"]


def test_a_phase_the_simulator_does_not_run_is_one_line():
    gov = GovernedTraining("sim")
    with pytest.raises(InputError, match="no phase 'augment'") as e:
        with gov.phase("augment"):
            pass
    assert "\n" not in str(e.value)
    gov.close()


def test_laps_as_hugging_face_reports_its_evaluation_steps():
    """`lap` (a step that began when the last ended: the HF callback's prediction steps) runs a simulated step too."""
    gov = GovernedTraining("sim", observe_s=0.0)
    with gov.step():
        pass
    gov.set_phase("eval")
    for _ in range(3):
        gov.lap()
    gov.close()
    train, *evals = gov.meter.records
    truth = gov.device.true_step("eval", *gov.device.default_clocks())
    assert [r.phase for r in evals] == ["eval"] * 3
    assert all(r.time_ms == pytest.approx(truth.time_ms, rel=6 * TIME_SIGMA) for r in evals)
    assert evals[0].start_s == pytest.approx(train.start_s + train.time_ms / 1e3, rel=1e-12)
