"""The knobs (clock pair, core clock, power limit), the whole `Device` protocol, and the power limit
in `GovernedTraining`: on the simulated GPU and on NVML's stand-in (`fake_pynvml`, not a GPU)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpudvfs.errors import InputError
from gpudvfs.govern import Governor
from gpudvfs.govern.clockd import ClockService
from gpudvfs.govern.integrations import GovernedTraining
from gpudvfs.govern.integrations.callback import SessionCallback
from gpudvfs.govern.integrations.settings import Governed
from gpudvfs.govern.knob import FIXED, ClockPair, CoreClock, PowerLimit, knob_rows, make_knob
from gpudvfs.govern.priors import LIMIT_PRIOR_SD, STEP_PRIOR_SD
from gpudvfs.hardware.device import Device, missing_members
from gpudvfs.hardware.nvml import NvmlDevice
from gpudvfs.hardware.simulated import SimulatedDevice

from fake_pynvml import FakeNvml
from stand_in_device import StandIn


class Ticks:
    """The meter's clock, moved by the test."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_the_simulator_and_nvml_stand_in_implement_the_whole_protocol():
    for device in (SimulatedDevice(), NvmlDevice(pynvml=FakeNvml()), StandIn()):
        assert missing_members(device) == [] and isinstance(device, Device)
    assert {"clocks", "power_limits", "set_power_limit", "close"} <= set(missing_members(object()))


def test_the_power_limit_knob_sets_and_restores_exactly_on_nvml():
    """The stand-in enforces 280 W of a 300 W default when the knob is made: restore puts back 280, not the
    default."""
    fake = FakeNvml()
    fake.power_limits_w = (280.0, 100.0, 350.0)
    knob = make_knob("power-limit", NvmlDevice(pynvml=fake))
    assert (knob.name, knob.unit, knob.original, knob.min_w, knob.max_w) == ("power-limit", "W", 280.0, 100.0, 350.0)
    knob.set(150.0)
    assert fake.power_limits_w[0] == 150.0 and knob.read() == 150.0 and knob.row() == (150.0, FIXED)
    with pytest.raises(InputError, match="outside the 100-350 W"):
        knob.set(351.0)
    knob.restore()
    assert fake.power_limits_w[0] == 280.0
    rows, k = knob.settings()
    assert rows[k, 0] == 300.0 and rows[:, 0].min() == 100.0 and rows[:, 0].max() == 350.0
    assert np.all(rows[:, 1] == FIXED)


def test_a_device_that_reports_no_limits_has_no_power_limit_knob():
    fake = FakeNvml()
    fake.nvmlDeviceGetPowerManagementLimitConstraints = None
    for device in (NvmlDevice(pynvml=fake), StandIn()):
        with pytest.raises(InputError, match="no power-limit knob here; use knob='clocks'"):
            PowerLimit(device)


def test_the_clock_knobs_lock_and_give_the_clocks_back():
    dev = SimulatedDevice()
    pair = ClockPair(dev)
    pair.set((785.0, 3505.0))
    assert dev.clocks == (785.0, 3505.0) and pair.row() == (785.0, 3505.0)
    with pytest.raises(InputError, match="not a pair"):
        pair.set((786.0, 3505.0))
    pair.restore()
    assert dev.clocks == dev.default_clocks()
    core = CoreClock(dev)
    core.set_row(633.0, FIXED)
    assert dev.clocks == (633.0, 3505.0) and core.read() == 633.0  # the memory clock held at its default
    with pytest.raises(InputError, match="not a core clock"):
        core.set(2000.0)
    rows, k = core.settings(4)
    assert rows[k, 0] == 975.0 and len(rows) <= 5
    core.restore()
    assert dev.clocks == dev.default_clocks()


@settings(max_examples=40, deadline=None)
@given(st.floats(allow_nan=True, allow_infinity=True, width=32))
def test_a_power_limit_is_taken_within_the_range_and_refused_outside(watts):
    """Any value: within the board's range it is set and read back; outside it (or not finite) it is refused
    and the limit is unchanged; restore always puts back the original."""
    dev = SimulatedDevice()
    knob = PowerLimit(dev)
    low, high = knob.min_w, knob.max_w
    if np.isfinite(watts) and low <= watts <= high:
        knob.set(watts)
        assert knob.read() == float(watts)
    else:
        with pytest.raises(InputError, match="outside"):
            knob.set(watts)
        assert knob.read() == knob.original
    knob.restore()
    assert dev.power_limits()["enforced"] == knob.original == 250.0


