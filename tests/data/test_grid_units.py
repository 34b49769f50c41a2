"""Grids as published: memory clocks in another unit than NVML's (a GDDR data rate as
nvidia-settings gives it, 4000-11000 MHz on a GTX 1080 Ti whose NVML clock is 5505), read and
converted with a warning or through --mem-clock-unit, and refused where the unit is ambiguous;
an NV-DVFS grid with its launch geometry left blank, read under --plain."""

from __future__ import annotations

import csv
import json
import re
import warnings

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

import gpudvfs
from gpudvfs.catalog import catalog, lookup
from gpudvfs.catalog.mem_unit import in_gpu_mem_unit
from gpudvfs.cli.app import cli
from gpudvfs.errors import DataFileError, GpudvfsWarning, InputError

GTX980_TIME = "nv-dvfs-benchmark/gtx980_time_dev.csv"
GTX980_POWER = "nv-dvfs-benchmark/gtx980_time_power_dev.csv"
HEADER = "abbr.,appName,coreF,memF,time/ms,warps,achieved_occupancy"


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def nvdvfs_grid(path, mem_mhz, header=HEADER):
    """Two applications at two core clocks and each memory clock, in NV-DVFS-Benchmark's columns."""
    rows = [f"{a[:2].upper()},{a},{fc},{fm:g},{1e5 / fc + 1e6 / fm:.4f},32768,0.9"
            for a in ("backprop", "vectorAdd") for fc in (1000, 1500) for fm in mem_mhz]
    path.write_text("\n".join([header, *rows]) + "\n")
    return path


def scaled(src, dst, factor, apps=None, blank=()):
    """A copy of a real NV-DVFS grid with its memory clocks times ``factor``, only ``apps``,
    the columns ``blank`` left empty."""
    with open(src, newline="") as f:
        rows = list(csv.reader(f))
    head = rows[0]
    m, a = head.index("memF"), head.index("appName")
    out = [head] + [["" if head[j] in blank else f"{float(c) * factor:g}" if j == m else c for j, c in enumerate(r)]
                    for r in rows[1:] if apps is None or r[a] in apps]
    with open(dst, "w", newline="") as f:
        csv.writer(f).writerows(out)
    return dst


# ------------------------------------------------------------------ the reader

def test_a_data_rate_grid_is_converted_to_nvmls_clocks_with_a_warning(tmp_path):
    """A GTX 1080 Ti grid as nvidia-settings gives it: 11000 MHz is twice NVML's 5505 (within
    rounding), so the data rate, halved."""
    grid = gpudvfs.read(nvdvfs_grid(tmp_path / "g.csv", [4000, 7000, 11000]))
    assert grid.mem_clock_to_nvml == 2.0  # the format's own unit, NVIDIA Inspector's
    with pytest.warns(GpudvfsWarning, match=r"read as the data rate .* converted to NVML's \(2000-5500 MHz\)"):
        got = in_gpu_mem_unit(grid, lookup("gtx1080ti"))
    assert got.mem_clock_to_nvml == 1.0
    assert got.mem_mhz.tolist() == (grid.mem_mhz / 2).tolist()
    assert got.core_mhz.tolist() == grid.core_mhz.tolist() and got.time_ms.tolist() == grid.time_ms.tolist()


def test_a_data_rate_grid_of_common_names_and_hbm(tmp_path):
    """Any grid format, and HBM (a V100's 877 MHz clock, 1754 MT/s)."""
    path = tmp_path / "v100.csv"
    path.write_text("benchmark,core_mhz,mem_mhz,time_ms\na,1000,1754,2.0\na,1300,1754,1.6\nb,1000,1754,3.0\n")
    grid = gpudvfs.read(path)
    assert grid.format == "grid" and grid.mem_clock_to_nvml == 1.0
    with pytest.warns(GpudvfsWarning, match="read as the data rate"):
        assert in_gpu_mem_unit(grid, lookup("v100-pcie")).mem_mhz.tolist() == [877.0] * 3


