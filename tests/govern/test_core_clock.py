"""The core clock alone as the governed knob (``nvidia-smi -lgc``, the memory clock left to the driver): its
values, set and restore on the simulators and on NVML's stand-in (`fake_pynvml`, not a GPU), the clock
service, `GovernedTraining`, the callbacks and the daemon."""

from __future__ import annotations

import os

import numpy as np
import pytest
from test_govern_services import _wait

from gpudvfs.errors import InputError
from gpudvfs.govern.clockd import ClockClient, ClockService
from gpudvfs.govern.daemon import Daemon, NvmlMonitor
from gpudvfs.govern.integrations import GovernedTraining
from gpudvfs.govern.integrations.callback import SessionCallback
from gpudvfs.govern.knob import FIXED, CoreClock, make_knob
from gpudvfs.govern.priors import CoreClockPrior
from gpudvfs.hardware.device import ClockPermissionError
from gpudvfs.hardware.nvml import ClockControlError, NvmlDevice
from gpudvfs.hardware.sim_training import SimulatedTraining
from gpudvfs.hardware.simulated import SimulatedDevice

from fake_pynvml import FakeNvml
from stand_in_device import StandIn


def test_the_core_clock_knob_locks_the_core_clock_alone_at_the_memory_clock_the_gpu_runs():
    dev = SimulatedDevice()
    dev.lock_clocks(975.0, 3300.0)  # the memory clock where the driver (here: a test) left it
    knob = make_knob("core-clock", dev)
    assert (knob.name, knob.unit, knob.mem_mhz, knob.original) == ("core-clock", "MHz", 3300.0, 975.0)
    knob.set_row(633.0, FIXED)
    assert dev.clocks == (633.0, 3300.0) and knob.row() == (633.0, FIXED)
    rows, k = knob.settings(4)
    assert rows[k, 0] == 975.0 and set(rows[:, 0]) <= set(dev.core_clocks(3300.0)) and np.all(rows[:, 1] == FIXED)
    assert {1164.0, 595.0} <= set(rows[:, 0]) and len(rows) <= 5  # thinned as the pairs are, ends kept
    knob.restore()
    assert dev.clocks == dev.default_clocks()


def test_a_core_clock_the_device_does_not_list_and_a_fixed_core_clock_are_refused():
    knob = CoreClock(SimulatedDevice())
    for bad in (976.0, 2000.0, (975.0, 3505.0)):
        with pytest.raises(InputError, match="not a core clock gpudvfs simulated GPU supports at memory 3505"):
            knob.set(bad)
    with pytest.raises(InputError, match=r"lists 1 core clock\(s\) \[1000.0\] at memory 800 MHz: it has no core "
                                         r"clock to turn; use knob='power-limit'"):
        CoreClock(StandIn())
    with pytest.raises(InputError, match="no core clock to turn"):
        GovernedTraining(StandIn(), knob="core-clock")


def test_on_nvml_the_core_clock_is_locked_alone_and_reset():
    """Stand-in: the core clock is locked (SetGpuLockedClocks) and the memory clock never touched; restore
    resets the locked core clock."""
    fake = FakeNvml()
    dev = NvmlDevice(pynvml=fake)
    knob = CoreClock(dev)
    assert knob.mem_mhz == 877.0
    knob.set(1305.0)
    assert fake.locked_gpu == (1305, 1305) and fake.locked_mem is None and fake.app_clocks is None
    assert fake.calls == ["nvmlDeviceSetGpuLockedClocks"] and knob.read() == 1305.0
    knob.restore()
    assert fake.locked_gpu is None and fake.calls[-1] == "nvmlDeviceResetGpuLockedClocks"
    with pytest.raises(InputError, match="core_mhz: 1306"):
        dev.lock_core_clock(1306.0)
    with pytest.raises(ClockPermissionError, match="-lgc 1305,1305"):
        NvmlDevice(pynvml=FakeNvml(root=False)).lock_core_clock(1305.0)
    with pytest.raises(ClockControlError, match="cannot lock its core clock alone"):
        NvmlDevice(pynvml=FakeNvml(locked_gpu=False)).lock_core_clock(1305.0)


def test_the_clock_service_locks_the_core_clock_alone_and_resets_it_when_its_owner_leaves(tmp_path):
    dev = SimulatedDevice()
    dev.lock_clocks(975.0, 3300.0)
    svc = ClockService(dev, tmp_path / "gpu0.sock").start()
    try:
        with ClockClient(svc.path) as c:
            CoreClock(dev, via=c).set(785.0)
            assert dev.clocks == (785.0, 3300.0) and c.clocks() == (785.0, None)
            with ClockClient(svc.path) as other, pytest.raises(InputError, match="another client owns"):
                other.set_core(633.0)
            with pytest.raises(InputError, match="not a supported core clock"):
                c.set_core(786.0)
            with pytest.raises(InputError, match="needs a number core_mhz"):
                c._call(op="set_core", core_mhz="fast")
        assert _wait(lambda: svc._owner is None)  # the service resets as the connection closes
        assert dev.clocks == dev.default_clocks()
    finally:
        svc.stop()


