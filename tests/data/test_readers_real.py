"""Every file under ../shared/data reads, writes back and reads again to equal arrays,
with the shapes its README states. Two files hold invalid rows; they read only with
on_invalid="skip", and the test pins exactly which rows are left out and why."""

from __future__ import annotations

import re

import numpy as np
import pytest

import gpudvfs
from gpudvfs import MeasurementGrid, PowerDataset, UtilizationTable

# file -> (format, rows, workloads, configurations) after reading
EXPECTED = {
    "gpupowermodel/titanx_micro.csv": ("gpmtool", 6528, 102, 64),
    "gpupowermodel/titanx_real_dev.csv": ("gpmtool", 1088, 17, 64),
    "gpupowermodel/titanx_hpca18_micro.csv": ("gpmtool", 1328, 83, 16),
    "gpupowermodel/titanx_hpca18_real_utils.csv": ("gpmtool-utils", 26, 26, None),
    "gpupowermodel/titanxp_micro.csv": ("gpmtool", 2496, 104, 24),
    "gpupowermodel/gtx980_micro.csv": ("gpmtool", 765, 85, 9),
    "gpupowermodel/k40c_micro.csv": ("gpmtool", 404, 101, 4),
    "nv-dvfs-benchmark/gtx980_time_dev.csv": ("nvdvfs", 490, 10, 49),
    "nv-dvfs-benchmark/gtx980_time_power_dev.csv": ("nvdvfs", 540, 15, 36),
    "nsfcac/v100_spec_dev.csv": ("dcgm", 1287, 11, 117),
    "gpuptxmodel/titanx_microbenchmarks.csv": ("ptx", 4480, 140, 32),
    "gpuptxmodel/titanx_realbenchmarks.csv": ("ptx", 768, 24, 32),
    # The docs' 51 x 8: 52 jobs, one of them measured at 2 of the 8 power limits.
    "zeus/power_limit_rtx6000.csv": ("zeus", 410, 52, 8),
    "zeus/power_limit_v100.csv": ("zeus", 476, 68, 7),
    "perseus/bloom_a40_stages.csv": ("perseus", 960, 16, 60),
    "perseus/gpt3-175b_a40_stages.csv": ("perseus", 960, 16, 60),
}
# Files whose invalid rows must be skipped explicitly: file -> (lines, what the message says)
INVALID = {
    # Two K40c benchmarks have wrapped-around counters (utilizations of -3e9).
    "gpupowermodel/k40c_micro.csv": ([33, 34, 35, 36, 41, 42, 43, 44], "expected a utilization in [0, 1]"),
    # stencil2d is measured twice; the second block is a duplicate.
    "gpuptxmodel/titanx_realbenchmarks.csv": ([793], "measured again"),
}


def _workloads(ds) -> int:
    if isinstance(ds, PowerDataset):
        return len(ds.benchmarks)
    if isinstance(ds, UtilizationTable):
        return len(ds.names)
    return len(np.unique(ds.workload))


def _arrays(ds) -> dict[str, np.ndarray]:
    if isinstance(ds, MeasurementGrid):
        return dict(ds.columns)
    out = {"utilization": ds.utilization}
    if isinstance(ds, PowerDataset):
        out |= {"watts": ds.watts, "freqs": ds.freqs_mhz, "benchmark": ds.benchmark}
    return out


def test_every_data_file_is_covered(data):
    found = {str(p.relative_to(data)) for p in data.glob("*/*.csv") if p.parent.name != "tool-outputs"}
    assert found == set(EXPECTED)


def test_traces_read_with_their_knob_and_power(data):
    """Zeus's knob is a power limit and its time an epoch's; Perseus gives energy, read as
    power over its time, in seconds."""
    zeus = gpudvfs.read(data / "zeus/power_limit_v100.csv")
    d = zeus.describe()
    assert zeus.knob == "power-limit" and d["power_limit_w_levels"] == [100, 125, 150, 175, 200, 225, 250]
    assert zeus.workload[0] == "cifar100/shufflenetv2/1024/adadelta"
    assert zeus.time_ms[0] == pytest.approx(11276.666666666666) and zeus.watts[0] == pytest.approx(86.86460850784009)
    perseus = gpudvfs.read(data / "perseus/bloom_a40_stages.csv")
    assert perseus.knob == "clocks" and perseus.mem_mhz is None and perseus.workload[0] == "0/forward"
    assert perseus.time_ms[0] == pytest.approx(133.44467067718507)
    assert perseus.watts[0] == pytest.approx(39.136634999871255 / 0.13344467067718507)


