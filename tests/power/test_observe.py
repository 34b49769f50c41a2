"""`gpudvfs power observe`: the prior refined from what the driver does by itself, against the
simulated GPU's truth; the NVML observer on a stand-in (tests/fake_pynvml.py, no GPU); readings
files; and the prior standing where the readings cannot move it."""

from __future__ import annotations

import json
import threading

import numpy as np
import pytest
from click.testing import CliRunner

from gpudvfs import InputError, PowerModel
from gpudvfs.cli.app import cli
from gpudvfs.hardware.driver_sim import DriverManagedGpu
from gpudvfs.hardware.nvml import NvmlDevice
from gpudvfs.hardware.observer import (
    GPM_ACTIVITIES,
    NvmlObserver,
    Observation,
    Reading,
    observe,
    read_readings,
    write_readings,
)
from gpudvfs.power.observe import fit_readings

from conftest import REPO
from fake_pynvml import FakeNvml


def test_observe_on_the_simulator_recovers_its_voltages(tmp_path):
    r = CliRunner().invoke(cli, ["power", "observe", "--device", "sim", "--seconds", "60", "-o",
                                 str(tmp_path / "m.json"), "--readings", str(tmp_path / "r.csv"), "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["samples"] == 600 and d["clock_changes_made"] == 0 and d["model"] == str(tmp_path / "m.json")
    assert len(d["clocks_seen"]) >= 4 and {"sw_power_cap", "sw_thermal_slowdown"} <= set(d["throttle_reasons_seen"])
    assert d["voltage_error_max"] < 0.05  # the bound
    assert d["power_mape_unseen"] < 10 and d["unseen_clocks"]
    model = PowerModel.load(tmp_path / "m.json")
    assert model.source_ == "observed" and model.components_ == GPM_ACTIVITIES
    # The same readings refitted from their file give the same model.
    again = CliRunner().invoke(cli, ["power", "observe", "--from-readings", str(tmp_path / "r.csv"), "-o",
                                     str(tmp_path / "m2.json"), "--json"])
    assert again.exit_code == 0, again.output
    assert PowerModel.load(tmp_path / "m2.json").voltage(900.0, 3505.0) == pytest.approx(model.voltage(900.0, 3505.0))


def test_ctrl_c_while_watching_keeps_and_fits_the_readings_so_far(tmp_path, monkeypatch):
    """Ctrl-C (KeyboardInterrupt raised by the simulator's 51st read) ends the watch: the 50
    readings are written to --readings and fitted, with a warning saying so. Ctrl-C before
    the first reading still stops the command."""
    real = DriverManagedGpu.read
    calls = {"n": 0}

    def read(self, seconds, step_s=0.01):
        calls["n"] += 1
        if calls["n"] > calls["stop"]:
            raise KeyboardInterrupt
        return real(self, seconds, step_s)

    monkeypatch.setattr(DriverManagedGpu, "read", read)
    calls["stop"] = 50
    args = ["power", "observe", "--device", "sim", "--seconds", "60", "-o", str(tmp_path / "m.json"),
            "--readings", str(tmp_path / "r.csv"), "--json"]
    r = CliRunner().invoke(cli, args)
    assert r.exit_code == 0, r.output
    assert "interrupted after 50 of 600 readings" in r.stderr
    assert json.loads(r.stdout)["samples"] == 50 and len(read_readings(tmp_path / "r.csv").readings) == 50
    calls.update(n=0, stop=0)
    r = CliRunner().invoke(cli, [*args[:-5], "-o", str(tmp_path / "m2.json")])
    assert r.exit_code != 0 and not (tmp_path / "m2.json").exists()


def test_observation_beats_the_prior_it_starts_from():
    sim = DriverManagedGpu(seed=3)
    obs = observe(sim, 60.0, 0.1)
    prior = PowerModel.prior(sim.catalog_key, reference=sim.default_mhz)
    fit = fit_readings(prior, obs)
    seen = np.array(fit.clocks_seen)
    truth = sim.true_volts(seen)
    err_fit = np.abs(fit.model.voltage(seen, sim.mem_mhz)[:, 0] / truth - 1).max()
    err_prior = np.abs(prior.voltage(seen, sim.mem_mhz)[:, 0] / truth - 1).max()
    assert err_fit < err_prior and err_fit < 0.05
    assert fit.readings_used < len(obs.readings)  # windows the clock changed in are left out


def test_one_clock_leaves_the_prior_standing(tmp_path):
    busy = [Reading(0.1 * i, 1980.0, 1980.0, 2619.0, 400.0 + i, (0.9, 0.5, 0.3), ()) for i in range(50)]
    obs = Observation(busy, GPM_ACTIVITIES, 2, "h100-sxm", (1980.0, 2619.0), "counter-interpolated")
    fit = fit_readings(PowerModel.prior("h100-sxm"), obs)
    assert fit.prior_stands and "one core clock" in fit.prior_stands and fit.model.source_ == "prior"
    write_readings(tmp_path / "r.csv", obs)
    r = CliRunner().invoke(cli, ["power", "observe", "--from-readings", str(tmp_path / "r.csv"), "-o",
                                 str(tmp_path / "m.json")])
    assert r.exit_code == 0 and "the prior stands" in r.output


def test_readings_files_round_trip_and_bad_ones_are_refused(tmp_path):
    got = [Reading(0.1, 345.0, 1980.0, 2619.0, 71.5, (0.0, 0.0, 0.01), ("sw_power_cap", "sw_thermal_slowdown"))]
    obs = Observation(got, GPM_ACTIVITIES, 2, "h100-sxm", (1980.0, 2619.0), "counter-interpolated")
    write_readings(tmp_path / "r.csv", obs)
    assert read_readings(tmp_path / "r.csv") == obs
    (tmp_path / "x.csv").write_text("t_s,watts\n1,2\n")
    with pytest.raises(InputError, match="line 1: not a gpudvfs readings file"):
        read_readings(tmp_path / "x.csv")
    text = (tmp_path / "r.csv").read_text().replace("71.5", "lots")
    (tmp_path / "y.csv").write_text(text)
    with pytest.raises(InputError, match="line 3: expected numbers"):
        read_readings(tmp_path / "y.csv")


def test_observe_refuses_to_write_over_its_input_or_an_output(tmp_path):
    got = [Reading(0.1, 345.0, 345.0, 2619.0, 71.5, (0.0, 0.0, 0.01), ())]
    write_readings(tmp_path / "r.csv", Observation(got, GPM_ACTIVITIES, 2, "h100-sxm", (1980.0, 2619.0), "exact"))
    runner = CliRunner()
    readings = str(tmp_path / "r.csv")
    r = runner.invoke(cli, ["power", "observe", "--from-readings", readings, "-o", readings, "--force"])
    assert r.exit_code == 2 and "input of this command" in r.output
    (tmp_path / "m.json").write_text("{}")
    r = runner.invoke(cli, ["power", "observe", "--from-readings", readings, "-o", str(tmp_path / "m.json")])
    assert r.exit_code == 2 and "--force" in r.output and (tmp_path / "m.json").read_text() == "{}"


def test_nvml_observer_reads_a_stand_in_gpu_and_sets_nothing():
    """Stand-in: tests/fake_pynvml.py, an in-memory NVML (no GPU) named as an H100, with GPM."""
    fake = FakeNvml(name="NVIDIA H100 80GB HBM3", gpm=True, default_clocks=(1980, 2619),
                    clock_table={2619: [1980, 1755, 1410, 345]})
    with NvmlDevice(pynvml=fake, leave_clocks=True) as dev:
        source = NvmlObserver(dev)
        work = threading.Thread(target=fake.run, args=(0.5,))  # the user's kernel, busy meanwhile
        work.start()
        obs = observe(source, 0.3, 0.05)
        work.join()
        source.close()
    got = obs.readings
    assert obs.catalog_key == "h100-sxm" and obs.activities == GPM_ACTIVITIES and len(got) == 6
    assert obs.power == "counter-interpolated"
    assert all(r.watts > 40 and len(r.activity) == 3 and r.core_mhz > 0 for r in got)
    assert max(r.activity[0] for r in got) > 0.5  # GPM saw the SM busy
    assert fake.calls == [] and fake.gpm_samples == 0


def test_the_observer_refuses_a_device_that_may_set_clocks():
    with NvmlDevice(pynvml=FakeNvml(name="NVIDIA H100 80GB HBM3")) as dev, \
            pytest.raises(InputError, match="leave_clocks=True"):
        NvmlObserver(dev)


def test_windows_shorter_than_the_counters_update_period_read_the_right_power():
    """An H200's counter advances every 0.1 s (validation/nvidia-h200/observe/readings.csv: idle
    windows of 0.11 s read 75 W, and 150 W where two updates fell in one: observe-raw-counter/).
    Read between updates,
    every window of a steady load reads its power. Stand-in: tests/fake_pynvml.py, no GPU."""
    fake = FakeNvml(name="NVIDIA H200", energy_period_s=0.1, default_clocks=(1980, 3201),
                    clock_table={3201: [1980, 1500, 345]})
    with NvmlDevice(pynvml=fake, leave_clocks=True) as dev:
        source = NvmlObserver(dev)
        work = threading.Thread(target=fake.run, args=(2.0,))
        work.start()
        got = observe(source, 1.1, 0.11).readings
        work.join()
        source.close()
    # Read raw, one window in ten would hold two updates (+80%) and the others one (-9%). The
    # bound per window leaves room for a poller thread delayed on a busy CPU.
    error = np.array([r.watts for r in got]) / fake.busy_watts(1980, 3201) - 1
    assert len(got) == 10 and np.abs(error).max() < 0.1 and abs(error.mean()) < 0.02, error


def test_the_h200_readings_show_the_counters_period():
    """The first H200 run's idle windows, read from the counter's raw difference: one update (about
    0.1 s of energy over a 0.11 s window) or two."""
    obs = read_readings(REPO / "validation/nvidia-h200/observe-raw-counter/readings.csv")
    got = obs.readings
    assert obs.power == "unknown"  # written before the power reading was recorded (it was the raw one)
    idle = np.array([r.watts for r in got if r.core_mhz == 345.0 and r.activity[0] == 0.0])
    doubled = idle > 1.5 * np.median(idle)
    assert 0.03 < doubled.mean() < 0.2
    assert np.median(idle[doubled]) / np.median(idle[~doubled]) == pytest.approx(2, rel=0.05)
