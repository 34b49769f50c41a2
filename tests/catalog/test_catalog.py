"""The device catalog (every figure sourced, lookups, user files), `gpudvfs predict` from a
profile (real files without counters, and Pascal ones, answered with the command that
collects them; the full path on stand-in records, since no profile in ../shared/data has
every counter), and `time fit-device` on the GTX 980 grid."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from click.testing import CliRunner
from profile_stand_ins import stand_in_record, synthetic_power_model

from gpudvfs.catalog import ISSUE_KEYS, LATENCY_KEYS, catalog, lookup
from gpudvfs.catalog.clocks import SupportedClocks
from gpudvfs.cli.app import cli
from gpudvfs.data import read
from gpudvfs.data.counters import MissingCountersError, time_model_extras
from gpudvfs.data.profilers import CounterReport
from gpudvfs.data.profilers.records import KernelCounters
from gpudvfs.errors import InputError
from gpudvfs.hardware.ncu import nvprof_command
from gpudvfs.predict.profile import (
    assumed_reference_spread,
    device_of,
    kernel_inputs,
    predict_detail,
    profile_command,
)
from gpudvfs.time.device import TimeDevice
from gpudvfs.time.fit_device import fit_device

ISSUE_LIST = ("sm_count", "dram_bus_bits", "tdp_w", "l2_bytes_per_cycle", "mem_mhz", "core_mhz.boost",
              *(f"issue_per_sm_per_cycle.{k}" for k in ISSUE_KEYS), *(f"latency_cycles.{k}" for k in LATENCY_KEYS))
REQUIRED = ("k40c", "gtx980", "gtx-titan-x", "gtx1080", "gtx1080ti", "titan-xp", "p100-sxm2", "v100-sxm2", "titan-v",
            "t4", "a100-sxm4-40gb", "a100-sxm4-80gb", "a10", "rtx3090", "l4", "l40s", "rtx4090", "h100-sxm",
            "h100-pcie", "h200", "b200", "rtx5090", "a100-pcie-40gb", "a40", "rtx-a6000", "quadro-rtx6000",
            "rtx2070-super", "rtx2080ti", "rtx3080ti", "titan-rtx", "l40", "gh200")


def test_every_gpu_of_the_issue_with_a_source_for_each_figure():
    from importlib import resources
    doc = json.loads(resources.files("gpudvfs.catalog").joinpath("gpus.json").read_text())
    assert set(REQUIRED) <= set(catalog())
    for key, d in catalog().items():
        for f in ISSUE_LIST:
            assert f in d.sources, f"{key}: no source for {f}"
            assert d.sources[f] in doc["references"], f"{key}: {f} cites an unknown reference"
        # Peak bandwidth from the bus, the transfers per NVML memory clock and that clock,
        # against the spec sheet (H200 and B200: nvidia-smi's clocks run 2.4% above it).
        bw = d.dram_bytes_per_mem_cycle * d.mem_mhz[0] / 1e3
        assert bw == pytest.approx(d.dram_bandwidth_gbs, rel=0.025), key


@pytest.mark.parametrize("name, key", [("NVIDIA A100-SXM4-40GB", "a100-sxm4-40gb"),
                                       ("NVIDIA GeForce RTX 4090", "rtx4090"), ("GeForce GTX 1080 Ti", "gtx1080ti"),
                                       ("Tesla V100-PCIE-16GB", "v100-pcie"), ("12.0", "rtx5090"),
                                       ("sm_100", "b200"), ("NVIDIA H100 80GB HBM3", "h100-sxm"),
                                       # NVML's names of the parts added with default_mhz
                                       ("NVIDIA A100-PCIE-40GB", "a100-pcie-40gb"), ("NVIDIA A40", "a40"),
                                       ("NVIDIA RTX A6000", "rtx-a6000"), ("Quadro RTX 6000", "quadro-rtx6000"),
                                       ("NVIDIA GeForce RTX 2070 SUPER", "rtx2070-super"),
                                       ("NVIDIA GeForce RTX 2080 Ti", "rtx2080ti"),
                                       ("GeForce RTX 2080 Ti", "rtx2080ti"),
                                       ("NVIDIA GeForce RTX 3080 Ti", "rtx3080ti"), ("NVIDIA TITAN RTX", "titan-rtx"),
                                       ("NVIDIA L40", "l40"), ("NVIDIA L40S", "l40s"), ("NVIDIA GH200 480GB", "gh200"),
                                       ("A100", "a100-sxm4-40gb")])
def test_lookup(name, key):
    assert lookup(name).key == key


def test_every_name_and_alias_finds_its_own_entry():
    """No alias is another entry's key, name or alias: each finds the entry that lists it."""
    for key, d in catalog().items():
        for name in (key, d.name, *d.aliases):
            assert lookup(name).key == key, f"{name!r} of {key} finds {lookup(name).key}"


