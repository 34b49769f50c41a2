"""The governor's daemon: phase detection from activities, the simulated GPU with phased
processes, the daemon end to end on it (scored against the simulator's truth), and the
daemon on the NVML stand-in `fake_pynvml` (no GPU here), including every way out."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpudvfs.errors import GpudvfsWarning, InputError
from gpudvfs.fleet.model_prior import ModelPrior
from gpudvfs.fleet.simhost import SimProcess, SimulatedHost, calibrated, phased_process, sim_activity
from gpudvfs.fleet.whatif import GpuTable
from gpudvfs.govern import Governor
from gpudvfs.govern.daemon import Daemon, NvmlMonitor, advice_report
from gpudvfs.govern.phases import PhaseDetector
from gpudvfs.hardware.apps import APPS
from gpudvfs.hardware.nvml import NvmlDevice
from gpudvfs.hardware.simulated import SimulatedDevice

from fake_pynvml import FakeNvml


@pytest.fixture(scope="module")
def sim_dir(tmp_path_factory):
    """The folder the simulated GPU's calibration is kept in."""
    return tmp_path_factory.mktemp("govern-sim")


@pytest.fixture(scope="module")
def sim(sim_dir):
    """The simulated GPU, its registry table and its DCGM time model (calibrated once)."""
    return calibrated(sim_dir)


# -- phase detection ----------------------------------------------------------------------

def test_a_lone_outlier_does_not_switch_and_a_phase_returns():
    d = PhaseDetector(threshold=0.1, confirm=2)
    a, b = [0.9, 0.8, 0.1], [0.3, 0.0, 0.9]
    assert d.update(("train",), a) == (("train",), 0) and d.inside
    assert d.update(("train",), b) == (("train",), 0) and not d.inside  # one interval: not yet
    assert d.update(("train",), a) == (("train",), 0) and d.inside
    d.update(("train",), b)
    assert d.update(("train",), b) == (("train",), 1) and d.inside  # confirmed
    d.update(("train",), a)
    assert d.update(("train",), a) == (("train",), 0)  # the earlier phase resumes
    assert d.update(("eval",), a) == (("eval",), 0)  # another program has phases of its own
    assert d.update((), a) is None


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 3), min_size=2, max_size=12), st.integers(3, 8), st.integers(0, 2**31 - 1))
def test_phases_follow_well_separated_activities(order, length, seed):
    """Segments of activities around 4 centroids 0.3 apart, noise within a quarter of the
    threshold: after the confirmation lag every interval is in its segment's phase, and a
    phase is one centroid's."""
    centroids = np.array([[0.1, 0.1, 0.1], [0.4, 0.1, 0.7], [0.8, 0.5, 0.2], [0.5, 0.9, 0.9]])
    rng = np.random.default_rng(seed)
    d = PhaseDetector(threshold=0.1, confirm=2)
    of_phase: dict = {}
    prev = None
    for c in order:
        for i in range(length):
            key = d.update(("p",), centroids[c] + rng.uniform(-0.025, 0.025, 3))
            if c != prev and i < 1 and prev is not None:
                continue  # the confirmation lag
            assert of_phase.setdefault(key, c) == c
        prev = c


def test_detector_rejects_bad_input():
    with pytest.raises(InputError, match="threshold"):
        PhaseDetector(threshold=0)
    with pytest.raises(InputError, match="confirm"):
        PhaseDetector(confirm=0)
    d = PhaseDetector()
    with pytest.raises(InputError, match="finite"):
        d.update(("p",), [0.1, float("nan")])
    d.update(("p",), [0.1, 0.2, 0.3])
    with pytest.raises(InputError, match="fields"):
        d.update(("p",), [0.1, 0.2])


# -- the governor without a time measurement -----------------------------------------------

def test_power_only_observations_leave_the_time_prediction_alone():
    cfg = np.array([[1000.0, 3000.0], [800.0, 3000.0], [600.0, 3000.0]])
    gov = Governor(cfg, 0)
    t, p = np.array([1.0, 1.2, 1.6]), np.array([200.0, 150.0, 120.0])
    gov.phase("a", t, p)
    for _ in range(5):
        gov.observe(1, None, 180.0)  # 20% above the prediction at pair 1
    lt, lp, _, _ = gov.estimates()
    assert np.allclose(np.exp(lt), t)
    assert np.exp(lp[1]) == pytest.approx(180.0)
    assert np.exp(lp[2]) > 120.0  # the correction carries to the unmeasured pair
    with pytest.raises(InputError):
        gov.observe(1, None, -1.0)


