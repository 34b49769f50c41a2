"""Fleet calibration: simulated chips, the registry, and Ray tasks on a local cluster with
logical GPUs, including a worker killed mid-sweep."""

from __future__ import annotations

import json
import os
import signal
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from gpudvfs.errors import InputError
from gpudvfs.fleet.calibrate import SimFleet, calibrate_fleet, calibrate_gpu
from gpudvfs.fleet.check import check_gpu
from gpudvfs.fleet.jobs import plan_budget, read_jobs, simulated_jobs, write_jobs
from gpudvfs.fleet.registry import ENTRY_FILE, Registry, gpu_dir
from gpudvfs.hardware.chips import chip_device, chip_gpu, sim_uuid
from gpudvfs.hardware.simulated import SimulatedGpu

ray = pytest.importorskip("ray")
FILES = ("power-suite.csv", "power-suite.csv.sweep.json", "time-suite.csv", "time-suite.csv.sweep.json",
         "power-model.json", "time-device.json", ENTRY_FILE)


def test_chips_differ_by_their_uuid_alone():
    uuids = [sim_uuid(i) for i in range(200)]
    assert len(set(uuids)) == 200 and all(u.startswith("GPU-") for u in uuids)
    assert sim_uuid(3) == sim_uuid(3) and sim_uuid(3, fleet_seed=1) != sim_uuid(3)
    assert chip_gpu(uuids[0]) == chip_gpu(uuids[0]) and chip_gpu(uuids[0]) != chip_gpu(uuids[1])
    base = SimulatedGpu()
    # Static power spread like same-SKU chips: about 8% on average, never beyond 22% (+ the
    # per-component 3%, 4 standard deviations of it at most here).
    ratio = np.array([chip_gpu(u).static_w[0] / base.static_w[0] for u in uuids])
    assert 0.05 < np.mean(np.abs(ratio - 1)) < 0.11 and np.all(np.abs(ratio - 1) < 0.22 * 1.12 + 0.12)
    for u in uuids[:20]:
        g = chip_gpu(u)
        assert g.volts(*g.default_mhz) == (1.0, 1.0)  # the reference stays the normalisation point
        assert g.core_volts(600.0) != base.core_volts(600.0)
    with pytest.raises(InputError):
        sim_uuid(-1)
    with pytest.raises(InputError):
        chip_gpu("")


def test_registry_refuses_uuids_that_are_not_folder_names(tmp_path):
    for bad in ("../x", "a/b", "", ".hidden"):
        with pytest.raises(InputError, match="UUID"):
            gpu_dir(tmp_path, bad)
    with pytest.raises(InputError, match="no such registry"):
        Registry.load(tmp_path / "missing")
    with pytest.raises(InputError, match="no calibrated GPU"):
        Registry.load(tmp_path)


def _read_all(folder: Path) -> dict[str, bytes]:
    return {f: (folder / f).read_bytes() for f in FILES}


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """GPU slot 3 calibrated in this process, without Ray and without interruption."""
    root = tmp_path_factory.mktemp("reference")
    entry = calibrate_gpu(SimFleet(), 3, str(root), 1.0, "per-domain")
    return root, entry


def test_the_registry_counts_the_power_cv_folds_that_fell_back(reference, tmp_path):
    """A GPU's entry records how many of its power CV folds fell back or did not converge (the
    simulated chip's fits all converge); the fleet's summary adds them up and its table names
    them only where some did. An entry edited to say 2 stands in for a fit that fell back; one
    written before the counts were recorded says nothing of them."""
    import shutil

    from gpudvfs.cli.fleet import summary_rows

    ref_root, entry = reference
    assert (entry["power"]["cv_fallback_folds"], entry["power"]["cv_unconverged_folds"]) == (0, 0)
    root = tmp_path / "reg"
    shutil.copytree(ref_root / entry["uuid"], root / entry["uuid"])
    summary = Registry.load(root).summary()
    assert (summary["power_cv_fallback_folds"], summary["power_cv_unconverged_folds"]) == (0, 0)
    assert not any("folds" in label for label, _ in summary_rows(summary))
    f = root / entry["uuid"] / ENTRY_FILE
    edited = json.loads(f.read_text())
    edited["power"]["cv_fallback_folds"] = 2
    f.write_text(json.dumps(edited))
    rows = dict(summary_rows(Registry.load(root).summary()))
    assert rows["power CV folds that fell back to per-domain voltages"] == "2 (6 per GPU)"
    assert "power CV folds that did not converge" not in rows
    for key in ("cv_fallback_folds", "cv_unconverged_folds"):
        del edited["power"][key]
    f.write_text(json.dumps(edited))
    summary = Registry.load(root).summary()
    assert "power_cv_fallback_folds" not in summary and summary["gpus"] == 1


