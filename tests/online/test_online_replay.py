"""The online model around the estimator: feature forms, grid tables, Lasso selection,
Eq. 12-14 sensitivity, and the replay (issue 5's acceptance figures on the real files,
through `gpudvfs online replay`)."""

from __future__ import annotations

import json
import sys
from dataclasses import replace

import numpy as np
import pytest
from click.testing import CliRunner

from gpudvfs import InputError, MeasurementGrid, OnlinePredictor
from gpudvfs.cli.app import cli
from gpudvfs.evaluation.online_replay import ReplaySettings, replay, tune
from gpudvfs.online import (
    CounterFrequencyModel,
    FeatureMap,
    GridTable,
    lasso_select,
    predict_time_at,
    time_slope,
)

GTX980 = "nv-dvfs-benchmark/gtx980_time_dev.csv"
V100 = "nsfcac/v100_spec_dev.csv"
CORE = np.array([400.0, 500.0, 600.0, 700.0, 800.0, 900.0, 1000.0])
MEM = np.array([500.0, 700.0, 900.0])
# Per application: t = c0 + c1 u_core + c2 u_mem^2 + c3 u_core u_mem, u = f_max / f.
LAW = np.array([[1.0, 2.0, 0.5, 0.3], [4.0, 0.5, 3.0, 0.1], [0.2, 6.0, 0.1, 1.0]])


def synthetic_grid() -> MeasurementGrid:
    """Three applications on a 7 x 3 grid following LAW; counters: instructions (per unit of
    work, clock independent), a rate proportional to the core clock, a constant, energy."""
    a, c, m = np.meshgrid(np.arange(3), CORE, MEM, indexing="ij")
    a, c, m = a.ravel(), c.ravel(), m.ravel()
    uc, um = CORE.max() / c, MEM.max() / m
    law = LAW[a]
    t = law[:, 0] + law[:, 1] * uc + law[:, 2] * um**2 + law[:, 3] * uc * um
    cols = {"app": np.array([f"app{i}" for i in a]), "core": c, "mem": m, "time": t,
            "inst": 1e6 * (a + 1.0), "rate": 50.0 * (a + 1) * c / CORE.max(), "const": np.full(len(a), 7.0),
            "total_energy": 200.0 * t}
    return MeasurementGrid("nvdvfs", "synthetic.csv", cols,
                           {"app": "app", "core_mhz": "core", "mem_mhz": "mem", "time": "time"}, ("app",))


@pytest.fixture(scope="module")
def table() -> GridTable:
    return GridTable.from_grid(synthetic_grid())


def test_grid_table_layout_and_target_readouts_left_out(table):
    assert table.apps == ("app0", "app1", "app2") and table.domains == ("core", "mem")
    assert table.counter_names == ("inst", "rate", "const")  # energy = power x time is the target
    assert table.time_ms.shape == (3, 7, 3) and table.counters.shape == (3, 7, 3, 3)
    uc, um = 1000.0 / 600.0, 900.0 / 700.0
    assert table.time_ms[1, 2, 1] == pytest.approx(4.0 + 0.5 * uc + 3.0 * um**2 + 0.1 * uc * um)
    assert table.shared_time_curves() == []


def test_grid_table_refuses_an_incomplete_grid():
    g = synthetic_grid()
    keep = np.arange(len(g)) != 5
    cut = replace(g, columns={k: v[keep] for k, v in g.columns.items()})
    with pytest.raises(InputError, match="1 cells are not, e.g. app0 at 500/900 MHz measured 0 times"):
        GridTable.from_grid(cut)


def test_paper_form_regressors_by_hand(table):
    fm = FeatureMap.fit(table, [0, 1, 2], "paper")
    assert fm.counters == ("inst", "rate")  # the constant counter carries nothing
    assert fm.names == ["ratio:core", "ratio:mem", "d:inst", "d:rate"]
    h = fm.regressors([500.0, 700.0], [1000.0, 350.0], [1e6, 10.0], [3e6, 30.0])
    sd = table.counters[..., :2].reshape(-1, 2).std(axis=0)
    np.testing.assert_allclose(h, [[-0.5, 1.0, 2e6 / sd[0], 20.0 / sd[1]]])


def test_inverse_form_has_constant_coefficients_the_paper_form_does_not(table):
    """For a workload whose time follows an inverse-clock law, every step's time change is
    the same linear function of the inverse-form regressors; the paper's frequency term
    needs a coefficient that depends on the clock a step starts from."""
    rng = np.random.default_rng(0)
    i, j = rng.integers(0, 21, 400), rng.integers(0, 21, 400)
    f = np.stack(np.meshgrid(CORE, MEM, indexing="ij"), axis=-1).reshape(-1, 2)
    t = table.time_ms[2].reshape(-1)
    residual = {}
    for form in ("inverse", "paper"):
        fm = FeatureMap.fit(table, [2], form)
        h = fm.frequency_terms(f[i], f[j])
        dt = t[j] - t[i]
        coef = np.linalg.lstsq(h, dt, rcond=None)[0]
        residual[form] = np.max(np.abs(h @ coef - dt)) / np.abs(dt).max()
        if form == "inverse":  # inv:core, inv:mem, inv2:core, inv2:mem, inv:core*mem
            np.testing.assert_allclose(coef, [6.0, 0.0, 0.0, 0.1, 1.0], atol=1e-9)
    assert residual["inverse"] < 1e-12 and residual["paper"] > 0.05


