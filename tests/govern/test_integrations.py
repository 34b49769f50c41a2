"""The governor in deep-learning training (`gpudvfs.govern.integrations`): the step prior, the
loop's dry run, the step meter on the simulated GPU and on the NVML stand-in `fake_pynvml` (no
GPU here), phases, fallbacks and bad input; and the real frameworks (transformers, Lightning,
plain PyTorch) on the CPU against the simulated GPU, skipped where the ``train`` extra is not
installed."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

from gpudvfs.errors import GpudvfsError, GpudvfsWarning, InputError
from gpudvfs.govern import Governor
from gpudvfs.govern.clock_grid import thin
from gpudvfs.govern.clockd import ClockClient, ClockService
from gpudvfs.govern.integrations import (
    GENERIC_UTIL,
    MEMORY_SHARE,
    GovernedTraining,
    StepMeter,
    clock_grid,
    step_prior,
)
from gpudvfs.govern.integrations import meter as meter_module
from gpudvfs.govern.loop import GovernedLoop, nearest_config
from gpudvfs.hardware.energy_counter import POLL_S
from gpudvfs.hardware.nvml import NvmlDevice
from gpudvfs.hardware.simulated import SimulatedDevice
from gpudvfs.power import PowerModel

from fake_pynvml import FakeNvml
from stand_in_device import StandIn
from virtual_clock import TickPoller, VirtualClock

ROOT = Path(__file__).resolve().parents[2]


def _sim_configs(dev: SimulatedDevice) -> tuple[np.ndarray, int]:
    configs = np.array([(c, m) for m in dev.memory_clocks() for c in dev.core_clocks(m)])
    return configs, nearest_config(configs, dev.default_clocks())


# ----------------------------------------------------------------------------- step prior
def test_step_prior_keeps_the_measured_level_and_the_catalog_shape():
    model = PowerModel.prior("h200", reference=(1980.0, 3201.0))
    warnings.filterwarnings("ignore", "memory clocks .* extrapolated", GpudvfsWarning)  # 1600 MHz: beyond the catalog
    cores = np.array([1980.0, 1700.0, 1400.0, 1100.0, 800.0, 500.0])
    configs = np.array([(c, m) for m in (3201.0, 1600.0) for c in cores])
    t, w = step_prior(configs, (1400.0, 3201.0), 120.0, 500.0, model.predict)
    assert t.shape == w.shape == (len(configs),)
    assert t[2] == pytest.approx(120.0) and w[2] == pytest.approx(500.0)  # the measurement, at its pair
    top = configs[:, 1] == 3201.0
    assert np.all(np.diff(t[top]) > 0) and np.all(np.diff(w[top]) < 0)  # lower core clock: slower, less power
    assert np.all(t[~top] > t[top])  # a lower memory clock is slower
    # Only the shape comes from the model: twice the watts measured, twice the prior everywhere.
    assert step_prior(configs, (1400.0, 3201.0), 120.0, 1000.0, model.predict)[1] == pytest.approx(2 * w)
    # The time law: a share MEMORY_SHARE of the time scales with the memory clock, the rest with the core's.
    m = MEMORY_SHARE
    assert t[0] == pytest.approx(120.0 * ((1 - m) * 1400.0 / 1980.0 + m))
    assert t[6 + 2] == pytest.approx(120.0 * (1 - m + m * 3201.0 / 1600.0))
    # No power model: flat power; memory_share 0: time by the core clock alone.
    t0, flat = step_prior(configs, (1400.0, 3201.0), 120.0, 500.0, memory_share=0.0)
    assert np.all(flat == 500.0) and t0[0] == pytest.approx(120.0 * 1400.0 / 1980.0)
    assert set(GENERIC_UTIL) == set(model.components_)


def test_step_prior_rejects_bad_input():
    configs = np.array([[1000.0, 800.0], [500.0, 800.0]])
    for kwargs, match in ((dict(time_ms=-1.0), "time_ms"), (dict(watts=float("nan")), "watts"),
                          (dict(memory_share=1.5), "memory_share"), (dict(measured_mhz=(1000.0,)), "measured_mhz"),
                          (dict(configs=np.ones(3)), "configs"),
                          (dict(power=lambda u, c, m: np.ones(5)), "one value per pair"),
                          (dict(power=lambda u, c, m: -np.ones(len(c))), "positive"),
                          (dict(power=lambda u, c, m: np.ones(len(c)), util={"TENSOR": 1.0}), "unknown components")):
        args = dict(configs=configs, measured_mhz=(1000.0, 800.0), time_ms=10.0, watts=100.0) | kwargs
        with pytest.raises(InputError, match=match):
            step_prior(**args)


# ------------------------------------------------------------------------- loop dry run
def test_the_loop_in_dry_run_never_sets_and_observes_the_pair_the_gpu_ran():
    dev = SimulatedDevice(seed=1)
    configs, default = _sim_configs(dev)
    t = np.linspace(10.0, 20.0, len(configs))
    w = np.linspace(200.0, 100.0, len(configs))
    actual = tuple(configs[7])  # the GPU runs at pair 7, whatever the governor would choose

    def refuse(c, m):
        raise AssertionError("dry run set clocks")

    logged, governor_log = [], []
    loop = GovernedLoop(Governor(configs, default, log=governor_log.append), refuse, dry_run=True,
                        actual_clocks=lambda: (actual[0] + 3.0, actual[1]), log=logged.append)
    first = loop.phase("train", t, w)
    assert loop.governor.current == 7 and loop.actual_index == 7
    assert first == tuple(configs[loop.would_index])
    for _ in range(5):
        would = loop.step_end(time_ms=12.5, watts=150.0)
        assert loop.governor.current == 7  # the actual pair, not the one it would set
        assert would == tuple(configs[loop.would_index])
    log_t, log_w, _, _ = loop.governor.estimates()
    assert np.exp(log_t[7]) == pytest.approx(12.5) and np.exp(log_w[7]) == pytest.approx(150.0)
    assert all(o["observed"]["index"] == 7 for o in governor_log[1:])
    assert len(logged) == 6 and all(e["dry_run"] and not e["set"] for e in logged)
    e = logged[-1]
    assert (e["actual_index"], e["actual_core_mhz"], e["actual_mem_mhz"]) == (7, *actual)
    assert (e["would_core_mhz"], e["would_mem_mhz"]) == tuple(configs[e["would_index"]])
    assert "predicted_saving" in e
    # Clocks given per step take precedence over actual_clocks.
    loop.step_end(time_ms=12.0, watts=150.0, clocks=tuple(configs[3]))
    assert loop.governor.current == 3
    with pytest.raises(InputError, match="clocks the GPU ran"):
        GovernedLoop(Governor(configs, default), dry_run=True).phase("x", t, w)
    with pytest.raises(InputError, match="set_clocks"):
        GovernedLoop(Governor(configs, default))


def test_the_loop_not_in_dry_run_is_unchanged_and_logs_what_it_set():
    configs = np.array([[500.0, 700.0], [1000.0, 700.0]])
    calls, logged = [], []
    loop = GovernedLoop(Governor(configs, 1), lambda c, m: calls.append((c, m)), log=logged.append)
    loop.phase("w", [2.0, 1.0], [50.0, 100.0])
    loop.step_end(time_ms=1.0, watts=100.0)
    assert calls[0] == tuple(configs[logged[0]["would_index"]]) and logged[0]["set"]
    assert all(e["dry_run"] is False and e["actual_index"] is None for e in logged)


def test_nearest_config_by_log_distance():
    configs = np.array([[1980.0, 3201.0], [1500.0, 3201.0], [1980.0, 1600.0]])
    assert nearest_config(configs, (1965.0, 3201.0)) == 0
    assert nearest_config(configs, (1700.0, 3201.0)) == 1
    assert nearest_config(configs, (1990.0, 1593.0)) == 2
    with pytest.raises(InputError, match="clocks"):
        nearest_config(configs, (0.0, 3201.0))


# ------------------------------------------------------------------------------- meter
def test_the_meter_on_the_simulated_gpu_sums_to_the_counter(tmp_path):
    dev = SimulatedDevice(seed=2)
    clock = VirtualClock(100.0)
    meter = StepMeter(dev, log_path=tmp_path / "m.jsonl", clock=clock)
    rng = np.random.default_rng(0)
    for i in range(20):
        meter.start("eval" if i % 5 == 4 else "train")
        clock.t += rng.uniform(0.01, 0.3)
        rec, = meter.stop()  # the simulated GPU's counter is exact: final at once
        # The simulator ran the step's workload for its wall time: its true power.
        assert rec.watts == pytest.approx(dev.true_power_w(meter.workload, *dev.clocks))
        assert rec.energy_source == "counter" and (rec.core_mhz, rec.mem_mhz) == dev.clocks
    total = sum(r.joules for r in meter.records)
    assert total == pytest.approx(meter.counter_total_j, rel=1e-12) and total > 0
    meter.close()
    lines = [json.loads(x) for x in (tmp_path / "m.jsonl").read_text().splitlines()]
    assert len(lines) == 20 and [x["phase_step"] for x in lines if x["phase"] == "eval"] == [1, 2, 3, 4]
    assert lines[-1]["counter_j"] == pytest.approx(total)


def test_the_meter_without_a_counter_and_with_failing_sensors():
    clock = VirtualClock(100.0)
    meter = StepMeter(SimulatedDevice(energy_counter=False), clock=clock)
    meter.start()
    clock.t += 0.5
    rec, = meter.stop()
    assert rec.energy_source == "power-readings" and rec.joules == pytest.approx(0.5 * rec.watts)
    assert meter.counter_total_j is None

    class Broken(StandIn):
        def energy_joules(self):
            raise RuntimeError("NVML: Unknown Error")

        def power_watts(self):
            raise RuntimeError("NVML: Unknown Error")

        def throttle_reasons(self):
            return ("sw_power_cap",)

    meter = StepMeter(Broken(), clock=clock)
    meter.start()
    clock.t += 0.1
    rec, = meter.stop()
    assert rec.joules is None and rec.energy_source == "none" and rec.throttle_reasons == ("sw_power_cap",)
    assert "Unknown Error" in meter.notes["energy_joules"]
    with pytest.raises(InputError, match="without a step"):
        meter.stop()


def test_the_meter_on_the_nvml_stand_in_in_dry_run(tmp_path):
    """NvmlDevice against the stand-in `fake_pynvml` (not a GPU): energy in mJ from the counter, and
    no clock-setting call in dry run."""
    fake = FakeNvml(refresh_s=0.002)
    dev = NvmlDevice(pynvml=fake, leave_clocks=True)
    gov = GovernedTraining(dev, dry_run=True, catalog_name="v100-sxm2", observe_s=0.0, log_path=tmp_path / "s.jsonl")
    t0 = time.perf_counter()
    for _ in range(8):
        with gov.step():
            fake.run(0.02)
    s = gov.close()
    t1 = time.perf_counter()
    assert fake.calls == [] and fake.locked_gpu is None
    assert s["steps"] == {"train": 8} and s["dry_run"] and s["power_prior"] == "v100-sxm2"
    # Each step ran the stand-in busy for about its measured time (20 ms asked; sleep overshoots,
    # the more the busier the machine); between steps it idled, which the counter's total holds
    # and the steps' sum does not.
    e = s["energy_j"]
    busy_s = sum(r.time_ms for r in gov.meter.records) / 1e3
    assert busy_s >= 8 * 0.02
    assert e["step_sum"] == pytest.approx(busy_s * fake.busy_watts(1312, 877), rel=0.15)
    assert e["step_sum"] <= e["counter_total"] <= fake.true_energy_j(t0, t1) + 1e-3
    assert e["relative_difference"] == pytest.approx((e["step_sum"] - e["counter_total"]) / e["counter_total"])
    assert s["clocks_seen"] == [{"core_mhz": 1312.0, "mem_mhz": 877.0, "steps": 8}]
    assert s["phases"]["train"]["would_set"] is not None and s["decisions"] == 8
    assert s["energy_j"]["sources"] == {"counter-interpolated": 8}  # a real device's counter: polled


class StubCounter(StandIn):
    """A device whose energy counter advances only when the test says (a stand-in, not NVML)."""

    def __init__(self, joules: float):
        self.j = joules

    def energy_joules(self) -> float:
        return self.j


def _until(done, timeout: float = 2.0) -> None:
    end = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < end, "the poller did not see the update"
        time.sleep(0.001)


def test_pending_steps_are_finalized_in_order_once_the_counter_updates_after_them(tmp_path):
    """The counter (a stub) updates every 0.1 s at 100 W; steps of 0.17 s; the meter's clock is the
    test's, and its poller stamps each update it sees with it."""
    clock, dev = VirtualClock(100.0), StubCounter(5.0)
    meter = StepMeter(dev, clock=clock, log_path=tmp_path / "p.jsonl")
    clock.t = 99.95
    meter.begin()  # no update comes: it waits FIRST_UPDATE_WAIT_S and goes on
    assert meter.poller is not None and meter.poller.error is None

    def update(t: float) -> None:  # the counter's update at t: 100 W since 100.0
        clock.t = t
        dev.j = 10.0 + 100.0 * (t - 100.0)
        _until(lambda: meter.poller.covers(t))

    def step(t0: float, t1: float) -> list:
        clock.t = t0
        meter.start()
        clock.t = t1
        return meter.stop()

    update(100.0)
    assert step(100.02, 100.19) == [] and meter.pending == 1  # no update after its end yet
    update(100.1)
    update(100.2)
    first = step(100.2, 100.37)  # step 1 is covered now; step 2 is not
    assert [r.step for r in first] == [1] and meter.pending == 1
    assert first[0].joules == pytest.approx(17.0) and first[0].watts == pytest.approx(100.0)
    assert first[0].energy_source == "counter-interpolated" and meter.records == first
    assert step(100.4, 100.57) == [] and meter.pending == 2  # steps 2 and 3 wait
    for t in (100.3, 100.4, 100.5, 100.6):
        update(t)
    several = step(100.6, 100.77)  # steps 2 and 3 at once, in order; step 4 waits
    assert [r.step for r in several] == [2, 3] and meter.pending == 1
    assert [r.joules for r in several] == pytest.approx([17.0, 17.0])
    assert meter.counter_total_j == pytest.approx(dev.j - 5.0)  # the raw total since begin
    t = time.monotonic()
    last = meter.close()  # no update after step 4: after 0.5 s, the raw difference
    assert 0.45 < time.monotonic() - t < 2.0
    assert [r.step for r in last] == [4] and last[0].energy_source == "counter-raw"
    assert last[0].joules == pytest.approx(0.0)  # the counter did not move between its start and end
    assert [r.step for r in meter.records] == [1, 2, 3, 4] and meter.pending == 0
    lines = [json.loads(x) for x in (tmp_path / "p.jsonl").read_text().splitlines()]
    assert [x["step"] for x in lines] == [1, 2, 3, 4]
    assert not meter.poller._thread.is_alive()


