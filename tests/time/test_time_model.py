"""The analytical time model: accuracy on the real GTX 980 grid, agreement with the numpy
specification, physical properties (hypothesis), device fits, and bad input."""

from __future__ import annotations

import dataclasses
import json
import sys

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

import gpudvfs
from gpudvfs import InputError, KernelProfile, TimeDevice, TimeModel
from gpudvfs.cli.app import cli
from gpudvfs.evaluation.time_errors import evaluate
from gpudvfs.time import CASES, INPUT_KEYS, profiles_from_grid

from conftest import REPO

sys.path.insert(0, str(REPO / "benches"))
from time_model_reference import predict_reference  # noqa: E402

DEV = TimeDevice.gtx980()


@st.composite
def profiles(draw):
    warps = draw(st.floats(32, 1e6))
    return KernelProfile(
        name="k", warps_total=warps, active_warps=draw(st.floats(1, 64)),
        warps_per_block=draw(st.sampled_from([1.0, 2.0, 4.0, 8.0, 16.0, 32.0])),
        gld_trans=draw(st.one_of(st.just(0.0), st.floats(0.01, 500))), trans_per_req=4.0,
        l2_hit_rate=draw(st.floats(0, 1)), comp_inst=draw(st.floats(1, 5000)),
        shared_trans=draw(st.one_of(st.just(0.0), st.floats(0.01, 500))),
        dp_inst=draw(st.one_of(st.just(0.0), st.floats(0.01, 200))),
        sf_inst=draw(st.one_of(st.just(0.0), st.floats(0.01, 200))),
        extra_chain=draw(st.one_of(st.just(0.0), st.floats(0.01, 1e4))),
        imad_inst=draw(st.one_of(st.just(0.0), st.floats(0.01, 200))))


clocks = st.lists(st.floats(300, 1500), min_size=1, max_size=8)


@settings(max_examples=200, deadline=None)
@given(ps=st.lists(profiles(), min_size=1, max_size=5), fc=clocks, fm=clocks,
       mode=st.sampled_from(["default", "paper"]), overlapped=st.booleans(), parallel=st.booleans())
def test_rust_matches_the_numpy_specification(ps, fc, fm, mode, overlapped, parallel):
    n = min(len(fc), len(fm))
    fc, fm = np.array(fc[:n]), np.array(fm[:n])
    # IMAD at half the issue rate, as from GA10x on (the GTX 980's costs the issue rate).
    dev = dataclasses.replace(DEV, overlapped_rounds=overlapped, parallel_queues=parallel, imad_inst_cycle=0.5)
    t, cases = TimeModel(dev, mode).predict(ps, fc, fm, return_cases=True)
    inputs = {k: np.array([getattr(p, k) for p in ps]) for k in INPUT_KEYS}
    t_ref, c_ref = predict_reference(inputs, dev.params(), fc, fm, mode)
    np.testing.assert_allclose(t, t_ref, rtol=1e-9)
    np.testing.assert_array_equal(cases, np.asarray(CASES, dtype=object)[c_ref])


@settings(max_examples=200, deadline=None)
@given(p=profiles(), fc=st.floats(300, 1500), fm=st.floats(300, 1500), up=st.floats(1.0, 2.0),
       k=st.integers(2, 50))
def test_positive_monotone_and_affine_in_blocks(p, fc, fm, up, k):
    """Default mode: time is positive, never rises when either clock rises with the other
    fixed, and grows with the blocks by the same time per round: with rounds overlapped (the
    preset) the exposed latency is paid once, so the time is affine in the blocks, each k-fold
    step adding as much as the one before; one round after another, it is linear. (Paper mode
    breaks monotonicity: its doubled fc/fm in Eq. 5a makes latency-bound time grow with fc;
    see rust/src/time.)"""
    m = TimeModel(DEV)
    t = m.predict(p, fc, fm)
    assert t > 0 and np.isfinite(t)
    assert m.predict(p, fc * up, fm) <= t * (1 + 1e-12)
    assert m.predict(p, fc, fm * up) <= t * (1 + 1e-12)

    def scaled(model, n):
        return model.predict(KernelProfile(**{**p.__dict__, "warps_total": p.warps_total * n}), fc, fm)

    step = scaled(m, k) - t
    assert step > 0 and scaled(m, 2 * k - 1) - scaled(m, k) == pytest.approx(step, rel=1e-9)
    serial = TimeModel(dataclasses.replace(DEV, overlapped_rounds=False))
    assert scaled(serial, k) == pytest.approx(k * serial.predict(p, fc, fm), rel=1e-12)


