"""Traps of the command line found in one hour of use, each closed: an output written over an
input or an existing file, data or clocks of another GPU taken silently, a reference pair
that only fits the GTX 980, a sweep the power fit could not read, two styles of error,
Python spoken to CLI users, a profiler command with nowhere to write, aliases not listed."""

from __future__ import annotations

import json
import shutil

import pytest
from click.testing import CliRunner

from gpudvfs.cli import main
from gpudvfs.cli.app import cli

GTX980_POWER = "nv-dvfs-benchmark/gtx980_time_power_dev.csv"
GTX980_TIME = "nv-dvfs-benchmark/gtx980_time_dev.csv"
V100 = "nsfcac/v100_spec_dev.csv"


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def _sweep(out, *extra):
    """A small power sweep of the simulated GPU (a few hundred rows, about a second)."""
    r = run("sweep", "--suite", "power", "-o", out, "--min-seconds", "0.001", "--core-mhz", "595,975,1164",
            "--mem-mhz", "810,3505", *extra)
    assert r.exit_code == 0, r.output
    return r


# ------------------------------------------------------------------ writing over files

def test_an_input_is_never_written_over_even_with_force(data, tmp_path):
    victim = tmp_path / "victim.csv"
    shutil.copy(data / GTX980_POWER, victim)
    before = victim.read_bytes()
    r = run("select", "fit-power", victim, "--device", "gtx980", "-o", victim, "--force")
    assert r.exit_code == 2 and "victim.csv is an input of this command" in r.output, r.output
    assert victim.read_bytes() == before


@pytest.mark.parametrize("command", [
    ["power", "fit", "{data}/gpupowermodel/gtx980_micro.csv", "-o", "{out}"],
    ["power", "plot", "model.json", "-o", "{out}.png"],
    ["power", "prior", "gtx980", "-o", "{out}"],
    ["power", "prior-cv", "{data}", "--write", "{out}"],
    ["power", "observe", "--seconds", "1", "-o", "{out}"],
    ["select", "fit-power", "{data}/" + GTX980_POWER, "--device", "gtx980", "-o", "{out}"],
    ["time", "fit-device", "{data}/" + GTX980_TIME, "--device", "gtx980", "-o", "{out}"],
    ["time", "fit-dcgm", "{data}/" + V100, "--reference", "945,877", "-o", "{out}"],
    ["fleet", "sample-jobs", "--registry", "{tmp}", "-o", "{out}"],
    ["fleet", "sample-telemetry", "--registry", "{tmp}", "-o", "{out}"],
])
def test_an_existing_output_needs_force(data, tmp_path, monkeypatch, command):
    """Refused before any work, the file left as it was; the message names --force."""
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "existing"
    args = [a.format(data=data, out=out, tmp=tmp_path) for a in command]
    target = next(a for a in args if a.startswith(str(out)))
    (tmp_path / target).write_text("keep")
    r = run(*args)
    assert r.exit_code == 2 and "exists; give --force to write over it" in r.output, r.output
    assert (tmp_path / target).read_text() == "keep"


def test_force_writes_over_an_output(data, tmp_path):
    out = tmp_path / "m.json"
    out.write_text("old")
    r = run("power", "prior", "gtx980", "-o", out, "--force")
    assert r.exit_code == 0, r.output
    assert json.loads(out.read_text())["kind"] == "power-model"


def test_a_sweep_continues_with_resume_and_says_so_in_cli_words(tmp_path):
    out = tmp_path / "s.csv"
    _sweep(out)
    r = run("sweep", "--suite", "power", "-o", out)
    assert r.exit_code == 2 and "give --resume to continue the sweep in it" in r.output, r.output
    assert "resume=True" not in r.output
    gpm = tmp_path / "g.csv"
    gpm.write_text("keep")
    r = run("sweep", "--suite", "power", "-o", tmp_path / "other.csv", "--gpmtool", gpm)
    assert r.exit_code == 2 and "g.csv exists" in r.output and gpm.read_text() == "keep"


@pytest.mark.parametrize("command", [["demo", "--out-dir"], ["validate", "-o"]])
def test_a_folder_holding_an_earlier_run_needs_resume(tmp_path, command):
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "report.md").write_text("keep")
    r = run(*command, folder)
    assert r.exit_code == 2 and "give --resume to continue" in r.output, r.output
    assert (folder / "report.md").read_text() == "keep"


# ------------------------------------------------------------------ another GPU's data or clocks

def test_a_sweep_of_another_gpu_is_refused(tmp_path):
    out = tmp_path / "s.csv"
    _sweep(out)
    record = tmp_path / "s.csv.sweep.json"
    doc = json.loads(record.read_text())
    doc["plan"]["device"]["name"] = "NVIDIA H100 80GB HBM3"
    record.write_text(json.dumps(doc))
    r = run("power", "fit", out, "--device", "gtx980")
    assert r.exit_code == 2 and "swept on NVIDIA H100 80GB HBM3 (h100-sxm), not on gtx980" in r.output, r.output