def test_feature_map_dict_roundtrip_and_validation(table):
    fm = FeatureMap.fit(table, [0, 1], "inverse").with_selection([0, 2, 5])
    assert FeatureMap.from_dict(json.loads(json.dumps(fm.to_dict()))) == fm
    assert fm.names == ["inv:core", "inv2:core", "d:inst"]
    with pytest.raises(InputError, match="selected"):
        fm.with_selection([9])
    with pytest.raises(InputError, match="unknown form"):
        FeatureMap.fit(table, [0], "relative")
    with pytest.raises(InputError, match="FeatureMap"):
        FeatureMap.from_dict({"form": "paper"})


def test_online_model_on_an_inverse_clock_law_predicts_exactly(table):
    """RLS on noiseless steps of one workload learns the law: the next prediction is exact."""
    fm = FeatureMap.fit(table, [0, 1, 2], "inverse")
    fm = fm.with_selection(range(fm.n_frequency))
    rng = np.random.default_rng(1)
    p = OnlinePredictor(fm.n_features, 1.0, 1e6)
    f = np.stack(np.meshgrid(CORE, MEM, indexing="ij"), axis=-1).reshape(-1, 2)
    t = table.time_ms[0].reshape(-1)
    k = 0
    for _ in range(60):
        j = int(rng.integers(0, 21))
        h = fm.frequency_terms(f[k], f[j])[0]
        predicted = t[k] + p.predict(h)
        p.update(h, t[j] - t[k])
        k = j
    assert predicted == pytest.approx(t[j], rel=1e-5)  # what is left is the prior's 1/delta pull


def test_lasso_one_standard_error_selection():
    rng = np.random.default_rng(2)
    h = rng.normal(size=(600, 8))
    y = 3.0 * h[:, 0] - 2.0 * h[:, 3] + 0.05 * rng.normal(size=600)
    sel = lasso_select(h, y, keep=[6])
    assert set(sel.lasso_selected) == {0, 3} and sel.selected == (0, 3, 6)
    assert sel.alpha_1se >= sel.alpha_min and sel.converged
    with pytest.raises(InputError, match="too few"):
        lasso_select(h[:10], y[:10])
    with pytest.raises(InputError, match="finite"):
        lasso_select(np.full((40, 2), np.nan), np.ones(40))


def hide_sklearn(monkeypatch) -> None:
    for name in [m for m in sys.modules if m == "sklearn" or m.startswith("sklearn.")] + ["sklearn"]:
        monkeypatch.setitem(sys.modules, name, None)


def test_lasso_without_scikit_learn_names_the_extra(monkeypatch):
    hide_sklearn(monkeypatch)
    with pytest.raises(ImportError, match=r"gpudvfs\[online\]"):
        lasso_select(np.ones((40, 2)), np.ones(40))


def test_counter_frequency_model_and_sensitivity(table):
    fm = FeatureMap.fit(table, [0, 1, 2], "inverse")
    cm = CounterFrequencyModel.fit(table, [0, 1, 2], fm.counters)
    x = table.counters[1, 2, 1, :2]  # app1 at 600/700 MHz
    dx = cm.change(x[None], [[600.0, 700.0]], [[700.0, 700.0]])[0]
    assert dx[0] == 0.0  # instructions do not move with the clock
    assert dx[1] == pytest.approx(x[1] * (700 / 600 - 1), rel=0.02)  # a rate follows it (Eq. 14 is quadratic)
    assert np.all(cm.change(x[None], [[600.0, 700.0]], [[600.0, 900.0]])[0] == 0)  # nothing depends on mem

    # Exact law coefficients on the frequency terms, zero on the counters: Eq. 12 gives the
    # measured time at the candidate, Eq. 13 its slope.
    coef = np.zeros(fm.n_features)
    coef[:5] = [0.5, 0.0, 0.0, 3.0, 0.1]
    t_now = table.time_ms[1, 2, 1]
    got = predict_time_at(fm, coef, t_now, [[600.0, 700.0]], [[600.0, 900.0]], x[None], cm)
    assert got[0] == pytest.approx(table.time_ms[1, 2, 2])
    slope = time_slope(fm, coef, t_now, [[600.0, 700.0]], [[700.0, 700.0]], x[None], cm)
    assert slope[0] == pytest.approx((table.time_ms[1, 3, 1] - t_now) / 100.0)
    with pytest.raises(InputError, match="exactly one"):
        time_slope(fm, coef, t_now, [[600.0, 700.0]], [[700.0, 900.0]], x[None])
    with pytest.raises(InputError, match="columns"):
        predict_time_at(fm, coef, t_now, [[600.0, 700.0]], [[700.0, 700.0]], x[None, :1])