@pytest.fixture
def ticked(monkeypatch) -> VirtualClock:
    """A virtual clock for the stand-in and the meter, the meter's poller polled at its ticks (2 ms,
    `POLL_S`) in place of a thread: each counter update is seen at the tick it comes, whatever
    the machine's load (a poller thread delayed on a busy CPU stamped updates late)."""
    monkeypatch.setattr(meter_module, "CounterPoller", TickPoller)
    return VirtualClock(tick_s=POLL_S)


def test_steps_read_at_the_counters_update_instants_match_the_truth_where_raw_differences_do_not(ticked):
    """The NVML stand-in `fake_pynvml` (no GPU) with an H200's counter: it advances every 0.1 s.
    Steps of 0.17 s at a constant busy power read one update or two by raw differences (the old
    meter: up to 40% off); interpolated at the update instants, each is within a few %."""
    fake = FakeNvml(refresh_s=0.002, energy_period_s=0.1, clock=ticked)
    dev = NvmlDevice(pynvml=fake, leave_clocks=True)
    meter = StepMeter(dev, clock=ticked)
    meter.begin()
    assert meter.poller is not None
    ticked.sleep(0.1 + POLL_S)  # idle until a poll past the counter's first update (begin waits in real time)
    got, truth, raw, returned = [], [], [], []
    for _ in range(10):
        meter.start()
        a, ra = ticked(), dev.energy_joules()
        fake.run(0.17)
        rb, b = dev.energy_joules(), ticked()
        returned.append(meter.stop())
        got += returned[-1]
        truth.append(fake.true_energy_j(a, b))
        raw.append(rb - ra)
    assert meter.pending >= 1  # the last step at least waits for the counter
    fake.run(0.12)  # the GPU stays busy past the last step's counter period
    got += meter.close()
    assert [r.step for r in got] == list(range(1, 11)) and got == meter.records
    # A step is pending at its own stop (the counter updates after it), finalized at a later one.
    assert sum(i + 1 not in [r.step for r in rs] for i, rs in enumerate(returned)) >= 8
    assert all(r.energy_source == "counter-interpolated" for r in got)
    err = np.array([r.joules for r in got]) / np.array(truth) - 1
    raw_err = np.array(raw) / np.array(truth) - 1
    # Within 1% (the first step, after idle); the bound was 8% with a poller thread on a busy CPU.
    assert np.abs(err).max() < 0.015, err
    assert np.abs(raw_err).max() > 0.25, raw_err  # one update (0.1 s) for a 0.17 s step: -41%
    assert np.abs(err).max() < np.abs(raw_err).max() / 5


