"""The simulated GPU: physically plausible, deterministic per (seed, workload, clocks),
and honest about its protocol (clock lists, permission errors, power sources)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpudvfs.hardware import ClockPermissionError, Device, SimulatedDevice, Workload

WL = Workload("w", counters={"util:SP": 0.6, "util:DRAM": 0.4, "compute_ms": 2.0, "memory_ms": 1.0})


def test_satisfies_the_protocol():
    assert isinstance(SimulatedDevice(), Device)


def test_clock_lists_and_defaults():
    d = SimulatedDevice()
    mems = d.memory_clocks()
    assert mems == sorted(mems, reverse=True) and d.default_clocks() == (975.0, 3505.0)
    for m in mems:
        cores = d.core_clocks(m)
        assert cores == sorted(cores, reverse=True)
    assert max(d.core_clocks(810.0)) < max(d.core_clocks(3505.0))
    with pytest.raises(ValueError, match="unsupported memory clock"):
        d.core_clocks(1234.0)
    with pytest.raises(ValueError, match="unsupported core clock"):
        d.lock_clocks(1164.0, 810.0)


def test_permission_error_says_what_is_needed():
    d = SimulatedDevice(permission=False)
    with pytest.raises(ClockPermissionError, match="root"):
        d.lock_clocks(975.0, 3505.0)


def test_measurements_are_reproducible_per_seed():
    a, b, c = SimulatedDevice(seed=1), SimulatedDevice(seed=1), SimulatedDevice(seed=2)
    assert a.measure(WL) == b.measure(WL)
    assert a.measure(WL).watts != c.measure(WL).watts


def test_measurement_spans_min_seconds_or_count():
    d = SimulatedDevice()
    m = d.measure(WL, min_seconds=1.0)
    assert m.duration_s >= 1.0 and m.repetitions * m.time_ms / 1e3 == pytest.approx(m.duration_s, rel=0.02)
    assert d.measure(WL, repetitions=3).repetitions == 3
    assert SimulatedDevice(energy_counter=False).measure(WL).power_source == "sampled"
    assert d.energy_joules() > 0 and SimulatedDevice(energy_counter=False).energy_joules() is None


def test_power_cap_flags_throttling():
    m = SimulatedDevice(power_limit_w=50.0).measure(WL)
    assert m.throttled and m.throttle_reasons == ("sw_power_cap",)


@settings(max_examples=60, deadline=None)
@given(u=st.lists(st.floats(0, 1), min_size=7, max_size=7), c=st.floats(0.01, 10), m=st.floats(0.01, 10))
def test_time_and_power_fall_with_clocks(u, c, m):
    """Lower clocks never make a workload faster, nor draw more power."""
    d = SimulatedDevice()
    gpu = d.gpu
    for fm in d.memory_clocks():
        cores = d.core_clocks(fm)
        t = [gpu.time_ms(c, m, fc, fm) for fc in cores]
        p = [gpu.power(np.array(u), fc, fm) for fc in cores]
        assert all(x <= y for x, y in zip(t, t[1:]))
        assert all(x >= y for x, y in zip(p, p[1:]))
        assert min(p) > 0


def test_voltage_curve_is_flat_then_linear():
    gpu = SimulatedDevice().gpu
    assert gpu.core_volts(595.0) == gpu.core_volts(700.0) == pytest.approx(gpu.v_low)
    assert gpu.core_volts(975.0) == pytest.approx(1.0)
    v = gpu.core_volts(np.array([800.0, 900.0, 1000.0]))
    assert np.allclose(np.diff(v), np.diff(v)[0])


@pytest.mark.parametrize("counters,match", [
    ({"util:SP": 1.5, "compute_ms": 1}, r"\[0, 1\]"),
    ({"util:XX": 0.5, "compute_ms": 1}, "unknown simulated counters"),
    ({"util:SP": 0.5}, "not both 0"),
])
def test_bad_workload_counters(counters, match):
    with pytest.raises(ValueError, match=match):
        SimulatedDevice().measure(Workload("bad", counters=counters))


@settings(max_examples=40, deadline=None)
@given(name=st.sampled_from(["gtx-titan-x", "v100-sxm2-16gb", "a100-sxm4-40gb", "h100-sxm", "l4"]),
       u=st.lists(st.floats(0, 1), min_size=7, max_size=7), c=st.floats(0.01, 10), m=st.floats(0.01, 10),
       limits=st.lists(st.floats(150.0, 275.0), min_size=2, max_size=5))
def test_under_a_lower_power_limit_a_workload_runs_slower_and_draws_less(name, u, c, m, limits):
    """On catalog GPUs (`catalog_gpu`: the simulator's physics at their clocks and TDP), as the limit falls
    the driver lowers the core clock: time never falls, power never rises, and the power stays under the
    limit unless the lowest core clock draws more; the cap is reported exactly while it holds."""
    from gpudvfs.hardware.sim_training import catalog_gpu

    dev = SimulatedDevice(catalog_gpu(name))
    counters = {f"util:{k}": x for k, x in zip(dev.gpu.components, u)} | {"compute_ms": c, "memory_ms": m}
    w = Workload("w", counters=counters)
    lowest = min(dev.core_clocks(dev.clocks[1]))
    times, watts = [], []
    for limit in sorted(limits, reverse=True):
        dev.set_power_limit(limit)
        e0 = dev.energy_joules()
        dev.run(w, 1.0)
        core, mem = dev.clocks
        times.append(dev.true_time_ms(w, core, mem))
        watts.append(dev.energy_joules() - e0)
        assert watts[-1] <= limit * (1 + 1e-9) or core == lowest
        assert bool(dev.throttle_reasons()) == (core < dev.default_clocks()[0] or watts[-1] > limit)
    assert all(np.diff(times) >= 0) and all(np.diff(watts) <= 1e-9)
    dev.reset_clocks()
    assert dev.clocks == dev.default_clocks() and dev.power_limit_w is None