def test_a_unit_named_is_read_in_it_and_the_formats_own_is_unchanged(tmp_path):
    grid = gpudvfs.read(nvdvfs_grid(tmp_path / "g.csv", [2000, 5505]))
    spec = lookup("gtx1080ti")
    nvml = in_gpu_mem_unit(grid, spec, "nvml")
    assert (nvml.mem_mhz.tolist(), nvml.mem_clock_to_nvml) == (grid.mem_mhz.tolist(), 1.0)
    rate = in_gpu_mem_unit(grid, spec, "data-rate")
    assert (rate.mem_mhz.tolist(), rate.mem_clock_to_nvml) == ((grid.mem_mhz / 2).tolist(), 1.0)
    assert in_gpu_mem_unit(grid, spec, "half-nvml") is grid
    with pytest.raises(InputError, match="memory clock unit 'mhz': expected one of nvml, data-rate, half-nvml"):
        in_gpu_mem_unit(grid, spec, "mhz")


@pytest.mark.parametrize("gpu,mem,readings", [
    # Above the 1080 Ti's 5505 in NV-DVFS's unit (half NVML's): NVML's clock overclocked 27%, or
    # the data rate up to 3500; neither is on a clock of the catalog.
    ("gtx1080ti", [3500, 7000], "as NVML's clock (nvidia-smi's), up to 7000 MHz; as the data rate"),
    # A K40c's two clocks (3004, 324): 3004 as NVML's, 648 as the data rate of 324.
    ("k40c", [648, 3004], "as the data rate (nvidia-settings' GDDR clock, NVML's x transfers per clock), up to 1502"),
])
def test_an_ambiguous_unit_is_refused_naming_the_option(tmp_path, gpu, mem, readings):
    grid = gpudvfs.read(nvdvfs_grid(tmp_path / "g.csv", mem))
    with pytest.raises(InputError, match=re.escape("--mem-clock-unit nvml|data-rate|half-nvml")) as e:
        in_gpu_mem_unit(grid, lookup(gpu))
    assert "their unit is ambiguous" in str(e.value) and readings in str(e.value)
    assert "g.csv: memory clocks" in str(e.value)


