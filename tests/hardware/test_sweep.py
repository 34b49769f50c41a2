"""Sweeps on the simulated GPU: rows flushed one by one, a SIGKILL midway loses nothing
that a resume does not redo, and the result loads with the readers."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import gpudvfs
from gpudvfs.cli.app import cli
from gpudvfs.hardware import SimulatedDevice, Workload, grid, run_sweep, to_power_dataset
from gpudvfs.time.device import TimeDevice

WORKLOADS = [
    Workload("compute", counters={"util:SP": 0.8, "util:INT": 0.2, "compute_ms": 2.0, "memory_ms": 0.2}),
    Workload("memory", counters={"util:L2": 0.3, "util:DRAM": 0.9, "compute_ms": 0.3, "memory_ms": 2.5}),
    Workload("mixed", counters={"util:SP": 0.4, "util:Shared": 0.5, "util:DRAM": 0.4,
                                "compute_ms": 1.0, "memory_ms": 1.0}),
]


def test_sweep_covers_the_grid_and_loads(tmp_path):
    dev = SimulatedDevice(seed=3)
    out = tmp_path / "s.csv"
    seen = []
    r = run_sweep(dev, WORKLOADS, out, progress=lambda d, t, label: seen.append((d, t)))
    n = len(grid(dev)) * len(WORKLOADS)
    assert r.measured == n and r.skipped == 0
    assert seen[-1] == (n + len(WORKLOADS), n + len(WORKLOADS))
    g = gpudvfs.read(out)
    assert g.format == "tidy" and len(g) == n
    ds = to_power_dataset(out, dev.gpu.components, dev.gpu.domain_sizes)
    assert ds.benchmarks == ("compute", "memory", "mixed")
    assert ds.describe()["configurations"] == len(grid(dev))
    # Clocks are back at the default after the sweep.
    assert dev.clocks == dev.default_clocks()


def test_existing_output_needs_resume(tmp_path):
    out = tmp_path / "s.csv"
    run_sweep(SimulatedDevice(), WORKLOADS[:1], out, configs=[(975.0, 3505.0)])
    with pytest.raises(gpudvfs.InputError, match="pass resume=True"):
        run_sweep(SimulatedDevice(), WORKLOADS[:1], out, configs=[(975.0, 3505.0)])
    r = run_sweep(SimulatedDevice(), WORKLOADS[:1], out, configs=[(975.0, 3505.0)], resume=True)
    assert r.measured == 0 and r.skipped == 1


def test_clocks_reset_after_an_error(tmp_path):
    dev = SimulatedDevice()
    bad = Workload("bad", counters={"util:SP": 0.5})  # no time: measuring it fails
    with pytest.raises(ValueError):
        run_sweep(dev, [bad], tmp_path / "s.csv", configs=[(595.0, 810.0)])
    assert dev.clocks == dev.default_clocks()


CHILD = """
import sys, time
from gpudvfs.hardware import SimulatedDevice, Workload, run_sweep
sys.path[:0] = {tests!r}
from test_sweep import WORKLOADS
# Slow each step down so the parent can kill the sweep midway.
run_sweep(SimulatedDevice(seed=7), WORKLOADS, {out!r}, progress=lambda d, t, l: time.sleep(0.01))
"""


def test_sigkill_midway_then_resume_equals_an_uninterrupted_run(tmp_path):
    full = tmp_path / "full.csv"
    run_sweep(SimulatedDevice(seed=7), WORKLOADS, full)
    part = tmp_path / "part.csv"
    here = os.path.dirname(__file__)  # this module, and the tests' root with conftest
    child = subprocess.Popen([sys.executable, "-c", CHILD.format(tests=[here, os.path.dirname(here)], out=str(part))])
    deadline = time.time() + 60
    while time.time() < deadline:
        if part.exists() and part.read_text().count("\n") > 20:
            break
        time.sleep(0.01)
    child.send_signal(signal.SIGKILL)
    child.wait()
    lines_before = part.read_text().count("\n")
    assert 20 < lines_before < full.read_text().count("\n"), "the sweep was not killed midway"
    # A row cut short by a crash is dropped on resume.
    with part.open("a") as f:
        f.write("memory,975,35")
    r = run_sweep(SimulatedDevice(seed=7), WORKLOADS, part, resume=True)
    assert r.skipped == lines_before - 1
    assert part.read_text() == full.read_text()
    assert json.loads((tmp_path / "part.csv.sweep.json").read_text()) == \
        json.loads((tmp_path / "full.csv.sweep.json").read_text())


# -- a resume proves the file is its own sweep, or refuses without touching a byte ----------

def _sweep_args(out, *extra):
    return ["sweep", "--suite", "power", "-o", str(out), "--core-mhz", "975", "--mem-mhz", "3505", *extra]


@pytest.mark.parametrize("content", [b"a,b,c\n1,2,3\n4,5,6", b"a,b,c", b"workload,core_mhz\n", b"\xff\xfe\x00junk"])
def test_resume_refuses_a_file_that_is_not_a_sweep_and_leaves_it_alone(tmp_path, content):
    out = tmp_path / "p.csv"
    out.write_bytes(content)
    r = CliRunner().invoke(cli, _sweep_args(out, "--resume"))
    assert r.exit_code == 2 and "not a gpudvfs sweep" in r.output, r.output
    assert out.read_bytes() == content
    assert not (tmp_path / "p.csv.sweep.json").exists()


@pytest.mark.parametrize("change,match", [
    (["--seed", "1"], "device"),
    (["--min-seconds", "2"], "protocol"),
    (["--core-mhz", "975,937"], "clock pairs"),
])
def test_resume_with_other_options_is_refused_not_mixed(tmp_path, change, match):
    out = tmp_path / "p.csv"
    runner = CliRunner()
    assert runner.invoke(cli, _sweep_args(out)).exit_code == 0
    before = out.read_bytes(), (tmp_path / "p.csv.sweep.json").read_bytes()
    args = _sweep_args(out, "--resume")
    for flag, value in zip(change[::2], change[1::2]):
        if flag in args:
            args[args.index(flag) + 1] = value
        else:
            args += [flag, value]
    r = runner.invoke(cli, args)
    assert r.exit_code == 2 and "another sweep than this one" in r.output and match in r.output, r.output
    assert (out.read_bytes(), (tmp_path / "p.csv.sweep.json").read_bytes()) == before


def test_resume_with_another_suite_is_refused(tmp_path):
    out = tmp_path / "p.csv"
    runner = CliRunner()
    assert runner.invoke(cli, _sweep_args(out)).exit_code == 0
    before = out.read_bytes()
    args = _sweep_args(out, "--resume")
    args[args.index("power")] = "time"
    r = runner.invoke(cli, args)
    assert r.exit_code == 2 and "workloads" in r.output and out.read_bytes() == before


@pytest.mark.parametrize("damage,match", [
    (lambda out, rec: rec.write_text("{"), "not valid JSON"),
    (lambda out, rec: rec.write_text('{"kind": "sweep", "version": 99}'), "version"),
    (lambda out, rec: out.write_text(out.read_text().replace("sp_ops", "xx_ops", 1)),
     "not a measurement of this sweep"),
    (lambda out, rec: out.write_text("x" + out.read_text()), "not the header"),
])
def test_resume_refuses_a_damaged_sweep(tmp_path, damage, match):
    out = tmp_path / "p.csv"
    assert CliRunner().invoke(cli, _sweep_args(out)).exit_code == 0
    damage(out, tmp_path / "p.csv.sweep.json")
    before = out.read_bytes()
    r = CliRunner().invoke(cli, _sweep_args(out, "--resume"))
    assert r.exit_code == 2 and match in r.output, r.output
    assert out.read_bytes() == before


def test_resume_of_an_empty_file_without_record_starts_the_sweep(tmp_path):
    out = tmp_path / "p.csv"
    out.touch()  # created, then killed before the record was written
    r = run_sweep(SimulatedDevice(), WORKLOADS[:1], out, configs=[(975.0, 3505.0)], resume=True)
    assert r.measured == 1 and gpudvfs.read(out, "tidy").app.tolist() == ["compute"]


def test_a_second_sweep_on_the_same_output_is_refused(tmp_path):
    fcntl = pytest.importorskip("fcntl")
    out = tmp_path / "p.csv"
    run_sweep(SimulatedDevice(), WORKLOADS[:1], out, configs=[(975.0, 3505.0)])
    with out.open("rb") as held:  # another process's sweep holds the lock while it writes
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        before = out.read_bytes()
        with pytest.raises(gpudvfs.InputError, match="another sweep is writing"):
            run_sweep(SimulatedDevice(), WORKLOADS[:1], out, configs=[(975.0, 3505.0)], resume=True)
        assert out.read_bytes() == before
    assert run_sweep(SimulatedDevice(), WORKLOADS[:1], out, configs=[(975.0, 3505.0)], resume=True).skipped == 1


def test_outputs_are_checked_before_the_sweep_starts(tmp_path):
    out = tmp_path / "s.csv"
    r = CliRunner().invoke(cli, _sweep_args(out, "--gpmtool", str(tmp_path / "no" / "such" / "p.csv")))
    assert r.exit_code == 2 and "does not exist" in r.output
    assert not out.exists()
    r = CliRunner().invoke(cli, _sweep_args(tmp_path / "nodir" / "s.csv"))
    assert r.exit_code == 2 and "does not exist" in r.output


@pytest.mark.parametrize("workload,match", [
    ({"name": "x", "counters": {"util:SP": 1e308, "compute_ms": 1}}, "utilizations must be in [0, 1]"),
    ({"name": "x", "counters": {"compute_ms": 1e308}}, "compute_ms and memory_ms must be in"),
    ({"name": "x", "callable": "json:dumps"}, "the simulated GPU runs no code"),
])
def test_workloads_the_simulator_cannot_run_are_refused_before_any_work(tmp_path, workload, match):
    wl, out = tmp_path / "w.json", tmp_path / "s.csv"
    wl.write_text(json.dumps({"workloads": [workload]}))
    r = CliRunner().invoke(cli, ["sweep", "--workloads", str(wl), "-o", str(out)])
    assert r.exit_code == 2 and match in r.output, r.output
    assert not out.exists()


def test_cli_sweep_with_workload_file(tmp_path):
    wl = tmp_path / "w.json"
    wl.write_text(json.dumps({"workloads": [{"name": w.name, "counters": dict(w.counters)} for w in WORKLOADS]}))
    out, gpm = tmp_path / "s.csv", tmp_path / "p.csv"
    r = CliRunner().invoke(cli, ["sweep", "--workloads", str(wl), "-o", str(out), "--mem-mhz", "3505,810",
                                 "--core-mhz", "975,595", "--gpmtool", str(gpm)])
    assert r.exit_code == 0, r.output
    ds = gpudvfs.read_power_dataset(gpm)
    assert len(ds) == 3 * 4
    np.testing.assert_array_equal(np.unique(ds.core_mhz), [595.0, 975.0])


@pytest.mark.parametrize("doc,match", [
    ("[]", "non-empty list 'workloads'"),
    ('{"workloads": [{"name": "x"}]}', "give 'callable'"),
    ('{"workloads": [{"name": "x", "callable": "nomodule_zz:f"}]}', "cannot import"),
    ('{"workloads": [{"name": "x", "counters": {"a": "b"}}]}', "map names to numbers"),
    ('{"workloads": [{"name": "x", "counters": {"compute_ms": 1}, "profile_kernel": ""}]}', "'profile_kernel'"),
    ('{"workloads": [{"name": "x", "counters": {"compute_ms": 1}, "profile_kernel": 3}]}', "'profile_kernel'"),
    ("{", "not valid JSON"),
])
def test_cli_sweep_bad_workload_file(tmp_path, doc, match):
    wl = tmp_path / "w.json"
    wl.write_text(doc)
    r = CliRunner().invoke(cli, ["sweep", "--workloads", str(wl), "-o", str(tmp_path / "s.csv")])
    assert r.exit_code == 2 and match in r.output


def test_cli_sweep_unsupported_clock(tmp_path):
    wl = tmp_path / "w.json"
    wl.write_text(json.dumps({"workloads": [{"name": "a", "counters": {"compute_ms": 1}}]}))
    r = CliRunner().invoke(cli, ["sweep", "--workloads", str(wl), "-o", str(tmp_path / "s.csv"),
                                 "--mem-mhz", "1234"])
    assert r.exit_code == 2 and "not supported" in r.output


def test_power_suite_sweep_then_fit_recovers_the_simulator(tmp_path):
    """`gpudvfs sweep --device sim --suite power`, then `gpudvfs power fit --variant
    per-domain` (the simulator's voltages are per domain): true voltages within 2%, every
    coefficient within 5%. The two static terms are told apart only by the memory voltage's
    few-percent variation, so the sensor noise must average out below it: 10 s per point
    (virtual time on the simulator) does; with 1 s the memory static term is off by up to 10%
    over seeds, while voltages, weights and predictions are not affected."""
    out, gpm, model = tmp_path / "power.csv", tmp_path / "power.gpm.csv", tmp_path / "m.json"
    runner = CliRunner()
    r = runner.invoke(cli, ["sweep", "--suite", "power", "--device", "sim", "--seed", "5", "-o", str(out),
                            "--min-seconds", "10", "--gpmtool", str(gpm)])
    assert r.exit_code == 0, r.output
    r = runner.invoke(cli, ["power", "fit", str(gpm), "--variant", "per-domain", "-o", str(model)])
    assert r.exit_code == 0, r.output
    m = gpudvfs.PowerModel.load(model)
    gpu = SimulatedDevice().gpu
    cfg = m.configs_
    true_v = np.array([gpu.volts(c, f) for c, f in cfg])
    np.testing.assert_allclose(m.voltage(cfg[:, 0], cfg[:, 1]), true_v, rtol=0.02)
    np.testing.assert_allclose(list(m.weights_.values()), gpu.weights_w, rtol=0.05)
    np.testing.assert_allclose(m.idle_w_, gpu.idle_w, rtol=0.05)
    np.testing.assert_allclose(m.static_w_, gpu.static_w, rtol=0.05)


def test_time_suite_sweep_fits_the_device():
    """The latency suite on the simulator, fitted: Eq. 4's DRAM latency law within 1%, the
    L2 and shared latencies within 1%, the DRAM delay law within 10% (it comes from timed
    launches with 0.5% noise)."""
    import tempfile

    from gpudvfs.hardware import suite_workloads, to_time_device

    dev = SimulatedDevice(seed=2)
    out = os.path.join(tempfile.mkdtemp(), "t.csv")
    run_sweep(dev, suite_workloads("time"), out)
    # The DRAM delay is per SM's share of the traffic: the fit starts from the device's SM count.
    from gpudvfs.hardware.calibrate import base_time_device

    fitted, report = to_time_device(out, base_time_device(dev, None))
    true = dev.gpu.time_device
    for k, tol in (("dm_lat_a", 0.01), ("dm_lat_b", 0.01), ("l2_lat", 0.01), ("sh_lat", 0.01),
                   ("dm_del_a", 0.1), ("dm_del_b", 0.1)):
        assert getattr(fitted, k) == pytest.approx(getattr(true, k), rel=tol), k
    assert report["dm_lat"]["r2"] > 0.999


@pytest.mark.parametrize("field,value", [
    ("plan", {"workloads": None}), ("plan", {"workloads": [1]}), ("profiles", {"a": {"u": "x"}}),
    ("reference_mhz", [975]), ("plan", {"configs": [[1, "2"]]}),
])
def test_resume_refuses_a_record_of_the_wrong_shape(tmp_path, field, value):
    out = tmp_path / "p.csv"
    run_sweep(SimulatedDevice(), WORKLOADS[:1], out, configs=[(975.0, 3505.0)])
    record = tmp_path / "p.csv.sweep.json"
    doc = json.loads(record.read_text())
    doc[field] = {**doc[field], **value} if isinstance(value, dict) and field == "plan" else value
    record.write_text(json.dumps(doc))
    before = out.read_bytes()
    with pytest.raises(gpudvfs.InputError, match="not a sweep record gpudvfs can use"):
        run_sweep(SimulatedDevice(), WORKLOADS[:1], out, configs=[(975.0, 3505.0)], resume=True)
    assert out.read_bytes() == before


def test_workload_file_carries_the_kernel_to_profile(tmp_path):
    """A real GPU's callable names the kernel ncu reads; the simulator's counters come along."""
    from gpudvfs.hardware.workload_file import read_workloads

    wl = tmp_path / "w.json"
    wl.write_text(json.dumps({"workloads": [
        {"name": "mm", "callable": "gpudvfs.hardware.apps:sgemm", "profile_kernel": "regex:gemm",
         "counters": {"compute_ms": 1}},
        {"name": "plain", "counters": {"compute_ms": 1}}]}))
    mm, plain = read_workloads(wl)
    assert (mm.spec, mm.profile_kernel, plain.profile_kernel) == ("gpudvfs.hardware.apps:sgemm", "regex:gemm", None)
    # The kernel profiled is part of what a sweep's record says it measured (absent: the first).
    from gpudvfs.hardware.sweep_record import workload_record

    assert workload_record(mm)["profile_kernel"] == "regex:gemm" and "profile_kernel" not in workload_record(plain)


def test_a_sweep_that_leaves_the_clocks_measures_at_the_drivers_and_resets_nothing(tmp_path):
    dev = SimulatedDevice(seed=2)
    dev.lock_clocks(595.0, 810.0)  # set by someone else: the sweep must keep it
    out = tmp_path / "s.csv"
    r = run_sweep(dev, WORKLOADS, out, leave_clocks=True)
    assert r.measured == len(WORKLOADS) and dev.clocks == (595.0, 810.0)
    g = gpudvfs.read(out)
    assert set(zip(g.core_mhz, g.mem_mhz)) == {(595.0, 810.0)}
    # A row cut off by a crash is measured again on resume, at whatever clocks run then.
    lines = out.read_bytes().splitlines(keepends=True)
    out.write_bytes(b"".join(lines[:-1]) + lines[-1][:10])
    dev.reset_clocks()
    r = run_sweep(dev, WORKLOADS, out, leave_clocks=True, resume=True)
    assert (r.measured, r.skipped) == (1, 2)
    g = gpudvfs.read(out)
    assert g.app.tolist() == ["compute", "memory", "mixed"] and g.core_mhz.tolist() == [595.0, 595.0, 975.0]
    with pytest.raises(gpudvfs.InputError, match="clocks left to the driver"):
        run_sweep(dev, WORKLOADS, out, configs=grid(dev)[:1], resume=True)
    with pytest.raises(gpudvfs.InputError, match="takes no clock pairs"):
        run_sweep(dev, WORKLOADS, tmp_path / "t.csv", configs=grid(dev)[:1], leave_clocks=True)


def test_cli_sweep_leave_clocks(tmp_path):
    out = tmp_path / "s.csv"
    r = CliRunner().invoke(cli, ["sweep", "--suite", "power", "--leave-clocks", "-o", str(out),
                                 "--min-seconds", "0.1"])
    assert r.exit_code == 0, r.output
    assert set(gpudvfs.read(out).core_mhz) == {975.0}
    r = CliRunner().invoke(cli, ["sweep", "--suite", "power", "--leave-clocks", "--core-mhz", "975", "-o",
                                 str(tmp_path / "t.csv")])
    assert r.exit_code == 2 and "takes no --core-mhz" in r.output


H100_SUITE = Path(__file__).parents[2] / "validation" / "nvidia-h100-80gb-hbm3" / "time-suite.csv"


def test_time_suite_at_one_clock_pair_with_its_launch_overhead(tmp_path):
    """An H100 run at the driver's clocks: the laws pass through the one pair's measurements,
    and the shared chase's launch beyond its chase (18.0 us) comes off the bandwidth
    benchmark's time: 2.83 TB/s sustained, 0.845 of the spec sheet's 3.35."""
    import shutil

    from gpudvfs.catalog import SUSTAINED_DRAM_FRACTION, lookup

    spec = lookup("h100-sxm")
    base = TimeDevice.from_spec(spec)
    from gpudvfs.hardware import to_time_device

    device, report = to_time_device(H100_SUITE, base)
    assert report["launch_overhead_ms"] == pytest.approx(0.01799, abs=1e-5)
    assert device.dm_lat_a * 1980 / 2619 + device.dm_lat_b == pytest.approx(595.67, abs=0.01)
    assert (device.l2_lat, device.sh_lat) == (pytest.approx(276.04, abs=0.01), pytest.approx(23.02, abs=0.01))
    sustained = base.dm_del_b * SUSTAINED_DRAM_FRACTION / device.dm_del_b  # of the peak
    assert sustained == pytest.approx(0.845, abs=0.001)
    # Launches no longer than the overhead leave no time for the copy.
    bad = tmp_path / "time-suite.csv"
    shutil.copy(H100_SUITE.with_name("time-suite.csv.sweep.json"), tmp_path / "time-suite.csv.sweep.json")
    text = H100_SUITE.read_text().replace("time_dram_bandwidth,1980,2619,0.166", "time_dram_bandwidth,1980,2619,0.016")
    bad.write_text(text)
    with pytest.raises(gpudvfs.InputError, match="no longer than the launch overhead"):
        to_time_device(bad, base)