def _train(gov: GovernedTraining, steps: int) -> tuple[dict, set]:
    seen = set()
    for _ in range(steps):
        with gov.step():
            pass
        seen.add(gov.device.clocks)
    return gov.close(), seen


def test_training_governs_the_core_clock_and_gives_it_back():
    """The simulated H200 trains with the core clock governed: core clocks of its own set, the memory
    clock never moved, the driver's clocks back at close; decisions and advice in MHz of the core clock."""
    gov = GovernedTraining("sim", knob="core-clock", dry_run=False, observe_s=0.0, distributed=None, quiet=True)
    dev = gov.device
    s, seen = _train(gov, 60)
    cores = gov.governor.configs[:, 0]
    assert s["knob"] == "core-clock" and s["clocks_set"] and not s["dry_run"]
    assert s["grid"]["mem_mhz"] == 3201.0 and s["grid"]["core_mhz"] == cores.tolist()
    assert s["grid"]["default_core_mhz"] == 1980.0 and len(cores) == 40
    assert {m for _, m in seen} == {3201.0} and len({c for c, _ in seen}) > 3 and {c for c, _ in seen} <= set(cores)
    assert dev.clocks == dev.default_clocks()
    d = gov.decisions[-1]
    assert "would_core_mhz" in d and not any(k.endswith("mem_mhz") for k in d)
    assert set(s["phases"]["train"]["would_set"]) == {"core_mhz", "predicted_saving", "explored"}
    assert s["advice"]["train"]["knob"] == "core-clock" and "mem_mhz" not in s["advice"]["train"]


def test_a_dry_run_observes_at_the_core_clock_the_driver_runs():
    gov = GovernedTraining("sim", knob="core-clock", observe_s=0.0, distributed=None, quiet=True)
    s, seen = _train(gov, 30)
    assert seen == {(1980.0, 3201.0)} and s["dry_run"] and not s["clocks_set"] and s["decisions"] > 0
    assert all(d["actual_core_mhz"] == 1980.0 and not d["explored"] for d in gov.decisions)
    a = s["advice"]["train"]
    assert a["ran_core_mhz"] == 1980.0 and a["core_mhz"] < 1980.0 and a["rests_on"] == "29 windows at 1 setting"


def test_a_saving_is_realised_on_the_training_simulator():
    """Governed (dry_run=False) against the same steps at the driver's clocks, same seed: 300 steps in 0.5 s
    windows save 2.0% (seeds 0-2: 1.92, 2.03, 1.97%); no run beats the best core clock's 2.89% (1560 MHz)."""
    energy = {}
    for dry in (True, False):
        dev = SimulatedTraining("h200", seed=0)
        _train(GovernedTraining(dev, knob="core-clock", dry_run=dry, distributed=None, quiet=True, sync=None), 300)
        energy[dry] = dev.energy_joules()
    assert 0.005 < 1 - energy[False] / energy[True] < 0.029


def test_training_sets_the_core_clock_through_the_clock_service(tmp_path):
    dev = SimulatedTraining("h200")
    svc = ClockService(dev, tmp_path / "clockd.sock").start()
    try:
        gov = GovernedTraining(dev, knob="core-clock", dry_run=False, clock_service=svc.path, observe_s=0.0,
                               distributed=None, quiet=True)
        s, seen = _train(gov, 30)
        assert s["clocks_set"] and {c for c, _ in seen} - {1980.0} and {m for _, m in seen} == {3201.0}
        assert dev.clocks == dev.default_clocks()
    finally:
        svc.stop()


def test_the_callbacks_take_the_core_clock():
    cb = SessionCallback("sim", knob="core-clock", observe_s=0.0, distributed=None, quiet=True)
    assert cb.session.knob_name == "core-clock" and cb.session.close()["knob"] == "core-clock"


def test_the_daemon_governs_the_core_clock_on_nvml_and_resets_it():
    """Stand-in: a busy process; the daemon locks core clocks alone (never the memory clock) and the run
    ends with the core clock given back to the driver."""
    fake = FakeNvml()
    fake.pids = [os.getpid()]
    with fake._lock:
        fake.busy = True
        fake._changed()
    device = NvmlDevice(pynvml=fake)
    with pytest.warns(match="no catalog power prior"):  # the stand-in's name
        prior = CoreClockPrior(device)
    assert prior.knob == "core-clock" and set(prior.pairs[:, 1]) == {877.0}
    assert prior.configs[prior.default_index, 0] == 1320.0  # of the 40 kept, the nearest the 1312 MHz default
    stats = Daemon(device, NvmlMonitor(device), prior, interval_s=0.02).run(0.3)
    assert set(fake.calls) == {"nvmlDeviceSetGpuLockedClocks", "nvmlDeviceResetGpuLockedClocks"}
    assert stats.observed >= 5 and stats.clock_changes >= 1 and fake.locked_gpu is None
