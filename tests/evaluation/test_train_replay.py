"""The recorded H200 training runs (validation/nvidia-h200/train, train-2) replayed through the step meter
and the governor in dry run: the replay gives back the record's energies and the governor's decisions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpudvfs.cli.app import cli
from gpudvfs.errors import InputError
from gpudvfs.evaluation.train_replay import RecordedSteps, read_steps, replay_run

H200 = Path(__file__).resolve().parents[2] / "validation" / "nvidia-h200"
LOGS = [H200 / run / f"{name}_steps.jsonl" for run in ("train", "train-2") for name in ("hf", "plain")]


@pytest.mark.parametrize("log", LOGS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_the_replay_gives_back_the_recorded_energies(log):
    replayed, recorded = replay_run(log)
    steps = read_steps(log)
    assert replayed["steps"] == recorded["steps"] and sum(replayed["steps"].values()) == len(steps)
    e, r = replayed["energy_j"], recorded["energy_j"]
    assert e["step_sum"] == pytest.approx(r["step_sum"], rel=1e-9)
    assert e["step_sum"] == pytest.approx(sum(s["joules"] for s in steps), rel=1e-9)
    assert e["counter_total"] == pytest.approx(r["counter_total"], rel=1e-9)
    assert e["counter_total"] == pytest.approx(steps[-1]["counter_j"], rel=1e-12)
    for phase, p in replayed["phases"].items():
        q = recorded["phases"][phase]
        assert p["energy_j"] == pytest.approx(q["energy_j"], rel=1e-9)
        assert p["mean_time_ms"] == pytest.approx(q["mean_time_ms"], rel=1e-9)
        assert p["mean_watts"] == pytest.approx(q["mean_watts"], rel=1e-9)
    # The governor observed the windows the recorded one did (same count, at the recorded clocks).
    assert replayed["observations"] == recorded["observations"] and replayed["decisions"] == recorded["decisions"]
    assert replayed["clocks_seen"] == recorded["clocks_seen"] and replayed["dry_run"]


def test_the_command_prints_both(tmp_path):
    r = CliRunner().invoke(cli, ["govern", "replay-steps", str(LOGS[0])])
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert lines[0].startswith("recorded: ") and lines[1].startswith("replayed: ")
    assert lines[0].split(": ", 1)[1] == lines[1].split(": ", 1)[1]
    assert "steps' sum 26610 J, counter 27952 J" in lines[1]
    r = CliRunner().invoke(cli, ["govern", "replay-steps", str(tmp_path / "none.jsonl")])
    assert r.exit_code != 0 and "none.jsonl" in r.output


def test_bad_logs_are_one_line_errors(tmp_path):
    steps = [json.loads(x) for x in LOGS[1].read_text().splitlines()]
    bad = tmp_path / "bad.jsonl"
    broken = [s for s in steps if s["kind"] == "step"][:3]
    del broken[2]["counter_j"]
    bad.write_text("\n".join(json.dumps(s) for s in broken) + "\n")
    with pytest.raises(InputError, match=r"bad.jsonl: line 3: a step record without \['counter_j'\]"):
        read_steps(bad)
    bad.write_text('{"kind": "step"\n')
    with pytest.raises(InputError, match="line 1: not JSON"):
        read_steps(bad)
    bad.write_text(json.dumps({"kind": "decision"}) + "\n")
    with pytest.raises(InputError, match="no step records"):
        read_steps(bad)
    (tmp_path / "ok.jsonl").write_text("\n".join(json.dumps(s) for s in broken[:2]) + "\n")
    with pytest.raises(InputError, match="ok.summary.json: file not found"):
        replay_run(tmp_path / "ok.jsonl")
    device = RecordedSteps(broken[:1], "NVIDIA H200", (1980.0, 3201.0))
    with pytest.raises(InputError, match="recorded step 1 is of phase 'train', replayed as 'eval'"):
        device.begin_step("eval")
    device.begin_step("train")
    device.end_step()
    with pytest.raises(InputError, match="the record has 1 steps"):
        device.begin_step("train")
