"""What is kept between runs: a job's profile (written, read, seeding its phases), a run resumed on its
log (step numbers, appended lines, the merged summary), the bad input of each, and a job's second
run on Zeus's traces. The training runs are on the simulated GPU, a stand-in for a real one: its
steps' time is the CPU's wall time."""

from __future__ import annotations

import json
import sys
import time
import types
import warnings

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

import gpudvfs
from gpudvfs.cli.app import cli
from gpudvfs.errors import GpudvfsWarning, InputError
from gpudvfs.evaluation.plain import plain_table
from gpudvfs.evaluation.profile_replay import profile_replay
from gpudvfs.evaluation.replay_table import subset
from gpudvfs.govern import Governor, integrations
from gpudvfs.govern.integrations import GovernedTraining
from gpudvfs.govern.integrations.callback import SessionCallback
from gpudvfs.govern.integrations.resume import read_history
from gpudvfs.govern.profile import REPLAY_MAX, PhaseCurves, Profile, ProfileKeeper, read_profile
from gpudvfs.hardware.simulated import SimulatedDevice

from toy_replay import power_limit_table

CONFIGS = np.array([[f, m] for f in (600.0, 900.0, 1200.0, 1500.0) for m in (800.0, 1600.0)])


def _run(tmp_path, steps, *, resume=False, log="steps.jsonl", **kw):
    gov = GovernedTraining("sim", log_path=tmp_path / log, observe_s=0.0, dry_run=False,
                           **({"profile_path": tmp_path / "profile.json", "job": "j"} | kw))
    if resume:
        gov.resume()
    for _ in range(steps):
        with gov.step():
            time.sleep(0.001)
    return gov, gov.close()


def _lines(path):
    return [json.loads(x) for x in path.read_text().splitlines()]


floats = st.floats(1e-3, 1e3, allow_nan=False)


@settings(max_examples=20, deadline=None)
@given(k=st.integers(1, 6), names=st.lists(st.text(min_size=1, max_size=5), min_size=1, max_size=3, unique=True),
       data=st.data())
def test_a_profile_written_then_read_has_the_same_curves(tmp_path_factory, k, names, data):
    def arr(low=-50.0, high=50.0):
        return np.array(data.draw(st.lists(st.floats(low, high, allow_nan=False), min_size=k, max_size=k)))

    phases = {n: PhaseCurves(arr(1e-3, 1e4), arr(1e-3, 1e4), np.array(data.draw(st.lists(
        st.integers(0, 10**6), min_size=k, max_size=k))), arr(), arr(), arr(0, 10), arr(0, 10),
        tuple(data.draw(st.lists(st.integers(0, k - 1), unique=True)))) for n in names}
    settings_ = np.column_stack([arr(1, 3000), np.ones(k)])
    path = tmp_path_factory.mktemp("p") / "profile.json"
    Profile("GPU", "job", "clocks", settings_, phases).write(path)
    back = read_profile(path)
    assert (back.gpu, back.job, back.knob) == ("GPU", "job", "clocks") and np.array_equal(back.settings, settings_)
    assert list(back.phases) == names
    for n in names:
        assert back.phases[n].to_dict() == phases[n].to_dict()


def test_a_phase_seeded_from_its_curves_has_the_governors_estimates_and_counts():
    rng = np.random.default_rng(0)
    t, p = 10 * (CONFIGS[:, 0] / 1500) ** -0.7, 200 * (CONFIGS[:, 0] / 1500) ** 1.5
    gov = Governor(CONFIGS, 7, policy="energy")
    gov.phase("train", t * 1.2, p * 0.9)
    for _ in range(40):
        k = gov.decide()
        gov.observe(k, t[k] * (1 + 0.01 * rng.standard_normal()), p[k] * (1 + 0.01 * rng.standard_normal()))
    gov.exclude(0)
    curves = PhaseCurves.of(gov, t * 1.2, p * 0.9)
    again = Governor(CONFIGS, 7, policy="energy")
    curves.seed(again, "train")
    (runs, left), (runs2, left2) = gov.measured(), again.measured()
    assert runs.sum() == 40 and np.array_equal(runs, runs2) and left == left2 == [0]
    # Least squares that forget nothing see only sums: every mean is the same (measured pairs
    # by their own mean, the others by the same correction).
    for a, b in zip(gov.estimates()[:2], again.estimates()[:2]):
        assert np.allclose(a, b, rtol=0, atol=1e-9)
    assert again.decide() == gov.decide()
    many = PhaseCurves(*(getattr(curves, f) for f in ("prior_time_ms", "prior_watts")), curves.runs * 1000,
                       curves.log_time, curves.log_watts, curves.sd_time, curves.sd_watts)
    capped = Governor(CONFIGS, 7, policy="energy")
    many.seed(capped, "train")
    assert capped.measured()[0].max() == REPLAY_MAX and np.array_equal(capped.measured()[0] > 0, runs > 0)


