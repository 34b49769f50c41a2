"""The `gpudvfs` command line: data info (table and JSON) and its errors."""

from __future__ import annotations

import json
import re

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
    d = json.loads(r.stdout)
    assert d["format"] == "tidy"
    assert d["rows"] == 4 * 2 and d["workloads"] == 4 and d["configurations"] == 2
    assert d["core_mhz_levels"] == [595.0, 975.0] and d["mem_mhz_levels"] == [3505.0]
    # The reference clocks come from the sweep's record beside the CSV.
    assert d["reference_mhz"] == [975.0, 3505.0] and d["reference_from"] == "sweep.csv.sweep.json"
    assert "975/3505  (from sweep.csv.sweep.json)" in run("data", "info", out).output
    (tmp_path / "sweep.csv.sweep.json").unlink()
    assert json.loads(run("data", "info", out, "--json").output)["reference_mhz"] is None


def test_info_table_on_real_file(run, data):
    r = run("data", "info", data / "nv-dvfs-benchmark/gtx980_time_dev.csv")
    assert r.exit_code == 0, r.output
    assert "nvdvfs" in r.output and "400, 500, 600, 700, 800, 900, 1000" in r.output


def test_info_json_on_real_file(run, data):
    r = run("data", "info", data / "gpupowermodel/titanx_real_dev.csv", "--json")
    d = json.loads(r.stdout)
    assert d["benchmarks"] == 17 and d["configurations"] == 64
    assert d["components"] == ["SP", "INT", "DP", "SFU", "CF", "L2", "Shared", "DRAM"]
    assert 0 < d["ranges"]["watts"][0] < d["ranges"]["watts"][1]


def test_format_override(run, data):
    r = run("data", "info", data / "gpupowermodel/titanx_real_dev.csv", "--format", "nvdvfs")
    assert r.exit_code == 2
    assert "header lacks the column 'appName'" in r.output and "looks like a gpmTOOL power CSV" in r.output
    # The grid format is not nvprof's own output, and an error says which one the file is.
    r = run("data", "info", data / "nv-dvfs-benchmark/gtx980_time_dev.csv", "--format", "nvprof")
    assert r.exit_code == 2 and "no nvprof CSV header" in r.output and "format 'nvdvfs'" in r.output


@pytest.mark.parametrize("name,holds", [
    ("ncu_a100_learningnote4dev.csv", ["ncu: Nsight Compute output", "gemm_v0", "Failed to profile"]),
    ("nvprof_gtx1080ti_magus.csv", ["nvprof: nvprof output", "vectorAdd", "GeForce GTX 1080 Ti"]),
    ("nvidia-smi_h800_cuda-test.csv", ["nvidia-smi", "NVIDIA H800", "127"]),
])
def test_info_says_what_a_profilers_output_holds(run, data, name, holds):
    r = run("data", "info", data / "tool-outputs" / name)
    assert r.exit_code == 0, r.output
    flat = " ".join(r.output.split())
    assert all(h in flat for h in holds), r.output


def test_power_fit_on_a_grid_says_what_the_file_is(run, data):
    r = run("power", "fit", data / "nv-dvfs-benchmark/gtx980_time_dev.csv")
    assert r.exit_code == 2 and "this is an NV-DVFS-Benchmark grid" in r.output
    assert "without a power column" in r.output
    with_power = data / "nv-dvfs-benchmark/gtx980_time_power_dev.csv"
    r = run("power", "fit", with_power)
    assert r.exit_code == 2 and "needs --reference CORE,MEM" in r.output
    r = run("power", "fit", with_power, "--reference", "700,700")
    assert r.exit_code == 2 and "utilizations from profiler counters need --device" in r.output
    r = run("select", "eval", "--device", "gtx980", data / "gpupowermodel/titanx_real_dev.csv")
    assert r.exit_code == 2 and "this is a gpmTOOL power CSV" in r.output


def test_invalid_rows_error_then_skip(run, data):
    path = data / "gpupowermodel/k40c_micro.csv"
    r = run("data", "info", path)
    assert r.exit_code == 2
    assert "line 33, column 4" in r.output and "utilization" in r.output and "--skip-invalid leaves out" in r.output
    r = run("data", "info", path, "--skip-invalid", "--json")
    assert r.exit_code == 0
    assert len(json.loads(r.stdout)["skipped"]) == 8


def test_missing_file(run, tmp_path):
    r = run("data", "info", tmp_path / "absent.csv")
    assert r.exit_code == 2
    assert "file not found" in r.output


# -- Ctrl-C: exit status 130 and one line, also while the command is still starting up ----