def test_table_ii_fit():
    """Table II prints fc = fm in every row, which leaves Eq. 4 with one regressor value;
    its cycles are Eq. 4 with the core clock at 400 MHz, so that is how it is read."""
    mem = np.array([400, 500, 600, 700, 800, 900, 1000.0])
    cycles = np.array([500, 455.5, 425.8, 404.6, 388.7, 376.3, 366.4])
    dev, report = DEV.fit((np.full(7, 400.0), mem, cycles))
    assert dev.dm_lat_a == pytest.approx(222.78, abs=0.5) and dev.dm_lat_b == pytest.approx(277.32, abs=0.5)
    assert report["dm_lat"]["r2"] > 0.9999
    with pytest.raises(InputError):
        DEV.fit((mem, mem, cycles))  # as labelled: fc/fm constant, nothing to fit
    table3 = np.array([10.06, 9.76, 9.54, 9.31, 9.19, 9.06, 9.0])
    dev, report = DEV.fit((np.full(7, 400.0), mem, cycles), (mem, table3))
    assert report["dm_del"]["r2"] > 0.99 and dev.dm_del_a == pytest.approx(DEV.dm_del_a, rel=1e-6)


@settings(max_examples=60, deadline=None)
@given(fc=st.floats(100, 3000), fm=st.floats(100, 9000), cycles=st.floats(1, 5000), delay=st.floats(0.1, 100),
       n=st.integers(1, 4))
def test_fit_at_one_clock_pair_scales_the_base_law_through_the_measurement(fc, fm, cycles, delay, n):
    """One clock pair cannot split Eq. 4 or the delay law into their parts: the base's laws keep
    their split and pass through the measurement (an H100 run with the clocks left to the driver)."""
    dev, report = DEV.fit((np.full(n, fc), np.full(n, fm), np.full(n, cycles)), (np.full(n, fm), np.full(n, delay)))
    assert dev.dm_lat_a * fc / fm + dev.dm_lat_b == pytest.approx(cycles, rel=1e-9)
    assert dev.dm_lat_a / dev.dm_lat_b == pytest.approx(DEV.dm_lat_a / DEV.dm_lat_b, rel=1e-9)
    assert dev.dm_del_a / fm + dev.dm_del_b == pytest.approx(delay, rel=1e-9)
    assert dev.dm_del_a / dev.dm_del_b == pytest.approx(DEV.dm_del_a / DEV.dm_del_b, rel=1e-9)
    assert report["dm_lat"]["r2"] is None and report["dm_del"]["r2"] is None and report["dm_lat"]["n"] == n


@pytest.mark.parametrize("latency,delay,match", [
    (([700.0], [700.0], [-5.0]), None, "DRAM latency cycles must be positive"),
    (([700.0], [700.0], [float("nan")]), None, "DRAM latency cycles must be positive"),
    (([700.0], [700.0], [400.0]), ([700.0], [0.0]), "DRAM delay cycles must be positive"),
    (([0.0], [700.0], [400.0]), None, "core clocks must be finite"),
    (([700.0], [700.0], [400.0]), ([-1.0], [9.0]), "memory clocks must be finite"),
])
def test_fit_at_one_clock_pair_refuses_bad_measurements(latency, delay, match):
    with pytest.raises(InputError, match=match):
        DEV.fit(latency, delay)


def test_catalog_constants_on_the_gtx980_grids(data):
    """Uncalibrated, with the catalog's constants in place of the preset's: the DRAM delay from
    the sustained fraction of the spec sheet's bandwidth, measured on an H100, not on these
    grids (7.15 / 9.49%; the spec peak itself 15.37 / 16.49%, the preset 6.37 / 9.31%)."""
    from gpudvfs.catalog import lookup

    device = TimeDevice.from_spec(lookup("gtx980"))
    for name, figure in (("gtx980_time_dev.csv", 7.15), ("gtx980_time_power_dev.csv", 9.49)):
        grid = gpudvfs.read(data / "nv-dvfs-benchmark" / name)
        assert evaluate(grid, TimeModel(device), (700, 700))["mape"] == pytest.approx(figure, abs=0.005), name


def test_device_save_load_and_errors(tmp_path):
    DEV.save(tmp_path / "d.json")
    assert TimeDevice.load(tmp_path / "d.json") == DEV
    # A file written before overlapped_rounds and sf_inst_cycle existed loads with the rounds
    # and the special-function cost it was written under (one after another; the issue rate).
    doc = json.loads((tmp_path / "d.json").read_text())
    del doc["params"]["overlapped_rounds"], doc["params"]["sf_inst_cycle"]
    (tmp_path / "old.json").write_text(json.dumps(doc))
    old = TimeDevice.load(tmp_path / "old.json")
    assert old == dataclasses.replace(DEV, overlapped_rounds=False, sf_inst_cycle=0.0)
    sf = KernelProfile("k", 1e5, 60, 8, 0.0, 4.0, 0.0, 300, 0, sf_inst=30, reference_mhz=(700.0, 700.0),
                       reference_time_ms=1.0)
    assert TimeModel(old).predict(sf, 700.0, 700.0) == TimeModel(old).predict(dataclasses.replace(sf, sf_inst=0),
                                                                              700.0, 700.0)
    assert TimeModel(DEV).predict(sf, 700.0, 700.0) > TimeModel(DEV).predict(dataclasses.replace(sf, sf_inst=0),
                                                                             700.0, 700.0)
    with pytest.raises(InputError, match="overlapped_rounds must be true or false"):
        TimeDevice(**{**DEV.params(), "overlapped_rounds": 1.0})
    with pytest.raises(InputError, match="finite number"):
        TimeDevice(**{**DEV.params(), "l2_lat": float("nan")})
    with pytest.raises(InputError, match="unknown GPU .rtx9090.: not in the device catalog"):
        TimeDevice.preset("rtx9090")
    with pytest.raises(InputError, match="unknown mode"):
        TimeModel(DEV, "magic")


