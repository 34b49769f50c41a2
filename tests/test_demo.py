"""The end-to-end job on the simulated GPU (`gpudvfs demo`) and frequency selection
validated on the measured GTX 980 grid (`gpudvfs select eval`)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from gpudvfs.cli.app import cli
from gpudvfs.demo import run_demo
from gpudvfs.measure import SimulatedDevice
from gpudvfs.time import TimeDevice


@pytest.mark.parametrize("seed", [0, 7])
def test_demo_choices_are_near_the_true_optimum(tmp_path, seed):
    """Each workload's minimum-energy choice costs, in the simulator's true energy, at most
    5% more than the true optimum over all configurations; every constrained choice that is
    feasible by prediction is feasible in truth within 1%."""
    r = run_demo(SimulatedDevice(seed=seed), workdir=tmp_path)
    assert len(r.workloads) == 4
    for w in r.workloads:
        true_e = w.true_time_ms * w.true_watts
        k = int(w.choices["energy"].index[0])
        assert true_e[k] <= 1.05 * true_e.min(), w.name
        d = w.choices["deadline"]
        if d.feasible[0]:
            default = int(np.flatnonzero((w.configs == SimulatedDevice().default_clocks()).all(axis=1))[0])
            assert w.true_time_ms[d.index[0]] <= 1.1 * w.true_time_ms[default] * 1.01
        # The Pareto front holds the fastest and the least-energy configurations.
        e = w.time_ms * w.watts
        assert int(np.argmin(e)) in w.pareto and int(np.argmin(w.time_ms)) in w.pareto
    cfg = r.workloads[0].configs
    np.testing.assert_allclose(r.power_model.voltage(cfg[:, 0], cfg[:, 1]), r.true_volts, rtol=0.02)


def test_demo_cli_json_and_plots(tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "demo"
    r = CliRunner().invoke(cli, ["demo", "--out-dir", str(out), "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["voltage_error_max"] < 0.02
    assert {c["policy"] for c in d["choices"]} == {"energy", "edp", "ed2p", "deadline", "power-cap"}
    pngs = sorted(p.name for p in out.glob("*.png"))
    assert "voltage-and-pareto.png" in pngs and len(pngs) == 5
    for row in d["choices"]:
        if row["policy"] == "energy":
            assert row["true_joules"] <= 1.05 * row["true_min_joules"]


def test_demo_table(tmp_path):
    r = CliRunner().invoke(cli, ["demo", "--out-dir", str(tmp_path)])
    assert r.exit_code == 0, r.output
    flat = " ".join(r.output.split())  # rich wraps titles to the terminal's width
    assert "sgemm (compute-bound): predicted / simulator's true values" in flat


def test_select_eval_beats_the_baselines(data):
    """GTX 980, 15 applications x 36 pairs, profiled at 700/700, power model fitted on the
    other applications: the minimum-energy policy's mean regret is 2.80%, below the highest
    clocks (12.6%), the reference pair (24.2%) and the best single pair in hindsight (5.3%)."""
    r = CliRunner().invoke(cli, ["select", "eval", str(data / "nv-dvfs-benchmark/gtx980_time_power_dev.csv"),
                                 "--reference", "700,700", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    b = d["baselines"]
    assert b["highest_clocks"]["mean"] == pytest.approx(0.126, abs=0.001)
    assert b["reference"]["mean"] == pytest.approx(0.242, abs=0.001)
    assert b["best_single_pair"]["mean"] == pytest.approx(0.053, abs=0.001)
    assert d["regret_mean"] == pytest.approx(0.0280, abs=0.0005) and d["regret_mean"] <= 0.03
    assert d["regret_mean"] < min(v["mean"] for v in b.values())
    assert d["deadline"]["mean"] < b["best_single_pair"]["mean"] and len(d["per_app"]) == 15
    # With measured time the power model alone leaves 0.44%; with measured power the time
    # model alone leaves 4.30% (its errors and the power model's partly cancel).
    a = d["attribution"]
    assert a["measured_time"]["mean"] == pytest.approx(0.0044, abs=0.0001)
    assert a["measured_power"]["mean"] == pytest.approx(0.0430, abs=0.0001)


def test_demo_on_nvml_without_a_driver_says_so():
    """This machine has no NVIDIA driver: `--device nvml` must stop with one clear line."""
    pynvml = pytest.importorskip("pynvml")
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        pass
    else:
        pytest.skip("an NVIDIA driver is present; this test checks the no-driver message")
    r = CliRunner().invoke(cli, ["demo", "--device", "nvml"])
    assert r.exit_code == 2
    assert "NVML could not be initialised" in r.output and "Traceback" not in r.output


def test_select_fit_power_then_choose(data, tmp_path):
    """`select fit-power` on the measured grid, then `select choose` for its workloads from
    their reference rows: each policy's choice is feasible by prediction and, for minimum
    energy, on the predicted Pareto front."""
    path = str(data / "nv-dvfs-benchmark/gtx980_time_power_dev.csv")
    model = tmp_path / "p.json"
    run = CliRunner().invoke
    r = run(cli, ["select", "fit-power", path, "--reference", "700,700", "-o", str(model)])
    assert r.exit_code == 0, r.output
    r = run(cli, ["select", "choose", path, "--power-model", str(model), "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert len(d["workloads"]) == 15 and len(d["configs"]) == 36
    for w in d["workloads"].values():
        assert [w["core_mhz"], w["mem_mhz"]] in w["pareto"] and w["feasible"]
    r = run(cli, ["select", "choose", path, "--power-model", str(model), "--policy", "power-cap",
                  "--power-cap", "50", "--json"])
    capped = json.loads(r.output)["workloads"]
    assert all(w["watts"] <= 50 for w in capped.values() if w["feasible"])
    r = run(cli, ["select", "choose", path, "--power-model", str(tmp_path / "missing.json")])
    assert r.exit_code == 2 and "file not found" in r.output
    titanx = tmp_path / "titanx.json"
    run(cli, ["power", "fit", str(data / "gpupowermodel/titanx_micro.csv"), "--variant", "per-domain",
              "-o", str(titanx)])
    r = run(cli, ["select", "choose", path, "--power-model", str(titanx)])
    assert r.exit_code == 2 and "select fit-power" in r.output


def test_select_eval_regret_is_fragile_in_the_overlap_exponent(data, tmp_path):
    """Stated, not hidden: the 2.80% rests on the soft-maximum exponent p = 6. The time
    model's calibrated MAPE barely moves with p (2.49-2.61% here; on gtx980_time_dev.csv
    3.15-3.19%, where p = 9 is the optimum), but the energy surfaces of several
    applications are so flat that their choices flip: the regret is 3.05% at p = 7, 2.89%
    at 8 and 4.57% at 9 (backpropBackward alone goes from 15.6% to 30.1%)."""
    path = str(data / "nv-dvfs-benchmark/gtx980_time_power_dev.csv")
    found = {}
    for p in (7, 8, 9):
        dev = tmp_path / f"p{p}.json"
        TimeDevice(**{**TimeDevice.gtx980().params(), "overlap_p": float(p)}).save(dev)
        r = CliRunner().invoke(cli, ["select", "eval", path, "--device", str(dev), "--json"])
        assert r.exit_code == 0, r.output
        d = json.loads(r.output)
        found[p] = (round(100 * d["regret_mean"], 2), round(d["time_mape"], 2))
    assert found == {7: (3.05, 2.49), 8: (2.89, 2.53), 9: (4.57, 2.58)}


def test_demo_figures_say_what_they_show(tmp_path):
    """Heatmaps: memory clocks as category rows, log colour scales, what white cells mean, each
    policy's choice marked with a legend entry; the Pareto panel marks the choices too."""
    pytest.importorskip("matplotlib")
    import matplotlib as mpl

    from gpudvfs.demo import demo_figures

    result = run_demo(SimulatedDevice(), workdir=tmp_path)
    figures = demo_figures(result)
    mems = sorted({float(m) for m in result.workloads[0].configs[:, 1]})
    heat = figures["heatmaps-stream--memory-bound"]
    assert "white: a pair the GPU does not support" in heat._suptitle.get_text()
    panels = [ax for ax in heat.axes if ax.get_title().startswith("predicted")]
    assert len(panels) == 3
    for ax in panels:
        assert [float(t.get_text()) for t in ax.get_yticklabels()] == mems  # evenly spaced rows
        assert isinstance(ax.images[0].norm, mpl.colors.LogNorm)
    labels = [t.get_text() for t in heat.legends[0].get_texts()]
    assert labels == [f"{p} choice" for p in ("energy", "edp", "ed2p", "deadline", "power-cap")]
    pareto = next(ax for ax in figures["voltage-and-pareto"].axes if ax.get_title().startswith("Pareto"))
    legend = [t.get_text() for t in pareto.get_legend().get_texts()]
    assert "energy choice" in legend and "default clocks" in legend
    assert pareto.get_xlabel() == "predicted time / time at the default clocks"


def test_voltage_figure_tells_its_series_apart(data):
    """Four memory levels: a legend beside the axes; sixteen core levels: a colour bar."""
    pytest.importorskip("matplotlib")
    import warnings

    import gpudvfs
    from gpudvfs.power.plots import model_figure

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", gpudvfs.GpudvfsWarning)
        model = gpudvfs.PowerModel().fit(gpudvfs.read_power_dataset(data / "gpupowermodel/titanx_micro.csv"))
    fig = model_figure(model)
    core, mem = (ax for ax in fig.axes if ax.get_title().endswith("default model"))
    legend = core.get_legend()
    assert [t.get_text() for t in legend.get_texts()] == [f"memory {m} MHz" for m in (810, 3300, 3505, 4005)]
    assert legend.get_bbox_to_anchor().x0 > core.get_window_extent().x1 - 1  # off the data, to the right
    assert mem.get_legend() is None
    assert any(ax.get_ylabel() == "core clock (MHz)" for ax in fig.axes)  # the colour bar's
    assert [t.get_text() for t in mem.get_xticklabels()] == ["810", "3300", "3505", "4005"]