def test_the_governor_observes_interpolated_steps_as_they_are_finalized(tmp_path, ticked):
    """GovernedTraining on the stand-in (no GPU) with a 0.1 s counter: `step_end` returns the steps
    finalized (often none: the step waits for the counter), the governor observes each step's
    interpolated power once finalized, and `close` finalizes the last."""
    fake = FakeNvml(refresh_s=0.002, energy_period_s=0.1, clock=ticked)
    gov = GovernedTraining(NvmlDevice(pynvml=fake, leave_clocks=True), catalog_name="v100-sxm2", observe_s=0.0,
                           log_path=tmp_path / "g.jsonl")
    gov.meter.clock = ticked
    gov.begin()
    ticked.sleep(0.1 + POLL_S)  # idle until a poll past the counter's first update
    returned = []
    for _ in range(6):
        gov.step_begin()
        fake.run(0.17)
        returned += gov.step_end(work=2.0)
    assert len(returned) < 6 and len(gov.decisions) == len(returned)  # one decision per finalized step
    fake.run(0.12)
    s = gov.close()
    assert s["steps"] == {"train": 6} and s["energy_j"]["sources"] == {"counter-interpolated": 6}
    assert len(gov.decisions) == 6 and gov.observations == 5  # the first step set the prior
    busy = fake.busy_watts(1312, 877)
    for d in gov.decisions[1:]:
        # Exact on the virtual clock (4% and 5% were allowed with real sleeps and a poller thread).
        assert d["observed"]["watts"] == pytest.approx(busy, rel=1e-9)
        assert d["observed"]["time_ms"] == pytest.approx(85.0, rel=1e-9)  # per unit of work
    lines = [json.loads(x) for x in (tmp_path / "g.jsonl").read_text().splitlines()]
    assert [x["step"] for x in lines if x["kind"] == "step"] == list(range(1, 7))