def test_profile_errors():
    good = {"warps": 100, "achieved_occupancy": 0.5, "l2_read_transactions": 10, "l2_write_transactions": 5,
            "dram_read_transactions": 3, "dram_write_transactions": 1, "shared_load_transactions": 0,
            "shared_store_transactions": 0, "inst_issued": 5000}
    p = KernelProfile.from_counters("k", good)
    assert p.gld_trans == 0.15 and p.active_warps == 32
    for bad, match in [({"warps": 0}, "warps must be > 0"), ({"achieved_occupancy": 1.5}, r"\(0, 1\]"),
                       ({"inst_issued": float("inf")}, "finite"), ({"l2_read_transactions": "x"}, "not a number")]:
        with pytest.raises(InputError, match=match):
            KernelProfile.from_counters("k", {**good, **bad})
    del good["dram_read_transactions"]
    with pytest.raises(InputError, match="dram_read_transactions' is missing"):
        KernelProfile.from_counters("k", good)
    with pytest.raises(InputError, match="calibration needs"):
        TimeModel().predict(p, 700.0, 700.0, calibrate=True)


def test_gtx980_accuracy_from_the_reference_counters(data):
    """All 49 pairs of each kernel predicted from its 700/700 counters, in-sample (the
    cross-validated figures are test_cross_validation_over_both_gtx980_files'): 6.37%
    absolute, 3.05% calibrated, beating the time-unchanged (24.69%) and two-term scaling
    (8.44%) baselines; the literal paper mode is far worse."""
    grid = gpudvfs.read(data / "nv-dvfs-benchmark/gtx980_time_dev.csv")
    r = evaluate(grid, TimeModel("gtx980"), (700.0, 700.0), baselines=True)
    assert r["n"] == 490 and len(r["per_kernel"]) == 10
    assert r["mape"] == pytest.approx(6.37, abs=0.01)
    assert evaluate(grid, TimeModel("gtx980"), (700.0, 700.0), calibrate=True)["mape"] == pytest.approx(3.05, abs=0.01)
    assert r["baselines"]["unchanged"]["mape"] == pytest.approx(24.69, abs=0.01)
    assert r["baselines"]["two_term"]["mape"] == pytest.approx(8.44, abs=0.01)
    assert evaluate(grid, TimeModel("gtx980", "paper"), (700.0, 700.0))["mape"] == pytest.approx(30.95, abs=0.01)


def test_kernels_of_the_time_power_file(data):
    """The other GTX 980 file's 15 kernels (no inst_issued: inst_executed stands in; launch
    geometry and request counts are there), in-sample: calibrated MAPE 2.97% over 36 pairs,
    9.31% absolute. The file is not unseen: the FP64 rate was added after looking at its
    kernels, the SFU rate after the H100's special-function benchmarks (see
    docs/methodology.md)."""
    grid = gpudvfs.read(data / "nv-dvfs-benchmark/gtx980_time_power_dev.csv")
    r = evaluate(grid, TimeModel("gtx980"), (700.0, 700.0), calibrate=True, baselines=True)
    assert r["mape"] == pytest.approx(2.97, abs=0.01)
    assert evaluate(grid, TimeModel("gtx980"), (700.0, 700.0))["mape"] == pytest.approx(9.31, abs=0.01)
    assert r["mape"] < r["baselines"]["two_term"]["mape"] < r["baselines"]["unchanged"]["mape"]


def test_the_block_starved_floor_needs_the_theoretical_occupancy(data):
    """gaussian's Fan2 launches 262144 blocks of 16 threads, at 0.31 achieved occupancy; its
    measured time moves < 2% from 500 to 1000 MHz core at 1000 MHz memory, and the model
    misses that (calibrated MAPE 15.6%, 1.85x predicted between those clocks). An nvprof
    grid does not say whether registers or shared memory hold it back, so no kernel of the
    file is read as block-starved (against the block-size bound the rule fired on kernels
    held back by registers, elsewhere). Told the theoretical occupancy, as Nsight Compute
    reports it (here 32 of 64 warps), it is: the model at full slots (1.27 ms) leaves a floor
    under the reference time (1.35 ms), and the kernel is predicted within 4.9%, 1.22x between
    those clocks. (With the exposed latency paid once per round, the model at full slots
    exceeded the reference and the floor stayed out.)"""
    grid = gpudvfs.read(data / "nv-dvfs-benchmark/gtx980_time_power_dev.csv")
    profs = profiles_from_grid(grid, (700.0, 700.0), DEV)
    assert all(p.slot_warps is None and not p.block_starved(DEV) for p in profs)
    g = next(p for p in profs if p.name.startswith("gaussian"))
    rows = grid.workload == g.name
    fc, fm, meas = grid.core_mhz[rows], grid.mem_mhz[rows], grid.time_ms[rows]
    m = TimeModel(DEV)
    plain = m.predict(g, fc, fm, calibrate=True)
    assert 100 * np.mean(np.abs(plain - meas) / meas) == pytest.approx(15.55, abs=0.01)
    hi = fm == 1000
    assert plain[hi & (fc == 500)] / plain[hi & (fc == 1000)] == pytest.approx(1.85, abs=0.01)
    told = dataclasses.replace(g, slot_warps=32.0)
    assert told.block_starved(DEV)
    floored = m.predict(told, fc, fm, calibrate=True)
    assert 100 * np.mean(np.abs(floored - meas) / meas) == pytest.approx(4.90, abs=0.01)
    assert floored[hi & (fc == 500)] / floored[hi & (fc == 1000)] == pytest.approx(1.22, abs=0.01)