def test_every_built_in_entry_states_its_default_clocks_with_a_source():
    """default_mhz is required in the built-in file (a user file may leave it out): a [core,
    memory] pair in NVML's units, cited, the core clock within [min, boost] (some parts' default
    application clock is the boost clock), the memory clock one of mem_mhz."""
    from importlib import resources
    doc = json.loads(resources.files("gpudvfs.catalog").joinpath("gpus.json").read_text())
    for key, raw in doc["devices"].items():
        assert "default_mhz" in raw, f"{key}: no default_mhz"
        assert raw["sources"].get("default_mhz") in doc["references"], f"{key}: default_mhz cites no known reference"
        d = lookup(key)
        assert d.default_mhz == tuple(float(x) for x in raw["default_mhz"])
        assert d.core_mhz.get("min", 0) <= d.default_mhz[0] <= d.core_mhz["boost"], key
        assert d.default_mhz[1] in d.mem_mhz, key
    # Measured by this project on a real H100 (validation/nvidia-h100-80gb-hbm3/device.json) and
    # read from nvidia-smi on an H200; data-center Ada/Ampere parts whose default is their boost.
    assert lookup("h100-sxm").default_mhz == (1980.0, 2619.0) and lookup("h200").default_mhz == (1980.0, 3201.0)
    assert lookup("a40").default_mhz == (1740.0, 7251.0) == (lookup("a40").core_mhz["boost"], 7251.0)
    assert lookup("gtx980").default_mhz == (1126.0, 3505.0)  # GeForce: the base clock
    # The built-in file must state it: the same entry without it is refused there.
    from gpudvfs.catalog.specs import _read
    entry = {k: v for k, v in doc["devices"]["gtx980"].items() if k != "default_mhz"}
    with pytest.raises(InputError, match="'gtx980': default_mhz is required"):
        _read({"version": 1, "devices": {"gtx980": entry}}, "gpus.json", require_default=True)


def test_a_user_entry_without_default_clocks_gets_base_and_highest_memory(tmp_path, monkeypatch):
    """A user file may leave default_mhz out: the base clock (the boost clock where there is no
    base) and the highest memory clock; `devices show --json` writes it back."""
    entry = {k: v for k, v in lookup("gtx980").to_dict().items() if k != "default_mhz"}
    entry |= {"name": "My GPU", "aliases": [], "mem_mhz": [3004, 3505, 810], "sources": {}}
    no_base = entry | {"name": "No Base", "core_mhz": {"boost": 1500, "min": 300}}
    user = tmp_path / "mine.json"
    user.write_text(json.dumps({"version": 1, "devices": {"mine": entry, "nobase": no_base}}))
    monkeypatch.setenv("GPUDVFS_CATALOG", str(user))
    assert lookup("my gpu").default_mhz == (1126.0, 3505.0)
    assert lookup("no base").default_mhz == (1500.0, 3505.0)
    r = CliRunner().invoke(cli, ["devices", "show", "mine", "--json"])
    assert r.exit_code == 0 and json.loads(r.stdout)["devices"]["mine"]["default_mhz"] == [1126.0, 3505.0]


