"""`CounterTrace` and `CounterPoller`: an energy counter that advances once per update period
(an H200's every 0.1 s) read between its updates."""

from __future__ import annotations

import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpudvfs.errors import GpudvfsError
from gpudvfs.hardware.energy_counter import CounterPoller, CounterTrace
from gpudvfs.hardware.nvml import NvmlDevice

from fake_pynvml import FakeNvml


@given(watts=st.floats(1, 1000), period=st.floats(0.01, 0.5), a=st.floats(0, 1), b=st.floats(0, 1))
def test_a_steady_power_is_read_exactly_between_any_two_instants(watts, period, a, b):
    trace = CounterTrace()
    for k in range(12):  # polled just after each update
        trace.add(k * period + 1e-4, watts * k * period)
    t0, t1 = sorted((1.01 * period + a * 9 * period, 1.01 * period + b * 9 * period))
    assert trace.energy(t0, t1) == pytest.approx(watts * (t1 - t0), rel=1e-6, abs=1e-6)


def test_outside_the_updates_seen_nothing_is_known_and_a_counter_going_back_is_refused():
    trace = CounterTrace()
    trace.add(0.0, 5.0)  # the first poll: when 5.0 came is unknown
    trace.add(0.05, 5.0)
    trace.add(0.1, 6.0)
    assert trace.energy(0.0, 0.1) is None and not trace.covers(0.2) and trace.covers(0.1)
    trace.add(0.2, 7.0)
    assert trace.energy(0.1, 0.2) == pytest.approx(1.0) and trace.energy(0.15, 0.25) is None
    with pytest.raises(GpudvfsError, match="backwards"):
        trace.add(0.3, 6.5)


def test_a_poller_on_a_stand_in_counter_of_an_h200s_period():
    """Stand-in: tests/fake_pynvml.py (no GPU), its counter advancing every 0.1 s."""
    fake = FakeNvml(energy_period_s=0.1)
    with NvmlDevice(pynvml=fake, leave_clocks=True) as dev, CounterPoller(dev.energy_joules) as poller:
        t0 = time.perf_counter() + 0.15
        time.sleep(0.5)
        t1 = time.perf_counter() - 0.1
        assert poller.wait_past(t1 + 0.1)
        raw = poller.energy(t0, t1)
    # Update instants are seen a poll late at most, more on a busy CPU: a few % over 0.35 s.
    assert raw == pytest.approx(fake.true_energy_j(t0, t1), rel=0.05)


def test_the_mean_power_between_updates_inside_a_window():
    trace = CounterTrace()
    for k, e in enumerate([0.0, 10.0, 20.0, 50.0, 80.0]):  # 100 W, then 300 W, a 0.1 s period
        trace.add(0.1 * k + 0.001, e)
    assert trace.mean_power(0.15, 0.42) == pytest.approx(600 / 2) and trace.mean_power(0.15, 0.25) is None