def test_a_second_run_starts_from_the_profile_and_explores_far_less(tmp_path):
    first, s1 = _run(tmp_path, 120, log="a.jsonl")
    doc = json.loads((tmp_path / "profile.json").read_text())
    assert (doc["kind"], doc["version"], doc["gpu"], doc["job"], doc["knob"]) == (
        "gpudvfs-profile", 1, first.device.name, "j", "clocks")
    assert len(doc["settings"]) == len(first.governor.configs) and sum(doc["phases"]["train"]["runs"]) > 100
    second, _ = _run(tmp_path, 120, log="b.jsonl")
    explored = [sum(d["explored"] for d in g.decisions) for g in (first, second)]
    assert explored[0] >= 5 and explored[1] <= explored[0] / 5, explored


def test_the_profile_is_written_at_most_every_write_s_and_at_the_end(tmp_path):
    now = [0.0]
    keeper = ProfileKeeper(tmp_path / "p.json", gpu="G", job="j", knob="clocks", settings=CONFIGS, write_s=60.0,
                           clock=lambda: now[0])
    gov = Governor(CONFIGS, 7)
    keeper.start(gov, "train", np.full(8, 10.0), np.full(8, 100.0))
    gov.phase("train", np.full(8, 10.0), np.full(8, 100.0))
    for i in range(3):
        now[0] = 30.0 * (i + 1)
        gov.observe(7, 10.0, 100.0)
        keeper.observed(gov, "train")
        written = (tmp_path / "p.json").exists()
        assert written == (now[0] >= 60.0)
    assert read_profile(tmp_path / "p.json").phases["train"].runs[7] == 2  # written at 60 s
    keeper.write()
    assert read_profile(tmp_path / "p.json").phases["train"].runs[7] == 3
    assert not (tmp_path / "p.json.tmp").exists()  # written through a temporary file and a rename


def test_a_resumed_run_continues_the_step_numbers_appends_and_merges_its_summary(tmp_path):
    _, s1 = _run(tmp_path, 30)
    (tmp_path / "steps.jsonl").write_text((tmp_path / "steps.jsonl").read_text() + '{"kind": "step", "st')  # torn
    second, s2 = _run(tmp_path, 20, resume=True)
    lines = [x for x in _lines(tmp_path / "steps.jsonl")]
    assert [x["step"] for x in lines if x["kind"] == "step"] == list(range(1, 51))
    assert [(x["first_step"], x["resumed"]) for x in lines if x["kind"] == "run"] == [(1, False), (31, True)]
    assert [x for x in lines if x["kind"] == "run"][1]["torn_line"] == '{"kind": "step", "st'  # kept, not lost
    decisions = [x for x in lines if x["kind"] == "decision"]
    assert [d["step"] for d in decisions] == sorted(d["step"] for d in decisions) and decisions[-1]["step"] >= 31
    # The summary covers both runs: steps, decisions and the counter's total (the sum of each run's).
    assert s2["steps"] == {"train": 50} and s2["decisions"] == len(decisions)
    assert s2["energy_j"]["counter_total"] == pytest.approx(s1["energy_j"]["counter_total"] + sum(
        r.joules for r in second.meter.records), rel=1e-9)
    assert s2["resumed"]["earlier_steps"] == 30 and s2["resumed"]["first_step"] == 31 and s1["resumed"] is None
    assert json.loads((tmp_path / "steps.summary.json").read_text())["steps"] == {"train": 50}


def test_a_checkpoints_state_resumes_the_callbacks_session(tmp_path):
    _run(tmp_path, 10)
    cb = SessionCallback("sim", log_path=tmp_path / "steps.jsonl", observe_s=0.0)
    state = cb.state_dict()
    assert state == {"steps": 0, "knob": "clocks"}
    cb.load_state_dict({"steps": 10, "knob": "clocks"})
    with cb.session.step():
        pass
    assert cb.session.close()["steps"] == {"train": 11} and cb.state_dict()["steps"] == 11
    no_log = SessionCallback("sim", observe_s=0.0)
    no_log.load_state_dict({"steps": 7, "knob": "clocks"})  # numbering goes on from the checkpoint's count
    with no_log.session.step():
        pass
    assert no_log.records[-1].step == 8
    no_log.session.close()