def test_clocks_no_unit_holds_are_left_to_the_clock_check(tmp_path):
    grid = gpudvfs.read(nvdvfs_grid(tmp_path / "g.csv", [40000]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert in_gpu_mem_unit(grid, lookup("gtx1080ti")) is grid


def test_the_real_gtx980_grids_read_as_before(data):
    """Half NVML's clock (NVIDIA Inspector's), 400-1000 MHz: the format's unit, unchanged."""
    for rel in (GTX980_TIME, GTX980_POWER):
        grid = gpudvfs.read(data / rel)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert in_gpu_mem_unit(grid, lookup("gtx980")) is grid
        assert grid.mem_clock_to_nvml == 2.0 and grid.mem_mhz.max() == 1000


@settings(max_examples=60, deadline=None)
@given(key=st.sampled_from(sorted(catalog())), fractions=st.lists(st.floats(0.3, 1.0), min_size=1, max_size=5))
def test_a_grid_in_the_data_rate_reads_back_nvmls_clocks(key, fractions):
    """Any catalog GPU: clocks at or below its highest in NVML's unit read unchanged; the same
    times its transfers per clock, its highest among them, read as those NVML clocks."""
    spec = lookup(key)
    highest = max(spec.mem_mhz)
    nvml = np.array([highest, *(round(highest * f) for f in fractions)], dtype=float)
    cols = {"w": np.array(["a"] * len(nvml)), "c": np.full(len(nvml), 1000.0), "m": nvml, "t": np.ones(len(nvml))}
    roles = {"app": "w", "core_mhz": "c", "mem_mhz": "m", "time": "t"}
    grid = gpudvfs.data.datasets.MeasurementGrid("grid", "g.csv", cols, roles, ("w",))
    assert in_gpu_mem_unit(grid, spec) is grid
    rate = gpudvfs.data.datasets.MeasurementGrid("grid", "g.csv", cols | {"m": nvml * spec.dram_transfers_per_clock},
                                                 roles, ("w",))
    with pytest.warns(GpudvfsWarning, match="read as the data rate"):
        got = in_gpu_mem_unit(rate, spec)
    np.testing.assert_allclose(got.mem_mhz, nvml, rtol=1e-12)


# ------------------------------------------------------------------ the commands that read grids

@pytest.fixture
def rate_grids(data, tmp_path):
    """The GTX 980 grids with GTX 1080 Ti-like data-rate memory clocks (memF x 11: 4400-11000
    MHz, NVML's 2200-5500), and ambiguous ones (memF x 7: up to 7000)."""
    return {name: scaled(data / rel, tmp_path / f"{name}.csv", factor, apps)
            for name, rel, factor, apps in [("time", GTX980_TIME, 11, None), ("power", GTX980_POWER, 11, None),
                                            ("time3", GTX980_TIME, 11, {"backprop", "histogram", "vectorAdd"}),
                                            ("ambiguous", GTX980_POWER, 7, None)]}


@pytest.mark.parametrize("command,grid", [
    (["select", "eval"], "power"), (["select", "fit-power", "-o", "{tmp}/m.json"], "power"),
    (["time", "eval"], "time"), (["time", "predict", "--kernel", "vectorAdd"], "time"),
    (["time", "cv"], "time3"), (["govern", "replay", "--steps", "300"], "power"),
    (["power", "fit", "-o", "{tmp}/p.json"], "power"),
])
def test_the_commands_read_a_data_rate_grid(rate_grids, tmp_path, command, grid):
    """Read as the data rate and converted: the reference in NVML's unit (700, 350 x 11 / 2)."""
    args = [a.format(tmp=tmp_path) for a in command]
    r = run(*args, rate_grids[grid], "--device", "gtx1080ti", "--reference", "700,3850")
    assert r.exit_code == 0, r.output
    low = {"power": 2750, "time": 2200, "time3": 2200}[grid]  # memF from 500 and 400
    assert f"read as the data rate (nvidia-settings' GDDR clock, NVML's x transfers per clock), converted to " \
           f"NVML's ({low}-5500 MHz)" in " ".join(r.output.split())


@pytest.mark.parametrize("command", [["select", "eval"], ["time", "eval"], ["time", "cv"], ["govern", "replay"],
                                     ["select", "choose", "--power-model", "m.json"], ["power", "fit"]])
def test_the_commands_refuse_an_ambiguous_grid_naming_the_option(rate_grids, command):
    r = run(*command, rate_grids["ambiguous"], "--device", "gtx1080ti")
    out = " ".join(r.output.split())
    assert r.exit_code == 2, r.output
    assert "their unit is ambiguous" in out and "--mem-clock-unit nvml|data-rate|half-nvml" in out


def test_the_option_reads_an_ambiguous_grid(rate_grids):
    r = run("select", "eval", rate_grids["ambiguous"], "--device", "gtx1080ti", "--mem-clock-unit", "data-rate",
            "--reference", "700,2450", "--json")
    assert r.exit_code == 0, r.output
    # memF x 7 / 2: the one pair for all in NVML's unit, 1750-3500 MHz.
    pair = json.loads(r.stdout)["baselines"]["single_pair"]["hindsight"]["pair"]
    assert pair[1] in {m * 3.5 for m in range(500, 1001, 100)}


def test_a_gtx980_grid_on_another_gpu_is_still_refused(data):
    r = run("select", "eval", data / GTX980_POWER, "--device", "v100-pcie")
    assert r.exit_code == 2 and "lie above a Tesla V100-PCIE-16GB's 877 MHz" in r.output, r.output


# ------------------------------------------------------------------ launch geometry left blank

def test_a_blank_launch_geometry_is_read_under_plain(data, tmp_path):
    """Empty `blocks` and `warps`: refused where counters are read (naming the cell), read
    with --plain and no --columns (its counters as text)."""
    path = scaled(data / GTX980_POWER, tmp_path / "blank.csv", 1, blank=("blocks", "warps"))
    with pytest.raises(DataFileError, match=r"column 9 \('warps'\): expected a number, found ''"):
        gpudvfs.read(path)
    grid = gpudvfs.read(path, counters=False)
    assert len(grid) == 540 and grid.metrics == {} and grid.mem_clock_to_nvml == 2.0
    r = run("govern", "replay", path, "--plain", "--steps", "300", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["knob"] == "clocks"
    r = run("govern", "replay", path, "--device", "gtx980")
    assert r.exit_code == 2 and "'warps'): expected a number" in r.output