def test_a_grid_at_clocks_the_device_does_not_run_is_refused(data):
    """A GTX 980's grid (GDDR5 up to 2000 MHz in NVML's unit) on a V100 (HBM2 at 877 MHz)."""
    r = run("time", "eval", data / GTX980_TIME, "--device", "v100-pcie")
    assert r.exit_code == 2 and "lie above a Tesla V100-PCIE-16GB's 877 MHz" in r.output, r.output


def test_a_reference_the_gpu_does_not_run_is_refused(data):
    r = run("time", "eval", data / GTX980_TIME, "--device", "gtx980", "--reference", "5000,2619")
    assert r.exit_code == 2 and "--reference 5000,2619: core clocks 5000 MHz lie outside" in r.output, r.output


def test_predicting_at_clocks_the_gpu_does_not_run_is_refused(data):
    r = run("time", "predict", data / GTX980_TIME, "--device", "gtx980", "--kernel", "vectorAdd",
            "--core-mhz", "700,3000")
    assert r.exit_code == 2 and "--core-mhz/--mem-mhz: core clocks 3000 MHz" in r.output, r.output


# ------------------------------------------------------------------ the reference pair

def test_the_reference_defaults_to_the_gpus_default_clocks(data):
    """A V100 grid has no 700 MHz row: the reference is the V100's default clocks (1245 MHz)."""
    r = run("govern", "replay", data / V100, "--device", "v100-pcie", "--steps", "10", "--phase-steps", "5", "--json")
    assert r.exit_code == 0, r.output


def test_an_nvdvfs_grid_keeps_its_own_reference(data):
    r = run("time", "eval", data / GTX980_TIME, "--device", "gtx980", "--json")
    assert r.exit_code == 0, r.output
    assert "reference 700/700" in run("time", "eval", data / GTX980_TIME, "--device", "gtx980").output


def test_a_missing_reference_row_suggests_reference_and_the_nearest_pairs(data):
    r = run("time", "eval", data / GTX980_TIME, "--device", "gtx980", "--reference", "1100,700")
    assert r.exit_code == 2, r.output
    assert "give --reference CORE,MEM, a pair the grid measured every workload at (nearest: 1000,700" in r.output
    r = run("time", "eval", data / V100, "--device", "v100-pcie", "--reference", "1000,877")
    assert r.exit_code == 2 and "nearest: 997,877; 1005,877" in r.output, r.output


# ------------------------------------------------------------------ the README's sweep-to-fit chain