def test_knob_rows_check_each_unit():
    assert knob_rows([100, 250], "power-limit").tolist() == [[100.0, 1.0], [250.0, 1.0]]
    assert knob_rows([[100, 1], [250, 1]], "power-limit").tolist() == [[100.0, 1.0], [250.0, 1.0]]
    with pytest.raises(InputError, match=r"power in \(0, 10000\] W"):
        knob_rows([0.0, 250.0], "power-limit")
    with pytest.raises(InputError, match=r"rows are \(value, 1\)"):
        knob_rows([[100, 2], [250, 1]], "power-limit")
    with pytest.raises(InputError, match="MHz"):
        knob_rows([[1e6, 800.0]], "clocks")
    with pytest.raises(InputError, match="knob must be one of"):
        knob_rows([1.0], "power_limit")
    with pytest.raises(InputError, match="W"):
        Governor([[20000.0, 1.0]], 0, knob="power-limit")  # 20 kW: no board's limit, though a clock's MHz
    assert Governor([[20000.0, 800.0]], 0).knob == "clocks"


def _run(gov: GovernedTraining, steps: int, seen: list[float]) -> dict:
    for _ in range(steps):
        with gov.step():
            pass
        seen.append(gov.device.power_limits()["enforced"])
    return gov.close()


def test_training_governs_the_power_limit_and_puts_the_original_back():
    """The simulated H200 (its limit 210-700 W, 700 W by default) trains: the governor sets limits of its
    own while it runs, and closing puts the 700 W back."""
    gov = GovernedTraining(device="sim", knob="power-limit", dry_run=False, observe_s=0.0, distributed=None)
    dev = gov.device
    seen: list[float] = []
    s = _run(gov, 40, seen)
    limits = gov.governor.configs[:, 0]
    assert s["knob"] == "power-limit" and not s["dry_run"] and s["clocks_set"]
    assert s["grid"]["default_w"] == 700.0 and s["grid"]["limits_w"] == limits.tolist() and limits.min() == 210.0
    assert set(seen) - {700.0} and set(seen) <= set(limits)  # limits of its own set while training
    assert dev.power_limits()["enforced"] == 700.0 and dev.clocks == dev.default_clocks()
    d = gov.decisions[-1]
    assert "would_limit_w" in d and not any(k.endswith("mem_mhz") for k in d)
    assert s["phases"]["train"]["would_set"]["limit_w"] in limits


@pytest.mark.parametrize("knob, sd", [("clocks", STEP_PRIOR_SD), ("core-clock", STEP_PRIOR_SD),
                                      ("power-limit", LIMIT_PRIOR_SD)])
def test_each_knob_s_governor_starts_from_its_prior_s_sd_unless_told(knob, sd):
    assert LIMIT_PRIOR_SD != STEP_PRIOR_SD  # else this test could not tell them apart
    gov = GovernedTraining(device="sim", knob=knob, distributed=None, quiet=True)
    assert isinstance(gov.settings, Governed) and gov.settings.prior_sd == sd
    assert gov.governor is not None and gov.governor.prior_sd == sd
    gov.close()
    gov = GovernedTraining(device="sim", knob=knob, prior_sd=0.5, distributed=None, quiet=True)
    assert gov.governor is not None and gov.governor.prior_sd == 0.5
    gov.close()


def test_training_in_dry_run_leaves_the_power_limit_alone():
    gov = GovernedTraining(device="sim", knob="power-limit", observe_s=0.0, distributed=None)
    seen: list[float] = []
    s = _run(gov, 30, seen)
    assert set(seen) == {700.0} and s["dry_run"] and not s["clocks_set"] and s["decisions"] > 0
    assert all(d["actual_limit_w"] == 700.0 for d in gov.decisions)


def test_training_sets_the_power_limit_through_the_clock_service(tmp_path):
    dev = SimulatedDevice()
    svc = ClockService(dev, tmp_path / "clockd.sock").start()
    try:
        gov = GovernedTraining(dev, knob="power-limit", dry_run=False, clock_service=svc.path, observe_s=0.0,
                               sync=None, distributed=None)
        gov.meter.clock = clock = Ticks()
        seen: list[float] = []
        for _ in range(30):
            with gov.step():
                clock.t += 0.05
            seen.append(dev.power_limits()["enforced"])
        s = gov.close()
        assert s["clocks_set"] and set(seen) - {250.0}
        assert dev.power_limits()["enforced"] == 250.0  # the service put it back as it found it
    finally:
        svc.stop()


def test_a_knob_the_device_cannot_turn_and_bad_knobs_are_refused():
    with pytest.raises(InputError, match="no power-limit knob here"):
        GovernedTraining(StandIn(), knob="power-limit")
    with pytest.raises(InputError, match="knob must be one of"):
        GovernedTraining("sim", knob="power_limit")
    with pytest.raises(InputError, match="knob must be one of"):
        SessionCallback("sim", knob="core_clock")

    half = type("Half", (), {"name": "half", "clocks": (1.0, 1.0), "energy_joules": lambda self: 0.0})()
    with pytest.raises(InputError, match=r"lacks check, close, core_clocks, .* of the Device protocol"):
        GovernedTraining(half)


def test_the_callbacks_take_the_knob():
    cb = SessionCallback("sim", knob="power-limit", observe_s=0.0, distributed=None)
    assert cb.session.governor is not None and cb.session.governor.prior_sd == LIMIT_PRIOR_SD
    assert cb.session.knob_name == "power-limit" and cb.session.close()["knob"] == "power-limit"