# ------------------------------------------------------------------------------ phases
def test_phases_and_marked_regions(tmp_path):
    """On a plain `SimulatedDevice`, which the meter runs for each step's wall time (here ticks)."""
    clock = VirtualClock(100.0)
    gov = GovernedTraining(SimulatedDevice(), observe_s=0.0, log_path=tmp_path / "run.jsonl")
    gov.meter.clock = clock

    def step(seconds=0.1):
        gov.step_begin()
        clock.t += seconds
        rec, = gov.step_end()  # the simulated GPU: each step final at once
        return rec

    for _ in range(3):
        assert step().phase == "train"
    with gov.phase("checkpoint"):  # no step inside: the region is a step of its own
        clock.t += 0.3
    gov.set_phase("eval")
    assert [step().phase for _ in range(2)] == ["eval", "eval"]
    gov.set_phase("train")
    with gov.phase("augment"):  # steps inside a region are named by it
        assert step().phase == "augment"
        assert step().phase == "augment"
    gov.step_begin()
    clock.t += 0.05
    with gov.phase("checkpoint"):  # inside a step: it cuts the step in two
        clock.t += 0.2
    clock.t += 0.05
    gov.step_end()
    s = gov.close()
    recs = gov.meter.records
    assert [r.phase for r in recs] == ["train"] * 3 + ["checkpoint", "eval", "eval", "augment", "augment", "train",
                                                      "checkpoint", "train"]
    assert [r.split for r in recs[-3:]] == [True, False, True]
    assert recs[3].time_ms == pytest.approx(300.0) and recs[-2].time_ms == pytest.approx(200.0)
    assert s["steps"] == {"train": 5, "checkpoint": 2, "eval": 2, "augment": 2}
    assert set(gov.governor._phases) == {"train", "checkpoint", "eval", "augment"}  # one governor phase each
    assert all(s["phases"][p]["would_set"] is not None for p in s["steps"])
    lines = [json.loads(x) for x in (tmp_path / "run.jsonl").read_text().splitlines()]
    decisions = [x for x in lines if x["kind"] == "decision"]
    assert sum(x["kind"] == "step" for x in lines) == len(recs) and decisions
    assert all(d["dry_run"] and d["actual_core_mhz"] == 975.0 and "would_core_mhz" in d for d in decisions)
    assert json.loads((tmp_path / "run.summary.json").read_text()) == json.loads(json.dumps(s))
    assert s["energy_j"]["relative_difference"] == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(InputError, match="closed"):
        gov.step_begin()


