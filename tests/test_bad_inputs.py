"""Bad input where it enters: each case here was once accepted, or refused with an internal
error (a traceback, a message naming the wrong thing), before its check was added."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
from click.testing import CliRunner

import gpudvfs
from gpudvfs import KernelProfile, PowerModel, TimeModel
from gpudvfs.catalog import catalog, lookup
from gpudvfs.cli.app import cli
from gpudvfs.errors import DataFileError, InputError
from gpudvfs.evaluation.power_errors import power_errors
from gpudvfs.time.device import TimeDevice

GRID = "nv-dvfs-benchmark/gtx980_time_power_dev.csv"
NVPROF = "tool-outputs/nvprof_gtx1080_microgpusim.txt"


@pytest.fixture
def run():
    runner = CliRunner()
    return lambda *args: runner.invoke(cli, [str(a) for a in args])


def _edit_cell(src, dst, line: int, column: str, value: str) -> None:
    """A copy of a grid CSV with one cell (1-based line, column by name) replaced."""
    lines = src.read_text().splitlines()
    header = lines[0].split(",")
    cells = lines[line - 1].split(",")
    cells[header.index(column)] = value
    lines[line - 1] = ",".join(cells)
    dst.write_text("\n".join(lines) + "\n")


def _profile() -> KernelProfile:
    return KernelProfile(name="k", warps_total=1e5, active_warps=60, warps_per_block=8, gld_trans=40,
                         trans_per_req=4.0, l2_hit_rate=0.1, comp_inst=300, shared_trans=0, dp_inst=0,
                         reference_mhz=(700.0, 700.0), reference_time_ms=1.0)


# ------------------------------------------------------------------ files

def test_a_grid_with_0_w_is_refused_at_its_cell(data, tmp_path):
    bad = tmp_path / "p0.csv"
    _edit_cell(data / GRID, bad, 30, "power/W", "0")
    with pytest.raises(DataFileError, match=r"line 30, column \d+ \('power/W'\): expected a value > 0") as e:
        gpudvfs.read(bad)
    assert e.value.line == 30


def test_a_gpmtool_file_with_0_w_is_refused(data, tmp_path):
    lines = (data / "gpupowermodel/gtx980_micro.csv").read_text().splitlines()
    cells = lines[5].split(",")
    cells[0] = "0"  # an unnamed row: P, clocks, utilizations
    lines[5] = ",".join(cells)
    (tmp_path / "m.csv").write_text("\n".join(lines) + "\n")
    with pytest.raises(DataFileError, match=r"line 6, column 1 \('P'\): expected a value > 0"):
        gpudvfs.read_power_dataset(tmp_path / "m.csv")


def test_an_implausible_number_in_a_grid_is_refused(data, tmp_path):
    bad = tmp_path / "big.csv"
    _edit_cell(data / GRID, bad, 26, "warps", "1e308")  # an overflow in every product it enters
    with pytest.raises(DataFileError, match=r"line 26, column \d+ \('warps'\): expected a value <= 1e\+18"):
        gpudvfs.read(bad)


def test_a_broken_profile_is_answered_with_its_line(data, tmp_path, run):
    """A tool's output that its parser refuses is that tool's file with an error in it, not a
    file of unknown format; a counter that is not a number is not a missing one."""
    text = (data / NVPROF).read_text()
    cut = tmp_path / "cut.txt"
    cut.write_text(text[:-40])
    r = run("predict", cut)
    assert r.exit_code == 2 and "line 7, column" in r.output and "cannot tell the format" not in r.output
    lines = text.splitlines()
    header = next(ln for ln in lines if ln.startswith('"Device"')).split(",")
    col = header.index('"inst_issued"')
    for value, said in (("abc", "counter 'inst_issued' is 'abc', not a number"),
                        ("nan", "counter 'inst_issued' is 'nan', not a number"),
                        ("1e308", "'1e308' is beyond what a GPU measures")):
        row = lines[6].split(",")
        row[col] = value
        path = tmp_path / f"{value}.txt"
        path.write_text("\n".join(lines[:6] + [",".join(row)] + lines[7:]) + "\n")
        r = run("predict", path)
        assert r.exit_code == 2 and said in r.output and "line 7" in r.output, r.output


def test_a_model_file_with_a_byte_order_mark_or_no_json(data, tmp_path, run):
    model = tmp_path / "m.json"
    micro = data / "gpupowermodel/gtx980_micro.csv"
    assert run("power", "fit", micro, "-o", model).exit_code == 0
    bom = tmp_path / "bom.json"
    bom.write_bytes(b"\xef\xbb\xbf" + model.read_bytes())
    assert run("power", "eval", bom, micro, "--json").exit_code == 0
    (tmp_path / "junk.json").write_text("hello\n")
    r = run("power", "eval", tmp_path / "junk.json", micro)
    assert r.exit_code == 2 and "not valid JSON" in r.output


# ------------------------------------------------------------------ power model

def test_power_model_arguments_and_state(data, tmp_path):
    ds = gpudvfs.read_power_dataset(data / "gpupowermodel/gtx980_micro.csv")
    with pytest.raises(InputError, match="not fitted"):
        PowerModel().breakdown([0.3] * 7, 975, 3505)
    with pytest.raises(InputError, match="max_iter must be an integer >= 1"):
        PowerModel(max_iter=-1)
    with pytest.raises(InputError, match="relative_error must be True, False or None"):
        PowerModel(relative_error="no")
    with pytest.raises(InputError, match=r"utilizations must lie in \[0, 1\]"):
        PowerModel().fit(replace(ds, utilization=ds.utilization * 5))
    # Arrays of other dtypes fit as float64 ones do.
    m = PowerModel("per-domain").fit(ds)
    m32 = PowerModel("per-domain").fit(replace(ds, watts=ds.watts.astype(np.float32).astype(np.float64)))
    cast = PowerModel("per-domain").fit(replace(ds, watts=ds.watts.astype(np.float32)))
    assert cast.train_mape_ == m32.train_mape_ and abs(cast.train_mape_ - m.train_mape_) < 1e-3
    with pytest.raises(InputError, match=r"row 3 has 0.0 W"):
        power_errors(m, replace(ds, watts=np.where(np.arange(len(ds)) == 2, 0.0, ds.watts)))
    with pytest.raises(InputError, match="power_errors needs a PowerDataset"):
        power_errors(m, None)
    m.save(tmp_path / "m.json")
    doc = json.loads((tmp_path / "m.json").read_text())
    doc["components"] = ["SP"] * len(doc["components"])
    (tmp_path / "dup.json").write_text(json.dumps(doc))
    with pytest.raises(InputError, match="component names repeat"):
        PowerModel.load(tmp_path / "dup.json")


def test_a_power_model_of_another_gpu_or_reference_is_refused(data, tmp_path, run):
    """select fit-power records the GPU; choose refuses another reference, predict another GPU."""
    grid = data / GRID
    sp = tmp_path / "sp.json"
    assert run("select", "fit-power", grid, "--device", "gtx980", "-o", sp).exit_code == 0
    assert PowerModel.load(sp).device_ == "gtx980"
    r = run("predict", data / NVPROF, "--power-model", sp)
    assert r.exit_code == 2 and "fitted on gtx980's measurements, not gtx1080's" in r.output
    pm = tmp_path / "pm.json"
    assert run("power", "fit", data / "gpupowermodel/gtx980_micro.csv", "-o", pm).exit_code == 0
    assert PowerModel.load(pm).device_ is None  # no --device: nothing recorded
    r = run("select", "choose", grid, "--power-model", pm, "--device", "gtx980")
    assert r.exit_code == 2 and "taken at 975/3505 MHz, the workloads' at 700/700" in r.output
    assert run("select", "choose", grid, "--power-model", sp, "--device", "gtx980").exit_code == 0


# ------------------------------------------------------------------ time model

def test_time_model_inputs_and_results():
    p = _profile()
    with pytest.raises(InputError, match="slot_warps .* must be > 0"):
        replace(p, slot_warps=0.0)
    with pytest.raises(InputError, match="device must be a preset name or a TimeDevice"):
        TimeModel(3)
    with pytest.raises(InputError, match="predict takes KernelProfile objects"):
        TimeModel().predict([1, 2], 700, 700)
    with pytest.raises(InputError, match="mem_mhz must be finite clocks"):
        TimeDevice.gtx980().dram_busy_ms(1, 0)
    with pytest.raises(InputError, match=r"the model's time at 1e-300/1e-300 MHz is inf"):
        TimeModel().predict(p, 1e-300, 1e-300)
    with pytest.raises(InputError, match="which no measured time can calibrate"):
        TimeModel().predict(replace(p, reference_mhz=(1e-300, 1e-300)), 700, 700, calibrate=True)
    assert TimeModel().predict(p, 700, 700, calibrate=True) == pytest.approx(1.0)


def test_fit_device_needs_two_memory_clocks(data, tmp_path, run):
    lines = (data / "nv-dvfs-benchmark/gtx980_time_dev.csv").read_text().splitlines()
    header = lines[0].split(",")
    core, mem = header.index("coreF"), header.index("memF")
    keep = [ln for ln in lines[1:] if ln.split(",")[mem] == "700" and ln.split(",")[core] in ("600", "700")]
    (tmp_path / "one.csv").write_text("\n".join([lines[0], *keep]) + "\n")
    r = run("time", "fit-device", tmp_path / "one.csv", "--device", "gtx980", "-o", tmp_path / "d.json")
    assert r.exit_code == 2 and "at least two memory clocks, got [700.0]" in r.output


def test_write_takes_only_what_read_returns(tmp_path):
    with pytest.raises(InputError, match="got NoneType"):
        gpudvfs.write(None, tmp_path / "x.csv")


# ------------------------------------------------------------------ options

def test_options_refuse_negative_seeds_and_infinite_numbers(data, run):
    grid = data / GRID
    r = run("online", "replay", grid, "--seed", "-1")
    assert r.exit_code == 2 and "'--seed': -1 is not in the range x>=0" in r.output
    r = run("select", "eval", grid, "--device", "gtx980", "--slowdown", "inf")
    assert r.exit_code == 2 and "inf is not a finite number" in r.output
    r = run("sweep", "--device", "sim", "--suite", "time", "-o", "x.csv", "--min-seconds", "1e308")
    assert r.exit_code == 2 and "'--min-seconds'" in r.output


def test_policy_options_given_to_another_policy_are_refused_everywhere(data, tmp_path, run):
    """--slowdown belongs to the deadline policy, --power-cap to the power-cap one: given with
    another policy, select choose and predict refuse them as govern does (before, ignored)."""
    grid = data / GRID
    sp = tmp_path / "sp.json"
    assert run("select", "fit-power", grid, "--device", "gtx980", "-o", sp).exit_code == 0
    choose = ("select", "choose", grid, "--power-model", sp, "--device", "gtx980")
    for args, said in ((["--slowdown", "0.2"], "--slowdown is for --policy deadline (the energy policy"),
                       (["--power-cap", "80"], "--power-cap is for --policy power-cap"),
                       (["--policy", "power-cap"], "--policy power-cap needs --power-cap")):
        r = run(*choose, *args)
        assert r.exit_code == 2 and said in r.output, (args, r.output)
    assert run(*choose, "--policy", "deadline", "--slowdown", "0.2").exit_code == 0
    r = run("predict", data / NVPROF, "--policy", "edp", "--slowdown", "0.2")
    assert r.exit_code == 2 and "--slowdown is for --policy deadline (the edp policy" in r.output


def test_the_simulated_gpu_has_index_0_only(tmp_path, run):
    r = run("govern", "reset", "--device", "sim", "--index", "5")
    assert r.exit_code == 2 and "the simulated GPU is the only one: index 0, not 5" in r.output
    r = run("sweep", "--device", "sim", "--index", "1", "--suite", "time", "-o", tmp_path / "s.csv")
    assert r.exit_code == 2 and "index 0, not 1" in r.output
    assert not (tmp_path / "s.csv").exists()
    assert run("govern", "reset", "--device", "sim").exit_code == 0


def test_online_replay_of_one_clock_pair_says_it_needs_two(data, tmp_path, run):
    lines = (data / GRID).read_text().splitlines()
    head = lines[0].split(",")
    core, mem = head.index("coreF"), head.index("memF")
    one = [ln for ln in lines[1:] if ln.split(",")[core] == "700" and ln.split(",")[mem] == "700"]
    (tmp_path / "one.csv").write_text("\n".join([lines[0], *one]) + "\n")
    r = run("online", "replay", tmp_path / "one.csv")
    assert r.exit_code == 2 and "every row is at one clock configuration" in r.output, r.output


def test_selection_on_a_grid_without_power_says_so(data, run):
    r = run("select", "eval", data / "nv-dvfs-benchmark/gtx980_time_dev.csv", "--device", "gtx980")
    assert r.exit_code == 2 and "the grid has no power column" in r.output


def test_selection_of_one_application_says_it_needs_two(data, tmp_path, run):
    lines = (data / GRID).read_text().splitlines()
    app = lines[0].split(",").index("appName")
    (tmp_path / "one.csv").write_text("\n".join(
        [lines[0], *(ln for ln in lines[1:] if ln.split(",")[app] == "BlackScholes")]) + "\n")
    r = run("select", "eval", tmp_path / "one.csv", "--device", "gtx980")
    assert r.exit_code == 2 and "needs a grid of at least 2 applications" in r.output


# ------------------------------------------------------------------ catalog

@pytest.mark.parametrize("change, said", [
    ({"core_mhz": {"base": 2000, "boost": 1000}}, "core_mhz must rise from min to base to boost"),
    ({"sm_count": 2.5}, "sm_count counts whole units"),
    ({"name": " "}, "name must not be empty"),
    ({"compute_capability": "x"}, "compute_capability must be MAJOR.MINOR"),
    ({"aliases": ["gtx980"]}, "alias 'gtx980' is the key of another device"),
])
def test_a_catalog_entry_that_cannot_be_right_is_refused(tmp_path, change, said):
    entry = lookup("gtx980").to_dict() | {"aliases": []} | change
    path = tmp_path / "cat.json"
    path.write_text(json.dumps({"version": 1, "devices": {"mygpu": entry}}))
    with pytest.raises(InputError, match=said):
        catalog(path)
    ok = lookup("gtx980").to_dict() | {"aliases": ["my gpu"]}
    path.write_text(json.dumps({"version": 1, "devices": {"mygpu": ok}}))
    assert catalog(path)["mygpu"].sm_count == 16


def test_power_cv_needs_two_gpus_and_matching_applications(data, run):
    d = data / "gpupowermodel"
    r = run("power", "cv", d / "gtx980_micro.csv")
    assert r.exit_code == 2 and "at least two microbenchmark files" in r.output, r.output
    r = run("power", "cv", d / "gtx980_micro.csv", d / "titanxp_micro.csv", "--apps", d / "titanx_micro.csv",
            d / "titanx_real_dev.csv")
    assert r.exit_code == 2 and "must be one of the microbenchmark files" in r.output, r.output
    r = run("power", "cv", d / "titanx_hpca18_micro.csv", d / "titanxp_micro.csv", "--apps",
            d / "titanx_hpca18_micro.csv", d / "titanx_real_dev.csv")
    assert r.exit_code == 2 and "differ from the model's" in r.output, r.output