# -- the simulated GPU with processes --------------------------------------------------------

def test_simulated_host_runs_phases_and_counts_energy(sim):
    device = sim[0]
    host = SimulatedHost(device, time_noise=0.0)
    stream, sgemm = APPS[1], APPS[0]
    t_stream = device.true_time_ms(stream, *device.clocks) / 1e3
    host.start(SimProcess(7, "job", ((stream, 2.0 / t_stream), (sgemm, 1.0))))
    e0 = device.energy_joules()
    host.wait(1.0)
    assert host.processes() == ((7, "job"),)
    assert host.phase() is stream
    assert np.allclose(host.activity(), sim_activity(stream, device))
    assert device.energy_joules() - e0 == pytest.approx(device.true_power_w(stream, *device.clocks))
    assert host.progress() == pytest.approx(1.0 / t_stream)
    host.wait(5.0)  # the rest of stream, one sgemm step, then idle
    assert host.processes() == ()
    assert host.progress() == pytest.approx(2.0 / t_stream + 1.0)
    with pytest.raises(InputError):
        host.wait(0.0)
    with pytest.raises(InputError):
        SimProcess(1, "x", ((stream, -1.0),))


def test_daemon_on_the_simulated_gpu_settles_near_the_least_energy(sim):
    """Four phases of 60 s, 1200 one-second intervals: the daemon detects one phase per
    workload, and its energy (exploration included) is near the least-energy pairs'."""
    device, table, model = sim
    host = SimulatedHost(device, seed=1)
    host.start(phased_process(device, APPS, 60.0, repeat=5))
    pairs = []
    daemon = Daemon(device, host, ModelPrior(table, model))
    for _ in range(1200):
        daemon.step()
        pairs.append((daemon._key, host.phase().name))
    stats = daemon.run(1.0)  # one more interval through run(): resets on the way out
    truth = host.truth(daemon.governor.configs, daemon.governor.default_index)
    # Each phase is one workload's, but for the confirmation lag: up to two intervals per
    # change (the one it happened in, and one more outside the old phase to confirm it).
    assert len(stats.phases) == 4
    changes = sum(a[1] != b[1] for a, b in zip(pairs, pairs[1:]))
    agree = sum(max(sum(1 for k, w in pairs if k == key and w == name) for name in {w for _, w in pairs})
                for key in {k for k, _ in pairs})
    assert changes >= 15 and agree >= len(pairs) - 2 * changes
    assert stats.joules / truth["joules_least"] - 1 < 0.02
    assert 1 - stats.joules / truth["joules_default"] > 0.05
    assert device.clocks == device.default_clocks()


def test_daemon_resets_the_clocks_when_the_process_ends(sim):
    device, table, model = sim
    host = SimulatedHost(device)
    host.start(phased_process(device, APPS[:1], 5.0, repeat=1))
    daemon = Daemon(device, host, ModelPrior(table, model))
    for _ in range(3):
        daemon.step()
    assert device.clocks != device.default_clocks()  # governing: sgemm runs below the top clocks
    for _ in range(10):
        daemon.step()
    assert host.processes() == () and daemon.loop.held is None
    assert device.clocks == device.default_clocks()


# -- the daemon on the NVML stand-in ---------------------------------------------------------

def _fake_table(fake: FakeNvml) -> GpuTable:
    """A registry table over the stand-in's pairs (its power grows with the clocks), default:
    the highest core clock at the stand-in's default memory clock."""
    cfg = np.array([(c, m) for m, cores in fake.clock_table.items() for c in cores], dtype=float)
    default = int(np.argmax(np.where(cfg[:, 1] == fake.default[1], cfg[:, 0], -1)))
    scale = cfg[:, 0] / cfg[default, 0]
    return GpuTable(cfg, 40.0 * scale, 80.0 * scale ** 2, 20.0 * cfg[:, 1] / cfg[default, 1], default)


def _busy(fake: FakeNvml) -> None:
    with fake._lock:
        fake.busy = True
        fake._changed()