def test_a_phase_prior_comes_from_its_first_window_and_warmup_is_skipped():
    clock = VirtualClock(100.0)
    gov = GovernedTraining(SimulatedDevice(), observe_s=0.25, warmup_steps=2)
    gov.meter.clock = clock
    for _ in range(6):
        gov.step_begin()
        clock.t += 0.1
        gov.step_end()
    # steps 3-5 make the first window (0.3 s): the prior; step 6 starts the next window.
    assert gov.decisions and len(gov.decisions) == 1 and gov.observations == 0
    t, w, _, _ = gov.governor.estimates()
    k = gov.settings.default_index  # the simulated GPU stays at its default clocks
    assert np.exp(t[k]) == pytest.approx(100.0, rel=1e-9)
    assert np.exp(w[k]) == pytest.approx(gov.meter.records[-1].watts, rel=1e-9)
    gov.close()


# ------------------------------------------------------------------ fallbacks, knobs
def test_no_gpu_falls_back_to_metering_time_with_one_warning(monkeypatch, tmp_path):
    import gpudvfs.govern.integrations.devices as devices

    def no_gpu(*a, **k):
        raise GpudvfsError("NVML could not be initialised (Driver Not Loaded)")

    monkeypatch.setattr(devices, "NvmlDevice", no_gpu)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gov = GovernedTraining("nvml", dry_run=False, log_path=tmp_path / "x.jsonl")
        for _ in range(3):
            with gov.step():
                pass
        s = gov.close()
    ours = [w for w in caught if issubclass(w.category, GpudvfsWarning)]
    assert len(ours) == 1 and "Driver Not Loaded" in str(ours[0].message)
    assert "\n" not in str(ours[0].message)
    assert s["dry_run"] and s["device_kind"] == "none" and s["steps"] == {"train": 3}
    assert s["energy_j"]["sources"] == {"none": 3} and s["decisions"] == 0