def test_replay_on_the_synthetic_grid(table):
    r = replay(synthetic_grid(), steps=400, seed=3)
    assert r.scored_apps == ["app1"] and r.train_apps == ["app0", "app2"]
    # One scored workload following an inverse-clock law: only the 1% noise is left.
    assert r.online.mape_same_app < 2.0 < r.naive.mape_same_app
    assert r.switches_scored == 0
    # The JSON `online replay` prints: the training split and the Lasso's choice nested, by name.
    d = r.to_dict()
    assert d["train"] == {"source": r.train_source, "apps": ["app0", "app2"]}
    assert d["ratio_same_app"] == r.online.mape_same_app / r.naive.mape_same_app
    assert d["lasso"]["selected"] == [r.features.all_names[i] for i in r.selection.lasso_selected]
    assert set(d["sensitivity"]["per_domain"]) == {"core", "mem"}


@pytest.fixture
def run():
    runner = CliRunner()
    return lambda *args: runner.invoke(cli, [str(a) for a in args], catch_exceptions=False)


@pytest.mark.parametrize("name", [GTX980, V100])
def test_acceptance_online_halves_the_last_value_error(run, data, name):
    """Issue 5: same-application MAPE of the online model at most half the last-value
    predictor's, with the default settings, as the replay command prints it."""
    r = run("online", "replay", data / name, "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert set(d) >= {"naive", "online", "offline", "sensitivity"}
    assert d["steps"] == 2000 and d["settings"] == {**vars(ReplaySettings())}
    assert d["online"]["mape_same_app"] <= 0.5 * d["naive"]["mape_same_app"]
    assert d["online"]["mape"] < d["naive"]["mape"]
    # The docs' figures (seed 0): online vs last value on same-application steps.
    online, naive = {GTX980: (1.68, 13.85), V100: (1.59, 5.00)}[name]
    assert d["online"]["mape_same_app"] == pytest.approx(online, abs=0.01)
    assert d["naive"]["mape_same_app"] == pytest.approx(naive, abs=0.01)
    # Over resampled scored applications (95%): the online figure's interval, and its lead over
    # the last value, below 0 at both ends (on the V100 every scored application shares one
    # time curve, so its interval says little about another application).
    ci = d["intervals_same_app"]
    expected = {GTX980: ((1.37, 1.93), (-12.66, -11.22)), V100: ((1.41, 1.78), (-3.87, -2.96))}[name]
    assert (ci["mean"], ci["minus_naive"]) == (pytest.approx(expected[0], abs=0.01),
                                               pytest.approx(expected[1], abs=0.01))
    assert set(d["train"]["apps"]).isdisjoint(d["scored_apps"])
    s = d["sensitivity"]
    assert s["cases"] > 1000 and s["mape"] < s["mape_no_change"] + 0.1
    if name == V100:  # ten of its eleven applications share one measured time curve
        assert len(d["shared_time_curves"]) == 1 and len(d["shared_time_curves"][0]) == 10


def test_replay_text_output(run, data):
    r = run("online", "replay", data / GTX980, "--steps", 300)
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())  # rich wraps lines at the terminal width
    assert "even positions train" in text and "last value" in text and "(target <= 0.5: met)" in text
    assert "95% intervals over the scored applications (same-application steps), %: online [" in text


def test_inverse_form_beats_the_paper_form_on_gtx980(data):
    inverse = replay(data / GTX980)
    paper = replay(data / GTX980, settings=replace(ReplaySettings(), form="paper"))
    assert inverse.online.mape_same_app < 0.5 * paper.online.mape_same_app


def test_defaults_are_near_best_on_the_training_traces(data):
    """How the defaults were chosen: on training traces only, they are within 3% of the
    best grid setting on both files (the differences are below seed-to-seed noise)."""
    for name in (GTX980, V100):
        rows = tune(data / name)
        d = ReplaySettings()
        mine = next(r for r in rows if (r.forgetting, r.initial_covariance, r.forgetting_mode)
                    == (d.forgetting, d.initial_covariance, d.forgetting_mode))
        assert mine.train_mape_same_app <= 1.03 * rows[0].train_mape_same_app, (name, rows[:3])


def test_replay_with_a_train_file_and_step_moves(data):
    r = replay(data / GTX980, train=data / "nv-dvfs-benchmark/gtx980_time_power_dev.csv", steps=600,
               moves="step")
    assert r.train_source.startswith("TRAIN file") and len(r.scored_apps) == 10
    assert r.online.mape_same_app < r.naive.mape_same_app


def test_replay_errors(run, data, tmp_path, monkeypatch):
    r = run("online", "replay", tmp_path / "missing.csv")
    assert r.exit_code == 2 and "not found" in r.output
    r = run("online", "replay", data / "gpupowermodel/titanx_real_dev.csv")
    assert r.exit_code == 2 and "this is a gpmTOOL power CSV" in r.output and "the replay reads" in r.output
    r = run("online", "replay", data / GTX980, "--train", data / V100)
    assert r.exit_code == 2 and "clock domains" in r.output
    hide_sklearn(monkeypatch)
    r = run("online", "replay", data / GTX980, "--steps", 100)
    assert r.exit_code == 2 and "gpudvfs[online]" in r.output
