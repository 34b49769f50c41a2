"""The `gpudvfs` command line: data info (table and JSON) and its errors."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from gpudvfs.cli.app import cli


@pytest.fixture
def run():
    runner = CliRunner()
    return lambda *args: runner.invoke(cli, [str(a) for a in args], catch_exceptions=False)


def test_info_json_of_a_sweep(run, tmp_path):
    out = tmp_path / "sweep.csv"
    r = run("sweep", "--suite", "time", "-o", out, "--mem-mhz", "3505", "--core-mhz", "975,595")
    assert r.exit_code == 0, r.output
    r = run("data", "info", out, "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["format"] == "tidy"
    assert d["rows"] == 4 * 2 and d["workloads"] == 4 and d["configurations"] == 2
    assert d["core_mhz_levels"] == [595.0, 975.0] and d["mem_mhz_levels"] == [3505.0]


def test_info_table_on_real_file(run, data):
    r = run("data", "info", data / "nv-dvfs-benchmark/gtx980_time_dev.csv")
    assert r.exit_code == 0, r.output
    assert "nvprof" in r.output and "400, 500, 600, 700, 800, 900, 1000" in r.output


def test_info_json_on_real_file(run, data):
    r = run("data", "info", data / "gpupowermodel/titanx_real_dev.csv", "--json")
    d = json.loads(r.output)
    assert d["benchmarks"] == 17 and d["configurations"] == 64
    assert d["components"] == ["SP", "INT", "DP", "SFU", "CF", "L2", "Shared", "DRAM"]
    assert 0 < d["ranges"]["watts"][0] < d["ranges"]["watts"][1]


def test_format_override(run, data):
    r = run("data", "info", data / "gpupowermodel/titanx_real_dev.csv", "--format", "nvprof")
    assert r.exit_code == 2
    assert "header lacks the column 'appName'" in r.output


def test_invalid_rows_error_then_skip(run, data):
    path = data / "gpupowermodel/k40c_micro.csv"
    r = run("data", "info", path)
    assert r.exit_code == 2
    assert "line 33, column 4" in r.output and "utilization" in r.output
    r = run("data", "info", path, "--skip-invalid", "--json")
    assert r.exit_code == 0
    assert len(json.loads(r.output)["skipped"]) == 8


def test_missing_file(run, tmp_path):
    r = run("data", "info", tmp_path / "absent.csv")
    assert r.exit_code == 2
    assert "file not found" in r.output