def test_without_permission_the_run_goes_on_in_dry_run_after_one_warning():
    dev = SimulatedDevice(permission=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gov = GovernedTraining(dev, dry_run=False, observe_s=0.0)
        for _ in range(6):
            with gov.step():
                pass
        s = gov.close()
    ours = [w for w in caught if issubclass(w.category, GpudvfsWarning)]
    assert len(ours) == 1 and "needs root" in str(ours[0].message) and "dry run" in str(ours[0].message)
    assert s["dry_run"] and not s["dry_run_requested"] and not s["clocks_set"]
    assert dev.clocks == dev.default_clocks()


def test_with_permission_clocks_are_set_and_put_back():
    dev = SimulatedDevice()
    gov = GovernedTraining(dev, dry_run=False, observe_s=0.0)
    seen = set()
    for _ in range(15):
        with gov.step():
            pass
        seen.add(dev.clocks)
    s = gov.close()
    assert s["clocks_set"] and not s["dry_run"] and len(seen) > 1
    assert dev.clocks == dev.default_clocks()


def test_a_second_job_without_the_knob_is_told_so(tmp_path):
    dev = SimulatedDevice()
    svc = ClockService(dev, tmp_path / "gpu0.sock").start()
    try:
        with ClockClient(svc.path) as first:
            first.set(*dev.default_clocks())  # the first job owns the clocks
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                gov = GovernedTraining(dev, dry_run=False, clock_service=svc.path, observe_s=0.0)
                for _ in range(4):
                    with gov.step():
                        pass
                s = gov.close()
            ours = [str(w.message) for w in caught if issubclass(w.category, GpudvfsWarning)]
            assert len(ours) == 1 and "another job holds this GPU's clocks" in ours[0]
            assert s["dry_run"] and not s["clocks_set"]
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            GovernedTraining(dev, dry_run=False, clock_service=tmp_path / "none.sock").close()
        assert any("cannot reach the clock service" in str(w.message) for w in caught)
    finally:
        svc.stop()


def test_bad_input_is_refused_clearly(tmp_path):
    with pytest.raises(InputError, match="unknown policy 'fastest'"):
        GovernedTraining("sim", policy="fastest")
    for device in ("gpu", 42, None):
        with pytest.raises(InputError, match="device must be one of"):
            GovernedTraining(device)
    with pytest.raises(InputError, match="does not exist"):
        GovernedTraining("sim", log_path=tmp_path / "missing" / "steps.jsonl")
    with pytest.raises(InputError, match="power_cap_w"):
        GovernedTraining("sim", policy="power-cap")
    with pytest.raises(InputError, match="memory_share"):
        GovernedTraining("sim", memory_share=2)
    with pytest.raises(InputError, match="unknown components"):
        GovernedTraining("sim", util={"Tensor": 0.5})
    with pytest.raises(InputError, match="phase name"):
        GovernedTraining("sim").set_phase("")
    gov = GovernedTraining("sim")
    with pytest.raises(InputError, match="step_end without step_begin"):
        gov.step_end()
    with pytest.raises(InputError, match="work"):
        gov.step_end(work=0)


# --------------------------------------------------------------------------- grids
def test_the_clock_grid_is_thinned_and_falls_back_to_the_catalog():
    dev = SimulatedDevice()
    g = clock_grid(dev, n=5)
    per_mem = {m: sorted(g.configs[g.configs[:, 1] == m, 0]) for m in dev.memory_clocks()}
    assert all(len(c) <= 6 for c in per_mem.values())
    top = per_mem[3505.0]
    assert top[0] == min(dev.core_clocks(3505.0)) and top[-1] == max(dev.core_clocks(3505.0)) and 975.0 in top
    assert tuple(g.configs[g.default_index]) == (975.0, 3505.0) and g.source == "device"
    assert thin(range(100, 200), 151, n=10)[0] == 199 and 151 in thin(range(100, 200), 151, n=10)

    class Unlisted:
        name = "NVIDIA H200"
        clocks = (1980.0, 3201.0)

        def memory_clocks(self):
            raise RuntimeError("NVML: Not Supported")

        def default_clocks(self):
            raise RuntimeError("NVML: Not Supported")

    g = clock_grid(Unlisted())  # the catalog's 15 MHz steps at both of the H200's memory clocks, thinned
    assert g.source == "catalog" and g.default_source == "catalog" and len(g.configs) >= 80
    assert g.configs[:, 0].max() == 1980.0 and set(g.configs[:, 1]) == {3201.0, 2201.0}
    assert np.all((g.configs[:, 0] - 345.0) % 15.0 == 0)
    assert any("cannot list" in n for n in g.notes)


def test_importing_gpudvfs_imports_no_framework():
    code = ("import sys, gpudvfs, gpudvfs.govern.integrations as i; i.GovernedTraining; "
            "print([m for m in ('torch', 'transformers', 'lightning') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# --------------------------------------------------------- real frameworks, on the CPU
def _need(*modules: str) -> None:
    for m in modules:
        pytest.importorskip(m, reason=f"{m} is not installed (pip install gpudvfs[train])")


def _check_run(path: Path, summary: dict, phases: set[str], train_steps: int) -> list[dict]:
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    steps = [x for x in lines if x["kind"] == "step"]
    assert {x["phase"] for x in steps} == phases
    assert sum(x["phase"] == "train" for x in steps) == train_steps
    assert all(x["energy_source"] == "counter" and x["joules"] > 0 and x["time_ms"] > 0 for x in steps)
    assert summary["steps"]["train"] == train_steps and set(summary["steps"]) == phases
    assert summary["energy_j"]["step_sum"] == pytest.approx(summary["energy_j"]["counter_total"], rel=1e-9)
    assert json.loads(path.with_name(path.stem + ".summary.json").read_text())["steps"] == summary["steps"]
    assert summary["dry_run"] and not summary["clocks_set"]
    assert any(x["kind"] == "decision" for x in lines)
    return steps


def test_transformers_trainer_with_the_callback(tmp_path):
    _need("torch", "transformers", "accelerate")
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

    from gpudvfs.govern.integrations import GpudvfsTrainerCallback

    class Tokens(torch.utils.data.Dataset):
        def __init__(self, n, seed):
            self.x = torch.randint(0, 256, (n, 32), generator=torch.Generator().manual_seed(seed))

        def __len__(self):
            return len(self.x)

        def __getitem__(self, i):
            return {"input_ids": self.x[i], "labels": self.x[i]}

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=256, n_positions=32, n_embd=64, n_layer=2, n_head=2,
                                       bos_token_id=0, eos_token_id=0))
    assert 50_000 < sum(p.numel() for p in model.parameters()) < 200_000
    cb = GpudvfsTrainerCallback(device="sim", log_path=tmp_path / "hf.jsonl", observe_s=0.0)
    args = TrainingArguments(output_dir=str(tmp_path / "out"), max_steps=20, per_device_train_batch_size=4,
                             per_device_eval_batch_size=4, eval_strategy="steps", eval_steps=10, save_strategy="no",
                             report_to=[], use_cpu=True, disable_tqdm=True, logging_steps=10)
    Trainer(model=model, args=args, train_dataset=Tokens(80, 1), eval_dataset=Tokens(8, 2), callbacks=[cb]).train()
    steps = _check_run(tmp_path / "hf.jsonl", cb.summary, {"train", "eval"}, 20)
    assert sum(x["phase"] == "eval" for x in steps) == 4  # 2 evaluations x 2 batches
    assert cb.session.closed