def test_power_fit_reads_a_power_sweep(tmp_path):
    out = tmp_path / "p.csv"
    _sweep(out)
    r = run("power", "fit", out, "--variant", "per-domain", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["rows"] > 0


# ------------------------------------------------------------------ one error style

@pytest.mark.parametrize("args, message", [
    (["sweep", "--bogus"], "No such option '--bogus'"),
    (["select", "fit-power"], "Missing argument 'DATA'"),
    (["time", "eval", "x.csv", "--device", "gtx980", "--reference", "1,2,3"], "expected CORE,MEM"),
    (["nope"], "No such command 'nope'"),
])
def test_usage_errors_read_like_every_other_error(args, message, capsys):
    r = run(*args)
    assert r.exit_code == 2 and r.output.startswith("gpudvfs: error: ") and message in r.output, r.output
    assert "Usage:" not in r.output and len(r.output.strip().splitlines()) == 1
    with pytest.raises(SystemExit) as e:
        main(args)
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.startswith("gpudvfs: error: ") and "Usage:" not in err


# ------------------------------------------------------------------ profile-command

def test_profile_command_takes_the_command_after_dashes_and_writes_a_named_file():
    r = run("profile-command", "--device", "h100-sxm", "--", "./app", "--size", "3")
    assert r.exit_code == 0, r.output
    words = r.output.split()
    assert words[-3:] == ["./app", "--size", "3"]
    assert "--log-file app.ncu.csv" in r.output and "--launch-count 100" in r.output
    r = run("profile-command", "--device", "h100-sxm", "--all-launches", "-o", "t.csv", "--", "python3", "train.py")
    assert r.exit_code == 0 and "--launch-count" not in r.output and "--log-file t.csv" in r.output
    r = run("profile-command", "--device", "gtx1080", "--", "./bench")
    assert r.exit_code == 0 and "--log-file bench.nvprof.csv" in r.output, r.output


def test_profile_command_needs_a_command():
    r = run("profile-command", "--device", "h100-sxm")
    assert r.exit_code == 2 and "Missing argument 'COMMAND...'" in r.output, r.output


# ------------------------------------------------------------------ aliases

def test_devices_list_shows_every_name_device_takes():
    r = run("devices", "list")
    row = next(line for line in r.output.splitlines() if "a100-sxm4-40gb" in line)
    assert "A100 40GB" in row and ", A100 " in row


def test_an_alias_two_entries_share_is_refused_with_both(tmp_path, monkeypatch):
    entry = json.loads(run("devices", "show", "h100-sxm", "--json").stdout)["devices"]["h100-sxm"]
    mine = tmp_path / "mine.json"
    mine.write_text(json.dumps({"version": 1, "devices": {
        "twin-a": entry | {"name": "Twin A", "aliases": ["twin"]},
        "twin-b": entry | {"name": "Twin B", "aliases": ["twin"]}}}))
    monkeypatch.setenv("GPUDVFS_CATALOG", str(mine))
    r = run("devices", "show", "twin")
    assert r.exit_code == 2 and "'twin' names several GPUs of the catalog: twin-a, twin-b" in r.output, r.output


# ------------------------------------------------------------------ figures a user reads at a glance

def _demo_result(cap: float = 150.0):
    """A demo's result without a sweep: four core x three unevenly spaced memory clocks, time and
    power of two workloads whose choices coincide (energy and EDP choose one pair)."""
    import numpy as np

    from gpudvfs.demo.run import DemoResult, WorkloadResult
    from gpudvfs.policy import POLICIES, pareto_front, select
    from gpudvfs.power import PowerModel

    configs = np.array([(c, m) for c in (600.0, 800.0, 1000.0, 1126.0) for m in (810.0, 3000.0, 3505.0)])
    default = int(np.flatnonzero((configs == (1126.0, 3505.0)).all(axis=1))[0])
    out = []
    for name, scale in (("a", 1.0), ("b", 1.5)):
        t = scale * (1e3 / configs[:, 0] + 2e3 / configs[:, 1])
        p = scale * (40 + 0.1 * configs[:, 0] + 0.01 * configs[:, 1])
        choices = {policy: select(t[None], p[None], configs, policy, default_index=default, slowdown=0.1,
                                  power_cap_w=cap) for policy in POLICIES}
        out.append(WorkloadResult(name, configs, t, p, choices, pareto_front(t, t * p / 1e3)))
    return DemoResult("sim", PowerModel.prior("gtx980"), None, {}, out, None, [], (1126.0, 3505.0), 0.1, cap)


def _markers(ax):
    """(data position, display position) of each policy choice marker drawn on ``ax``."""
    from gpudvfs.demo.plots import POLICY_MARKERS

    return [(tuple(line.get_xydata()[0]), tuple(line.get_transform().transform(line.get_xydata())[0]))
            for line in ax.get_lines() if line.get_marker() in POLICY_MARKERS.values() and len(line.get_xdata())]


def test_heatmaps_mark_the_default_clocks_the_cap_and_every_choice():
    pytest.importorskip("matplotlib")
    from matplotlib.contour import ContourSet

    from gpudvfs.demo.plots import SPREAD_PT, demo_figures

    figures = demo_figures(_demo_result())
    fig = figures["heatmaps-a"]
    time_ax, power_ax, energy_ax = fig.axes[:3]
    for ax in (time_ax, power_ax, energy_ax):
        [ring] = [line for line in ax.get_lines() if line.get_label() == "default clocks"]
        assert tuple(ring.get_xydata()[0]) == (3, 2)  # the 1126 MHz column, the 3505 MHz row
        assert ax.get_ylabel() == "memory clock (MHz, levels not to scale)"
        assert ax.get_xlabel() == "core clock (MHz, levels not to scale)"
        # Markers at one pair sit side by side, SPREAD_PT apart on the page.
        at: dict = {}
        for data, shown in _markers(ax):
            at.setdefault(data, []).append(shown[0])
        shared = [sorted(xs) for xs in at.values() if len(xs) > 1]
        assert shared, "the example's energy and EDP choices share a pair"
        for xs in shared:
            assert min(b - a for a, b in zip(xs, xs[1:])) == pytest.approx(SPREAD_PT * fig.dpi / 72)
    assert any(isinstance(c, ContourSet) for c in power_ax.collections)
    assert not any(isinstance(c, ContourSet) for c in time_ax.collections)
    bar = fig.axes[4]  # the power panel's colour bar
    assert any(list(line.get_ydata()) == [150.0, 150.0] for line in bar.get_lines())
    assert "power cap 150 W" in [t.get_text() for t in fig.legends[0].get_texts()]


def test_the_pareto_plot_marks_the_default_clocks_and_each_workloads_cap():
    pytest.importorskip("matplotlib")
    from matplotlib.lines import AxLine

    from gpudvfs.demo.plots import demo_figures

    result = _demo_result()
    ax = demo_figures(result)["voltage-and-pareto"].axes[2]
    [ring] = [line for line in ax.get_lines() if line.get_label() == "default clocks"]
    assert tuple(ring.get_xydata()[0]) == (1.0, 1.0)
    caps = [line for line in ax.get_lines() if isinstance(line, AxLine)]
    assert [c._slope for c in caps] == pytest.approx([150.0 / r.watts[-1] for r in result.workloads])
    shown = [s for _, s in _markers(ax)]
    assert len(set(shown)) == len(shown), "no marker hidden under another"


def test_an_evenly_spaced_clock_axis_is_not_labelled_as_levels():
    pytest.importorskip("matplotlib")
    from gpudvfs.power.plots import clock_label

    assert clock_label("memory", [810.0, 3000.0, 3505.0], True) == "memory clock (MHz, levels not to scale)"
    assert clock_label("memory", [405.0, 810.0, 1215.0], True) == "memory clock (MHz)"
    assert clock_label("core", [600.0, 700.0, 1126.0], False) == "core clock (MHz)"
