"""validation/collect_dl.sh and its Python parts, checked without a GPU: the script's control flow
under its stand-in (DRY=1 prints each GPU command instead of running it), each printed command's
options against the gpudvfs CLI and the scripts' own parsers, the Nsight Compute metrics against
those an H200's Nsight Compute listed, and the NVML reads on the fake NVML (tests/fake_pynvml.py)."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import gpudvfs

from conftest import REPO
from fake_pynvml import FakeNvml

VALIDATION = REPO / "validation"
QUERY_METRICS = VALIDATION / "nvidia-h200" / "ncu-query-metrics.txt"


def _script(name: str):
    spec = importlib.util.spec_from_file_location(name, VALIDATION / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


dl_kernels, dl_train = _script("dl_kernels"), _script("dl_train")


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory) -> tuple[Path, list[str], str]:
    """collect_dl.sh under DRY=1 in a copy of validation/ whose H200 folder has kernels/ recorded
    (the run must then write beside it): the copy, the printed commands, the log."""
    if shutil.which("bash") is None:
        pytest.skip("no bash")
    root = tmp_path_factory.mktemp("dry")
    (root / "validation").mkdir()
    for f in [*VALIDATION.glob("*.sh"), *VALIDATION.glob("*.py")]:
        shutil.copy(f, root / "validation" / f.name)
    recorded = root / "validation" / "nvidia-h200" / "kernels"
    recorded.mkdir(parents=True)
    (recorded / "gemm_bf16.ncu.csv").write_text("recorded\n")
    env = os.environ | {"DRY": "1", "DRY_GPU": "nvidia-h200", "OUT": str(root / "out"),
                        # The gpudvfs this test imports (a source tree holds no built extension: CI installs one).
                        "PYTHONPATH": os.pathsep.join([str(Path(gpudvfs.__file__).parents[1]),
                                                       os.environ.get("PYTHONPATH", "")])}
    env.pop("SUFFIX", None)
    env.pop("STEPS", None)
    done = subprocess.run(["bash", str(root / "validation" / "collect_dl.sh")], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (recorded / "gemm_bf16.ncu.csv").read_text() == "recorded\n"
    commands = (root / "out" / "dry-commands.txt").read_text().splitlines()
    return root, [c.removeprefix("DRY: ") for c in commands], done.stdout


def test_the_dry_run_prints_every_step_and_writes_beside_a_recorded_run(dry_run):
    _, commands, log = dry_run
    suffix = re.search(r"suffix '(-\d{4}-\d{4})'", log)
    assert suffix, log[:400]
    kern = f"validation/nvidia-h200/kernels{suffix.group(1)}"
    text = "\n".join(commands)
    here = "validation/nvidia-h200"
    assert f"dl_kernels.py support --out {here}/support{suffix.group(1)}.json" in text
    assert f"dl_kernels.py load --varied --seconds 5 --out {here}/observe{suffix.group(1)}/load.json" in text
    for op in dl_kernels.OPS:
        assert f"dl_kernels.py power {op} --seconds 2 --out {kern}/{op}.power.json" in text
        assert f"--log-file {kern}/{op}.ncu.csv" in text and f"dl_kernels.py profile {op}" in text
        assert f"predict {kern}/{op}.ncu.csv --json" in text
    assert f"observe_chain.py validation/nvidia-h200/observe{suffix.group(1)} {kern}" in text
    assert "--knob clocks --knob core-clock --knob power-limit --overhead" in text
    assert not re.search(r"validation/nvidia-h200/(kernels|observe|train)/", text), "a recorded folder written"
    assert re.findall(r"\[(\d+) s\] done", log)


def _gpudvfs_args(commands: list[str]) -> list[list[str]]:
    """The arguments of each gpudvfs command the script runs through its ``gpudvfs`` array."""
    return [shlex.split(c.split("main() ", 1)[1]) for c in commands if "from gpudvfs.cli import main" in c]


def test_the_scripts_gpudvfs_commands_name_existing_commands_and_options(dry_run):
    click = pytest.importorskip("click")
    from gpudvfs.cli.app import cli

    runs = _gpudvfs_args(dry_run[1])
    assert {" ".join(a[:2]) for a in runs} >= {"power observe"} and any(a[0] == "predict" for a in runs)
    for args in runs:
        cmd = cli
        while isinstance(cmd, click.Group):
            assert args and args[0] in cmd.commands, f"no command {args[:1]}"
            cmd, args = cmd.commands[args[0]], args[1:]
        names = {o for p in cmd.params for o in (*p.opts, *p.secondary_opts)}
        unknown = [a for a in args if a.startswith("-") and a not in names]
        assert not unknown, f"{cmd.name} takes no option {unknown}"


def test_the_scripts_own_commands_parse(dry_run):
    for command in dry_run[1]:
        for script, parser in (("dl_kernels.py", dl_kernels.parser()), ("dl_train.py", dl_train.parser())):
            if f"validation/{script} " in command:
                args = shlex.split(command.split(f"validation/{script} ", 1)[1])
                parser.parse_args(args)  # exits on an option or OP it does not know


def test_the_ncu_command_asks_for_metrics_an_h200_knows_and_leaves_the_clocks(dry_run):
    names = {line.split()[0] for line in QUERY_METRICS.read_text().splitlines() if line.strip()}
    ncu = next(c for c in dry_run[1] if c.startswith("timeout 60 bash -c ncu "))
    assert "--clock-control none --profile-from-start off" in ncu
    metrics = shlex.split(ncu)[shlex.split(ncu).index("--metrics") + 1].split(",")
    tensor = [m for m in metrics if "tensor" in m]
    assert len(tensor) >= 6
    assert [m for m in tensor if m.split(".")[0] not in names] == []


def test_support_reads_and_sets_nothing():
    fake = FakeNvml(name="NVIDIA H200", power_limits_w=(700.0, 200.0, 700.0))
    fake.nvmlInit()
    doc = dl_kernels.support(fake, fake.nvmlDeviceGetHandleByIndex(0))
    assert fake.calls == []
    assert doc["name"] == "NVIDIA H200" and doc["power_limit_constraints_mw"] == [200_000, 700_000]
    assert doc["power_limit_default_mw"] == 700_000
    mems = fake.nvmlDeviceGetSupportedMemoryClocks(fake.nvmlDeviceGetHandleByIndex(0))
    assert sorted(doc["supported_clocks_mhz"]) == sorted(mems) and all(doc["supported_clocks_mhz"].values())
    assert doc["api_restricted_to_root"]["application_clocks"] is True
    assert doc["mig_mode"].startswith("AttributeError")  # a call the binding lacks: said, not raised


def test_gpm_span_gives_each_metric_and_none_for_one_the_gpu_lacks():
    fake = FakeNvml(gpm=True)
    fake.nvmlInit()
    h = fake.nvmlDeviceGetHandleByIndex(0)
    end = dl_kernels.gpm_span(fake, h)
    fake.run(0.05)
    got = end()
    assert set(got) == set(dl_kernels.GPM) and fake.gpm_samples == 0
    assert got["sm"] > 0 and got["tensor"] is None and got["sm_occupancy"] is None
    assert dl_kernels.gpm_span(FakeNvml(gpm=False), h) is None


@pytest.mark.parametrize("op", dl_kernels.OPS)
def test_each_op_runs_scaled_down_on_the_cpu(op):
    """The ops' code on the CPU, every dimension divided by 64 (the kernels themselves run on a GPU)."""
    torch = pytest.importorskip("torch")
    if op == "gemm_fp8":
        with pytest.raises(dl_kernels.Unsupported, match="compute capability 8.9"):
            dl_kernels.make(op, "cpu", scale=64)
        return
    out = dl_kernels.make(op, "cpu", scale=64)()
    assert isinstance(out, torch.Tensor) and out.dtype == torch.bfloat16 and torch.isfinite(out.float()).all()
    if op in dl_kernels.GEMMS:
        m, _, n = dl_kernels.GEMMS[op]
        assert out.shape == (max(1, m // 64), max(1, n // 64))


def test_a_knob_this_gpudvfs_lacks_is_skipped_with_its_reason():
    def old(device="nvml", policy="energy"):
        return None

    assert dl_train.knob_option(old, "clocks") == {}
    with pytest.raises(dl_train.Skipped, match="no power-limit knob"):
        dl_train.knob_option(old, "power-limit")

    def new(device="nvml", knob="clocks"):
        return None

    assert dl_train.knob_option(new, "power-limit") == {"knob": "power-limit"}
    assert dl_train.median_period_ms([0.0, 0.1, 0.2, 1.0]) == pytest.approx(100.0)
    assert dl_train.median_period_ms([0.0]) is None


def test_the_training_job_runs_on_the_simulator(tmp_path):
    """dl_train.py's CPU path (--tiny --device-kind sim): every run, the report, the overhead, the windows."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    done = subprocess.run([sys.executable, str(VALIDATION / "dl_train.py"), "--out", str(tmp_path), "--seconds", "6",
                           "--tiny", "--device-kind", "sim", "--knob", "clocks", "--knob", "core-clock", "--knob",
                           "power-limit", "--overhead"],
                          capture_output=True, text=True, timeout=600, cwd=REPO)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = (tmp_path / "report.txt").read_text()
    assert "FAILED" not in report and "plain loop without gpudvfs: ok" in report
    # Each knob's summary and advice read as this gpudvfs writes them, not as raw JSON.
    assert "read as JSON" not in report and "from advice_table" not in report
    assert "advised core clock per phase" in report and "core clocks (device)" in report
    assert (tmp_path / "plain_steps.summary.json").exists() and (tmp_path / "windows.json").exists()
    assert set(json.loads((tmp_path / "overhead.json").read_text())) >= {
        "plain clocks", "plain core-clock", "plain without gpudvfs", "hf clocks", "hf core-clock", "hf without gpudvfs"}