def _mlp():
    import torch

    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))


def test_lightning_trainer_with_the_callback(tmp_path):
    _need("torch", "lightning")
    import lightning.pytorch as L
    import torch

    from gpudvfs.govern.integrations import GpudvfsLightningCallback

    class Module(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = _mlp()

        def training_step(self, batch, i):
            x, y = batch
            return torch.nn.functional.mse_loss(self.net(x), y)

        def validation_step(self, batch, i):
            x, y = batch
            self.log("val", torch.nn.functional.mse_loss(self.net(x), y))

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)

    g = torch.Generator().manual_seed(0)
    data = torch.utils.data.TensorDataset(torch.randn(200, 16, generator=g), torch.randn(200, 1, generator=g))
    train = torch.utils.data.DataLoader(data, batch_size=8)
    val = torch.utils.data.DataLoader(torch.utils.data.Subset(data, range(16)), batch_size=8)
    cb = GpudvfsLightningCallback(device="sim", log_path=tmp_path / "pl.jsonl", observe_s=0.0)
    trainer = L.Trainer(accelerator="cpu", max_steps=20, val_check_interval=10, callbacks=[cb], logger=False,
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(Module(), train, val)
    steps = _check_run(tmp_path / "pl.jsonl", cb.summary, {"train", "eval"}, 20)
    assert sum(x["phase"] == "eval" for x in steps) == 6  # the sanity check's 2 and 2 evaluations x 2


def test_a_plain_pytorch_loop(tmp_path):
    _need("torch")
    import torch

    torch.manual_seed(0)
    model, x, y = _mlp(), torch.randn(64, 16), torch.randn(64, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    gov = GovernedTraining("sim", log_path=tmp_path / "plain.jsonl", observe_s=0.0)
    for i in range(20):
        with gov.step():
            torch.nn.functional.mse_loss(model(x), y).backward()
            opt.step()
            opt.zero_grad()
        if i % 5 == 4:
            with gov.phase("checkpoint"):
                snapshot = {k: v.detach().clone() for k, v in model.state_dict().items()}
    assert snapshot
    _check_run(tmp_path / "plain.jsonl", gov.close(), {"train", "checkpoint"}, 20)


def test_the_validation_script_runs_tiny_on_the_cpu(tmp_path):
    _need("torch", "transformers", "accelerate")
    out = tmp_path / "dl"
    r = subprocess.run([sys.executable, str(ROOT / "validation" / "dl_train.py"), "--out", str(out), "--seconds", "4",
                        "--tiny", "--device-kind", "sim", "--eval-every", "20",
                        "--min-steps", "50"],  # an evaluation and a checkpoint however loaded the machine
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert not (out / "errors.txt").exists()
    for name in ("hf_steps", "plain_steps"):
        summary = json.loads((out / f"{name}.summary.json").read_text())
        assert summary["steps"]["train"] > 0 and "eval" in summary["steps"] and summary["dry_run"]
    assert "checkpoint" in json.loads((out / "plain_steps.summary.json").read_text())["steps"]
    assert "no clock or power limit was set" in (out / "report.txt").read_text()


def test_train_extra_is_declared():
    text = (ROOT / "pyproject.toml").read_text()
    assert 'train = ["torch>=2.2", "transformers>=4.40"' in text
    assert importlib.util.find_spec("gpudvfs.govern.integrations.huggingface") is not None


def test_the_train_extra_brings_nvml_with_the_frameworks():
    """Where the frameworks are installed (the `train` extra's environment in CI), NVML's
    bindings are too: `device="nvml"` then meters energy rather than timing steps alone."""
    pytest.importorskip("torch")
    import pynvml

    assert callable(pynvml.nvmlInit)