@pytest.mark.parametrize("rel", sorted(EXPECTED))
def test_reads_and_round_trips(data, rel, tmp_path):
    fmt, rows, workloads, configs = EXPECTED[rel]
    path = data / rel
    assert gpudvfs.detect_format(path) == fmt
    if rel in INVALID:
        lines, message = INVALID[rel]
        with pytest.raises(gpudvfs.DataFileError, match=re.escape(message)) as e:
            gpudvfs.read(path)
        assert e.value.line == lines[0]
        with pytest.warns(gpudvfs.GpudvfsWarning, match="skipped"):
            ds = gpudvfs.read(path, on_invalid="skip")
        assert [p.line for p in ds.skipped] == lines
        assert all(message in p.message for p in ds.skipped)
    else:
        ds = gpudvfs.read(path)
        assert ds.skipped == ()
    assert ds.format == fmt
    assert len(ds) == rows
    assert _workloads(ds) == workloads
    if configs is not None:
        assert ds.describe()["configurations"] == configs

    out = tmp_path / "copy.csv"
    gpudvfs.write(ds, out)
    again = gpudvfs.read(out)
    a, b = _arrays(ds), _arrays(again)
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)
    if isinstance(ds, PowerDataset):
        assert again.benchmarks == ds.benchmarks and again.row_names == ds.row_names
        assert again.reference_mhz == ds.reference_mhz and again.components == ds.components


@pytest.mark.filterwarnings("ignore::gpudvfs.GpudvfsWarning")
@pytest.mark.parametrize("rel", sorted(EXPECTED))
def test_reads_alike_in_small_chunks(data, rel, monkeypatch):
    """Read a few lines and bytes at a time, every file gives the same arrays and skips."""
    whole = gpudvfs.read(data / rel, on_invalid="skip")
    monkeypatch.setattr(gpudvfs.data.source, "CHUNK_LINES", 7)
    monkeypatch.setattr(gpudvfs.data.source, "BLOCK_BYTES", 100)
    chunked = gpudvfs.read(data / rel, on_invalid="skip")
    assert chunked.skipped == whole.skipped
    a, b = _arrays(whole), _arrays(chunked)
    assert a.keys() == b.keys()
    for k in a:
        assert a[k].dtype == b[k].dtype, k
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)


def test_power_dataset_fields(data):
    ds = gpudvfs.read_power_dataset(data / "gpupowermodel/titanx_micro.csv")
    assert ds.reference_mhz == (975.0, 3505.0)
    assert ds.domain_sizes == (7, 1)
    assert ds.components == ("SP", "INT", "DP", "SFU", "CF", "L2", "Shared", "DRAM")
    assert ds.configs.shape == (64, 2)
    # Names repeat across sweeps ("1" in the INT, SP and DP sweeps): told apart by utilizations.
    assert "1" in ds.benchmarks and "1#2" in ds.benchmarks
    u = ds.benchmark_utilization()
    assert u.shape == (102, 8)
    np.testing.assert_array_equal(u[ds.benchmark], ds.utilization)


def test_read_power_dataset_rejects_other_formats(data):
    with pytest.raises(gpudvfs.InputError, match="utils"):
        gpudvfs.read_power_dataset(data / "gpupowermodel/titanx_hpca18_real_utils.csv")
    with pytest.raises(gpudvfs.DataFileError):
        gpudvfs.read_power_dataset(data / "nsfcac/v100_spec_dev.csv")


def test_grid_roles(data):
    g = gpudvfs.read(data / "nsfcac/v100_spec_dev.csv")
    assert g.mem_mhz is None
    # run_time is in seconds; time_ms converts.
    np.testing.assert_allclose(g.time_ms, g.columns["run_time"] * 1000.0)
    assert "sm_active" in g.metrics and "run_time" not in g.metrics and "index" not in g.metrics
    tp = gpudvfs.read(data / "nv-dvfs-benchmark/gtx980_time_power_dev.csv")
    blocks, threads = gpudvfs.data.launch_geometry(tp)
    assert blocks.shape == (540, 3) and tuple(blocks[0]) == (3584, 1, 1) and tuple(threads[0]) == (128, 1, 1)
    assert tp.watts is not None and np.all(tp.watts > 0)


@pytest.mark.parametrize("name,fmt,kind", [
    ("ncu_a100_learningnote4dev.csv", "ncu", "CounterReport"),
    ("ncu_gtx1080_microgpusim.txt", "ncu", "CounterReport"),  # the application's output first
    ("nvprof_gtx1080ti_magus.csv", "nvprof", "CounterReport"),
    ("nvprof_gtx1080_microgpusim.txt", "nvprof", "CounterReport"),
    ("nvidia-smi_h800_cuda-test.csv", "nvidia-smi", "SmiLog"),
])
def test_tool_outputs_are_read_as_what_they_are(data, name, fmt, kind):
    path = data / "tool-outputs" / name
    assert gpudvfs.detect_format(path) == fmt
    ds = gpudvfs.read(path)
    assert type(ds).__name__ == kind and ds.describe()["format"] == fmt
    with pytest.raises(gpudvfs.InputError, match="read only"):
        gpudvfs.write(ds, "unused.csv")
    with pytest.raises(gpudvfs.DataFileError, match="reported an error and printed no counters"):
        gpudvfs.read(data / "tool-outputs/ncu_b200_roofline-analysis_app-error.csv")
