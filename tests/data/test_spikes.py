"""Spikes of measured grids (`gpudvfs.data.spikes`): single cells that depart from both
neighbours along the core or the memory clock while those agree, found, listed and left out."""

from __future__ import annotations

import csv
import json
import warnings

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from gpudvfs.cli.app import cli
from gpudvfs.data import read, read_measured_grid
from gpudvfs.data.spikes import drop_spikes, find_spikes
from gpudvfs.errors import GpudvfsWarning, InputError

CORES = [500.0, 600.0, 700.0, 800.0, 900.0, 1000.0]
#: A V100-like sweep: 5 MHz apart, a cell's neighbours agree within 5% wherever the series is smooth.
FINE = [float(c) for c in range(500, 1001, 5)]


def smooth(core, mem, scale=1.0):
    """A memory-and-core-bound time and a cubic-ish power: what a workload's cells look like."""
    return scale * (300.0 / core + 200.0 / mem), scale * (30.0 + 40.0 * (core / 1000.0) ** 2.5 + 0.01 * mem)


def write_grid(path, cells):
    """A grid CSV from {(workload, core, mem): (time_ms, watts)}."""
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["benchmark", "coreF", "memF", "time/ms", "power/W"])
        for (name, c, m), (t, p) in cells.items():
            w.writerow([name, c, m, f"{t:.9g}", f"{p:.9g}"])
    return read(path)


def cells(workloads=("a", "b"), mems=(700.0, 1000.0), cores=CORES):
    return {(n, c, m): smooth(c, m, 1 + i) for i, n in enumerate(workloads) for m in mems for c in cores}


def test_a_spike_in_power_and_one_in_time_are_found_with_their_neighbours(tmp_path):
    grid_cells = cells(cores=FINE)
    t, p = grid_cells[("a", 800.0, 700.0)]
    grid_cells[("a", 800.0, 700.0)] = (t, 0.75 * p)
    t, p = grid_cells[("b", 600.0, 1000.0)]
    grid_cells[("b", 600.0, 1000.0)] = (1.2 * t, p)
    grid = write_grid(tmp_path / "g.csv", grid_cells)
    found = find_spikes(grid)
    assert [(s.workload, s.core_mhz, s.mem_mhz, s.quantity) for s in found] == [
        ("a", 800.0, 700.0, "power"), ("b", 600.0, 1000.0, "time")]
    power = found[0]
    assert power.neighbour_mhz == (795.0, 805.0)
    assert power.neighbours == (pytest.approx(smooth(795.0, 700.0)[1]), pytest.approx(smooth(805.0, 700.0)[1]))
    assert power.deviation == pytest.approx(0.75 * smooth(800.0, 700.0)[1] / np.sqrt(np.prod(power.neighbours)) - 1)
    assert "25% below" in str(power) and "'a' at 800/700 MHz" in str(power)
    assert "above" in str(found[1])


#: Memory clocks 50 MHz apart: a memory series fine enough to judge.
MEMS = [float(m) for m in range(700, 1101, 50)]


def test_a_cell_at_the_edge_of_its_core_series_is_judged_along_the_memory_clock(tmp_path):
    """The highest core clock has one neighbour along the core clock; along the memory clock
    it has two. A cell inside both series is a spike along both and is listed once."""
    grid_cells = cells(workloads=("a",), mems=MEMS)
    edge, inner = ("a", 1000.0, 900.0), ("a", 700.0, 900.0)
    t, p = grid_cells[edge]
    grid_cells[edge] = (t, 1.3 * p)
    t, p = grid_cells[inner]
    grid_cells[inner] = (0.7 * t, p)
    found = find_spikes(write_grid(tmp_path / "g.csv", grid_cells), 0.25)
    assert [(s.core_mhz, s.mem_mhz, s.quantity, s.axis) for s in found] == [
        (700.0, 900.0, "time", "core"), (1000.0, 900.0, "power", "memory")]
    assert found[1].neighbour_mhz == (850.0, 950.0)
    assert found[1].neighbours == (pytest.approx(smooth(1000.0, 850.0)[1]), pytest.approx(smooth(1000.0, 950.0)[1]))
    assert "30% above" in str(found[1]) and "(at 850 and 950 MHz memory)" in str(found[1])
    # Two memory clocks make no series: the edge cell is not judged at all, the inner one still is.
    two = {k: v for k, v in grid_cells.items() if k[2] in (850.0, 900.0)}
    assert [(s.core_mhz, s.axis) for s in find_spikes(write_grid(tmp_path / "h.csv", two), 0.25)] == [(700.0, "core")]