def test_the_hugging_face_callback_resumes_where_the_trainer_resumes(tmp_path, monkeypatch):
    # A stand-in for transformers (not installed here): the callback reads state.global_step alone.
    fake = types.ModuleType("transformers")
    fake.TrainerCallback = fake.TrainerControl = fake.TrainerState = fake.TrainingArguments = object
    monkeypatch.setitem(sys.modules, "transformers", fake)
    # The callback's module is imported anew on the stand-in, and undone after.
    monkeypatch.setitem(sys.modules, "gpudvfs.govern.integrations.huggingface", None)
    monkeypatch.setattr(integrations, "huggingface", None, raising=False)
    del sys.modules["gpudvfs.govern.integrations.huggingface"]
    delattr(integrations, "huggingface")
    from gpudvfs.govern.integrations.huggingface import GpudvfsTrainerCallback

    for global_step in (0, 4):
        cb = GpudvfsTrainerCallback("sim", log_path=tmp_path / "hf.jsonl", observe_s=0.0)
        cb.on_train_begin(None, types.SimpleNamespace(global_step=global_step), None)
        for _ in range(4):
            cb.on_step_begin(None, None, None)
            cb.on_step_end(None, None, None)
        cb.on_train_end(None, None, None)
    steps = [x["step"] for x in _lines(tmp_path / "hf.jsonl") if x["kind"] == "step"]
    assert steps == list(range(1, 9)) and cb.summary["steps"] == {"train": 8}


def test_in_a_data_parallel_job_rank_0_alone_writes_the_profile(tmp_path):
    from test_data_parallel import _on_ranks

    def run(r, comm):
        gov = GovernedTraining(SimulatedDevice(seed=r), dry_run=True, observe_s=0.0, distributed=comm,
                               profile_path=tmp_path / f"p{r}.json", job="j")
        for _ in range(5):
            with gov.step():
                time.sleep(0.002)
        return gov.close()
    assert all(isinstance(s, dict) for s in _on_ranks(2, run))
    assert (tmp_path / "p0.json").exists() and not (tmp_path / "p1.json").exists()


def test_a_profile_of_another_gpu_job_or_knob_is_neither_used_nor_written(tmp_path):
    _run(tmp_path, 20)
    path = tmp_path / "profile.json"
    doc = json.loads(path.read_text())
    for key, value, why in (("gpu", "Tesla K80", "GPU 'Tesla K80'"), ("job", "other", "job 'other'"),
                            ("knob", "power-limit", "knob 'power-limit'")):
        path.write_text(json.dumps(doc | {key: value}))
        before = path.read_bytes()
        with pytest.warns(GpudvfsWarning, match=f"profile .* not used, nor written: it is of {why}"):
            gov, _ = _run(tmp_path, 20)
        assert sum(d["explored"] for d in gov.decisions) >= 5  # started from scratch
        assert path.read_bytes() == before
    path.write_text(json.dumps(doc | {"settings": [[c / 2, m] for c, m in doc["settings"]]}))
    k = len(doc["settings"])
    with pytest.warns(GpudvfsWarning, match=f"its {k} settings are not this run's {k}"):
        _run(tmp_path, 2)


@pytest.mark.parametrize("text, match", [
    ("{", "not valid JSON"), ("[]", "not a gpudvfs profile"),
    ('{"kind": "gpudvfs-profile", "version": 9}', "unknown profile version 9"),
    ('{"kind": "gpudvfs-profile", "version": 1, "gpu": "G", "job": "j", "knob": "clocks", "settings": [[1, 1]], '
     '"phases": {"train": {"runs": [1]}}}', "phases.train: expected the fields"),
])
def test_a_corrupt_profile_is_refused_in_one_line_and_never_overwritten(tmp_path, text, match):
    path = tmp_path / "profile.json"
    path.write_text(text)
    with pytest.raises(InputError, match=match) as e:
        _run(tmp_path, 1)
    assert "\n" not in str(e.value) and str(path) in str(e.value) and path.read_text() == text


