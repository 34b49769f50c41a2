"""The privileged clock service (against the NVML stand-in `fake_pynvml`: no GPU here) with
clients in other processes, one SIGKILLed mid-run; and the governor embedded in a loop on
the simulated GPU."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

from gpudvfs.errors import InputError
from gpudvfs.govern import Governor
from gpudvfs.govern.clockd import ClockClient, ClockService
from gpudvfs.govern.loop import GovernedLoop
from gpudvfs.hardware.apps import APPS
from gpudvfs.hardware.nvml import NvmlDevice
from gpudvfs.hardware.simulated import SimulatedDevice

from fake_pynvml import FakeNvml

GPUDVFS = [sys.executable, "-c", "import sys; from gpudvfs.cli import main; main(sys.argv[1:])"]
CLIENT = """
import sys, time
from gpudvfs.govern.clockd import ClockClient
c = ClockClient(sys.argv[1])
c.set(float(sys.argv[2]), float(sys.argv[3]))
print("set", flush=True)
time.sleep(120)
"""


@pytest.fixture
def service(tmp_path):
    fake = FakeNvml()
    device = NvmlDevice(pynvml=fake)
    svc = ClockService(device, tmp_path / "gpu0.sock").start()
    yield svc, fake
    svc.stop()


def _wait(check, timeout_s: float = 10.0) -> bool:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if check():
            return True
        time.sleep(0.02)
    return False


def test_a_client_killed_mid_run_leaves_no_clocks_locked(service):
    svc, fake = service
    core, mem = sorted(svc.device.core_clocks(svc.device.memory_clocks()[-1]))[0], svc.device.memory_clocks()[-1]
    proc = subprocess.Popen([sys.executable, "-c", CLIENT, str(svc.path), str(core), str(mem)], stdout=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout.readline().strip() == "set"
        assert fake.locked_gpu is not None and fake.locked_gpu[1] == core
        with ClockClient(svc.path) as other:  # another governor may look, not set
            assert other.clocks() == (core, mem)
            with pytest.raises(InputError, match="another client owns"):
                other.set(*svc.device.default_clocks())
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        assert _wait(lambda: fake.locked_gpu is None and fake.locked_mem is None), "clocks still locked"
        with ClockClient(svc.path) as c:  # the GPU is free again
            c.set(core, mem)
            c.reset()
    finally:
        proc.kill()


def test_bad_requests_are_answered_not_obeyed(service, tmp_path):
    svc, fake = service
    with ClockClient(svc.path) as c:
        pairs = c.pairs()
        assert len(pairs) > 1 and all(len(p) == 2 for p in pairs)
        with pytest.raises(InputError, match="not a supported pair"):
            c.set(1.0, 2.0)
        with pytest.raises(InputError, match="numbers"):
            c._call(op="set", core_mhz="fast")
        with pytest.raises(InputError, match="unknown op"):
            c._call(op="reboot")
    raw = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    raw.connect(str(svc.path))
    f = raw.makefile("rwb")
    for line in (b"not json\n", b"[1, 2]\n", b"\xff\xfe\n"):
        f.write(line)
        f.flush()
        assert json.loads(f.readline())["ok"] is False
    raw.close()
    assert fake.locked_gpu is None
    with pytest.raises(InputError, match="cannot reach"):
        ClockClient(tmp_path / "absent.sock")
    (tmp_path / "file").write_text("x")
    with pytest.raises(InputError, match="not a socket"):
        ClockService(svc.device, tmp_path / "file").start()


def test_stopping_the_service_resets_the_clocks(tmp_path):
    fake = FakeNvml()
    svc = ClockService(NvmlDevice(pynvml=fake), tmp_path / "s.sock").start()
    c = ClockClient(svc.path)
    m = svc.device.memory_clocks()[0]
    c.set(svc.device.core_clocks(m)[-1], m)
    assert fake.locked_gpu is not None
    svc.stop()
    assert fake.locked_gpu is None and not (tmp_path / "s.sock").exists()
    c.close()


def test_the_governor_in_a_loop_on_the_simulated_gpu():
    """150 steps of one workload: the prediction is off by a tilt in the core clock; the loop
    ends at a pair whose true energy is within 1% of the least, having spent within 3%."""
    dev = SimulatedDevice(seed=3)
    w = APPS[2]
    configs = np.array([(c, m) for m in dev.memory_clocks() for c in dev.core_clocks(m)])
    true_t = np.array([dev.true_time_ms(w, c, m) for c, m in configs])
    true_p = np.array([dev.true_power_w(w, c, m) for c, m in configs])
    default = int(np.flatnonzero((configs == dev.default_clocks()).all(axis=1))[0])
    tilt = (configs[:, 0] / configs[default, 0]) ** 0.15
    loop = GovernedLoop(Governor(configs, default), dev.lock_clocks, dev.energy_joules)
    loop.phase(w.name, true_t * tilt, true_p / tilt)
    spent = 0.0
    for _ in range(150):
        m = dev.measure(w, min_seconds=0.5)
        spent += m.time_ms * m.watts
        loop.step_end(time_ms=m.time_ms, watts=m.watts)
    e = true_t * true_p
    k = loop.governor.current
    assert e[k] <= 1.01 * e.min()
    assert spent / (150 * e.min()) < 1.03
    assert dev.clocks == tuple(configs[k])


def test_the_loop_measures_what_it_is_not_given():
    clock = iter([0.0, 0.5, 0.5, 1.5, 1.5]).__next__
    energy = iter([0.0, 50.0, 50.0, 150.0, 150.0]).__next__
    configs = np.array([[500.0, 700.0], [1000.0, 700.0]])
    calls = []
    loop = GovernedLoop(Governor(configs, 1), lambda c, m: calls.append((c, m)), energy, clock)
    with pytest.raises(InputError, match="phase"):
        loop.step_end()
    loop.phase("w", [2.0, 1.0], [50.0, 100.0])
    k = loop.governor.current
    loop.step_end()  # 0.5 s, 50 J: 500 ms per unit at 100 W, observed at the pair it ran at
    assert loop.governor.estimates()[0][k] == pytest.approx(np.log(500.0))
    assert loop.governor.estimates()[1][k] == pytest.approx(np.log(100.0))
    loop.step_end(work=2.0)  # 1 s for 2 units
    assert calls and all(c in [tuple(x) for x in configs] for c in calls)
    with pytest.raises(InputError, match="work"):
        loop.step_end(work=0)
    no_counter = GovernedLoop(Governor(configs, 1), lambda c, m: None)
    no_counter.phase("w", [2.0, 1.0], [50.0, 100.0])
    with pytest.raises(InputError, match="energy counter"):
        no_counter.step_end(time_ms=1.0)


def test_clockd_and_reset_commands(tmp_path):
    sock = tmp_path / "gpu0.sock"
    daemon = subprocess.Popen([*GPUDVFS, "govern", "clockd", "--device", "sim", "--socket", str(sock)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert _wait(sock.exists), daemon.stderr.read() if daemon.poll() is not None else "no socket"
        assert oct(sock.stat().st_mode & 0o777) == "0o660"
        with ClockClient(sock) as c:
            assert c.clocks() is None
            c.set(785.0, 3505.0)
            assert c.clocks() == (785.0, 3505.0)
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(10) == 0
        assert not sock.exists()
    finally:
        daemon.kill()
    r = subprocess.run([*GPUDVFS, "govern", "reset", "--device", "sim"], capture_output=True, text=True)
    assert r.returncode == 0 and "reset" in r.stdout


def test_the_power_limit_through_the_service_comes_back_when_its_owner_leaves(service):
    svc, fake = service
    with ClockClient(svc.path) as c:
        assert c.power_limits()["max"] == 350.0
        c.set_power_limit(200.0)
        assert fake.power_limits_w[0] == 200.0
        with ClockClient(svc.path) as other, pytest.raises(InputError, match="another client owns"):
            other.set_power_limit(250.0)
        with pytest.raises(InputError, match="outside the 100-350 W"):
            c.set_power_limit(500.0)
        with pytest.raises(InputError, match="needs a number"):
            c._call(op="power_limit", watts="high")
    assert _wait(lambda: fake.power_limits_w[0] == 300.0)  # the owner's connection closed


def test_a_device_without_the_knob_is_refused(tmp_path):
    fake = FakeNvml()
    fake.nvmlDeviceGetPowerManagementLimitConstraints = None  # a board that reports no range
    svc = ClockService(NvmlDevice(pynvml=fake), tmp_path / "nvml.sock").start()
    try:
        with ClockClient(svc.path) as c, pytest.raises(InputError, match="no power-limit knob"):
            c.set_power_limit(100.0)
    finally:
        svc.stop()