def test_launch_geometry_and_request_counts_enter_the_profile():
    base = {"warps": 100, "achieved_occupancy": 0.25, "l2_read_transactions": 700, "l2_write_transactions": 300,
            "dram_read_transactions": 3, "dram_write_transactions": 1, "shared_load_transactions": 0,
            "shared_store_transactions": 0, "inst_issued": 5000}
    p = KernelProfile.from_counters("k", base)
    assert (p.warps_total, p.warps_per_block, p.trans_per_req, p.slot_warps) == (100, 8, 4.0, None)
    # 16-thread blocks: each still takes a whole warp slot. The launch alone gives no warp
    # slots (registers and shared memory may bound them): only the theoretical occupancy does.
    p = KernelProfile.from_counters("k", base, launch=(1000, 16))
    assert (p.warps_total, p.warps_per_block, p.slot_warps, p.gld_trans) == (1000, 1, None, 1.0)
    counted = {**base, "gld_transactions": 800, "gld_transactions_per_request": 8, "gst_transactions": 400,
               "gst_transactions_per_request": 4}
    assert KernelProfile.from_counters("k", counted).trans_per_req == 5.0  # 1000 L2 sectors / 200 requests
    assert KernelProfile.from_counters("k", counted, trans_per_req=2.0).trans_per_req == 2.0
    no_stores = {**counted, "gst_transactions": 0, "gst_transactions_per_request": 0}
    assert KernelProfile.from_counters("k", no_stores).trans_per_req == 10.0
    for launch in [(0, 32), (10, 0), (float("nan"), 32)]:
        with pytest.raises(InputError, match="launch needs"):
            KernelProfile.from_counters("k", base, launch=launch)


@settings(max_examples=200, deadline=None)
@given(p=profiles(), share=st.floats(0.05, 0.74), extra=st.floats(1.01, 5.0), fc=st.floats(300, 1500),
       fm=st.floats(300, 1500), up=st.floats(1.0, 2.0))
def test_block_starved_calibration(p, share, extra, fc, fm, up):
    """A block-starved kernel (occupancy < 0.75 of its slots, >= 4 waves) whose reference
    time exceeds the model at full slots: calibrated time equals the reference time at the
    reference, never rises with a clock, and never falls below the floor that the
    reference leaves."""
    slot = 32.0
    ref = (700.0, 700.0)
    full = KernelProfile(**{**p.__dict__, "active_warps": slot, "warps_total": max(p.warps_total, 4 * slot * 16)})
    m = TimeModel(DEV)
    t_full = m.predict(full, *ref)
    starved = KernelProfile(**{**full.__dict__, "active_warps": share * slot, "slot_warps": slot,
                               "reference_mhz": ref, "reference_time_ms": t_full * extra})
    assert starved.block_starved(DEV)
    t = m.predict(starved, fc, fm, calibrate=True)
    assert m.predict(starved, *ref, calibrate=True) == pytest.approx(t_full * extra, rel=1e-9)
    assert m.predict(starved, fc * up, fm, calibrate=True) <= t * (1 + 1e-12)
    assert m.predict(starved, fc, fm * up, calibrate=True) <= t * (1 + 1e-12)
    q = DEV.overlap_p
    assert t >= t_full * (extra ** q - 1) ** (1 / q) * (1 - 1e-12)
    # The paper mode is the text as printed: no floor there.
    paper = TimeModel(DEV, "paper")
    assert paper.predict(starved, fc, fm, calibrate=True) == pytest.approx(
        paper.predict(starved, fc, fm) * paper.calibration([starved])[0], rel=1e-12)


@settings(max_examples=100, deadline=None)
@given(p=profiles(), slower=st.floats(1.0, 4.0), fc=st.floats(300, 1500), fm=st.floats(300, 1500),
       up=st.floats(1.0, 2.0))
def test_dram_check_calibration(p, slower, fc, fm, up):
    """calibration="dram-check": the prediction meets the reference time at the reference and
    never rises with a clock; a kernel whose DRAM transfers fill >= DRAM_BOUND of its time, or
    that the model finds no faster than measured, is scaled as by "scale"."""
    from gpudvfs.time.model import DRAM_BOUND

    ref = (700.0, 700.0)
    m, scale = TimeModel(DEV, calibration="dram-check"), TimeModel(DEV)
    k = dataclasses.replace(p, reference_mhz=ref, reference_time_ms=m.predict(p, *ref) * slower)
    assert m.predict(k, *ref, calibrate=True) == pytest.approx(k.reference_time_ms, rel=1e-9)
    t = m.predict(k, fc, fm, calibrate=True)
    assert m.predict(k, fc * up, fm, calibrate=True) <= t * (1 + 1e-9)
    assert m.predict(k, fc, fm * up, calibrate=True) <= t * (1 + 1e-9)
    dram = DEV.dram_busy_ms(k.warps_total * k.gld_trans * (1 - k.l2_hit_rate), ref[1])
    if dram >= DRAM_BOUND * k.reference_time_ms or slower == 1.0:
        assert t == pytest.approx(scale.predict(k, fc, fm, calibrate=True), rel=1e-9)


