"""The training-step simulator: its steps respond to the clocks and the power limit as a GPU's do."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpudvfs.catalog import lookup
from gpudvfs.errors import InputError
from gpudvfs.hardware import ClockPermissionError, Device
from gpudvfs.hardware.nvml import THROTTLE_REASONS
from gpudvfs.hardware.sim_training import PHASES, SimulatedTraining, StepDevice, StepShape

GPUS = ("h200", "h100-sxm", "a100-sxm4-40gb", "v100-sxm2", "a40", "l40", "t4", "gtx-titan-x")
SIMS = {name: SimulatedTraining(name) for name in GPUS}


def test_a_catalog_gpu_with_its_clocks_limits_and_protocols():
    d = SimulatedTraining("h200")
    spec = lookup("h200")
    assert isinstance(d, Device) and isinstance(d, StepDevice)
    assert d.name == spec.name and d.default_clocks() == spec.default_mhz and d.clocks == spec.default_mhz
    assert set(d.memory_clocks()) == set(spec.mem_mhz)
    assert min(d.core_clocks(3201.0)) == spec.core_mhz["min"] and max(d.core_clocks(3201.0)) == spec.core_mhz["boost"]
    assert d.power_limits() == {"enforced": 700.0, "default": 700.0, "min": 210.0, "max": 700.0}
    # Training at the default clocks draws most of the TDP, below it; a checkpoint near idle.
    train, ckpt = d.true_step("train", *spec.default_mhz), d.true_step("checkpoint", *spec.default_mhz)
    assert 0.5 * 700 < train.busy_watts < 700 and ckpt.watts < 0.3 * 700


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(GPUS), st.sampled_from(sorted(PHASES)), st.data())
def test_time_is_nonincreasing_in_each_clock(name, phase, data):
    d = SIMS[name]
    fm = data.draw(st.sampled_from(d.memory_clocks()))
    cores = d.core_clocks(fm)
    t = [d.true_step(phase, c, fm).time_ms for c in cores]  # highest clock first
    assert all(a <= b * (1 + 1e-12) for a, b in zip(t, t[1:]))
    c = data.draw(st.sampled_from(cores))
    mems = [m for m in d.memory_clocks() if c in d.core_clocks(m)]
    t = [d.true_step(phase, c, m).time_ms for m in mems]
    assert all(a <= b * (1 + 1e-12) for a, b in zip(t, t[1:]))


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(GPUS), st.floats(0.7, 1.0), st.floats(0.4, 1.0), st.floats(0.4, 1.0), st.floats(0.0, 0.6),
       st.floats(1.0, 300.0), st.floats(0.0, 1 / 3), st.floats(0.0, 0.1))
def test_a_compute_heavy_step_has_an_interior_energy_minimum_over_core_clocks(name, sp, l2, shared, dram, compute,
                                                                             mem_share, host_share):
    shape = StepShape(compute, mem_share * compute, host_share * compute,
                      {"SP": sp, "L2": l2, "Shared": shared, "DRAM": dram})
    d = SimulatedTraining(name, phases={"x": shape})
    fm = d.default_clocks()[1]
    cores = d.core_clocks(fm)
    e = [d.true_step("x", c, fm).joules for c in cores]
    assert 0 < int(np.argmin(e)) < len(cores) - 1


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(GPUS), st.sampled_from(sorted(PHASES)), st.floats(0.0, 1.0), st.floats(0.0, 1.0))
def test_a_lower_power_limit_lowers_power_and_raises_time(name, phase, a, b):
    d = SIMS[name]
    lim = d.power_limits()
    low, high = sorted(lim["min"] + x * (lim["max"] - lim["min"]) for x in (a, b))
    fc, fm = d.default_clocks()
    under, over = d.true_step(phase, fc, fm, low), d.true_step(phase, fc, fm, high)
    assert under.busy_watts <= over.busy_watts and under.time_ms >= over.time_ms and under.core_mhz <= over.core_mhz
    # The driver's clock is the highest whose power fits, unless even the lowest does not.
    lowest = min(d.core_clocks(fm))
    assert under.busy_watts <= low or under.core_mhz == lowest


def test_the_driver_lowers_the_clock_under_a_limit_and_says_so():
    d = SimulatedTraining("h200")
    free = d.true_step("train", *d.default_clocks())
    d.set_power_limit(400.0)
    d.begin_step("train")
    t0, e0 = d.now(), d.energy_joules()
    d.end_step()
    capped = d.true_step("train", *d.default_clocks(), 400.0)
    assert capped.core_mhz < 1980.0 and capped.busy_watts <= 400.0 < free.busy_watts
    assert d.clocks == (capped.core_mhz, 3201.0) and d.throttle_reasons() == ("sw_power_cap",)
    assert "sw_power_cap" in {n for _, n in THROTTLE_REASONS}
    assert d.energy_joules() - e0 == pytest.approx(capped.watts * (d.now() - t0), rel=1e-12)
    d.reset_clocks()
    assert d.power_limits()["enforced"] == 700.0 and d.clocks == d.default_clocks() and d.throttle_reasons() == ()


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 2**32 - 1), st.lists(st.sampled_from(sorted(PHASES)), min_size=1, max_size=8))
def test_noise_is_reproducible_by_seed(seed, phases):
    def run(seed: int, core: float) -> list[float]:
        d = SimulatedTraining("h200", seed=seed)
        d.lock_clocks(core, 3201.0)
        out = []
        for p in phases:
            t0 = d.now()
            d.begin_step(p)
            d.end_step()
            out.append((d.now() - t0) * 1e3 / d.true_step(p, core, 3201.0).time_ms)
        return out

    first = run(seed, 1980.0)
    assert first == run(seed, 1980.0) and first == pytest.approx(run(seed, 1005.0), rel=1e-12)  # per step, any clock
    assert first != run(seed + 1, 1980.0)
    assert all(0.8 < f < 1.25 for f in first)


def test_bad_input_is_one_line():
    d = SimulatedTraining("h200")
    for watts in (100.0, 800.0, float("nan")):
        with pytest.raises(InputError, match=r"power limit .* outside the 210-700 W") as e:
            d.set_power_limit(watts)
        assert "\n" not in str(e.value)
    with pytest.raises(InputError, match="no phase 'warmup'.*it runs \\['checkpoint', 'eval', 'train'\\]") as e:
        d.begin_step("warmup")
    assert "\n" not in str(e.value)
    with pytest.raises(InputError, match="end_step without begin_step"):
        SimulatedTraining("h200").end_step()
    d.begin_step("train")
    d.end_step()
    with pytest.raises(InputError, match="end_step without begin_step"):
        d.end_step()
    with pytest.raises(InputError, match=r"phase 'x': no power component \['Tensor'\]"):
        SimulatedTraining("h200", phases={"x": StepShape(1.0, 0.0, 0.0, {"Tensor": 0.5})})
    with pytest.raises(InputError, match="no-such-gpu"):
        SimulatedTraining("no-such-gpu")
    with pytest.raises(InputError, match="time_sigma"):
        SimulatedTraining("h200", time_sigma=-0.1)
    with pytest.raises(InputError, match="compute_ms"):
        StepShape(0.0, 0.0, 5.0, {})
    with pytest.raises(InputError, match="utilizations"):
        StepShape(1.0, 0.0, 0.0, {"SP": 1.5})
    with pytest.raises(ClockPermissionError, match="root"):
        SimulatedTraining("h200", permission=False).set_power_limit(500.0)