@pytest.mark.parametrize("default, match", [
    ([2000, 3505], r"default_mhz core clock 2000 MHz lies outside core_mhz up to its 1216 MHz boost"),
    ([100, 3505], r"default_mhz core clock 100 MHz lies outside core_mhz \[135, 1216\] \(min to boost\)"),
    ([1126, 3004], r"default_mhz memory clock 3004 MHz is not one of mem_mhz \(3505\)"),
    ([1126], r"default_mhz must be \[core MHz, memory MHz\]"),
    ([1126, 3505, 0], r"default_mhz must be \[core MHz, memory MHz\]"),
    ("1126,3505", r"default_mhz must be \[core MHz, memory MHz\]"),
    ({"core": 1126, "memory": 3505}, r"default_mhz must be \[core MHz, memory MHz\]"),
    ([True, 3505], r"default_mhz must be \[core MHz, memory MHz\]"),
    ([-1126, 3505], r"default_mhz must be \[core MHz, memory MHz\], two numbers > 0"),
    (None, r"default_mhz must be \[core MHz, memory MHz\]")])
def test_a_bad_default_clock_pair_is_refused(tmp_path, monkeypatch, default, match):
    entry = lookup("gtx980").to_dict() | {"name": "My GPU", "aliases": [], "default_mhz": default}
    if "min to boost" in match:
        entry["core_mhz"] = entry["core_mhz"] | {"min": 135}
    user = tmp_path / "mine.json"
    user.write_text(json.dumps({"version": 1, "devices": {"mine": entry}}))
    monkeypatch.setenv("GPUDVFS_CATALOG", str(user))
    with pytest.raises(InputError, match=f"mine.json: device 'mine': {match}"):
        lookup("gtx980")


def test_unknown_and_ambiguous_gpus_and_a_user_file(tmp_path, monkeypatch):
    with pytest.raises(InputError, match="unknown GPU 'Radeon VII'.*time fit-device"):
        lookup("Radeon VII")
    with pytest.raises(InputError, match="8.9 is shared by"):
        lookup("8.9")
    entry = lookup("gtx980").to_dict() | {"name": "My GPU", "aliases": [], "sm_count": 20}
    user = tmp_path / "mine.json"
    user.write_text(json.dumps({"version": 1, "devices": {"mine": entry}}))
    monkeypatch.setenv("GPUDVFS_CATALOG", str(user))
    assert lookup("my gpu").sm_count == 20 and lookup("gtx980").sm_count == 16
    assert TimeDevice.from_spec(lookup("my gpu")).sf_inst_cycle == 1.0  # 32 SFU lanes per SM
    # The catalog accepts 0 SFU lanes (unpublished): special-function instructions then cost
    # the issue rate, not a division by zero.
    unpublished = entry | {"issue_per_sm_per_cycle": entry["issue_per_sm_per_cycle"] | {"sfu": 0}}
    user.write_text(json.dumps({"version": 1, "devices": {"mine": unpublished}}))
    assert TimeDevice.from_spec(lookup("my gpu")).sf_inst_cycle == 0.0
    user.write_text(json.dumps({"version": 1, "devices": {"mine": entry | {"sm_count": -1}}}))
    with pytest.raises(InputError, match="sm_count must be > 0"):
        lookup("gtx980")