INTERRUPT_AT_IMPORT = """
import builtins, os, signal, sys
from gpudvfs.cli import main

real = builtins.__import__

def ctrl_c_at(name, *args, **kwargs):  # a Ctrl-C while the command's libraries load
    if name.startswith({module!r}):
        builtins.__import__ = real
        os.kill(os.getpid(), signal.SIGINT)
    return real(name, *args, **kwargs)

builtins.__import__ = ctrl_c_at
main(sys.argv[1:])
"""


@pytest.mark.parametrize("module", ["click", "rich", "numpy"])
def test_ctrl_c_during_start_up_exits_130_with_one_line(tmp_path, module):
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-c", INTERRUPT_AT_IMPORT.format(module=module), "demo", "--out-dir",
                        str(tmp_path / "d")], capture_output=True, text=True, timeout=120)
    assert r.returncode == 130, r.stderr
    assert [ln for ln in r.stderr.splitlines() if ln.strip()] == ["gpudvfs: interrupted"]


@pytest.mark.parametrize("module", ["click", "rich"])
def test_without_the_cli_extra_the_command_names_it_and_the_core_still_works(module):
    """A governor embeds the numpy-only core: without click or rich, the command says which
    extra to install (status 2, one line) and the models still import and predict."""
    import subprocess
    import sys

    code = (f"import sys; sys.modules[{module!r}] = None\n"  # what an install without the extra gives
            "import gpudvfs\n"
            "print(gpudvfs.TimeModel('gtx980').predict(gpudvfs.KernelProfile.from_counters('k', {\n"
            "    'warps': 64, 'achieved_occupancy': 0.5, 'l2_read_transactions': 1e4, 'l2_write_transactions': 0,\n"
            "    'dram_read_transactions': 1e4, 'dram_write_transactions': 0, 'shared_load_transactions': 0,\n"
            "    'shared_store_transactions': 0, 'inst_issued': 1e5}), 700.0, 700.0) > 0)\n"
            "from gpudvfs.cli import main\n"
            "main(['data', 'info', 'x.csv'])\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stdout.strip() == "True", r.stderr
    assert r.stderr.strip().splitlines() == [f"gpudvfs: the command line needs the 'cli' extra ({module} is missing): "
                                             "pip install 'gpudvfs[cli]'"]


def test_ctrl_c_during_a_sweep_exits_130_with_one_line(tmp_path):
    import signal
    import subprocess
    import sys
    import time

    out = tmp_path / "s.csv"
    child = subprocess.Popen([sys.executable, "-c", "from gpudvfs.cli import main; main()", "sweep", "--device",
                              "sim", "--suite", "power", "-o", str(out)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while time.time() < deadline and not (out.exists() and out.read_text().count("\n") > 5):
        time.sleep(0.01)
    child.send_signal(signal.SIGINT)
    _, err = child.communicate(timeout=60)
    assert child.returncode == 130, err
    assert [ln for ln in err.splitlines() if ln.strip()] == ["gpudvfs: interrupted"]


def test_power_cap_policy_needs_its_cap(run, tmp_path, data):
    grid = data / "nv-dvfs-benchmark/gtx980_time_power_dev.csv"
    r = run("select", "fit-power", "--device", "gtx980", grid, "-o", tmp_path / "m.json")
    assert r.exit_code == 0, r.output
    r = run("select", "choose", "--device", "gtx980",
grid, "--power-model", tmp_path / "m.json", "--policy", "power-cap")
    assert r.exit_code == 2 and "--policy power-cap needs --power-cap WATTS" in r.output


def test_time_predict_warns_where_it_extrapolates(tmp_path, data):
    runner = CliRunner()  # stderr apart from stdout, so the JSON stays parseable
    grid = data / "nv-dvfs-benchmark/gtx980_time_dev.csv"
    r = runner.invoke(cli, ["time", "predict", "--device", "gtx980",
                            str(grid), "--kernel", "backprop", "--core-mhz", "700,1200",
                            "--mem-mhz", "700", "--json"])
    assert r.exit_code == 0, r.output  # 1200 MHz: a GTX 980's boost, beyond what the grid measured
    assert "core clocks 1200 MHz lie outside the measured 400-1000 MHz" in r.stderr
    assert len(json.loads(r.stdout)["extrapolated"]) == 1
    r = runner.invoke(cli, ["time", "predict", "--device", "gtx980", str(grid), "--core-mhz", "1e9"])
    assert r.exit_code == 2 and "finite clocks" in r.output


@pytest.mark.parametrize("args,match", [
    (["power", "fit", "TRAIN", "-o", "{tmp}/no/such/m.json"], "does not exist"),
    (["power", "fit", "TRAIN", "-o", "{tmp}"], "is a directory"),
    (["select", "fit-power", "--device", "gtx980", "TRAIN", "-o", "{tmp}/no/m.json"], "does not exist"),
    (["demo", "--out-dir", "{tmp}/file.txt"], "is a file"),
    (["demo", "--out-dir", "{tmp}/file.txt/sub"], "not a writable folder"),
])
def test_outputs_that_cannot_be_written_are_refused_before_work(run, tmp_path, args, match):
    (tmp_path / "file.txt").write_text("x")
    r = run(*[a.format(tmp=tmp_path).replace("TRAIN", str(tmp_path / "file.txt")) for a in args])
    assert r.exit_code == 2 and match in r.output, r.output


@pytest.mark.parametrize("kind,content,match", [
    ("folder", None, "is a (folder|directory)"),
    ("not UTF-8", b'{"kind": "\xff\xfe"}', "not UTF-8"),
    ("a JSON list", b"[1, 2, 3]", "not a gpudvfs"),
])
@pytest.mark.parametrize("command", ["power eval", "time eval --device", "sweep --workloads", "select choose"])
def test_json_inputs_that_are_not_what_they_claim(run, tmp_path, data, command, kind, content, match):
    """A model, device or workload file that is a folder, not UTF-8 or a JSON list gets one
    located line and status 2 (each gave a traceback, or was read as a gpmTOOL model)."""
    path = tmp_path / "x.json"
    path.mkdir() if content is None else path.write_bytes(content)
    grid = data / "nv-dvfs-benchmark/gtx980_time_power_dev.csv"
    args = {"power eval": ["power", "eval", path, data / "gpupowermodel/gtx980_micro.csv"],
            "time eval --device": ["time", "eval", "--device", "gtx980", grid, "--device", path],
            "sweep --workloads": ["sweep", "--device", "sim", "--workloads", path, "-o", tmp_path / "s.csv"],
            "select choose": ["select", "choose", "--device", "gtx980", grid, "--power-model", path]}[command]
    r = run(*args)
    if command == "sweep --workloads" and kind == "a JSON list":
        match = "non-empty list 'workloads'"
    assert r.exit_code == 2 and re.search(match, r.output), r.output
    assert len(r.output.strip().splitlines()) == 1 or "Usage" in r.output


def test_resume_of_a_sweep_whose_record_is_a_folder(run, tmp_path):
    out = tmp_path / "s.csv"
    out.write_text("workload\n")
    (tmp_path / "s.csv.sweep.json").mkdir()
    r = run("sweep", "--suite", "time", "-o", out, "--resume")
    assert r.exit_code == 2 and "is a folder" in r.output and out.read_text() == "workload\n"


def test_power_no_gpu_draws_is_refused_where_read(run, tmp_path, data):
    lines = (data / "gpupowermodel/gtx980_micro.csv").read_text().splitlines()
    fields = lines[10].split(",")
    fields[1] = "1e300"
    lines[10] = ",".join(fields)
    (tmp_path / "t.csv").write_text("\n".join(lines) + "\n")
    r = run("power", "fit", tmp_path / "t.csv")
    assert r.exit_code == 2 and "line 11, column 2" in r.output and "no GPU measures more" in r.output


@pytest.mark.parametrize("columns", [None, "40"])
def test_tables_reach_a_pipe_whole(columns):
    """Piped into a file, a table is as wide as it needs (a long workload name on one line);
    at a narrow COLUMNS its cells fold onto more lines, never cut short with an ellipsis."""
    import os
    import subprocess
    import sys

    name = "kernel/" + "x" * 140
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    if columns:
        env["COLUMNS"] = columns
    script = ("from gpudvfs.cli.output import console, table; "
              f"console.print(table('t', ['workload', 'MHz'], [[{name!r}, '1000/1000']]))")
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "…" not in r.stdout
    if columns:
        assert max(map(len, r.stdout.splitlines())) <= 40
        cells = re.sub(r"[│\s]", "", r.stdout)
        assert r.stdout.count("x") == 140 and "1000/1000" in cells
    else:
        assert name in r.stdout and "1000/1000" in r.stdout


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_shell_completion_as_documented(shell):
    """docs/cli.md's completion lines: each shell's script is printed, and bash completes a
    command from its first letters (what the script asks the command at each TAB)."""
    import os
    import subprocess
    import sys

    from conftest import REPO

    doc = (REPO / "docs" / "cli.md").read_text()
    assert f"_GPUDVFS_COMPLETE={shell}_source gpudvfs" in doc
    env = {**os.environ, "_GPUDVFS_COMPLETE": f"{shell}_source"}
    command = [sys.executable, "-c", "from gpudvfs.cli import main; main()"]  # what the `gpudvfs` script runs
    r = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "_GPUDVFS_COMPLETE" in r.stdout, r.stderr
    if shell == "bash":
        env = {**os.environ, "_GPUDVFS_COMPLETE": "bash_complete", "COMP_WORDS": "gpudvfs pre", "COMP_CWORD": "1"}
        r = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
        assert "predict" in r.stdout.split()[0].split(","), r.stdout