def test_a_resume_with_another_knob_is_refused(tmp_path):
    _run(tmp_path, 5)
    log = tmp_path / "steps.jsonl"
    before = log.read_text()
    # Until the session turns other knobs, a log of another knob is written by hand.
    log.write_text(before.replace('"knob": "clocks"', '"knob": "power-limit"'))
    gov = GovernedTraining("sim", log_path=log, observe_s=0.0)
    with pytest.raises(InputError, match=r"steps.jsonl is of knob 'power-limit', this run's is 'clocks': resume with"):
        gov.resume()
    with pytest.raises(InputError, match="the checkpoint is of knob 'power-limit'"):
        gov.resume(knob="power-limit")
    gov.close()
    assert log.read_text().startswith(before.replace('"knob": "clocks"', '"knob": "power-limit"'))  # nothing lost


def test_bad_input_of_profiles_and_resume(tmp_path):
    with pytest.raises(InputError, match="profile_path needs job="):
        GovernedTraining("sim", profile_path=tmp_path / "p.json")
    with pytest.raises(InputError, match="give profile_path too"):
        GovernedTraining("sim", job="j")
    with pytest.raises(InputError, match="the folder .* does not exist"):
        GovernedTraining("sim", profile_path=tmp_path / "no" / "p.json", job="j")
    gov = GovernedTraining("sim", log_path=tmp_path / "s.jsonl", observe_s=0.0)
    with gov.step():
        pass
    with pytest.raises(InputError, match="before the run's first step"):
        gov.resume()
    with pytest.raises(InputError, match="steps must be an integer >= 0"):
        GovernedTraining("sim").resume(steps=-1)
    gov.close()
    (tmp_path / "s.jsonl").write_text('{"kind": "step", "step": 1}\nnot json\n')
    with pytest.raises(InputError, match=r"s.jsonl:1: a step line without"):
        read_history(tmp_path / "s.jsonl")
    (tmp_path / "s.jsonl").write_text('{"kind": "decision"}\nnot json\n')
    with pytest.raises(InputError, match=r"s.jsonl:2: not a JSON line"):
        read_history(tmp_path / "s.jsonl")


def test_the_second_run_replay_writes_reads_and_seeds_each_jobs_profile():
    r = profile_replay(power_limit_table(), "toy", steps=300, seed=1)
    d = r.to_dict()
    assert d["jobs"] == 3 and d["second"]["explored_steps"] <= d["first"]["explored_steps"]
    assert d["second"]["regret_mean"] <= d["first"]["regret_mean"] and (r.regret >= -1e-12).all()


def test_on_zeus_traces_a_jobs_second_run_explores_a_tenth_of_the_first(data):
    # `gpudvfs govern second-run ../shared/data/zeus/power_limit_v100.csv`, on the first 12 jobs for time.
    tab = subset(plain_table(gpudvfs.read(data / "zeus/power_limit_v100.csv")), list(range(12)))
    d = profile_replay(tab, "v100", seed=0).to_dict()
    assert d["explored_ratio"] <= 0.1 and d["second"]["regret_mean"] <= d["first"]["regret_mean"]


def test_a_recheck_runs_a_pair_again_in_the_first_run_and_the_second_keeps_its_means(data):
    # `gpudvfs govern second-run ... --recheck-z 2 --recheck-runs 2`, on the first 12 V100 jobs for time: the
    # first run runs some measured pairs again (explored), the second seeded from it still explores a tenth.
    tab = subset(plain_table(gpudvfs.read(data / "zeus/power_limit_v100.csv")), list(range(12)))
    off = profile_replay(tab, "v100", seed=0)
    on = profile_replay(tab, "v100", seed=0, recheck_z=2.0, recheck_runs=2)
    assert on.explored[:, 0].sum() > off.explored[:, 0].sum()
    assert on.explored[:, 1].sum() <= 0.1 * on.explored[:, 0].sum()


def test_the_second_run_command(data):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GpudvfsWarning)
        res = CliRunner().invoke(cli, ["govern", "second-run", str(data / "zeus/power_limit_v100.csv"), "--steps",
                                       "200", "--seeds", "1", "--json"])
    assert res.exit_code == 0, res.output
    [out] = json.loads(res.output)
    assert out["jobs"] == 68 and set(out) >= {"first", "second", "explored_ratio"}
    res = CliRunner().invoke(cli, ["govern", "second-run", str(data / "zeus/power_limit_v100.csv"), "--recheck-runs",
                                   "0"])
    assert res.exit_code == 2 and "--recheck-runs" in res.output
