"""The end-to-end job on the simulated GPU (`gpudvfs demo`) and frequency selection
validated on the measured GTX 980 grid (`gpudvfs select eval`)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from gpudvfs.cli.app import cli
from gpudvfs.demo import run_demo
from gpudvfs.hardware import SimulatedDevice
from gpudvfs.power import PowerModel
from gpudvfs.time import TimeDevice, interval


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
    d = json.loads(r.stdout)
    assert d["voltage_error_max"] < 0.02
    assert {c["policy"] for c in d["choices"]} == {"energy", "edp", "ed2p", "deadline", "power-cap", "cost"}
    pngs = sorted(p.name for p in out.glob("*.png"))
    assert "voltage-and-pareto.png" in pngs and len(pngs) == 5
    for row in d["choices"]:
        if row["policy"] == "energy":
            assert row["true_joules"] <= 1.05 * row["true_min_joules"]


def test_demo_table(tmp_path):
    r = CliRunner().invoke(cli, ["demo", "--out-dir", str(tmp_path)])
    assert r.exit_code == 0, r.output
    flat = " ".join(r.output.split())  # rich wraps titles to the terminal's width
    assert "sgemm: predicted / simulator's true values" in flat


def test_select_eval_beats_the_baselines(data):
    """GTX 980, 15 applications x 36 pairs, profiled at 700/700, power model fitted on the
    other applications: the minimum-energy policy's mean regret is 3.36% (in-sample: the time
    model's settings were chosen with these kernels among others; cross-validated also 3.36%,
    see test_cross_validation_over_both_gtx980_files), below the highest clocks (12.6%),
    the reference pair (24.2%) and one pair for all (5.34%, chosen on the other
    applications). The error-aware choices (worst case within each energy's error, its
    expectation, or the pair nearest the highest clocks within it) do no better: 4.24%, 3.36%
    and 11.78%. The pair nearest the highest clocks within a tie tolerance chosen without
    the application gives 4.11%, every application choosing 2% but backpropBackward and
    histogram, which choose none (held out with backpropForward, as `time cv` holds them, 3.62%)."""
    r = CliRunner().invoke(cli, ["select", "eval", "--device", "gtx980",
                                 str(data / "nv-dvfs-benchmark/gtx980_time_power_dev.csv"),
                                 "--reference", "700,700", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    b = d["baselines"]
    assert b["highest_clocks"]["mean"] == pytest.approx(0.126, abs=0.001)
    assert b["reference"]["mean"] == pytest.approx(0.242, abs=0.001)
    # One pair for all, chosen on the other applications, is as good as in hindsight here: 5.34%.
    single = b["single_pair"]
    assert single["hindsight"]["mean"] == pytest.approx(0.0534, abs=0.0001) and single["hindsight"]["pair"] == [
        700.0, 1000.0]
    assert single["cross_validated"]["mean"] == pytest.approx(0.0534, abs=0.0001)
    assert d["regret_mean"] == pytest.approx(0.0336, abs=0.0001) and d["regret_max"] == pytest.approx(0.189, abs=0.001)
    assert d["regret_mean"] < min(b["highest_clocks"]["mean"], b["reference"]["mean"],
                                  single["cross_validated"]["mean"])
    assert d["deadline"]["mean"] < single["cross_validated"]["mean"] and len(d["per_app"]) == 15
    # The 10%-slowdown policy: 3.36%, 14 of the 15 deadlines met.
    assert d["deadline"]["mean"] == pytest.approx(0.0336, abs=0.0001) and d["deadline"]["deadline_met"] == 14
    # With measured time the power model alone leaves 0.44%; with measured power the time
    # model alone leaves 4.87%.
    a = d["attribution"]
    assert a["measured_time"]["mean"] == pytest.approx(0.0044, abs=0.0001)
    assert a["measured_power"]["mean"] == pytest.approx(0.0487, abs=0.0001)
    u = d["uncertainty"]
    # The error bars are honest: 67% of measured energies lie within them (one normal sigma: 68.3%).
    assert u["energy_error_mean"] == pytest.approx(0.129, abs=0.001)
    assert u["within_error"] == pytest.approx(0.674, abs=0.001)
    assert u["worst_case"]["mean"] == pytest.approx(0.0424, abs=0.0001)
    assert u["near_ties_to_highest"]["mean"] == pytest.approx(0.1178, abs=0.0001)
    assert u["expected"]["mean"] == pytest.approx(0.0336, abs=0.0001)
    # Near ties within a fixed tolerance: 3.24% at 2% (in hindsight the best); held out alone,
    # each application chooses 2% but backpropBackward and histogram, which choose none: 4.11%.
    ties = d["near_ties"]
    over = {k: v["mean"] for k, v in ties["over_tolerance"].items()}
    assert over["0"] == d["regret_mean"] and min(over.values()) == pytest.approx(over["0.02"])
    assert (over["0.02"], max(over.values())) == pytest.approx((0.0324, 0.0822), abs=0.0001)
    assert ties["cross_validated"]["mean"] == pytest.approx(0.0411, abs=0.0001)
    assert [a for a, t in zip(d["per_app"], ties["cross_validated"]["tolerances"]) if t != 0.02] == [
        "backpropBackward/bpnn_adjust_weights_cuda/input00", "histogram/histogram256Kernel/input00"]
    # Over resampled applications (95%): 0.93-6.55%; below the highest clocks by 3.89-14.15
    # points, and not told apart from one pair for all (-7.44 to +2.60 points). The deadline
    # policy chooses as the minimum energy does here: the same intervals.
    ci = d["intervals"]
    assert ci["minimum_energy"]["mean"] == pytest.approx((0.0093, 0.0655), abs=1e-4)
    assert ci["minimum_energy"]["minus_highest_clocks"] == pytest.approx((-0.1415, -0.0389), abs=1e-4)
    assert ci["minimum_energy"]["minus_single_pair"] == pytest.approx((-0.0744, 0.0260), abs=1e-4)
    assert ci["deadline"] == {k: ci["minimum_energy"][k] for k in ("mean", "minus_highest_clocks")}


@pytest.mark.parametrize("path,args,line", [
    ("nv-dvfs-benchmark/gtx980_time_power_dev.csv", ["--device", "gtx980"],
     "minimum energy [0.93, 6.55], minus the highest clocks [-14.15, -3.89], minus one pair for all [-7.44, 2.60]"),
    ("nsfcac/v100_spec_dev.csv", ["--device", "v100-pcie", "--reference", "1245,877"],
     "energy [5.70, 18.09], minus the highest clocks [-49.69, -18.64], minus 1/f time [-17.25, -3.42], "
     "minus one pair for all [2.43, 13.39]")])
def test_select_eval_prints_its_intervals(data, path, args, line):
    """The text report gives the intervals of the JSON (test above, tests/time/test_dcgm.py) in %."""
    r = CliRunner().invoke(cli, ["select", "eval", str(data / path), *args])
    assert r.exit_code == 0, r.output
    assert line in " ".join(r.output.split())


def test_a_slowdown_cap_chosen_without_the_application_is_worse_than_none(data):
    """docs/accuracy.md: capping the minimum-energy choice at a slowdown (2-100% of the highest clocks'
    predicted time) moves the regret between 3.36% and 3.52%; a cap chosen (or none) by the
    least mean regret over the other applications gives 4.56%, worse than no cap (3.36%)."""
    from gpudvfs.catalog import lookup
    from gpudvfs.data import read_measured_grid
    from gpudvfs.evaluation.selection import evaluate_selection

    grid = read_measured_grid(data / "nv-dvfs-benchmark/gtx980_time_power_dev.csv", "the test")
    runs = [evaluate_selection(grid, (700.0, 700.0), time_device=TimeDevice.preset("gtx980"), spec=lookup("gtx980"),
                               slowdown=s) for s in (0.02, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5, 1.0)]
    apps = list(runs[0].per_app)
    capped = np.array([[run.per_app[a].deadline_regret for a in apps] for run in runs])
    regret = np.vstack([[runs[0].per_app[a].regret for a in apps], capped])  # [no cap, caps...] x apps
    assert (capped.mean(axis=1).min(), capped.mean(axis=1).max()) == pytest.approx((0.0336, 0.0352), abs=1e-4)
    held_out = [regret[np.argmin(np.delete(regret, a, axis=1).mean(axis=1)), a] for a in range(len(apps))]
    assert np.mean(held_out) == pytest.approx(0.0456, abs=1e-4) and np.mean(held_out) > regret[0].mean()


def test_demo_on_nvml_without_a_driver_says_so(tmp_path, monkeypatch):
    """This machine has no NVIDIA driver: `--device nvml` must stop with one clear line. Run in
    an empty folder: the README's `gpudvfs demo`, run first from the repository root, leaves
    its default output folder there, which would be refused before the device is reached."""
    monkeypatch.chdir(tmp_path)
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
    r = run(cli, ["select", "fit-power", "--device", "gtx980", path, "--reference", "700,700", "-o", str(model)])
    assert r.exit_code == 0, r.output
    r = run(cli, ["select", "choose", "--device", "gtx980", path, "--power-model", str(model), "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert len(d["workloads"]) == 15 and len(d["configs"]) == 36
    for w in d["workloads"].values():
        assert [w["core_mhz"], w["mem_mhz"]] in w["pareto"] and w["feasible"]
    # fit-power stores the error of a predicted energy at each pair (the root mean square over
    # the grid's workloads, each with power from a model fitted without it); choose reports it.
    saved = PowerModel.load(model)
    assert saved.energy_error_.shape == (36,) and 0.08 < saved.energy_error_.min() < saved.energy_error_.max() < 0.2
    pairs = [list(c) for c in saved.configs_.tolist()]
    for w in d["workloads"].values():
        assert w["energy_error"] == saved.energy_error_[pairs.index([w["core_mhz"], w["mem_mhz"]])]
    r = run(cli, ["select", "choose", "--device", "gtx980", path, "--power-model", str(model)],
            env={"COLUMNS": "200"})
    assert "energy error" in r.output and "%" in r.output
    r = run(cli, ["select", "choose", "--device", "gtx980", path, "--power-model", str(model), "--policy", "power-cap",
                  "--power-cap", "50", "--json"])
    capped = json.loads(r.stdout)["workloads"]
    assert all(w["watts"] <= 50 for w in capped.values() if w["feasible"])
    r = run(cli, ["select", "choose", "--device", "gtx980", path, "--power-model", str(tmp_path / "missing.json")])
    assert r.exit_code == 2 and "file not found" in r.output
    titanx = tmp_path / "titanx.json"
    run(cli, ["power", "fit", str(data / "gpupowermodel/titanx_micro.csv"), "--variant", "per-domain",
              "-o", str(titanx)])
    r = run(cli, ["select", "choose", "--device", "gtx980", path, "--power-model", str(titanx)])
    assert r.exit_code == 2 and "select fit-power" in r.output


def test_cross_validation_over_both_gtx980_files(data):
    """The protocol (docs/accuracy.md): 256 candidate settings (soft-max exponent 4-12, dependent
    instruction latency on or off, L2 and DRAM queues in parallel or in series, FP64 and
    special-function instructions at their pipes' rates or not, calibration by scale or with
    the DRAM check, rounds overlapped or one after another), nested leave-one-application-out
    over the 25 kernels of both GTX 980 files (15 applications: the ten in both files, and
    backprop's and scan's two kernels, are held out together), the aggregate of the training
    kernels' errors (mean, trimmed mean, median, log mean, mean rank) chosen one level in.
    Cross-validated calibrated MAPE 3.21% / 3.07%, the model beating two-term scaling on 9 of
    10 and 13 of 15 kernels; minimum-energy regret 3.36% (max 18.9%; in-sample 3.36%), moving
    between 2.70% and 5.31% over the exponents. With the mean alone, as before the aggregate
    was chosen, 3.50% / 3.10% and 3.76%. Parallel queues,
    chosen on one file two changes ago, lose under the protocol; so does the DRAM check.
    Each file scored under the settings chosen on the other one alone, the settings chosen
    by the selection regret instead of the time error, and the near-ties rule."""
    r = CliRunner().invoke(cli, ["time", "cv", "--device", "gtx980",
                                 str(data / "nv-dvfs-benchmark/gtx980_time_dev.csv"),
                                 str(data / "nv-dvfs-benchmark/gtx980_time_power_dev.csv"), "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    dev, tp = (d["files"][str(data / f"nv-dvfs-benchmark/{f}")] for f in ("gtx980_time_dev.csv",
                                                                          "gtx980_time_power_dev.csv"))
    assert (dev["kernels"], tp["kernels"], d["candidates"]) == (10, 15, 256)
    # Both files under the 3.5% issue 13 asks.
    assert (dev["cv_mape"], tp["cv_mape"]) == pytest.approx((3.21, 3.07), abs=0.01)
    assert (dev["in_sample_mape"], tp["in_sample_mape"]) == pytest.approx((3.05, 2.97), abs=0.01)
    assert d["applications"]["backprop"] == ["backprop", "backpropBackward/bpnn_adjust_weights_cuda/input00",
                                             "backpropForward/bpnn_layerforward_CUDA/input00"]
    assert len(d["applications"]) == 10 and sum(map(len, d["applications"].values())) == 22
    assert (dev["cv_beats_two_term"], tp["cv_beats_two_term"]) == (9, 13)
    assert (dev["two_term_mape"], tp["two_term_mape"]) == pytest.approx((8.44, 6.49), abs=0.01)
    # predict's 90% interval of a calibrated time, Z90 sigma(d), is fitted on these predictions'
    # residuals; with each application's kernels held out it holds 89.0% of them (a constant
    # interval of the same mean width 90.1%, but too wide near the reference, too narrow far away).
    q = d["interval"]
    fit = q["on_all"]
    assert (fit["spread_a"], fit["spread_b"], fit["z90"]) == pytest.approx(
        (interval.SPREAD_A, interval.SPREAD_B, interval.Z90), abs=1e-3)
    assert (q["coverage"], q["constant_coverage"], q["mean_half_width"]) == pytest.approx((0.890, 0.901, 0.0907),
                                                                                          abs=1e-3)
    bands = [q["by_distance"][b] for b in ("0-0.3", "0.3-0.5", "0.5-inf")]
    assert [b["coverage"] for b in bands] == pytest.approx([0.894, 0.872, 0.935], abs=1e-3)
    assert [b["constant_coverage"] for b in bands] == pytest.approx([0.931, 0.880, 0.903], abs=1e-3)
    assert [b["mean_half_width"] for b in bands] == pytest.approx([0.0627, 0.0953, 0.1387], abs=1e-3)
    # The preset is the protocol's choice on all kernels, by the aggregate chosen on them.
    assert d["chosen_on_all"] == "p=7, dependent latency, queues in series, pipe rates, scale, overlapped rounds"
    assert d["aggregate_on_all"] == "trimmed mean"
    assert d["aggregate_per_kernel"] == {"mean": 1, "trimmed mean": 4, "median": 1, "log mean": 2, "mean rank": 17}
    preset = TimeDevice.gtx980()
    assert (preset.overlap_p, preset.parallel_queues, preset.overlapped_rounds) == (7.0, False, True)
    assert (preset.dp_inst_cycle, preset.sf_inst_cycle) == (8.0, 1.0)
    for name in ("parallel queues", "DRAM check"):  # worse under the protocol: left out
        ext = d["extensions"][name]
        assert np.mean(list(ext["with"].values())) > np.mean(list(ext["without"].values()))
    files = [str(data / "nv-dvfs-benchmark" / f) for f in ("gtx980_time_dev.csv", "gtx980_time_power_dev.csv")]
    # How the figures move with the aggregate, each alone: time per file and regret (max).
    for name, mape, regret in (("mean", (3.505, 3.097), (0.0376, 0.189)),
                               ("trimmed mean", (3.161, 3.041), (0.0336, 0.189)),
                               ("median", (3.734, 3.265), (0.0465, 0.301)),
                               ("log mean", (3.465, 3.167), (0.0441, 0.189)),
                               ("mean rank", (3.207, 3.067), (0.0358, 0.189))):
        assert [d["over_aggregates"][name][f] for f in files] == pytest.approx(mape, abs=0.001), name
        alone = d["selection"][files[1]]["over_aggregates"][name]
        assert (alone["mean"], alone["max"]) == pytest.approx(regret, abs=0.001), name
    # The docs' table of extensions: CV MAPE per file with each, and without it.
    for name, with_it, without in (("dependent latency", (3.16, 3.11), (3.42, 2.85)),
                                   ("pipe rates", (3.24, 3.07), (3.12, 3.02)),
                                   ("parallel queues", (3.37, 3.39), (3.15, 3.00)),
                                   ("DRAM check", (3.17, 3.20), (3.17, 3.07)),
                                   ("overlapped rounds", (3.19, 3.01), (3.20, 3.49))):
        ext = d["extensions"][name]
        assert [ext["with"][f] for f in files] == pytest.approx(with_it, abs=0.01), name
        assert [ext["without"][f] for f in files] == pytest.approx(without, abs=0.01), name
    # So is the learned correction: 5.03-5.77% / 4.13-4.61% over the ridge strengths.
    correction = np.array([[per_file[f] for f in files] for per_file in d["learned_correction"].values()])
    assert correction.min(axis=0) == pytest.approx([5.03, 4.13], abs=0.01)
    assert correction.max(axis=0) == pytest.approx([5.77, 4.61], abs=0.01)
    s = next(iter(d["selection"].values()))
    assert s["cv_regret_mean"] == pytest.approx(0.0336, abs=0.0001)
    assert s["cv_regret_max"] == pytest.approx(0.189, abs=0.001)
    assert (s["in_sample_regret_mean"], s["in_sample_regret_max"]) == pytest.approx((0.0336, 0.189), abs=0.0001)
    regret = [v["regret_mean"] for v in s["over_overlap_p"].values()]
    assert min(regret) == pytest.approx(0.0270, abs=0.0001) and max(regret) == pytest.approx(0.0531, abs=0.0001)
    # Each file under the settings chosen on the other file alone (a shift of kernel set):
    # the time figures hold (3.38% / 3.44%), the regret does not (5.01%, max 30.1%).
    assert dev["other_files"]["mape"] == pytest.approx(3.38, abs=0.01) and dev["other_files"]["beats_two_term"] == 8
    assert tp["other_files"]["mape"] == pytest.approx(3.44, abs=0.01) and tp["other_files"]["beats_two_term"] == 13
    assert s["other_files_regret_mean"] == pytest.approx(0.0501, abs=0.0001)
    assert s["other_files_regret_max"] == pytest.approx(0.301, abs=0.001)
    # Choosing the settings by the regret itself (least mean over the other applications)
    # instead of the time error: 4.92% (max 30.1%), worse; held out by kernel alone too (3.52%
    # against 3.36%).
    assert s["chosen_by_regret"]["mean"] == pytest.approx(0.0492, abs=1e-4)
    assert s["chosen_by_regret"]["max"] == pytest.approx(0.301, abs=1e-3)
    # With the criterion itself chosen for each application on the others: the regret for 4
    # of the 15, 4.61%.
    assert s["criterion_chosen"]["mean"] == pytest.approx(0.0461, abs=1e-4)
    assert s["criterion_chosen"]["regret_chosen"] == 4
    # The near-ties rule, its tolerance chosen without the application's group: 3.62%, 0.26
    # points over none. Held out together, backprop's kernels choose none; mergeSort 1%;
    # every other application 0.5%.
    ties = s["near_ties"]
    assert ties["mean"] == pytest.approx(0.0362, abs=1e-4) and ties["max"] == pytest.approx(0.189, abs=1e-3)
    apps = list(s["per_app"])
    assert {a.split("/")[0]: t for a, t in zip(apps, ties["tolerances"]) if t != 0.005} == {
        "backpropBackward": 0.0, "backpropForward": 0.0, "mergeSort": 0.01}
    assert s["per_app"]["quasirandomGenerator/quasirandomGeneratorKernel/input00"] == 0.0
    # No choice among the 256 settings meets 2.5% / 15%: each application's best in hindsight
    # leaves 2.11% (max 18.2%, gaussian), the best single setting 2.69%.
    h = s["hindsight"]
    assert (h["per_application"]["mean"], h["per_application"]["max"]) == pytest.approx((0.0211, 0.182), abs=1e-3)
    assert h["one_candidate"]["mean"] == pytest.approx(0.0269, abs=1e-4)
    # The baselines on the same applications: two-term times 4.66% (max 14.7%), one pair for
    # all chosen on the other applications 5.34% (32.8%), the highest clocks 12.60%.
    b = s["baselines"]
    assert (b["two_term"]["mean"], b["single_pair"]["mean"], b["highest_clocks"]["mean"]) == pytest.approx(
        (0.0466, 0.0534, 0.1260), abs=1e-4)
    # How far the figures could move with other applications of these kinds (cluster bootstrap
    # over the held-out groups, 95%): time 1.78-4.95% / 1.27-5.38%, and below two-term on
    # both files (the paired difference's interval is below 0); the regret 1.04-6.37%, its
    # difference from two-term times -4.41..1.58 points and from one pair for all
    # -7.22..2.12: 2.5% lies within it and neither baseline is told apart from the model.
    assert dev["intervals"]["mean"] == pytest.approx((1.78, 4.95), abs=0.01)
    assert tp["intervals"]["mean"] == pytest.approx((1.27, 5.38), abs=0.01)
    assert dev["intervals"]["minus_two_term"][1] < 0 and tp["intervals"]["minus_two_term"][1] < 0
    ci = s["intervals"]
    assert ci["mean"] == pytest.approx((0.0104, 0.0637), abs=1e-4)
    assert ci["minus_two_term"] == pytest.approx((-0.0441, 0.0158), abs=1e-4)
    assert ci["minus_single_pair"] == pytest.approx((-0.0722, 0.0212), abs=1e-4)
    # The aggregate's gain over the mean alone is not told apart from none: time -0.81..0.13 /
    # -0.15..0.07 points, regret -1.52..0.47.
    assert dev["intervals"]["minus_mean"] == pytest.approx((-0.81, 0.13), abs=0.01)
    assert tp["intervals"]["minus_mean"] == pytest.approx((-0.15, 0.07), abs=0.01)
    assert ci["minus_mean"] == pytest.approx((-0.0152, 0.0047), abs=1e-4)


def test_the_trimmed_mean_over_how_many_it_trims(data, monkeypatch):
    """docs/accuracy.md: the trimmed mean alone, cross-validated as `time cv` does, with 1-4 kernels
    left out at each end: 3.16 / 3.04, 3.20 / 3.03, 3.33 / 3.32, 3.37 / 3.14%."""
    from gpudvfs.evaluation import nested
    from gpudvfs.evaluation import time_cv as crossval

    grids = _gtx980_grids(data)
    run = crossval.protocol_run(grids, (700.0, 700.0), TimeDevice.gtx980(), crossval.CANDIDATES, "application")
    cases, groups, errors = run.cases, run.groups, run.errors
    first = np.array([k.file == grids[0].path for k in cases])
    figures = []
    for trim in (1, 2, 3, 4):
        monkeypatch.setattr(nested, "TRIM", trim)
        chosen = nested.protocol_choice(errors, groups, ("trimmed mean",))[0]
        cv = errors[chosen, np.arange(len(cases))]
        figures += [cv[first].mean(), cv[~first].mean()]
    assert figures == pytest.approx([3.16, 3.04, 3.20, 3.03, 3.33, 3.32, 3.37, 3.14], abs=0.01)


def test_cross_validation_by_kernel_alone(data):
    """`time cv --hold-out kernel`: each kernel held out alone, its application's kernel in
    the other file left in: 3.29% / 3.13% time, 3.58% regret; there the settings chosen by
    the regret do better (3.52%), and the nested choice of criterion takes the regret for 10
    of the 15 applications (3.67%)."""
    files = [str(data / f"nv-dvfs-benchmark/{f}") for f in ("gtx980_time_dev.csv", "gtx980_time_power_dev.csv")]
    r = CliRunner().invoke(cli, ["time", "cv", "--device", "gtx980", *files, "--hold-out", "kernel", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["hold_out"] == "kernel" and d["applications"] == {}
    # Each extension's figures under the JSON keys the docs name ("with" is no Python name).
    assert all(list(v) == ["with", "without"] and set(v["with"]) == set(files) for v in d["extensions"].values())
    assert [d["files"][f]["cv_mape"] for f in files] == pytest.approx([3.29, 3.13], abs=0.01)
    s = d["selection"][files[1]]
    assert s["cv_regret_mean"] == pytest.approx(0.0358, abs=1e-4)
    assert s["chosen_by_regret"]["mean"] == pytest.approx(0.0352, abs=1e-4)
    assert s["criterion_chosen"]["regret_chosen"] == 10 and s["criterion_chosen"]["mean"] == pytest.approx(0.0367,
                                                                                                          abs=1e-4)
    r = CliRunner().invoke(cli, ["time", "cv", "--device", "gtx980", *files, "--hold-out", "app"])
    assert r.exit_code == 2 and "--hold-out" in r.output
    from gpudvfs.errors import InputError
    from gpudvfs.evaluation.time_cv import cross_validate_time

    with pytest.raises(InputError, match="hold_out must be one of"):
        cross_validate_time(_gtx980_grids(data), (700.0, 700.0), TimeDevice.gtx980(), hold_out="file")


def _gtx980_grids(data):
    from gpudvfs.data import read_measured_grid

    return [read_measured_grid(data / f"nv-dvfs-benchmark/{f}", "the time model")
            for f in ("gtx980_time_dev.csv", "gtx980_time_power_dev.csv")]


#: The docs' table of the protocol over the device constants: per constant, at x0.5,
#: x0.75, x1.25 and x1.5, the CV time MAPE on both files and the CV regret mean (%).
CONSTANT_TABLE = {
    "inst_lat": [(3.39, 2.91, 3.58), (3.38, 2.96, 3.36), (3.01, 2.95, 3.36), (3.17, 3.04, 4.76)],
    "sh_lat": [(3.16, 3.07, 3.36), (3.17, 3.07, 3.36), (3.21, 3.07, 3.36), (3.18, 3.04, 3.36)],
    "l2_lat": [(3.54, 3.15, 4.26), (3.37, 2.94, 3.36), (3.27, 3.20, 3.58), (3.40, 3.23, 3.96)],
    "l2_del": [(3.32, 3.17, 4.01), (3.24, 3.15, 3.58), (3.32, 2.99, 3.36), (3.58, 3.01, 3.04)],
    "dm_lat_b": [(3.32, 2.93, 3.58), (3.24, 2.98, 3.58), (3.20, 3.01, 3.58), (2.98, 3.01, 3.36)],
    "dp_inst_cycle": [(3.12, 2.98, 4.33), (3.16, 3.00, 3.36), (3.36, 3.03, 4.75), (3.16, 3.27, 5.73)],
    "sf_inst_cycle": [(3.21, 3.07, 3.79), (3.21, 3.06, 3.36), (3.17, 3.05, 3.58), (3.17, 3.06, 3.58)],
}


def test_the_protocol_figures_over_the_device_constants(data):
    """How the cross-validated figures move when one hardware constant of the gtx980 preset
    moves (the whole protocol re-run each time: 28 runs): the time figures stay
    within 2.9-3.6%, the regret within 3.0-5.8%; no constant fixes the worst application
    (gaussian, 18.2-18.9%), and four settings send another to 30.1% (the FP64 instruction
    at x0.5, x1.25 or x1.5, the dependent latency at x1.5): the time figures do not hang on
    one constant, the selection figure does, and no constant was shaped to them."""
    from gpudvfs.catalog import lookup
    from gpudvfs.evaluation.time_cv import CONSTANT_SCALES, constant_sensitivity

    grids = _gtx980_grids(data)
    r = constant_sensitivity(grids, (700.0, 700.0), TimeDevice.gtx980(), lookup("gtx980"))
    time_dev, time_power = (g.path for g in grids)
    assert list(r) == list(CONSTANT_TABLE) and CONSTANT_SCALES == (0.5, 0.75, 1.25, 1.5)
    for name, rows in CONSTANT_TABLE.items():
        for x, row in zip(CONSTANT_SCALES, rows):
            v = r[name][f"{x:g}"]
            assert v.cv_regret is not None
            got = (v.cv_mape[time_dev], v.cv_mape[time_power], 100 * v.cv_regret[time_power].mean)
            assert got == pytest.approx(row, abs=0.005), (name, x)
            assert 0.182 - 0.001 <= v.cv_regret[time_power].max <= 0.301 + 0.001, (name, x)
    assert r["l2_lat"]["1.5"].cv_regret[time_power].max == pytest.approx(0.182, abs=0.001)
    worst = [(name, x) for name, by_scale in r.items() for x, v in by_scale.items()
             if v.cv_regret[time_power].max > 0.2]
    assert worst == [("inst_lat", "1.5"), ("dp_inst_cycle", "0.5"), ("dp_inst_cycle", "1.25"),
                     ("dp_inst_cycle", "1.5")]


def test_device_constant_sensitivity_refuses_what_it_cannot_scale(data):
    from gpudvfs.errors import InputError
    from gpudvfs.evaluation.time_cv import constant_sensitivity

    grids = _gtx980_grids(data)[:1]
    for bad in (("overlap_p",), ("name",), ("parallel_queues",), ("nope",), ()):
        with pytest.raises(InputError, match="constants"):
            constant_sensitivity(grids, (700.0, 700.0), TimeDevice.gtx980(), constants=bad)
    for bad in ((0.0,), (-1.0,), (float("nan"),), (True,), ()):
        with pytest.raises(InputError, match="scales"):
            constant_sensitivity(grids, (700.0, 700.0), TimeDevice.gtx980(), scales=bad)


def test_time_cv_sensitivity_table(data, monkeypatch):
    """`time cv --sensitivity` prints the protocol's figures per scaled constant (here the
    command's set of constants cut to one, to keep the test short)."""
    from functools import partial

    from gpudvfs.evaluation import time_cv

    monkeypatch.setattr(time_cv, "constant_sensitivity",
                        partial(time_cv.constant_sensitivity, constants=("inst_lat",), scales=(1.5,)))
    files = [str(data / f"nv-dvfs-benchmark/{f}") for f in ("gtx980_time_dev.csv", "gtx980_time_power_dev.csv")]
    r = CliRunner().invoke(cli, ["time", "cv", "--device", "gtx980", *files, "--sensitivity"],
                           env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    row = next(line for line in r.output.splitlines() if "inst_lat" in line and "ETA" not in line)  # not the bar
    assert "x1.5" in row and "3.17" in row and "3.04" in row and "4.76 (30.1)" in row
    # The text carries the intervals and the regret's baselines too.
    dev_row = next(line for line in r.output.splitlines() if "gtx980_time_dev.csv" in line and "9/10" in line)
    assert "[1.78, 4.95]" in dev_row and "[-7.49, -2.80]" in dev_row
    assert ("cross-validated mean [1.04, 6.37]; minus two-term [-4.41, 1.58]; minus one pair for all [-7.22, 2.12]; "
            "minus the mean as the only aggregate [-1.52, 0.47]") in " ".join(r.output.split())
    # And the aggregates: the protocol's choices, and each one alone.
    assert "aggregated by the trimmed mean on all kernels; per held-out kernel: mean x1; trimmed mean x4" in (
        " ".join(r.output.split()))
    assert ["│", "mean", "│", "3.50", "│", "3.10", "│", "3.76", "(18.9)", "│"] in [
        line.split() for line in r.output.splitlines()]
    assert any("two-term times" in line and "4.66" in line and "14.69" in line for line in r.output.splitlines())
    r = CliRunner().invoke(cli, ["time", "cv", "--device", "gtx980", *files, "--sensitivity", "--json"])
    d = json.loads(r.stdout)["over_device_constants"]
    assert list(d) == ["inst_lat"] and d["inst_lat"]["1.5"]["cv_mape"][files[0]] == pytest.approx(3.17, abs=0.01)