class _Failing(NvmlMonitor):
    def __init__(self, device, fail_at: int, error: BaseException):
        super().__init__(device)
        self.waits, self.fail_at, self.error = 0, fail_at, error

    def wait(self, seconds: float) -> None:
        self.waits += 1
        if self.waits == self.fail_at:
            raise self.error
        time.sleep(seconds)


@pytest.mark.parametrize("error", [RuntimeError("monitor broke"), KeyboardInterrupt()])
def test_daemon_on_the_nvml_stand_in_resets_clocks_on_errors(sim, error):
    """Stand-in: no GPU here. The daemon locks the stand-in's clocks while a process runs, and
    an exception (or ctrl-c) in the loop leaves them reset."""
    import os

    fake = FakeNvml()
    fake.pids = [os.getpid()]
    _busy(fake)
    device = NvmlDevice(pynvml=fake)
    daemon = Daemon(device, _Failing(device, 4, error), ModelPrior(_fake_table(fake), sim[2]), interval_s=0.02)
    with pytest.raises(type(error)):
        daemon.run()
    assert "nvmlDeviceSetGpuLockedClocks" in fake.calls
    assert fake.locked_gpu is None and fake.locked_mem is None
    assert daemon.stats.governed == 3 and daemon.stats.observed == 2
    with open(f"/proc/{os.getpid()}/comm") as f:  # the phase is named for this process
        assert set(daemon.stats.phases) == {f"{f.read().strip()}#0"}


def test_daemon_reads_progress_from_a_file(sim, tmp_path):
    fake = FakeNvml()
    device = NvmlDevice(pynvml=fake)
    path = tmp_path / "steps"
    monitor = NvmlMonitor(device, path)
    assert monitor.progress() is None  # not reporting yet
    path.write_text("1234.5\n")
    assert monitor.progress() == 1234.5
    path.write_text("many")
    with pytest.raises(InputError, match="work units"):
        monitor.progress()
    path.write_text("-3")
    with pytest.raises(InputError, match=">= 0"):
        monitor.progress()
    fake.mem_busy = 0.25
    _busy(fake)
    assert np.allclose(monitor.activity(), [1.0, 0.0, 0.25])


def test_activities_come_from_gpm_where_the_gpu_has_it():
    """Stand-in: GPM as nvidia-ml-py exposes it (Hopper and newer). A window fully busy reads
    the stand-in's SM, FP32 and DRAM shares; the tensor metric it does not count reads 0;
    an idle window reads 0; the samples are freed. Without GPM, NVML's utilization rates."""
    from types import SimpleNamespace

    from gpudvfs.hardware.gpm import GpmActivity

    fake = FakeNvml(gpm=True)
    device = NvmlDevice(pynvml=fake)
    monitor = NvmlMonitor(device)
    assert monitor.source == "gpm" and fake.gpm_samples == 2
    _busy(fake)
    monitor.wait(0.02)
    assert np.allclose(monitor.activity(), [1.0, fake.fp32_busy, fake.mem_busy])
    with fake._lock:
        fake.busy = False
        fake._changed()
    monitor.wait(0.2)  # long against the moment between the window's start and the workload's end
    assert np.allclose(monitor.activity(), 0.0, atol=0.05)  # busy a few us into the window
    monitor.close()
    assert fake.gpm_samples == 0
    assert NvmlMonitor(NvmlDevice(pynvml=FakeNvml(gpm=False))).source == "utilization"
    assert GpmActivity.open(SimpleNamespace(), None) is None  # bindings that predate GPM


def test_daemon_refuses_a_gpu_without_an_energy_counter(sim):
    fake = FakeNvml(energy_counter=False)
    device = NvmlDevice(pynvml=fake)
    with pytest.raises(InputError, match="energy counter"):
        Daemon(device, NvmlMonitor(device), ModelPrior(_fake_table(fake), sim[2]))
    with pytest.raises(InputError, match="interval"):
        Daemon(NvmlDevice(pynvml=FakeNvml()), None, ModelPrior(_fake_table(fake), sim[2]), interval_s=0)