def test_a_resumed_calibration_equals_an_uninterrupted_one(reference, tmp_path):
    ref_root, entry = reference
    uuid = entry["uuid"]
    assert entry["truth"]["voltage_error_max"] < 0.02
    # A crash mid-row: the power sweep cut inside a line, the time sweep and models not begun.
    folder = gpu_dir(tmp_path, uuid)
    folder.mkdir()
    for f in ("power-suite.csv", "power-suite.csv.sweep.json"):
        (folder / f).write_bytes((ref_root / uuid / f).read_bytes())
    csv = folder / "power-suite.csv"
    text = csv.read_bytes()
    csv.write_bytes(text[: len(text) // 2 + 7])
    calibrate_gpu(SimFleet(), 3, str(tmp_path), 1.0, "per-domain")
    assert _read_all(folder) == _read_all(ref_root / uuid)


@dataclass(frozen=True)
class KillingFleet(SimFleet):
    """Simulated GPUs whose slot ``victim`` SIGKILLs its own worker process after ``after``
    measurements, once (a marker file remembers it): a real worker death, which Ray answers by
    retrying the task."""

    victim: int = 0
    after: int = 0
    marker: str = ""

    def __call__(self, slot):
        device = super().__call__(slot)
        if slot != self.victim or os.path.exists(self.marker):
            return device
        measure, count = device.measure, [0]

        def killing_measure(*args, **kwargs):
            count[0] += 1
            if count[0] == self.after:
                Path(self.marker).touch()
                os.kill(os.getpid(), signal.SIGKILL)
            return measure(*args, **kwargs)

        device.measure = killing_measure
        return device


def test_eight_gpus_on_ray_with_a_worker_killed_mid_sweep(reference, tmp_path):
    """8 simulated GPUs on a local Ray cluster each recover their own voltages within 0.3%
    (asked: 2%); the worker of slot 3 is killed 700 rows into its power sweep, and the retried
    task's registry entry, models and sweeps equal those of an uninterrupted calibration."""
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers cannot import the tests
    marker = tmp_path / "killed"
    root = tmp_path / "registry"
    done = []
    registry = calibrate_fleet(KillingFleet(victim=3, after=700, marker=str(marker)), root, gpus=8,
                               progress=lambda d, n, label: done.append((d, n)))
    assert marker.exists(), "the victim's worker was never killed"
    assert done[-1] == (8, 8)
    assert len(registry.entries) == 8
    assert set(registry.entries) == {sim_uuid(i) for i in range(8)}
    for uuid, e in registry.entries.items():
        assert e["truth"]["voltage_error_max"] < 0.02, uuid
        assert e["power"]["cv_mape"] < 1.0
    ref_root, entry = reference
    assert _read_all(root / entry["uuid"]) == _read_all(ref_root / entry["uuid"])
    summary = registry.summary()
    assert summary["gpus"] == 8 and summary["voltage_error_max"] < 0.003  # docs/accuracy.md: within 0.3% (asked: 2%)
    # The chips differ: their fitted static powers spread as their simulated truths do.
    fitted = np.array([registry.power_model(u).static_w_[0] for u in registry.entries])
    true = np.array([chip_device(u).gpu.static_w[0] for u in registry.entries])
    assert np.ptp(fitted) > 0.05 * np.mean(fitted)
    assert np.corrcoef(fitted, true)[0, 1] > 0.9


def test_bad_fleet_requests_are_refused_before_any_work(tmp_path):
    with pytest.raises(InputError, match="--gpus"):
        calibrate_fleet(SimFleet(), tmp_path, gpus=None)
    with pytest.raises(InputError, match="at least 1"):
        calibrate_fleet(SimFleet(), tmp_path, gpus=0)


def test_registry_entries_are_checked_on_load(reference, tmp_path):
    ref_root, entry = reference
    folder = tmp_path / "GPU-other"
    folder.mkdir()
    (folder / ENTRY_FILE).write_text(json.dumps(json.loads((ref_root / entry["uuid"] / ENTRY_FILE).read_text())))
    with pytest.raises(InputError, match="folder's name"):
        Registry.load(tmp_path)
    (folder / ENTRY_FILE).write_text(json.dumps({"kind": "fleet-gpu", "version": 99}))
    with pytest.raises(InputError, match="version"):
        Registry.load(tmp_path)


def _true_watts(plan) -> float:
    from gpudvfs.hardware.apps import APPS

    by_name = {w.name: w for w in APPS}
    return sum(chip_device(j["gpu"]).true_power_w(by_name[j["job"]], j["core_mhz"], j["mem_mhz"])
               for j in plan["jobs"])


def test_budget_plans_hold_the_budget_in_truth_and_trade_time_for_watts(registry3, tmp_path):
    jobs = simulated_jobs(registry3)
    write_jobs(jobs, tmp_path / "jobs.json")
    assert read_jobs(tmp_path / "jobs.json") == jobs
    least = plan_budget(registry3, jobs, 1e6)  # no limit: every job at its fastest pair
    assert least["gap_bound"] < 1e-12
    prev = 0.0
    for budget in np.linspace(least["watts"], 0.7 * least["default_watts"], 5):
        plan = plan_budget(registry3, jobs, float(budget))
        assert plan["watts"] <= budget
        # The simulated chips' true power at the chosen clocks stays within the budget up to
        # the models' error (0.1-0.2% on these chips).
        assert _true_watts(plan) <= budget * 1.01
        assert plan["objective_value"] >= prev - 1e-9  # a smaller budget never buys less time
        prev = plan["objective_value"]
        assert plan["objective_value"] == pytest.approx(sum(j["relative_time"] for j in plan["jobs"]))
    plan = plan_budget(registry3, jobs, least["default_watts"], "energy", slowdown=0.05)
    assert all(j["relative_time"] <= 1.05 + 1e-9 for j in plan["jobs"])
    assert plan["watts"] <= least["default_watts"]


def test_bad_jobs_and_budgets_are_refused(registry3, tmp_path):
    jobs = simulated_jobs(registry3)
    uuid = jobs[0].gpu

    def refused(doc, match):
        (tmp_path / "j.json").write_text(json.dumps(doc))
        with pytest.raises(InputError, match=match):
            plan_budget(registry3, read_jobs(tmp_path / "j.json"), 1e4)

    good = {"gpu": uuid, "name": "a", "counters": jobs[0].counters, "time_ms": 1.0}
    refused({"jobs": []}, "non-empty list")
    refused({"jobs": [good, good | {"name": "b"}]}, "one job per GPU")
    refused({"jobs": [good | {"gpu": "GPU-unknown"}]}, "not in the registry")
    refused({"jobs": [good | {"time_ms": -1}]}, "time_ms")
    refused({"jobs": [good | {"counters": {"SP": "x"}}]}, "numbers")
    refused({"jobs": [good | {"counters": {k: v for k, v in jobs[0].counters.items() if k != "DRAM"}}]},
            r"no utilization for \['DRAM'\]")
    with pytest.raises(InputError, match="below"):
        plan_budget(registry3, jobs, 10.0)
    with pytest.raises(InputError, match="objective"):
        plan_budget(registry3, jobs, 1e4, "speed")


def test_check_flags_chips_whose_power_grew(registry3):
    fresh = [check_gpu(SimFleet(), s, str(registry3.root), 4, 3, 1.0) for s in range(3)]
    aged = [check_gpu(SimFleet(aging=0.05), s, str(registry3.root), 4, 3, 1.0) for s in range(3)]
    assert not any(r["flagged"] for r in fresh) and all(r["flagged"] for r in aged)
    assert all(abs(r["drift_pct"]) < 0.5 for r in fresh)
    assert all(r["drift_pct"] > 2 and r["points"] == 12 for r in aged)
    with pytest.raises(InputError, match="not in the registry"):
        check_gpu(SimFleet(), 7, str(registry3.root), 4, 3, 1.0)


def test_fleet_commands_end_to_end(tmp_path):
    """calibrate, check (exit status 3 on drift), sample-jobs and budget, as a user runs them."""
    from click.testing import CliRunner

    from gpudvfs.cli.app import cli

    run = CliRunner().invoke
    reg = str(tmp_path / "reg")
    r = run(cli, ["fleet", "calibrate", "--gpus", "2", "-o", reg, "--min-seconds", "0.2", "--json"])
    assert r.exit_code == 0, r.output
    summary = json.loads(r.stdout)
    assert summary["gpus"] == 2 and summary["voltage_error_max"] < 0.02
    r = run(cli, ["fleet", "check", "--registry", reg, "--gpus", "2", "--sim-aging", "0.05", "--json"])
    assert r.exit_code == 3 and len(json.loads(r.stdout)["flagged"]) == 2
    # A GPU never calibrated fails its check; rerunning the check cannot help, so no hint says it would.
    r = run(cli, ["fleet", "check", "--registry", reg, "--gpus", "3", "--min-seconds", "0.1"])
    assert r.exit_code == 2 and "1 of 3 checks failed:" in r.output and "rerun" not in r.output
    jobs = str(tmp_path / "jobs.json")
    assert run(cli, ["fleet", "sample-jobs", "--registry", reg, "-o", jobs]).exit_code == 0
    r = run(cli, ["fleet", "budget", jobs, "--registry", reg, "--budget-w", "280", "--json"])
    assert r.exit_code == 0, r.output
    plan = json.loads(r.stdout)
    assert plan["watts"] <= 280 and len(plan["jobs"]) == 2
    r = run(cli, ["fleet", "budget", jobs, "--registry", reg])
    assert r.exit_code == 2 and "--budget-w" in r.output
    r = run(cli, ["fleet", "check", "--registry", reg, "--device", "nvml", "--sim-aging", "0.1"])
    assert r.exit_code == 2 and "--sim-aging is for --device sim" in r.output


def test_ray_auto_without_a_cluster_says_what_to_pass(monkeypatch):
    """Ray's own message tells the user to pass `--address`, which gpudvfs has no option for."""
    from gpudvfs.fleet.tasks import ray_session

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    with pytest.raises(InputError, match=r"--ray auto: no Ray cluster found") as e:
        with ray_session("auto"):
            pass
    assert "--address" not in str(e.value) and "'local'" in str(e.value)