def test_the_devices_commands_and_a_user_file_made_from_their_json(tmp_path, monkeypatch):
    """`devices list` and `devices show`; the unknown-GPU error tells users to start a file of
    their own from `devices show ... --json`: that output, renamed and edited, is a catalog."""
    run = CliRunner().invoke
    r = run(cli, ["devices", "list", "--json"])
    assert r.exit_code == 0, r.output
    listed = json.loads(r.stdout)
    assert set(REQUIRED) <= set(listed) and listed["gtx980"] == "GeForce GTX 980"
    assert "NVIDIA H100 80GB HBM3" in run(cli, ["devices", "list"]).output
    r = run(cli, ["devices", "show", "H100 SXM", "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    [(key, entry)] = doc["devices"].items()
    assert key == "h100-sxm" and entry["sources"]["sm_count"] == "nv-h100-wp"
    assert entry["default_mhz"] == [1980.0, 2619.0] and entry["sources"]["default_mhz"] == "gpudvfs-h100-run"
    mine = entry | {"name": "My H100 NVL", "aliases": ["h100nvl"], "sm_count": 114}
    user = tmp_path / "mine.json"
    user.write_text(json.dumps({"version": doc["version"], "devices": {"my-h100": mine}}))
    monkeypatch.setenv("GPUDVFS_CATALOG", str(user))
    d = lookup("h100nvl")
    assert (d.key, d.sm_count, d.tdp_w, d.default_mhz) == ("my-h100", 114, lookup("h100-sxm").tdp_w, (1980.0, 2619.0))
    text = run(cli, ["devices", "show", "my-h100"]).output
    assert "My H100 NVL" in text and "nv-h100-wp" in text
    r = run(cli, ["devices", "show", "Radeon VII"])
    assert r.exit_code == 2 and "not in the device catalog" in r.output and "devices show gtx980 --json" in r.output


def test_gtx980_peaks_keep_the_selection_figures(data):
    """Utilizations from the catalog's peaks (NV-DVFS memory clocks are Inspector's, half of
    NVML's) give the selection figures of docs/accuracy.md."""
    from gpudvfs.evaluation.selection import evaluate_selection
    grid = read(data / "nv-dvfs-benchmark/gtx980_time_power_dev.csv")
    r = evaluate_selection(grid, (700.0, 700.0), time_device=TimeDevice.gtx980(), spec=lookup("gtx980"))
    assert r.regret_mean == pytest.approx(0.0336, abs=1e-4)


@pytest.mark.parametrize("name", ["ncu_a100_learningnote4dev.csv", "ncu_b200_roofline-analysis.csv",
                                  "ncu_rtx5090_llm-perf-opt.csv"])
def test_real_profiles_without_counters_get_the_command(data, name):
    r = CliRunner().invoke(cli, ["predict", str(data / "tool-outputs" / name)])
    assert r.exit_code == 2 and "lack counters the models need" in r.output and "ncu --csv" in r.output


@pytest.mark.parametrize("name, counters", [
    # Nsight Compute 2019 on a GTX 1080: no L2, shared or FLOP counts in its Pascal metric set.
    ("ncu_gtx1080_microgpusim.txt", "l2_read_transactions, l2_write_transactions, shared_load_transactions"),
    # nvprof's summary of a GTX 1080 Ti without a warp count: the GPU it names gives the CC.
    ("nvprof_gtx1080ti_magus.csv", "unique_warps_launched")])
def test_real_pascal_profiles_get_the_nvprof_command(data, name, counters):
    r = CliRunner().invoke(cli, ["predict", str(data / "tool-outputs" / name)])
    assert r.exit_code == 2 and counters in r.output, r.output
    command = r.output.split("Collect them with:")[1].split()
    assert command[:3] == ["nvprof", "--csv", "--metrics"] and "unique_warps_launched" in command[3].split(",")
    assert "ncu" not in command


def test_profile_command_by_compute_capability():
    for cc in ("7.0", "9.0", "12.0"):
        assert profile_command(cc).startswith("ncu --csv --print-units base --metrics ")
        assert "--clock-control base ./app" in profile_command(cc)
        assert "device__attribute_display_name" in profile_command(cc).split()[5].split(",")
    pascal = profile_command("6.1", "./bench --n 4").split()
    assert pascal[:3] == ["nvprof", "--csv", "--metrics"] and pascal[-3:] == ["./bench", "--n", "4"]
    # Before Pascal nvprof has no warp-count metric: the event, in the GPU trace (one table).
    maxwell = profile_command("5.2").split()
    assert maxwell[:5] == ["nvprof", "--csv", "--print-gpu-trace", "--events", "warps_launched"]
    assert "unique_warps_launched" not in maxwell[6].split(",")
    with pytest.raises(InputError, match="unreadable compute capability 'sm_x'"):
        profile_command("sm_x")
    r = CliRunner().invoke(cli, ["profile-command", "--device", "h100-sxm", "--kernel-name", "regex:gemm",
                                 "--launch-count", "3", "python3 train.py"])
    assert r.exit_code == 0 and "--kernel-name regex:gemm --launch-count 3 --log-file python3.ncu.csv " \
        "--clock-control base python3 train.py" in r.output, r.output
    # Clocks left to the driver, for a GPU whose settings are not the profiler's to change.
    r = CliRunner().invoke(cli, ["profile-command", "--device", "h100-sxm", "--clock-control", "none", "./app"])
    assert r.exit_code == 0 and r.output.split().count("--clock-control") == 1
    assert "--clock-control none ./app" in r.output
    with pytest.raises(InputError, match="clock_control must be one of"):
        profile_command("9.0", clock_control="max")
    for args, match in [(["--device", "gtx1080", "--launch-count", "3"], "profiles every launch"),
                        (["--device", "gtx980", "--clock-control", "none"], "leaves the clocks to the driver"),
                        (["--device", "h100-sxm", "--clock-control", "boost"], "Invalid value for '--clock-control'"),
                        (["--device", "h100-sxm", "--launch-count", "0"], "0 is not in the range x>=1")]:
        r = CliRunner().invoke(cli, ["profile-command", *args, "./app"])
        assert r.exit_code == 2 and match in r.output, r.output
    for bad, match in [("dram_utilization", "a sequence of names"), ([], "no metrics"),
                       (["a,b"], "comma or whitespace")]:
        with pytest.raises(InputError, match=match):
            nvprof_command(bad, ["./app"])
    with pytest.raises(InputError, match="target_argv"):
        nvprof_command(["dram_utilization"], [])
    with pytest.raises(InputError, match="events must be a sequence"):
        nvprof_command(["dram_utilization"], ["./app"], events="warps_launched")


@pytest.mark.parametrize("cc", ["5.2", "6.1"])
def test_the_nvprof_command_asks_for_all_predict_reads(cc):
    """A STAND-IN nvprof record holding exactly what profile_command asks for (values of a
    plain kernel) passes every check of predict: the command lacks nothing."""
    words = profile_command(cc).split()
    names = [n for i, w in enumerate(words) if w in ("--metrics", "--events") for n in words[i + 1].split(",")]
    metrics = dict.fromkeys(names, 1000.0) | {"achieved_occupancy": 0.5}
    metrics |= {n: 2.0 for n in names if n.endswith("utilization")}  # nvprof's 0-10 levels
    k = KernelCounters(name="k", id=1, invocation=0, tool="nvprof", metrics=metrics,
                       units=dict.fromkeys((n for n in names if n.endswith("utilization")), "level (0-10)"))
    [launch] = kernel_inputs(CounterReport("<stand-in>", "nvprof", "wide", [k]))
    label, scheme, inputs, util, ms = launch.label, launch.scheme, launch.inputs, launch.utilization, launch.time_ms
    assert (label, scheme, ms) == ("k", "nvprof", None) and None not in inputs.values()
    assert util is not None and all(0 <= u <= 1 for u in util.values())
    del metrics[names[0]]
    with pytest.raises(MissingCountersError, match="Collect them with"):
        kernel_inputs(CounterReport("<stand-in>", "nvprof", "wide", [k]))


def test_each_launch_of_a_repeated_kernel_is_predicted(data, tmp_path):
    """The real nvprof trace of a GTX 1080 with its one launch written twice (another
    correlation id): two predictions, numbered, where one used to overwrite the other."""
    lines = (data / "tool-outputs/nvprof_gtx1080_microgpusim.txt").read_text().splitlines()
    again = lines[-1].replace('"_Z6vecAddIfEvPT_S1_S1_i",1,', '"_Z6vecAddIfEvPT_S1_S1_i",2,')
    assert again != lines[-1]
    path = tmp_path / "twice.csv"
    path.write_text("\n".join([*lines, again]) + "\n")
    r = CliRunner().invoke(cli, ["predict", str(path), "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert list(out["kernels"]) == ["_Z6vecAddIfEvPT_S1_S1_i #1", "_Z6vecAddIfEvPT_S1_S1_i #2"]
    # A vector addition of 100 floats: nanoseconds of modelled work, no measured time to
    # calibrate on, so both are flagged as lower bounds.
    assert not out["calibrated_on_measured_time"] and out["under_launch_scale"] == list(out["kernels"])
    assert "read those times as lower bounds" in CliRunner().invoke(cli, ["predict", str(path)]).output


def test_a_shared_compute_capability_asks_for_the_device():
    with pytest.raises(InputError, match="8.9 is shared by l4, l40, l40s, rtx4090: name the device: give --device"):
        device_of(stand_in_record("8.9"), None)
    assert device_of(stand_in_record("8.9"), "l40s").key == "l40s"
    assert device_of(stand_in_record("12.0"), None).key == "rtx5090"
    # What profile-command now collects as well: the name settles it.
    named = stand_in_record("9.0")
    named.kernels[0].text["device__attribute_display_name"] = "NVIDIA H100 80GB HBM3"
    assert device_of(named, None).key == "h100-sxm"


def test_predict_full_path_on_a_stand_in_record():
    spec = lookup("h100-sxm")
    r = predict_detail(stand_in_record("9.0"), spec).to_dict()
    t = np.array(r["kernels"]["stand_in_kernel"]["time_ms"])
    cfg = np.array(r["configs"])
    assert len(cfg) == len(SupportedClocks.of_spec(spec).pairs) and cfg[:, 0].max() == spec.core_mhz["boost"]
    at = cfg[:, 1] == spec.default_mhz[1]  # faster at higher core clocks, at each memory clock
    assert r["calibrated_on_measured_time"] and np.all(np.diff(t[at]) <= 1e-12)
    assert "under_launch_scale" not in r
    base = np.flatnonzero(at)[np.argmin(np.abs(cfg[at, 0] - spec.core_mhz["base"]))]
    assert t[base] == pytest.approx(0.2, rel=0.1)  # near the measured 200 us at the base clock
    assert r["reference_mhz"] == [1590.0, 2619.0] and r["reference_from"].startswith("the profile's SM clock")


def test_predict_takes_the_reference_from_the_clock_the_profile_ran_at(data):
    """STAND-IN record of a launch that ran boosting at 1980 MHz: its measured 200 us belongs to
    1980 MHz, where the prediction meets it, not to the catalog's 1590 MHz base clock; a given
    --reference overrides, and without the clock rate the catalog's default clocks serve. The
    metric's name and unit are those of a real A100 Nsight Compute CSV (ncu locked it to 765 MHz,
    the driver's base clock there)."""
    spec = lookup("h100-sxm")
    report = stand_in_record("9.0")
    report.kernels[0].metrics["smsp__cycles_elapsed.avg.per_second"] = 1.98e9
    r = predict_detail(report, spec).to_dict()
    cfg, t = np.array(r["configs"]), np.array(r["kernels"]["stand_in_kernel"]["time_ms"])
    top = np.flatnonzero((cfg[:, 0] == 1980.0) & (cfg[:, 1] == 2619.0))
    assert r["reference_mhz"] == [1980.0, 2619.0] and t[top] == pytest.approx(0.2, rel=1e-9)
    given = predict_detail(report, spec, reference=(1590.0, 2619.0)).to_dict()
    assert given["reference_from"] == "given" and given["kernels"]["stand_in_kernel"]["time_ms"][top[0]] < 0.19
    # A rate whose unit is not cycles per second or Hz (or not stated) cannot be read as a clock.
    for unit, said in (("cycle", "is in 'cycle'"), ("", "states no unit")):
        report.kernels[0].units["smsp__cycles_elapsed.avg.per_second"] = unit
        with pytest.raises(InputError, match=f"{said}.*sm_clock_mhz needs it in 'cycle/second' or 'Hz'"):
            predict_detail(report, spec)
    report.kernels[0].units["smsp__cycles_elapsed.avg.per_second"] = "Hz"  # ncu printing MHz or GHz
    assert predict_detail(report, spec).reference_mhz == (1980.0, 2619.0)
    report.kernels[0].metrics["smsp__cycles_elapsed.avg.per_second"] = 1234.0  # '1,234' (Hz) read as a number
    with pytest.raises(InputError, match="SM clock rate .* 0.001234 MHz cannot be h100-sxm's: no GPU runs below"):
        predict_detail(report, spec)
    report.kernels[0].metrics["smsp__cycles_elapsed.avg.per_second"] = 1.98e9
    report.kernels[0].units["gpu__time_duration.sum"] = "cycle"
    with pytest.raises(InputError, match="gpu__time_duration.sum is in 'cycle', not a unit of time"):
        predict_detail(report, spec)
    report.kernels[0].units["gpu__time_duration.sum"] = "ns"
    del report.kernels[0].metrics["smsp__cycles_elapsed.avg.per_second"]
    r = predict_detail(report, spec)
    assert r.reference_from.startswith("the catalog's default clocks, assumed") and r.reference_mhz == (1980.0, 2619.0)
    # Assumed, the clocks widen the time interval by the base-to-boost ratio (1980 / 1590 MHz
    # on the H100 SXM), in quadrature, and the output says so.
    report.kernels[0].metrics["smsp__cycles_elapsed.avg.per_second"] = 1.98e9
    measured = predict_detail(report, spec)
    assert assumed_reference_spread(spec) == pytest.approx(math.log(1980 / 1590))
    assert r.intervals.time == pytest.approx(np.hypot(measured.intervals.time, math.log(1980 / 1590)))
    assert "its clocks assumed" in r.rests_on and "x/1.25" in r.rests_on and "assumed" not in measured.rests_on
    del report.kernels[0].metrics["smsp__cycles_elapsed.avg.per_second"]
    # A GPU with no base clock in the catalog (B200) still has its default clocks.
    assert predict_detail(report, lookup("b200")).reference_mhz == tuple(lookup("b200").default_mhz)
    real = read(data / "tool-outputs/ncu_a100_learningnote4dev.csv")
    assert [round(time_model_extras(k)["sm_clock_mhz"]) for k in real.kernels] == [765, 765, 764]


def test_fit_device_on_each_grid_and_left_out(data):
    """The memory parameters fitted to a grid's absolute times (docs/accuracy.md): on
    gtx980_time_dev.csv 6.37% -> 6.33% leave-one-kernel-out (6.10% in-sample); on
    gtx980_time_power_dev.csv the fit does not carry to the kernel left out: 9.31% -> 10.08%."""
    grid = read(data / "nv-dvfs-benchmark/gtx980_time_dev.csv")
    device, r = fit_device(grid, (700.0, 700.0), TimeDevice.gtx980())
    assert r["mape_leave_one_kernel_out"] < r["mape_before"]
    assert r["mape_before"] == pytest.approx(6.37, abs=0.01)
    assert r["mape_leave_one_kernel_out"] == pytest.approx(6.33, abs=0.01)
    assert r["mape_in_sample"] == pytest.approx(6.10, abs=0.01)
    with pytest.raises(InputError, match="parameter groups"):
        fit_device(grid, (700.0, 700.0), device, groups=("inst_cycle",))
    _, r = fit_device(read(data / "nv-dvfs-benchmark/gtx980_time_power_dev.csv"), (700.0, 700.0), TimeDevice.gtx980())
    assert (r["mape_before"], r["mape_leave_one_kernel_out"]) == pytest.approx((9.31, 10.08), abs=0.01)


def test_many_launches_are_summed_per_name_and_for_the_whole(data, tmp_path):
    """The real GTX 1080 nvprof trace with its launch written 25 times: the JSON sums the
    launches per kernel name and over the whole profile; past 20 launches the text has a line
    per name and one for all launches, and --per-launch brings back a line per launch."""
    lines = (data / "tool-outputs/nvprof_gtx1080_microgpusim.txt").read_text().splitlines()
    copies = [lines[-1].replace('"_Z6vecAddIfEvPT_S1_S1_i",1,', f'"_Z6vecAddIfEvPT_S1_S1_i",{i},')
              for i in range(2, 26)]
    assert len(set(copies)) == 24 and lines[-1] not in copies
    path = tmp_path / "many.csv"
    path.write_text("\n".join([*lines, *copies]) + "\n")
    r = CliRunner().invoke(cli, ["predict", str(path), "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    per_launch = np.array([k["time_ms"] for k in out["kernels"].values()])
    assert per_launch.shape[0] == 25
    by_name = out["by_name"]
    assert list(by_name) == ["_Z6vecAddIfEvPT_S1_S1_i"] and by_name["_Z6vecAddIfEvPT_S1_S1_i"]["launches"] == 25
    assert np.allclose(by_name["_Z6vecAddIfEvPT_S1_S1_i"]["time_ms"], per_launch.sum(axis=0))
    assert np.allclose(out["application"]["time_ms"], per_launch.sum(axis=0)) and out["application"]["launches"] == 25
    assert "chosen" in out["application"] and out["power_source"] == "prior"  # no power model: the catalog prior
    text = CliRunner().invoke(cli, ["predict", str(path)]).output
    assert "(25 launches, 100% of the time)" in text and "all 25 launches" in text and " #3:" not in text
    text = CliRunner().invoke(cli, ["predict", str(path), "--per-launch"]).output
    assert sum(" #" in line for line in text.splitlines()) == 25


@pytest.mark.filterwarnings("ignore::gpudvfs.errors.GpudvfsWarning")  # the fit's notes on synthetic data
def test_one_pair_is_chosen_for_all_launches_on_their_summed_energy():
    """STAND-IN records (two kernels, one launched twice) and a power model fitted on synthetic
    utilizations: the application's pair minimizes the launches' summed predicted energy,
    which no single launch's choice need do."""
    spec = lookup("h100-sxm")
    model = synthetic_power_model(spec)
    report = stand_in_record("9.0")
    heavy = report.kernels[0]
    light = KernelCounters(name="light", id=1, invocation=0, tool="ncu",
                           metrics=heavy.metrics | {"gpu__time_duration.sum": 2e4},
                           units=heavy.units, info=heavy.info)
    report = CounterReport(path="<stand-in>", tool="ncu", form="wide", kernels=[heavy, light, light])
    out = predict_detail(report, spec, power_model=model).to_dict()
    assert list(out["by_name"]) == ["stand_in_kernel", "light"] and out["by_name"]["light"]["launches"] == 2
    joules = np.sum([k["joules"] for k in out["kernels"].values()], axis=0)
    time_ms = np.sum([k["time_ms"] for k in out["kernels"].values()], axis=0)
    app = out["application"]
    assert np.allclose(app["joules"], joules) and np.allclose(app["watts"], joules * 1e3 / time_ms)
    best = int(np.argmin(joules))
    assert [app["chosen"]["core_mhz"], app["chosen"]["mem_mhz"]] == out["configs"][best]


@pytest.mark.parametrize("content", [None, "{bad", '{"version": 1, "devices": {"x": {}}}'])
def test_a_bad_gpudvfs_catalog_names_the_variable(content, monkeypatch, tmp_path):
    """A missing, unparsable or malformed file named by GPUDVFS_CATALOG: the error says where
    the file came from, since the user never passed it on the command line."""
    user = tmp_path / "mine.json"
    if content is not None:
        user.write_text(content)
    monkeypatch.setenv("GPUDVFS_CATALOG", str(user))
    with pytest.raises(InputError, match=r"mine\.json.*GPUDVFS_CATALOG environment variable"):
        lookup("h100")
    monkeypatch.delenv("GPUDVFS_CATALOG")
    with pytest.raises(InputError) as e:  # passed as extra=, it is the caller's own file
        lookup("h100", extra=user)
    assert "GPUDVFS_CATALOG" not in str(e.value)