SIGTERM_DAEMON = """
import os, sys, threading, signal, time, json
import numpy as np
sys.path[:0] = {tests!r}
from fake_pynvml import FakeNvml
from gpudvfs.fleet.model_prior import ModelPrior
from gpudvfs.govern.daemon import Daemon, NvmlMonitor, advice_report
from gpudvfs.hardware.nvml import NvmlDevice
from gpudvfs.time.dcgm import DcgmTimeModel
from test_govern_daemon import _fake_table, _busy
fake = FakeNvml(state_file={state!r})
fake.pids = [os.getpid()]
_busy(fake)
device = NvmlDevice(pynvml=fake)
stop = threading.Event()
signal.signal(signal.SIGTERM, lambda *_: stop.set())
daemon = Daemon(device, NvmlMonitor(device), ModelPrior(_fake_table(fake), DcgmTimeModel.load({model!r})),
                interval_s=0.02, log=lambda e: print(json.dumps(e["index"]), flush=True))
daemon.run(stop=stop)
print("done", flush=True)
"""


def test_a_sigterm_ends_the_daemon_with_its_clocks_reset(sim, tmp_path):
    """Stand-in in another process: SIGTERM mid-run; the state the stand-in wrote shows the
    clocks were locked, then reset."""
    from pathlib import Path

    model_path = tmp_path / "time.json"
    sim[2].save(model_path)
    state = tmp_path / "state.json"
    here = Path(__file__).parent  # this module, and the tests' root with the NVML stand-in
    script = SIGTERM_DAEMON.format(tests=[str(here), str(here.parent)], state=str(state), model=str(model_path))
    err = tmp_path / "stderr.txt"
    with open(err, "w") as stderr:
        proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(script)], stdout=subprocess.PIPE,
                                stderr=stderr, text=True)
    said = err.read_text  # the daemon's stderr, for a failure's message
    try:
        for _ in range(3):  # three decisions made
            assert proc.stdout.readline().strip().isdigit(), said()
        # Locked (a change of pairs resets, then locks: the file may show the moment between).
        # One read both ends the wait and is asserted on: a second read could land between.
        end = time.monotonic() + 10
        while (seen := json.loads(state.read_text()))["locked_gpu"] is None and time.monotonic() < end:
            time.sleep(0.005)
        assert seen["locked_gpu"] is not None, (seen, said())
        proc.send_signal(signal.SIGTERM)
        assert proc.stdout.read().strip().endswith("done"), said()
        assert proc.wait(20) == 0, said()
        s = json.loads(state.read_text())
        assert s["locked_gpu"] is None and s["locked_mem"] is None, s
        assert s["calls"][-1].startswith("nvmlDeviceReset"), s
    finally:
        proc.kill()


