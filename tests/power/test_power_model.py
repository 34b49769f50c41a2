"""The DVFS-aware power model: recovery of a known model (hypothesis), the accuracy figures
on real GPUs, persistence, and every way bad input can enter."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gpudvfs
from gpudvfs import InputError, PowerDataset, PowerModel
from gpudvfs.catalog import lookup
from gpudvfs.evaluation.power_errors import cross_validate_power, power_errors
from gpudvfs.power.equations import power_grid_numpy
from gpudvfs.power.model import _SETTINGS

COMPONENTS = ("SP", "INT", "DP", "L2", "DRAM")
SIZES = (4, 1)
REF = (1000.0, 3000.0)
CORE = (600.0, 800.0, 1000.0, 1200.0)
MEM = (1000.0, 2000.0, 3000.0)


def synthetic(seed: int, noise: float, drop: float = 0.0):
    """Microbenchmark-like data from a known model: each benchmark stresses one or two
    components; the core voltage is flat then linear, the memory voltage rises with fm."""
    rng = np.random.default_rng(seed)
    static = rng.uniform(20, 60, 2)
    idle = rng.uniform(5, 30, 2)
    weights = rng.uniform(20, 90, len(COMPONENTS))
    brk = rng.uniform(650, 950)
    slope = rng.uniform(0.1, 0.4)
    vc = lambda f: 1 + slope * (np.maximum(f - brk, 0) - (REF[0] - brk)) / REF[0]  # noqa: E731
    vm = {1000.0: rng.uniform(0.85, 0.95), 2000.0: rng.uniform(0.95, 1.0), 3000.0: 1.0}
    util = []
    for j in range(len(COMPONENTS)):
        for level in (0.3, 0.6, 0.9):
            u = np.zeros(len(COMPONENTS))
            u[j] = level
            u[rng.integers(len(COMPONENTS))] += rng.uniform(0, 0.1)
            util.append(np.minimum(u, 1.0))
    util.append(np.zeros(len(COMPONENTS)))  # idle
    util += list(rng.uniform(0, 0.5, (6, len(COMPONENTS))))  # mixes
    util = np.array(util)
    configs = np.array([(c, m) for m in MEM for c in CORE])
    volts = np.column_stack([vc(configs[:, 0]), [vm[m] for m in configs[:, 1]]])
    watts = power_grid_numpy(util, SIZES, static, idle, weights, configs / np.array(REF), volts)
    watts = watts * (1 + noise * rng.standard_normal(watts.shape))
    n_b, n_k = watts.shape
    keep = rng.uniform(size=n_b * n_k) >= drop
    keep[np.arange(n_k)] = True  # the first benchmark keeps every configuration
    ds = PowerDataset(
        path=f"<synthetic {seed}>", reference_mhz=REF, domain_sizes=SIZES, components=COMPONENTS,
        watts=watts.reshape(-1)[keep], freqs_mhz=np.tile(configs, (n_b, 1))[keep],
        utilization=np.repeat(util, n_k, axis=0)[keep], row_names=None,
        benchmark=np.repeat(np.arange(n_b), n_k)[keep], benchmarks=tuple(f"b{i}" for i in range(n_b)))
    truth = {"static": static, "idle": idle, "weights": weights, "configs": configs, "volts": volts}
    return ds, truth


def fit_quietly(ds, variant="per-config", **kw) -> PowerModel:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", gpudvfs.GpudvfsWarning)
        return PowerModel(variant, **kw).fit(ds)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), variant=st.sampled_from(["per-config", "per-domain"]))
def test_recovers_a_known_model(seed, variant):
    """Noise of 0.2%: core voltages within 2%, memory voltages within 5% (the memory
    domain draws a small share of the power, so its voltage per configuration is the least
    determined: 3.4% worst over 150 seeds), component weights within 5%, and the constant
    power of each configuration (static + idle, which the data cannot split) within 1%."""
    ds, truth = synthetic(seed, noise=0.002)
    m = fit_quietly(ds, variant)
    assert m.converged_
    v = m.voltage(truth["configs"][:, 0], truth["configs"][:, 1])
    np.testing.assert_allclose(v[:, 0], truth["volts"][:, 0], rtol=0.02)
    np.testing.assert_allclose(v[:, 1], truth["volts"][:, 1], rtol=0.05)
    np.testing.assert_allclose(list(m.weights_.values()), truth["weights"], rtol=0.05)
    x = truth["configs"] / np.array(REF)
    const = lambda s, i, vv: (s * vv + vv**2 * x * i).sum(axis=1)  # noqa: E731
    np.testing.assert_allclose(const(m.static_w_, m.idle_w_, v), const(truth["static"], truth["idle"], truth["volts"]),
                               rtol=0.01)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), variant=st.sampled_from(["per-config", "per-domain", "curve", "default"]),
       noise=st.floats(0, 0.05), drop=st.floats(0, 0.3))
def test_invariants_under_noise_and_missing_rows(seed, variant, noise, drop):
    """Whatever the noise and missing (benchmark, configuration) rows: voltages lie within
    the bounds, never fall when a clock rises, are 1 at the reference; predictions are positive."""
    ds, truth = synthetic(seed, noise=noise, drop=drop)
    m = fit_quietly(ds, variant)
    cfg = m.configs_
    v = m.voltage(cfg[:, 0], cfg[:, 1])
    assert np.all((v >= m.v_min - 1e-12) & (v <= m.v_max + 1e-12))
    np.testing.assert_allclose(m.voltage(*REF), [1.0, 1.0])
    for d, other in ((0, 1), (1, 0)):
        for level in np.unique(cfg[:, other]):
            sel = cfg[:, other] == level
            order = np.argsort(cfg[sel, d])
            assert np.all(np.diff(v[sel, d][order]) >= -1e-9)
    assert np.all(m.predict_grid(ds.benchmark_utilization()) > 0)


def test_prediction_apis_agree():
    ds, truth = synthetic(1, noise=0.0)
    m = fit_quietly(ds)
    u = ds.benchmark_utilization()
    grid = m.predict_grid(u)
    assert grid.shape == (len(u), len(m.configs_))
    row = m.predict(u[:, None, :], m.configs_[:, 0], m.configs_[:, 1])
    np.testing.assert_allclose(row, grid, rtol=1e-12)
    assert isinstance(m.predict(u[3], 800.0, 2000.0), float)
    parts = m.breakdown(u[3], 800.0, 2000.0)
    assert sum(parts.values()) == pytest.approx(m.predict(u[3], 800.0, 2000.0), rel=1e-12)
    assert set(parts) == {"static:core", "idle:core", "static:memory", "idle:memory",
                          *(f"dynamic:{c}" for c in COMPONENTS)}


def test_only_the_curve_interpolates():
    ds, _ = synthetic(2, noise=0.0)
    for variant in ("per-config", "per-domain"):
        m = fit_quietly(ds, variant)
        with pytest.raises(InputError, match="not"):
            m.predict(ds.utilization[0], 900.0, 3000.0)
    curve = fit_quietly(ds, "curve")
    lo, hi = curve.voltage(800.0, 3000.0)[0], curve.voltage(1000.0, 3000.0)[0]
    assert lo <= curve.voltage(900.0, 3000.0)[0] <= hi
    assert curve.voltage_curve_["core"]["slope_per_mhz"] >= 0


def test_save_load_and_gpmtool_round_trip(tmp_path):
    ds, _ = synthetic(3, noise=0.01)
    for variant in ("default", "per-domain", "curve"):
        m = fit_quietly(ds, variant)
        m.save(tmp_path / "m.json")
        back = PowerModel.load(tmp_path / "m.json")
        assert back.variant == variant and back.iterations_ == m.iterations_
        np.testing.assert_array_equal(back.predict_grid(ds.benchmark_utilization()),
                                      m.predict_grid(ds.benchmark_utilization()))
    m = fit_quietly(ds, "per-domain")
    m.to_gpmtool(tmp_path / "gpm.csv")
    back = PowerModel.from_gpmtool(tmp_path / "gpm.csv")
    np.testing.assert_allclose(back.predict_grid(ds.benchmark_utilization()),
                               m.predict_grid(ds.benchmark_utilization()), rtol=1e-12)
    with pytest.raises(InputError, match="cannot hold"):
        fit_quietly(ds, "curve").to_gpmtool(tmp_path / "c.csv")


def test_an_energy_error_per_configuration_round_trips(tmp_path):
    ds, _ = synthetic(3, noise=0.01)
    m = fit_quietly(ds, "per-domain")
    m.save(tmp_path / "plain.json")
    assert PowerModel.load(tmp_path / "plain.json").energy_error_ is None  # nobody measured it
    m.energy_error_ = np.linspace(0.05, 0.2, len(m.configs_))
    m.save(tmp_path / "m.json")
    np.testing.assert_array_equal(PowerModel.load(tmp_path / "m.json").energy_error_, m.energy_error_)
    doc = json.loads((tmp_path / "m.json").read_text())
    for bad in (doc["energy_error"][:-1], [-0.1] * len(m.configs_), ["5%"] * len(m.configs_),
                [True] * len(m.configs_), 0.1):
        (tmp_path / "b.json").write_text(json.dumps({**doc, "energy_error": bad}))
        with pytest.raises(InputError, match="energy_error"):
            PowerModel.load(tmp_path / "b.json")


def test_model_file_errors(tmp_path):
    ds, _ = synthetic(4, noise=0.0)
    m = fit_quietly(ds)
    m.save(tmp_path / "m.json")
    doc = json.loads((tmp_path / "m.json").read_text())
    bad = dict(doc, version=99)
    (tmp_path / "v.json").write_text(json.dumps(bad))
    with pytest.raises(InputError, match="unknown power-model file version 99"):
        PowerModel.load(tmp_path / "v.json")
    doc["state"]["voltages"] = doc["state"]["voltages"][:-2]
    (tmp_path / "s.json").write_text(json.dumps(doc))
    with pytest.raises(InputError, match="invalid power model"):
        PowerModel.load(tmp_path / "s.json")
    doc = json.loads((tmp_path / "m.json").read_text())
    doc["state"]["weights"][1] = -2.0  # the fit's least squares are non-negative
    (tmp_path / "n.json").write_text(json.dumps(doc))
    with pytest.raises(InputError, match="coefficients must be >= 0"):
        PowerModel.load(tmp_path / "n.json")
    for name, content, match in (("d", None, "is a folder"), ("u.json", b'{"kind": "\xff"}', "not UTF-8"),
                                 ("l.json", b"[1, 2]", "not a gpudvfs power-model"),
                                 ("i.json", b'{"kind": "power-model", "version": 1, "x": 1e999}', "range"),
                                 ("c.json", json.dumps({**doc, "components": [1, 2]}).encode(), "component names")):
        path = tmp_path / name
        path.mkdir() if content is None else path.write_bytes(content)
        with pytest.raises(InputError, match=match):
            PowerModel.load(path)
    (tmp_path / "g.csv").write_text("2\n975,3505\n1,1\nA,B\n900,975\n3505\n1,2,3,4,5,6\n1,1\n1,1\n1,1\n")
    with pytest.raises(gpudvfs.DataFileError, match="voltages"):
        PowerModel.from_gpmtool(tmp_path / "g.csv")


def test_a_component_no_row_uses_gets_weight_zero(tmp_path):
    """``unused="zero"``: the fit is the one without the component, its weight is 0 and said
    so (warning, ``notes_``, ``untrained_``, kept by save/load), and the model takes the full
    utilizations: a workload that uses the component is predicted as if it did not."""
    ds, _ = synthetic(5, noise=0.002)
    zero_dp = PowerDataset(**{**ds.__dict__, "utilization": ds.utilization * (np.arange(5) != 2)})
    with pytest.warns(gpudvfs.GpudvfsWarning, match=r"\['DP'\] are zero in every training row"):
        m = PowerModel("per-domain").fit(zero_dp, unused="zero")
    without = fit_quietly(zero_dp.without_components(["DP"]), "per-domain")
    assert m.components_ == COMPONENTS and m.untrained_ == ("DP",) and m.weights_["DP"] == 0.0
    u = np.array([[0.5, 0.2, 0.7, 0.1, 0.3], [0.1, 0.9, 0.0, 0.4, 0.6]])
    np.testing.assert_allclose(m.predict_grid(u), without.predict_grid(u[:, [0, 1, 3, 4]]), rtol=1e-12)
    m.save(tmp_path / "m.json")
    back = PowerModel.load(tmp_path / "m.json")
    assert back.untrained_ == ("DP",) and any("DP" in n for n in back.notes_)
    np.testing.assert_array_equal(back.predict_grid(u), m.predict_grid(u))
    with pytest.raises(InputError, match="unknown unused"):
        PowerModel().fit(ds, unused="drop")
    doc = json.loads((tmp_path / "m.json").read_text())
    (tmp_path / "bad.json").write_text(json.dumps({**doc, "untrained": ["FP16"]}))
    with pytest.raises(InputError, match="'untrained' must list"):
        PowerModel.load(tmp_path / "bad.json")


def test_bad_training_and_test_input():
    ds, _ = synthetic(5, noise=0.0)
    one = ds.subset((ds.core_mhz == REF[0]) & (ds.mem_mhz == REF[1]))
    with pytest.raises(InputError, match="configuration"):
        PowerModel().fit(one)
    zero_dp = PowerDataset(**{**ds.__dict__, "utilization": ds.utilization * (np.arange(5) != 2)})
    with pytest.raises(InputError, match=r"\['DP'\] are zero in every row"):
        PowerModel().fit(zero_dp)
    no_ref = ds.subset(ds.mem_mhz != REF[1])
    with pytest.raises(InputError, match="reference"):
        PowerModel().fit(no_ref)
    m = fit_quietly(ds)
    other = ds.without_components(["DP"])
    with pytest.raises(InputError, match="differ from the model's"):
        power_errors(m, other)
    with pytest.raises(InputError, match="in \\[0, 1\\]"):
        m.predict([0.5, 1.7, 0, 0, 0], 1000.0, 3000.0)
    with pytest.raises(InputError, match="NaN"):
        m.predict([0.5, np.nan, 0, 0, 0], 1000.0, 3000.0)
    with pytest.raises(InputError, match="5 components"):
        m.predict([0.5, 0.1], 1000.0, 3000.0)
    with pytest.raises(InputError, match="not fitted"):
        PowerModel().predict([0.1] * 5, 1000.0, 3000.0)
    with pytest.raises(InputError, match="unknown variant"):
        PowerModel("magic")
    # A clock given as text is not read as a number; impossible clocks and power are refused.
    with pytest.raises(InputError, match="must be numbers"):
        m.predict([0.1] * 5, "1000", 3000.0)
    with pytest.raises(InputError, match="finite clocks"):
        m.predict([0.1] * 5, 1e9, 3000.0)
    huge = PowerDataset(**{**ds.__dict__, "watts": np.where(np.arange(len(ds)) == 7, 1e300, ds.watts)})
    with pytest.raises(InputError, match="row 8 has 1e[+]300 W"):
        PowerModel().fit(huge)


def test_the_curve_warns_where_it_extrapolates():
    ds, _ = synthetic(2, noise=0.0)
    curve = fit_quietly(ds, "curve")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        curve.voltage(900.0, 3000.0)  # inside the fitted clocks: no warning
    with pytest.warns(gpudvfs.GpudvfsWarning, match="extrapolated"):
        curve.voltage(2500.0, 3000.0)


# ------------------------------------------------------------------ real GPUs
def test_titanx_unseen_applications(data):
    """Trained on titanx_micro.csv, evaluated on the 17 real applications x 64 configs:
    the paper's per-config and gpmTOOL v2's per-domain estimation land within 0.3 points of
    the authors' tool (9.0% and 8.6%); the default variant (per-config, relative errors, no
    ridge: chosen on five GPUs' microbenchmarks alone) gives 8.59%, an unseen figure."""
    train = gpudvfs.read_power_dataset(data / "gpupowermodel/titanx_micro.csv")
    dev = gpudvfs.read_power_dataset(data / "gpupowermodel/titanx_real_dev.csv")
    got = {v: power_errors(fit_quietly(train, v), dev) for v in ("per-config", "per-domain", "curve")}
    assert 8.7 <= got["per-config"]["mape"] <= 9.3
    assert 8.3 <= got["per-domain"]["mape"] <= 8.9
    assert (got["per-config"]["mape"], got["per-domain"]["mape"]) == pytest.approx((8.71, 8.63), abs=0.01)  # docs
    assert got["curve"]["mape"] == pytest.approx(8.09, abs=0.01)
    with pytest.warns(gpudvfs.GpudvfsWarning, match="on a bound"):
        default = gpudvfs.PowerModel().fit(gpudvfs.read_power_dataset(data / "gpupowermodel/titanx_micro.csv"))
    r = power_errors(default, dev)
    assert r["n"] == 1088 and len(r["per_config"]) == 64
    assert r["mape"] == pytest.approx(8.59, abs=0.01) and r["mape"] < got["per-config"]["mape"]
    # Over resampled applications (each one's 64 configs drawn together), 95%: 5.99-11.33%.
    assert r["mape_interval"] == pytest.approx((5.99, 11.33), abs=0.01)
    assert default.converged_