@given(st.floats(1.0, 1e9), st.floats(100.0, 20000.0), st.sampled_from([16.0, 80.0, 132.0]))
def test_a_bandwidth_measurement_gives_back_the_delay_law_per_sm(transactions, fm, sms):
    """`dram_delay_of` inverts `dram_busy_ms`: the delay a bandwidth benchmark measures is the
    law's value for one SM's share, whatever the SM count (an H100's was fitted 132 times too
    small when it was taken per device)."""
    dev = dataclasses.replace(DEV, sm_count=sms)
    busy = dev.dram_busy_ms(transactions, fm)
    assert dev.dram_delay_of(busy, transactions, fm) == pytest.approx(dev.dm_del_a / fm + dev.dm_del_b, rel=1e-12)


def test_dram_check_moves_unexplained_time_to_the_core_clock():
    """A memory-heavy kernel whose DRAM transfers fill half its measured time, which the model
    finds 40% faster: scaled, it stays memory-bound (the core clock barely matters); with the
    DRAM check, the missing time is chain latency and halving the core clock costs most of it."""
    k = KernelProfile(name="k", warps_total=1e5, active_warps=60, warps_per_block=8, gld_trans=40,
                      trans_per_req=4, l2_hit_rate=0.0, comp_inst=40, shared_trans=0)
    ref = (700.0, 700.0)
    dram = DEV.dram_busy_ms(k.warps_total * k.gld_trans, ref[1])
    k = dataclasses.replace(k, reference_mhz=ref, reference_time_ms=2 * dram)
    scale, check = TimeModel(DEV), TimeModel(DEV, calibration="dram-check")
    assert scale.predict(k, *ref) < 0.6 * k.reference_time_ms
    slow_scale = scale.predict(k, 350.0, 700.0, calibrate=True) / k.reference_time_ms
    slow_check = check.predict(k, 350.0, 700.0, calibrate=True) / k.reference_time_ms
    assert slow_scale < 1.3 and slow_check > 1.7


def test_kernels_that_fill_their_slots_are_scaled_as_before():
    p = KernelProfile(name="k", warps_total=1e5, active_warps=60, warps_per_block=8, gld_trans=20,
                      trans_per_req=4, l2_hit_rate=0.3, comp_inst=200, shared_trans=0, slot_warps=64,
                      reference_mhz=(700.0, 700.0), reference_time_ms=1.0)
    m = TimeModel(DEV)
    assert not p.block_starved(DEV)
    few_waves = KernelProfile(**{**p.__dict__, "active_warps": 20, "warps_total": 3 * 64 * 16})
    assert not few_waves.block_starved(DEV)
    fc = np.array([500.0, 1000.0])
    np.testing.assert_allclose(m.predict(p, fc, 700.0, calibrate=True),
                               m.predict(p, fc, 700.0) * m.calibration([p])[0], rtol=1e-12)


def test_one_kernel_at_one_pair_gives_a_float_and_a_label():
    p = KernelProfile(name="k", warps_total=1e4, active_warps=60, warps_per_block=8, gld_trans=20,
                      trans_per_req=4, l2_hit_rate=0.3, comp_inst=200, shared_trans=0)
    t, case = TimeModel(DEV).predict(p, 700.0, 700.0, return_cases=True)
    assert isinstance(t, float) and case in CASES