def test_on_a_coarse_grid_a_neighbour_of_a_spike_is_not_taken_for_it(tmp_path):
    """100 MHz apart, power 25% low at 800 MHz leaves 700 MHz above its agreeing neighbours
    (600 and the low 800): 700 is not the spike, and 800, whose neighbours differ by more than
    the factor, cannot be judged."""
    grid_cells = cells()
    t, p = grid_cells[("a", 800.0, 700.0)]
    grid_cells[("a", 800.0, 700.0)] = (t, 0.75 * p)
    grid = write_grid(tmp_path / "g.csv", grid_cells)
    assert find_spikes(grid) == []
    assert [s.core_mhz for s in find_spikes(grid, 0.3)] == [800.0]


def test_steps_ends_and_other_series_are_not_spikes(tmp_path):
    """A step that moves a neighbour too is physics; the first and last clocks have one
    neighbour; a cell is compared with its own workload at its own memory clock only."""
    grid_cells = cells()
    for c in (800.0, 900.0, 1000.0):  # a knee: every clock from 800 up is 30% faster and draws 30% more
        t, p = grid_cells[("a", c, 700.0)]
        grid_cells[("a", c, 700.0)] = (0.7 * t, 1.3 * p)
    for c in (500.0, 1000.0):
        t, p = grid_cells[("b", c, 700.0)]
        grid_cells[("b", c, 700.0)] = (t, 2 * p)
    assert find_spikes(write_grid(tmp_path / "g.csv", grid_cells)) == []
    # Workload b is 2x slower than a at each clock; read side by side, they make no spikes.
    assert find_spikes(write_grid(tmp_path / "h.csv", cells(mems=(700.0,)))) == []


@settings(max_examples=60, deadline=None)
@given(at=st.integers(1, len(FINE) - 2), threshold=st.floats(0.06, 0.5), margin=st.floats(0.1, 1.0),
       up=st.booleans(), quantity=st.sampled_from(["time", "power"]))
def test_a_planted_spike_is_found_exactly_when_it_passes_the_threshold(tmp_path_factory, at, threshold, margin, up,
                                                                       quantity):
    """On a fine sweep, a smooth series has no spike at any threshold here; a cell moved by a
    factor beyond 1 + threshold is the one spike found, and one moved by a factor within it
    is not."""
    path = tmp_path_factory.mktemp("spike") / "g.csv"
    for factor, expected in (((1 + threshold) * (1 + margin), 1), (1 + threshold / (1 + margin), 0)):
        f = factor if up else 1 / factor
        grid_cells = cells(workloads=("a",), mems=(900.0,), cores=FINE)
        key = ("a", FINE[at], 900.0)
        t, p = grid_cells[key]
        grid_cells[key] = (t * f, p) if quantity == "time" else (t, p * f)
        found = find_spikes(write_grid(path, grid_cells), threshold)
        assert len(found) == expected
        if expected:
            assert (found[0].core_mhz, found[0].quantity) == (FINE[at], quantity)
            assert found[0].deviation == pytest.approx(f - 1, rel=0.05, abs=0.02)


@pytest.mark.parametrize("bad", [0, -0.1, float("nan"), float("inf"), True, "0.1", None])
def test_a_bad_threshold_is_refused(tmp_path, bad):
    grid = write_grid(tmp_path / "g.csv", cells())
    with pytest.raises(InputError, match="spike threshold must be a number > 0"):
        find_spikes(grid, bad)