@pytest.mark.parametrize("name,entry,train,cv", [
    ("titanx_micro", "gtx-titan-x", 2.953, 3.101),
    ("titanxp_micro", "titan-xp", 3.483, 3.636),
    ("gtx980_micro", "gtx980", 2.747, 2.978),
    ("titanx_hpca18_micro", "gtx-titan-x", 3.942, 4.226),
    ("k40c_micro", "k40c", 6.234, 6.746),
])
def test_other_devices_train_and_grouped_cv(data, name, entry, train, cv):
    """The default variant's training and 6-fold grouped CV error per device (docs/accuracy.md),
    each file's clocks within what its catalog entry runs. The K40c file needs its two
    corrupt benchmarks skipped and its unused DP MUL column dropped; its single memory clock
    is folded (stated in the notes)."""
    if "k40c" in name:
        with pytest.warns(gpudvfs.GpudvfsWarning, match="skipped 8 invalid row"):
            ds = gpudvfs.read_power_dataset(data / f"gpupowermodel/{name}.csv", on_invalid="skip")
    else:
        ds = gpudvfs.read_power_dataset(data / f"gpupowermodel/{name}.csv")
    ds = ds.without_components(ds.unused_components())
    assert lookup(entry).clock_warnings(ds.core_mhz, ds.mem_mhz) == []
    m = fit_quietly(ds, "default")
    assert m.converged_ and m.iterations_ < 1000 and m.fallback_ is None
    assert m.train_mape_ == pytest.approx(train, abs=0.01)
    assert cross_validate_power(ds, 6).mape == pytest.approx(cv, abs=0.01)
    if "k40c" in name:
        assert any("single clock" in n for n in m.notes_)