def test_cli_time_eval_and_predict(data):
    path = str(data / "nv-dvfs-benchmark/gtx980_time_dev.csv")
    runner = CliRunner()
    r = runner.invoke(cli, ["time", "eval", path, "--device", "gtx980", "--reference", "700,700", "--json",
                            "--baselines"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["mape"] < 8.0 and set(d["per_kernel"]) == set(d["calibrated"]["per_kernel"])
    assert {"unchanged", "two_term"} == set(d["baselines"])
    r = runner.invoke(cli, ["time", "predict", "--device", "gtx980",
                            path, "--kernel", "backprop", "--core-mhz", "500,1000",
                            "--mem-mhz", "700", "--json"])
    d = json.loads(r.stdout)
    t = d["time_ms"]["backprop"]
    assert len(t) == 2 and t[1][0] < t[0][0]
    r = runner.invoke(cli, ["time", "eval", "--device", "gtx980", path, "--reference", "650,700"])
    assert r.exit_code == 2 and "no row at the reference 650/700" in r.output
    r = runner.invoke(cli, ["time", "eval", "--device", "gtx980", str(data / "nsfcac/v100_spec_dev.csv")])
    # A DCGM grid goes to the DCGM time model, which needs a reference clock it measured; the
    # default, the GPU's default clocks, is not one of this grid's: the error says --reference.
    assert r.exit_code == 2 and "'bfs' has no row at the reference 1126 MHz" in r.output
    assert "the reference defaults to gtx980's default clocks 1126,3505: give --reference CORE,MEM" in r.output


def test_profile_from_nsight_compute_names_equals_nvprof():
    """The same kernel's counters under Nsight Compute names (SM >= 7.0) give the same
    profile as under the nvprof names the model was built on (mapping: measure.counters)."""
    nvprof = {"warps": 4096, "achieved_occupancy": 0.75, "dram_read_transactions": 2.0e5,
              "dram_write_transactions": 1.0e5, "l2_read_transactions": 4.0e5, "l2_write_transactions": 1.2e5,
              "shared_load_transactions": 3.0e4, "shared_store_transactions": 1.0e4, "inst_issued": 2.5e6,
              "inst_fp_64": 3.2e5, "flop_count_sp_special": 6.4e5}
    # Special-function operations: nvprof counts threads, Nsight Compute the XU pipe's warp
    # instructions (32 threads each).
    ncu = {"smsp__inst_executed_pipe_xu.sum": 2.0e4, "smsp__sass_thread_inst_executed_op_dadd_pred_on.sum": 1.0e5,
           "smsp__sass_thread_inst_executed_op_dmul_pred_on.sum": 2.0e5,
           "smsp__sass_thread_inst_executed_op_dfma_pred_on.sum": 2.0e4,
           "smsp__warps_launched.sum": 4096, "sm__warps_active.avg.pct_of_peak_sustained_active": 75.0,
           "dram__sectors_read.sum": 2.0e5, "dram__sectors_write.sum": 1.0e5,
           "lts__t_sectors_op_read.sum": 4.0e5, "lts__t_sectors_op_write.sum": 1.2e5,
           "lts__t_sectors_op_atom.sum": 0.0, "lts__t_sectors_op_red.sum": 0.0,
           "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum": 3.0e4,
           "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum": 1.0e4,
           "smsp__inst_issued.sum": 2.5e6}
    a = KernelProfile.from_counters("k", nvprof)
    b = KernelProfile.from_counters("k", ncu, tool="ncu")
    for key in INPUT_KEYS:
        assert getattr(b, key) == pytest.approx(getattr(a, key), rel=1e-12), key
    assert (b.dp_inst, b.sf_inst) == pytest.approx((3.2e5 / 32 / 4096, 2.0e4 / 4096))


def test_nsight_compute_profile_carries_launch_requests_and_theoretical_occupancy():
    """Nsight Compute reports the launch, global requests and the theoretical occupancy
    (registers and shared memory included): the profile takes its warp slots from the
    latter, so a kernel held to 32 of 64 warps by registers is not read as block-starved."""
    ncu = {"launch__grid_size": 512, "launch__block_size": 256,
           "sm__maximum_warps_per_active_cycle_pct": 50.0,
           "sm__warps_active.avg.pct_of_peak_sustained_active": 40.0,
           "dram__sectors_read.sum": 2.0e5, "dram__sectors_write.sum": 1.0e5,
           "lts__t_sectors_op_read.sum": 4.0e5, "lts__t_sectors_op_write.sum": 1.2e5,
           "lts__t_sectors_op_atom.sum": 0.0, "lts__t_sectors_op_red.sum": 0.0,
           "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum": 0.0,
           "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum": 0.0,
           "smsp__inst_issued.sum": 2.5e6, "smsp__inst_executed_op_global_ld.sum": 1.0e5,
           "smsp__inst_executed_op_global_st.sum": 3.0e4}
    p = KernelProfile.from_counters("k", ncu, tool="ncu")
    assert (p.warps_total, p.warps_per_block, p.slot_warps) == (4096, 8, 32)
    assert p.trans_per_req == pytest.approx(4.0)  # 520k L2 sectors over 130k requests
    assert p.active_warps == pytest.approx(25.6) and not p.block_starved(DEV)
    # Without the theoretical occupancy nothing tells the slots: never read as starved.
    del ncu["sm__maximum_warps_per_active_cycle_pct"]
    assert KernelProfile.from_counters("k", ncu, tool="ncu").slot_warps is None
    with pytest.raises(InputError, match="theoretical_occupancy must be in"):
        KernelProfile.from_counters("k", {**ncu, "sm__maximum_warps_per_active_cycle_pct": 0.0}, tool="ncu")


def test_calibration_takes_integer_reference_clocks():
    """reference_mhz=(700, 700), as the docs write it: ints, which the core once refused
    (TypeError: type mismatch from=int64)."""
    counters = {"warps": 4096, "achieved_occupancy": 0.75, "dram_read_transactions": 2.0e5,
                "dram_write_transactions": 1.0e5, "l2_read_transactions": 4.0e5, "l2_write_transactions": 1.2e5,
                "shared_load_transactions": 3.0e4, "shared_store_transactions": 1.0e4, "inst_issued": 2.5e6}
    ints = KernelProfile.from_counters("k", counters, reference_mhz=(700, 700), reference_time_ms=0.49)
    floats = KernelProfile.from_counters("k", counters, reference_mhz=(700.0, 700.0), reference_time_ms=0.49)
    m = TimeModel(DEV)
    assert m.predict(ints, 700, 700, calibrate=True) == pytest.approx(0.49, rel=1e-12)
    fc = np.array([500.0, 1000.0])
    np.testing.assert_array_equal(m.predict(ints, fc, 700.0, calibrate=True),
                                  m.predict(floats, fc, 700.0, calibrate=True))


def test_nvprof_warps_launched_stands_in_for_warps():
    """nvprof reports the warp count as the event warps_launched or the metric
    unique_warps_launched; both reach the profile through the nvprof mapping table."""
    base = {"achieved_occupancy": 0.5, "l2_read_transactions": 10, "l2_write_transactions": 5,
            "dram_read_transactions": 3, "dram_write_transactions": 1, "shared_load_transactions": 0,
            "shared_store_transactions": 0, "inst_issued": 5000}
    expected = KernelProfile.from_counters("k", {**base, "warps": 100})
    for name in ("warps_launched", "unique_warps_launched"):
        assert KernelProfile.from_counters("k", {**base, name: 100}) == expected, name
    # The table's order: the metric, the event, the grid's column (what profile-command asks for first).
    assert KernelProfile.from_counters("k", {**base, "warps": 7, "warps_launched": 100}) == expected
    assert KernelProfile.from_counters("k", {**base, "unique_warps_launched": 100, "warps_launched": 7}) == expected
    with pytest.raises(InputError, match="kernel 'k': counter 'warps_launched' is not a number"):
        KernelProfile.from_counters("k", {**base, "warps_launched": "many"})
    with pytest.raises(InputError, match="counter 'warps' is missing"):
        KernelProfile.from_counters("k", base)


def test_profile_from_real_nvprof_output(data):
    """nvprof --metrics all --print-gpu-trace of a vector addition on a GTX 1080: its warp
    count is unique_warps_launched (32), with no warps column."""
    from gpudvfs.data.profilers import read_counters

    (kernel,) = read_counters(data / "tool-outputs/nvprof_gtx1080_microgpusim.txt").kernels
    assert "warps" not in kernel.metrics and kernel.metrics["unique_warps_launched"] == 32
    p = KernelProfile.from_counters(kernel.name, kernel.metrics)
    assert p.warps_total == 32 and p.comp_inst == pytest.approx(408 / 32)
    assert p.gld_trans == pytest.approx((66 + 26) / 32)


def test_an_application_is_held_out_with_every_kernel_of_it():
    """The protocol's groups: a name's application is its first '/'-part without case and
    punctuation, one beginning another joins them (NV-DVFS's 'scan' in one file, its kernels
    in the other), and the joining is transitive."""
    from gpudvfs.evaluation.nested import application_groups

    names = ["scan", "scanScanExclusiveShared/scanExclusiveShared/input00", "scanUniformUpdate/uniformUpdate/input00",
             "matrixMul(Global)", "matrixMulGlobal/matrixMulCUDA/input00", "gaussian/Fan2/input00", "srad", "SRAD/k"]
    g = application_groups(names)
    assert g[0] == g[1] == g[2] and g[3] == g[4] and g[6] == g[7]
    assert len(set(g.tolist())) == 4
    assert application_groups(["a", "b"]).tolist() == [0, 1]


@settings(max_examples=50, deadline=None)
@given(st.integers(2, 8), st.integers(2, 12), st.integers(0, 2**32 - 1))
def test_the_nested_choice_never_sees_the_held_out_group(n_candidates, n_columns, seed):
    """Each column's candidate is the least mean error over the columns outside its group:
    changing a column's group mates' errors never changes its choice, and with every column
    its own group the choice is the plain leave-one-out."""
    from gpudvfs.evaluation.nested import nested_choice

    rng = np.random.default_rng(seed)
    errors = rng.random((n_candidates, n_columns))
    groups = rng.integers(0, max(2, n_columns // 2), n_columns)
    groups[0], groups[-1] = 0, 1  # at least two groups
    chosen = nested_choice(errors, groups)
    for j in range(n_columns):
        outside = groups != groups[j]
        assert chosen[j] == np.argmin(errors[:, outside].mean(axis=1))
        moved = errors.copy()
        moved[:, ~outside] = rng.random((n_candidates, int((~outside).sum())))
        assert nested_choice(moved, groups)[j] == chosen[j]
    loo = [np.argmin(np.delete(errors, j, axis=1).mean(axis=1)) for j in range(n_columns)]
    assert nested_choice(errors).tolist() == loo
    with pytest.raises(InputError, match="at least 2"):
        nested_choice(errors, np.zeros(n_columns, dtype=int))
    with pytest.raises(InputError, match="group labels"):
        nested_choice(errors, groups[:-1])


@settings(max_examples=50, deadline=None)
@given(st.integers(2, 8), st.integers(3, 12), st.integers(0, 2**32 - 1))
def test_the_protocol_choice_never_sees_the_held_out_group(n_candidates, n_columns, seed):
    """The protocol's choice with its aggregate chosen one level in: a column's candidate and
    aggregate depend on the other groups' columns alone, and with one aggregate the choice is
    that aggregate's least over them (the mean's is `nested_choice`)."""
    from gpudvfs.evaluation.nested import AGGREGATES, aggregate_scores, nested_choice, protocol_choice

    rng = np.random.default_rng(seed)
    errors = rng.random((n_candidates, n_columns))
    groups = rng.integers(0, max(2, n_columns // 2), n_columns)
    groups[0], groups[-1] = 0, 1
    chosen, used = protocol_choice(errors, groups)
    assert set(used) <= set(AGGREGATES)
    for j in range(n_columns):
        outside = groups != groups[j]
        moved = errors.copy()
        moved[:, ~outside] = rng.random((n_candidates, int((~outside).sum())))
        c, u = protocol_choice(moved, groups)
        assert (c[j], u[j]) == (chosen[j], used[j])
        for a in AGGREGATES:
            alone = protocol_choice(errors, groups, (a,))[0]
            assert alone[j] == np.argmin(aggregate_scores(errors[:, outside], a))
    assert protocol_choice(errors, groups, ("mean",))[0].tolist() == nested_choice(errors, groups).tolist()
    with pytest.raises(InputError, match="at least 2"):
        protocol_choice(errors, np.zeros(n_columns, dtype=int))
    with pytest.raises(InputError, match="group labels"):
        protocol_choice(errors, groups[:-1])


def test_the_aggregates_by_hand():
    """Each aggregate on a small case worked by hand: three candidates over four kernels, one
    kernel that no candidate fits (10-14%). The mean follows that kernel (candidate 2); the
    trimmed mean, the median and the mean rank follow the other three (candidate 0); tied
    candidates share their mean rank."""
    from gpudvfs.evaluation.nested import aggregate_scores, chosen_aggregate

    errors = np.array([[1.0, 1.0, 1.0, 14.0],
                       [2.0, 2.0, 2.0, 12.0],
                       [2.0, 2.0, 2.0, 10.0]])
    assert aggregate_scores(errors, "mean").tolist() == [4.25, 4.5, 4.0]
    assert aggregate_scores(errors, "trimmed mean").tolist() == [1.0, 2.0, 2.0]
    assert aggregate_scores(errors, "median").tolist() == [1.0, 2.0, 2.0]
    assert aggregate_scores(errors, "log mean") == pytest.approx(np.log(errors).mean(axis=1))
    # Kernel by kernel the ranks are (1, 2.5, 2.5) thrice, then (3, 2, 1).
    assert aggregate_scores(errors, "mean rank").tolist() == [1.5, 2.375, 2.125]
    assert aggregate_scores(np.zeros((2, 3)), "log mean").tolist() == [np.log(1e-12)] * 2
    with pytest.raises(InputError, match="aggregate must be one of"):
        aggregate_scores(errors, "max")
    # Held out in turn (each kernel its own group), the mean chooses candidate 2 for each of
    # the three fitted kernels (2 points each) and the trimmed mean candidate 0 (1 point each);
    # both choose candidate 0 for the fourth (14): the trimmed mean scores 17 against 20.
    assert chosen_aggregate(errors, np.arange(4), ("mean", "trimmed mean")) == "trimmed mean"
    assert chosen_aggregate(errors, np.arange(4), ("median",)) == "median"
    assert chosen_aggregate(errors, np.zeros(4, dtype=int)) == "mean"


def test_the_two_term_split_is_the_models_core_work_over_all():
    """`evaluate.core_share`, the two-term baseline's split, costs a kernel by the model's own
    terms (Rust `KernelInputs::core_share`): issue work alone is all core; with DRAM misses
    the share grows with the memory clock (a miss's delay shrinks); a reference memory clock
    that is no clock is refused with the kernel's name."""
    from gpudvfs.evaluation.time_errors import core_share

    dev = TimeDevice.preset("gtx980")
    compute = KernelProfile("c", 1e5, 60, 8, 0.0, 4.0, 0.0, 300, 0)
    assert core_share(compute, dev, (700.0, 700.0)) == 1.0
    mixed = KernelProfile("m", 1e5, 60, 8, 12.0, 4.0, 0.03, 21, 0)
    lo, hi = (core_share(mixed, dev, (700.0, m)) for m in (500.0, 1000.0))
    assert 0 < lo < hi < 1
    with pytest.raises(InputError, match="kernel 'm': invalid value: mem_mhz must be finite and > 0"):
        core_share(mixed, dev, (700.0, 0.0))
    # The binding itself: rows of the model's 12 inputs, read in place.
    from gpudvfs import _core

    rows = np.array([mixed.inputs()] * 2)
    assert _core.time_core_share(rows, 700.0, dev.params()).tolist() == [core_share(mixed, dev, (700.0, 700.0))] * 2
    with pytest.raises(ValueError, match="inputs must have 12 columns, got 10"):
        _core.time_core_share(rows[:, :10].copy(), 700.0, dev.params())
    with pytest.raises(ValueError, match="inputs must be a C-contiguous array"):
        _core.time_core_share(np.asfortranarray(rows), 700.0, dev.params())