def test_dropping_spikes_leaves_their_rows_out_and_says_so(tmp_path):
    grid_cells = cells(cores=FINE)
    t, p = grid_cells[("a", 800.0, 700.0)]
    grid_cells[("a", 800.0, 700.0)] = (t, 0.7 * p)
    grid = write_grid(tmp_path / "g.csv", grid_cells)
    with pytest.warns(GpudvfsWarning, match=r"1 row\(s\) left out as spikes.*'a' at 800/700 MHz"):
        clean = drop_spikes(grid)
    assert len(clean) == len(grid) - 1 and len(clean.skipped) == 1
    assert "left out as a spike" in str(clean.skipped[0])
    assert not ((clean.workload == "a") & (clean.core_mhz == 800.0) & (clean.mem_mhz == 700.0)).any()
    # A table compares workloads pair by pair: the pair goes for every workload, with a warning.
    with pytest.warns(GpudvfsWarning, match=f"1 of {2 * len(FINE)} clock pairs are left out"):
        configs, (watts,) = clean.table(["a", "b"], clean.watts)
    assert [800.0, 700.0] not in configs.tolist() and watts.shape == (2, 2 * len(FINE) - 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert drop_spikes(clean) is clean  # nothing left to drop: the same grid, no warning


def test_the_spikes_of_the_public_grids(data):
    """The V100 DCGM grid's power has eleven single-clock glitches at 10%, among them bfs at
    1200 MHz (25% below both neighbours): its minimum-energy pair. The GTX 980 time+power grid
    has none; the time grid one (quasirandomGenerator, 12% slower at 700/600 MHz)."""
    v100 = read_measured_grid(data / "nsfcac/v100_spec_dev.csv", "test", ("dcgm",))
    found = find_spikes(v100, 0.1)
    assert {(s.workload, s.core_mhz) for s in found} == {
        ("bfs", 697.0), ("bfs", 832.0), ("bfs", 975.0), ("bfs", 1200.0), ("bfs", 1327.0), ("mriq", 1350.0),
        ("tpacf", 630.0), ("tpacf", 697.0), ("tpacf", 825.0), ("tpacf", 870.0), ("tpacf", 1155.0)}
    assert all(s.quantity == "power" for s in found)
    bfs = v100.workload == "bfs"
    energy = (v100.time_ms * v100.watts)[bfs]
    assert v100.core_mhz[bfs][np.argmin(energy)] == 1200.0
    assert [s.core_mhz for s in find_spikes(v100, 0.25)] == [1200.0, 1350.0]
    assert find_spikes(read(data / "nv-dvfs-benchmark/gtx980_time_power_dev.csv"), 0.1) == []
    [q] = find_spikes(read(data / "nv-dvfs-benchmark/gtx980_time_dev.csv"), 0.1)
    assert (q.workload, q.core_mhz, q.mem_mhz, q.quantity, q.axis) == (
        "quasirandomGenerator", 700.0, 600.0, "time", "core")


def test_the_spikes_command_and_the_option(data, tmp_path):
    run = CliRunner().invoke
    v100 = str(data / "nsfcac/v100_spec_dev.csv")
    r = run(cli, ["data", "spikes", v100, "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["threshold"] == 0.1 and out["rows"] == 1287 and len(out["spikes"]) == 11
    # One memory clock: every spike is judged along the core clock.
    assert {s["axis"] for s in out["spikes"]} == {"core"}
    r = run(cli, ["data", "info", v100, "--json"])
    assert r.exit_code == 0 and json.loads(r.stdout)["spikes"] == 11
    r = run(cli, ["data", "spikes", v100, "--threshold", "0.25"])
    assert r.exit_code == 0 and "2 spike(s) in 1287 rows" in r.output and "'bfs' at 1200 MHz" in r.output
    r = run(cli, ["data", "spikes", v100, "--threshold", "0"])
    assert r.exit_code == 2 and "--threshold" in r.output
    r = run(cli, ["data", "spikes", str(data / "gpupowermodel/gtx980_micro.csv")])
    assert r.exit_code == 2 and "the spike check reads" in r.output
    grid = str(data / "nv-dvfs-benchmark/gtx980_time_dev.csv")
    r = run(cli, ["time", "eval", grid, "--device", "gtx980", "--drop-spikes", "0.1", "--json"])
    assert r.exit_code == 0, r.output
    assert "left out as spikes" in r.output and "quasirandomGenerator" in r.output
    r = run(cli, ["govern", "replay", v100, "--device", "v100-pcie", "--drop-spikes", "-1"])
    assert r.exit_code == 2 and "--drop-spikes" in r.output