def test_cli_fit_eval_predict_plot(tmp_path):
    """The power commands on a synthetic training set: fit writes a model that eval and
    predict read back; plot draws the voltages and measured vs predicted power."""
    from click.testing import CliRunner

    from gpudvfs.cli.app import cli

    ds, _ = synthetic(6, noise=0.005)
    train = tmp_path / "train.csv"
    gpudvfs.write(PowerDataset(**{**ds.__dict__, "row_names": tuple(ds.benchmarks[b] for b in ds.benchmark)}), train)
    run = CliRunner().invoke
    r = run(cli, ["power", "fit", str(train), "--variant", "per-domain", "-o", str(tmp_path / "m.json"), "--json",
                  "--cv", "3"])
    assert r.exit_code == 0, r.output
    fit = json.loads(r.stdout)
    assert fit["cv_mape"] > fit["train_mape"] > 0 and fit["configurations"] == 12
    r = run(cli, ["power", "eval", str(tmp_path / "m.json"), str(train), "--json"])
    assert json.loads(r.stdout)["mape"] == pytest.approx(fit["train_mape"], rel=1e-9)
    r = run(cli, ["power", "predict", str(tmp_path / "m.json"), str(train), "--json"])
    pred = json.loads(r.stdout)
    assert len(pred["configs"]) == 12 and len(pred["watts"]) == len(ds.benchmarks)
    pytest.importorskip("matplotlib")
    r = run(cli, ["power", "plot", str(tmp_path / "m.json"), "--data", str(train), "-o", str(tmp_path / "p.png")])
    assert r.exit_code == 0, r.output
    assert (tmp_path / "p.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    r = run(cli, ["power", "plot", str(tmp_path / "m.json"), "-o", str(tmp_path / "p.txt")])
    assert r.exit_code == 2 and "cannot tell the figure format from .txt" in r.output
    assert not (tmp_path / "p.txt").exists()
    r = run(cli, ["power", "predict", str(tmp_path / "m.json"), str(train)])
    assert r.exit_code == 0 and "application" in r.output and "power W" in r.output


# ------------------------------------------------- settings chosen by cross-validation
def test_settings_are_chosen_by_grouped_cv_across_gpus():
    """Two synthetic GPUs from known models, 1% noise: a ridge only biases the weights there, so
    the protocol chooses none, on all files and on each file's other; an application set
    scored under every setting reports the chosen one and the best in hindsight."""
    from gpudvfs.evaluation.power_cv import Setting, choose_settings

    micro = {f"gpu{s}": synthetic(s, 0.01)[0] for s in (0, 1)}
    apps = {"apps0": synthetic(0, 0.0)[0]}
    settings_ = [Setting(v, rel, r) for v in ("per-config", "per-domain") for rel in (False, True) for r in (0.0, 0.1)]
    calls = []
    r = choose_settings(micro, [("gpu0", "apps0")], apps, folds=3, settings=settings_,
                        progress=lambda done, total, label: calls.append((done, total)))
    assert calls[-1] == (len(settings_), len(settings_))
    assert r.chosen.ridge == 0.0 and r.chosen_cv_mean < 2.0 and r.n_settings == len(settings_)
    means = {k: v.cv_mean for k, v in r.per_setting.items()}
    assert r.chosen.label == min(means, key=means.get)
    for v in r.files.values():
        assert v.chosen_on_others.endswith("ridge 0") and v.best_in_hindsight <= v.cv_mape
    [a] = r.apps
    assert a.best_in_hindsight_mape <= a.mape == a.over_ridge["0"] < a.over_ridge["0.1"]
    assert a.best_in_hindsight_mape <= a.chosen_on_other_apps
    # The JSON `power cv` prints: the count of settings, the choice with its label, the best nested.
    d = r.to_dict()
    assert (d["settings"], d["chosen"]) == (len(settings_), {**r.chosen.as_dict(), "label": r.chosen.label})
    assert d["apps"][0]["best_in_hindsight"] == {"label": a.best_in_hindsight_label, "mape": a.best_in_hindsight_mape}


def test_choosing_settings_refuses_bad_input():
    from gpudvfs.evaluation.power_cv import choose_settings

    ds = synthetic(0, 0.0)[0]
    with pytest.raises(InputError, match="at least two"):
        choose_settings({"a": ds})
    with pytest.raises(InputError, match="no settings"):
        choose_settings({"a": ds, "b": ds}, settings=())
    with pytest.raises(InputError, match="must be one of the microbenchmark files"):
        choose_settings({"a": ds, "b": ds}, [("c", "t")], {"t": ds})
    other = ds.without_components(["INT"])
    with pytest.raises(InputError, match="differ from the model's"):
        choose_settings({"a": ds, "b": ds}, [("a", "t")], {"t": other}, folds=2)


def test_power_settings_chosen_on_five_gpus_microbenchmarks(data):
    """`gpudvfs power cv` on the five microbenchmark files (docs/accuracy.md): per-config voltages,
    relative errors and no ridge win on all of them and on each one's other four; fitted on
    titanx_micro.csv, that setting's error on the unseen applications of titanx_real_dev.csv
    is 8.59% (the `default` variant is that setting), where ridge 0.01 (the former default,
    chosen with that file's error) has 7.94%, and the setting chosen on the other 16
    applications gives each 9.02%."""
    from click.testing import CliRunner

    from gpudvfs.cli.app import cli

    d = data / "gpupowermodel"
    micro = [str(d / f"{n}_micro.csv") for n in ("titanx", "titanxp", "gtx980", "titanx_hpca18", "k40c")]
    r = CliRunner().invoke(cli, ["power", "cv", *micro, "--skip-invalid", "--apps", micro[0],
                                 str(d / "titanx_real_dev.csv"), "--json"])
    assert r.exit_code == 0, r.output
    got = json.loads(r.stdout)
    assert got["chosen"] == {"variant": "per-config", "relative_error": True, "ridge": 0.0,
                             "label": "per-config, relative, ridge 0"}
    assert {v["chosen_on_others"] for v in got["files"].values()} == {got["chosen"]["label"]}
    # The default variant is the setting the protocol chooses.
    assert _SETTINGS["default"] == ("per-config", True, 0.0)
    assert got["chosen_cv_mean"] == pytest.approx(4.14, abs=0.005)
    assert [round(v["cv_mape"], 2) for v in got["files"].values()] == [3.10, 3.64, 2.98, 4.23, 6.75]
    [apps] = got["apps"]
    assert apps["mape"] == pytest.approx(8.59, abs=0.005)
    assert apps["chosen_on_other_apps"] == pytest.approx(9.02, abs=0.005)  # choosing on applications
    assert apps["best_in_hindsight"]["label"] == "per-config, relative, ridge 0.01"
    assert [round(apps["over_ridge"][k], 2) for k in ("0", "0.001", "0.003", "0.01", "0.03", "0.1")] == \
        [8.59, 8.47, 8.27, 7.94, 8.26, 10.76]


def test_power_cv_prints_the_choice_and_each_files_figures(data):
    from click.testing import CliRunner

    from gpudvfs.cli.app import cli

    d = data / "gpupowermodel"
    r = CliRunner().invoke(cli, ["power", "cv", str(d / "gtx980_micro.csv"), str(d / "titanxp_micro.csv"),
                                 "--folds", "3"])
    assert r.exit_code == 0, r.output
    assert "chosen on all 2 files: " in r.output and "gtx980_micro.csv" in r.output
    assert "leave-one-GPU-out mean" in r.output and "applications of" not in r.output