def test_govern_run_command_on_the_simulated_gpu(tmp_path):
    from click.testing import CliRunner

    from gpudvfs.cli.app import cli

    run = CliRunner().invoke
    log = tmp_path / "decisions.jsonl"
    r = run(cli, ["govern", "run", "--device", "sim", "--apply", "--duration", "300", "--sim-phase-s", "30",
                  "--workdir", str(tmp_path / "work"), "--log", str(log), "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["intervals"] == 300 and len(out["phases"]) == 4
    assert out["sim_truth"]["energy_saving"] > 0.05 and out["sim_truth"]["energy_over_least"] < 0.03
    lines = log.read_text().splitlines()
    assert len(lines) == 300 and {"phase", "core_mhz", "explored", "predicted_saving"} <= set(json.loads(lines[-1]))
    # The metrics server stays up in this process after the command: scrape it.
    import socket
    import urllib.request

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    r = run(cli, ["govern", "run", "--device", "sim", "--duration", "20", "--workdir", str(tmp_path / "work"),
                  "--metrics-port", str(port), "--json"])
    assert r.exit_code == 0, r.output
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    assert 'gpudvfs_governor_decisions_total{gpu="sim0"} 20.0' in text
    # Without --json, at a terminal (TTY_COMPATIBLE: rich's stand-in for one), a bar on stderr
    # follows the run: intervals of the duration, phases, clock changes; stdout holds the report alone.
    r = run(cli, ["govern", "run", "--device", "sim", "--apply", "--duration", "40", "--sim-phase-s", "10", "--workdir",
                  str(tmp_path / "work")], env={"TTY_COMPATIBLE": "1"})
    assert r.exit_code == 0, r.output
    assert re.search(r"govern\b.*40/40.*4 phases, \d+ clock changes", re.sub(r"\x1b\[[0-9;?]*[a-zA-Z]", "", r.stderr))
    assert "40/40" not in r.stdout and "governor daemon" in r.stdout
    for args, message in ((["--device", "sim", "--progress", "p"], "--progress is for"),
                          (["--device", "sim", "--registry", "r"], "calibrates its own"),
                          (["--device", "sim", "--policy", "power-cap"], "--power-cap"),
                          (["--device", "sim", "--interval", "0"], "interval")):
        r = run(cli, ["govern", "run", *args])
        assert r.exit_code == 2 and message in r.output, (args, r.output)


def test_govern_run_in_dry_run_advises_per_phase_and_prints_the_table(tmp_path):
    """A dry run at the simulated driver's clocks: the log holds the advised pair, never one to
    explore, and no realized saving; the report holds each phase's advice against the driver's
    pair, printed as the table (the simulator is seeded: both runs are the same)."""
    from click.testing import CliRunner

    from gpudvfs.cli.app import cli

    log = tmp_path / "decisions.jsonl"
    args = ["govern", "run", "--device", "sim", "--duration", "80", "--sim-phase-s", "20", "--workdir",
            str(tmp_path / "work")]
    r = CliRunner().invoke(cli, [*args, "--log", str(log), "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["dry_run"] and out["clock_changes"] == 0 and set(out["advice"]) == set(out["phases"])
    decisions = [json.loads(line) for line in log.read_text().splitlines()]
    explored = [d for d in decisions if d["explore"] is not None]
    assert any(d["explore"]["index"] != d["index"] for d in explored)  # logged: the advice, not that pair
    assert not any("realized_saving" in d or d["explored"] for d in decisions)
    for name, a in out["advice"].items():
        assert (a["ran_core_mhz"], a["ran_mem_mhz"]) == tuple(out["clocks_restored"])  # the driver's pair
        assert a["energy_interval"][0] <= a["energy_saving"] <= a["energy_interval"][1]
        last = [d for d in decisions if f"{'+'.join(d['phase'][0])}#{d['phase'][1]}" == name][-1]
        assert last["index"] == a["index"]
    r = CliRunner().invoke(cli, args)
    assert r.exit_code == 0, r.output
    table = advice_report(out)
    assert r.output.rstrip().endswith(table) and table.splitlines()[1].split()[:2] == ["phase", "intervals"]


def test_the_service_ends_on_sigterm_or_ctrl_c_and_puts_the_handler_back(sim, sim_dir):
    """`serve` (what `govern run` calls): SIGTERM mid-run ends it after that interval, Ctrl-C
    too, each with the clocks given back and the run so far scored; the SIGTERM handler found
    is put back."""
    import os

    from gpudvfs.fleet.govern_service import ServiceSettings, serve

    device = sim[0]
    settings = ServiceSettings(device_kind="sim", duration_s=200, sim_phase_s=20, workdir=sim_dir, dry_run=False)
    started = []

    def sigterm_at_10(stats, total):
        assert total == 200
        if stats.intervals == 10:
            os.kill(os.getpid(), signal.SIGTERM)

    before = signal.getsignal(signal.SIGTERM)
    out = serve(settings, started=started.append, progress=sigterm_at_10)
    assert signal.getsignal(signal.SIGTERM) is before
    assert [type(d) for d in started] == [Daemon] and started[0].prior.name == "models"
    assert out["intervals"] == 10 and out["device"] == device.name and out["prior"] == "models"
    assert tuple(out["clocks_restored"]) == device.default_clocks()
    assert set(out["sim_truth"]) >= {"joules_least", "joules_default", "energy_saving", "energy_over_least"}

    def ctrl_c_at_5(stats, total):
        if stats.intervals == 5:
            raise KeyboardInterrupt

    out = serve(settings, progress=ctrl_c_at_5)
    assert out["intervals"] == 5 and tuple(out["clocks_restored"]) == device.default_clocks()
    assert signal.getsignal(signal.SIGTERM) is before


@pytest.mark.parametrize("settings, message", [
    ({"device_kind": "sim", "registry": "r", "time_model": "m"}, "calibrates its own"),
    ({"device_kind": "sim", "progress_file": "p"}, "--progress is for --device nvml"),
    ({"device_kind": "sim", "knob": "core-clock", "catalog_prior": True}, "--catalog-prior is the clock pairs'"),
    ({"device_kind": "sim", "sim_phase_s": 0.5}, "at least --interval"),
    ({"catalog_prior": True}, "--catalog-prior is for --device sim"),
    ({"registry": "r"}, "go together"),
    ({"registry": "r", "time_model": "m", "knob": "power-limit"}, "models predict clock pairs; leave --registry"),
    ({"registry": "r", "time_model": "m", "knob": "core-clock"}, "--knob core-clock: the models predict clock"),
    ({"knob": "volts"}, "unknown knob"),
    ({"device_kind": "rocm"}, "unknown device"),
])
def test_the_service_refuses_settings_that_do_not_go_together(settings, message):
    from gpudvfs.fleet.govern_service import ServiceSettings

    with pytest.raises(InputError, match=message):
        ServiceSettings(**settings)


def test_govern_run_on_nvml_needs_this_gpus_registry_entry(sim, tmp_path, monkeypatch):
    """Stand-in (no GPU here): `govern run --device nvml` refuses to start without the models
    it needs, or with a registry that does not hold this GPU, and leaves NVML shut down."""
    from click.testing import CliRunner

    from gpudvfs.cli.app import cli
    from gpudvfs.fleet.calibrate import SimFleet, calibrate_gpu
    from gpudvfs.hardware.nvml import gpu as nvml_gpu

    fake = FakeNvml()
    monkeypatch.setattr(nvml_gpu, "import_pynvml", lambda: fake)
    calibrate_gpu(SimFleet(), 0, str(tmp_path / "registry"), 1.0, "per-domain")
    sim[2].save(tmp_path / "time.json")
    run = CliRunner().invoke
    r = run(cli, ["govern", "run", "--device", "nvml", "--registry", str(tmp_path / "registry")])
    assert r.exit_code == 2 and "--time-model" in r.output
    r = run(cli, ["govern", "run", "--device", "nvml", "--registry", str(tmp_path / "registry"),
                  "--time-model", str(tmp_path / "time.json"), "--duration", "1"])
    assert r.exit_code == 2 and "not in the registry" in r.output, r.output
    assert fake.init_count == 0


def test_pairs_the_gpu_cannot_hold_are_left(sim):
    """A simulated power limit below what the compute-bound workload draws at the high clocks,
    under a deadline (whose phase runs the default, highest clocks first, over the limit; an
    energy governor never goes near them): intervals the GPU reports throttled are not
    learnt from, their pairs are left for the phase, and the daemon settles among the pairs
    under the limit (no endless re-trying)."""
    device, table, model = sim
    sgemm = APPS[0]
    watts = [device.true_power_w(sgemm, *pair) for pair in table.configs]
    limited = SimulatedDevice(device.gpu, power_limit_w=float(np.percentile(watts, 60)))
    host = SimulatedHost(limited)
    host.start(phased_process(limited, APPS[:1], 400.0, repeat=1))
    daemon = Daemon(limited, host, ModelPrior(table, model), policy="deadline")
    stats = daemon.run(300.0)
    assert stats.throttled >= 1 and stats.throttled + stats.observed <= stats.governed
    last = daemon.governor.configs[daemon.governor.current]
    assert limited.true_power_w(sgemm, *last) <= limited.power_limit_w
    assert stats.clock_changes < 60
    gov = Governor(table.configs, table.default, policy="deadline")
    gov.phase("a", np.ones(len(table.configs)), np.full(len(table.configs), 100.0))
    gov.exclude(table.default)  # the deadline's reference pair cannot be held: not insisted on
    assert gov.decide() != table.default
    with pytest.raises(InputError, match="index"):
        gov.exclude(len(table.configs))


# -- nothing built by hand: the catalog's prior; dry run ------------------------------------

def test_the_catalog_prior_governs_the_simulated_gpu_near_the_models(sim):
    """No registry, no time model: the clocks the device lists and the catalog power prior's
    shape (`govern run --device sim --catalog-prior`: 1.06% over the least energy at 600 s,
    0.70% at 1200 s, against the models' 0.60 and 0.48%)."""
    from gpudvfs.govern.integrations.devices import SIM_CATALOG_NAME
    from gpudvfs.govern.priors import STEP_PRIOR_SD, CatalogPrior

    device = sim[0]
    prior = CatalogPrior.of(device, SIM_CATALOG_NAME)
    assert isinstance(prior, CatalogPrior) and prior.shape is not None and prior.prior_sd == STEP_PRIOR_SD
    host = SimulatedHost(device, seed=1)
    host.start(phased_process(device, APPS, 60.0, repeat=5))
    daemon = Daemon(device, host, prior)
    assert daemon.governor.prior_sd == STEP_PRIOR_SD
    stats = daemon.run(1200.0)
    truth = host.truth(daemon.governor.configs, daemon.governor.default_index)
    assert stats.joules / truth["joules_least"] - 1 < 0.02
    assert 1 - stats.joules / truth["joules_default"] > 0.08
    assert device.clocks == device.default_clocks()


def test_a_dry_run_sets_nothing_and_learns_at_the_drivers_clocks(sim):
    """The stand-in's process runs at the driver's clocks all along: no clock-setting call,
    every steady interval observed at the default pair, and what the governor would set is
    counted."""
    import os

    from gpudvfs.govern.priors import CatalogPrior

    fake = FakeNvml()
    fake.pids = [os.getpid()]
    _busy(fake)
    device = NvmlDevice(pynvml=fake, leave_clocks=True)
    with pytest.warns(GpudvfsWarning, match="no catalog power prior"):  # the stand-in's name
        prior = CatalogPrior.of(device)
    daemon = Daemon(device, NvmlMonitor(device), prior, interval_s=0.02, dry_run=True)
    stats = daemon.run(0.2)
    assert fake.calls == [] and stats.clock_changes == 0
    assert stats.observed >= 5 and stats.would_change >= 1
    [(name, advice)] = stats.advice.items()
    # Without a progress signal no window has a measured time: the advice's time rests on the prior.
    assert advice["ran_index"] == daemon.governor.default_index and advice["rests_on"] == "prior only"
    var_watts = daemon.governor.estimates()[3]  # without a progress signal the power alone is learnt
    assert var_watts[daemon.governor.default_index] < var_watts.max()


def test_the_power_limit_knob_sets_limits_and_puts_back_the_one_found():
    """The stand-in at its 300 W default draws more than its lower limits allow: the governor
    (energy, power learnt, time the prior's) sets limits below the default, never a clock,
    and the run ends with the limit it found."""
    import os

    from gpudvfs.govern.priors import LIMIT_PRIOR_SD, PowerLimitPrior

    fake = FakeNvml()
    fake.pids = [os.getpid()]
    _busy(fake)
    device = NvmlDevice(pynvml=fake)
    prior = PowerLimitPrior(device)
    assert prior.configs[prior.default_index, 0] == 300.0 and prior.configs[:, 0].min() == 100.0
    daemon = Daemon(device, NvmlMonitor(device), prior, interval_s=0.02)
    assert daemon.governor.prior_sd == LIMIT_PRIOR_SD  # the power-limit prior's own, not the clocks'
    stats = daemon.run(0.3)
    sets = [c for c in fake.calls if c != "nvmlDeviceSetPowerManagementLimit"]
    assert sets == [] and fake.calls.count("nvmlDeviceSetPowerManagementLimit") >= 2
    assert stats.observed >= 5 and fake.power_limits_w[0] == 300.0
    with pytest.raises(InputError, match="no power-limit knob"):
        fake.nvmlDeviceGetPowerManagementLimitConstraints = None
        PowerLimitPrior(NvmlDevice(pynvml=fake))


@pytest.mark.parametrize("knob, limits", [("core-clock", False), ("power-limit", True)])
def test_govern_run_turns_the_simulated_gpus_core_clock_and_power_limit(sim_dir, knob, limits):
    """`govern run --device sim --knob ...`: the knob set (its settings changed), scored against the
    simulator's truth at its own settings, and given back (the power limit found, the driver's clocks)."""
    import json

    from click.testing import CliRunner

    from gpudvfs.cli.app import cli

    r = CliRunner().invoke(cli, ["govern", "run", "--device", "sim", "--knob", knob, "--apply", "--duration", "300",
                                 "--workdir", str(sim_dir), "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    t = out["sim_truth"]
    assert out["knob"] == knob and out["clock_changes"] >= 2 and tuple(out["clocks_restored"]) == (975.0, 3505.0)
    assert t["joules_least"] <= t["joules_default"] and t["energy_over_least"] >= -1e-9
    assert t["energy_saving"] == pytest.approx(1 - out["joules"] / t["joules_default"])
    assert all(("limit_w" in a) == limits and "mem_mhz" not in a for a in out["advice"].values())


