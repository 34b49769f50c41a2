"""How a training run ends (`gpudvfs.govern.integrations.closing`) and how it is misused: the line
printed at the end and why no decision was made; an exception, Ctrl-C or an exit without
``close()`` still writing the summary and putting the clocks back (in child processes, through
a real SIGINT); a callback registered twice; a GPU or ``LOCAL_RANK`` the machine lacks (against
the NVML stand-in `fake_pynvml`, not a GPU). The Hugging Face and Lightning cases run on the CPU
against the simulated GPU, skipped where the ``train`` extra is not installed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpudvfs.errors import InputError
from gpudvfs.govern.integrations import GovernedTraining
from gpudvfs.govern.integrations.callback import SessionCallback
from gpudvfs.govern.integrations.closing import end_line
from gpudvfs.govern.integrations.ranks import local_gpu_index, rank_log_path
from gpudvfs.hardware.simulated import SimulatedDevice

from fake_pynvml import FakeNvml


def _run_child(code: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=300)


# --------------------------------------------------------------------------- the end line
def test_the_end_line_counts_steps_energy_and_decisions(capsys):
    gov = GovernedTraining("sim")  # a simulated training step lasts about 0.16 s: a window is 4 steps
    for _ in range(20):
        with gov.step():
            pass
    s = gov.close()
    err = capsys.readouterr().err.strip().splitlines()[-1:]  # after the advice table
    assert s["decisions"] > 0
    assert err[0].startswith("gpudvfs: 20 steps (train 20) in ") and f"; {s['decisions']} decisions (dry run" in err[0]
    assert f"{s['energy_j']['step_sum']:.4g} J" in err[0] and "no decision" not in err[0]


def test_no_decision_says_why(capsys):
    gov = GovernedTraining(SimulatedDevice())  # wall time: forty empty steps never fill a 0.5 s window
    for _ in range(40):
        with gov.step():
            pass
    assert gov.close()["decisions"] == 0
    err = capsys.readouterr().err
    assert "0 decisions" in err and "no decision: a phase's first observe_s=0.5 s" in err and "'train'" in err
    assert "pass a smaller observe_s or run longer" in err
    gov = GovernedTraining(SimulatedDevice(), observe_s=0.0, warmup_steps=5)
    for _ in range(3):
        with gov.step():
            pass
    gov.close()
    assert "every phase ran at most warmup_steps=5 steps" in capsys.readouterr().err
    gov = GovernedTraining(SimulatedDevice(), quiet=True)
    gov.close()
    assert capsys.readouterr().err == ""
    with pytest.raises(InputError, match="quiet must be True or False"):
        GovernedTraining("sim", quiet="yes")


def test_the_end_line_of_a_data_parallel_job_gives_the_jobs_energy():
    summary = {"steps": {"train": 3}, "interrupted": None, "energy_j": {"step_sum": 1.0}, "decisions": 2,
               "dry_run": True, "clocks_set": False, "grid": {},
               "ranks": {"rank": 0, "world_size": 2, "job_energy_j": 2.5}}
    assert "2.5 J over 2 ranks; 2 decisions (dry run: no clock set)" in end_line(summary, [], 0.5, 0)
    summary |= {"interrupted": "KeyboardInterrupt", "ranks": None}
    assert end_line(summary, [], 0.5, 0).startswith("gpudvfs: run interrupted (KeyboardInterrupt): 3 steps")


# ------------------------------------------------------------------ exceptions and Ctrl-C
def test_an_exception_in_a_with_block_writes_the_summary_and_puts_the_clocks_back(tmp_path):
    dev, seen = SimulatedDevice(), set()
    with pytest.raises(RuntimeError, match="diverged"):
        with GovernedTraining(dev, dry_run=False, observe_s=0.0, log_path=tmp_path / "s.jsonl", quiet=True) as gov:
            for i in range(12):
                with gov.step():
                    if i == 10:
                        raise RuntimeError("loss diverged")
                seen.add(dev.clocks)
    assert len(seen) > 1 and dev.clocks == dev.default_clocks()  # set while running, put back
    s = json.loads((tmp_path / "s.summary.json").read_text())
    assert s["interrupted"] == "RuntimeError" and s["steps"] == {"train": 11} and s["clocks_set"]


PLAIN = """
import atexit, json, os, signal, sys
out = {}
# Registered first, so run last: after gpudvfs's exit hook.
atexit.register(lambda: print(json.dumps({**out, "clocks": list(dev.clocks)})))
from gpudvfs.govern.integrations import GovernedTraining
gov = GovernedTraining("sim", dry_run=False, observe_s=0.0, log_path=sys.argv[1])
dev = gov.device
out["default"] = list(dev.default_clocks())
seen = set()
for i in range(30):
    gov.step_begin()
    if i == 20 and sys.argv[2] == "sigint":
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C: KeyboardInterrupt, never caught
    gov.step_end()
    seen.add(dev.clocks)
out["pairs_seen"] = len(seen)
"""


@pytest.mark.parametrize("how", ["sigint", "exit"])
def test_a_plain_loop_without_with_is_closed_at_exit(tmp_path, how):
    r = _run_child(PLAIN, str(tmp_path / "s.jsonl"), how)
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["clocks"] == out["default"]  # put back before the process ended
    s = json.loads((tmp_path / "s.summary.json").read_text())
    assert s["clocks_set"] and not s["dry_run"]
    if how == "sigint":
        assert r.returncode != 0 and "KeyboardInterrupt" in r.stderr
        assert s["interrupted"] == "KeyboardInterrupt" and s["steps"] == {"train": 21}  # the open step recorded
    else:
        assert r.returncode == 0 and out["pairs_seen"] > 1
        assert s["interrupted"] == "the process exited without close()" and s["steps"] == {"train": 30}
    assert "gpudvfs: run interrupted" in r.stderr
    steps = [json.loads(x) for x in (tmp_path / "s.jsonl").read_text().splitlines()]
    assert sum(x["kind"] == "step" for x in steps) == sum(s["steps"].values())


# ------------------------------------------------------------------------------- misuse
class _Callback(SessionCallback):
    """`SessionCallback` without a framework: a stand-in for the two callbacks' start hooks."""

    def start(self, run: object) -> None:
        self.claim(run)
        self.session.begin()


def test_a_callback_registered_twice_is_refused_before_a_step_counts_twice():
    run = object()  # the trainer (Lightning) or its state (Hugging Face)
    cb = _Callback("sim", quiet=True)
    cb.start(run)
    with pytest.raises(InputError, match="_Callback is registered twice with this trainer, which would count "
                                         r"every step twice: pass one in callbacks=\[...\]"):
        cb.start(run)
    assert cb.session.closed and cb.summary["interrupted"] == "InputError"
    a, b = _Callback("sim", quiet=True), _Callback("sim", quiet=True)
    a.start(run)  # the first claim ended with its session: the run is free again
    with pytest.raises(InputError, match="this trainer has two _Callbacks"):
        b.start(run)
    assert a.session.closed and b.session.closed
    c, d = _Callback("sim", quiet=True), _Callback("sim", quiet=True)
    c.start(object())
    d.start(object())  # two trainers, one callback each: fine
    assert not (c.session.closed or d.session.closed)
    c.session.close()
    d.session.close()


@pytest.mark.filterwarnings("ignore::gpudvfs.errors.GpudvfsWarning")  # the stand-in is in no catalog
def test_a_gpu_the_machine_lacks_is_an_error(monkeypatch):
    """Stand-in: tests/fake_pynvml.py, one GPU; NVML's module is replaced by it."""
    monkeypatch.setitem(sys.modules, "pynvml", FakeNvml())
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    with pytest.raises(InputError, match=r"index: GPU 7 is not on this machine \(NVML sees 1: 0\.\.0\)"):
        GovernedTraining("nvml", index=7)
    monkeypatch.setenv("LOCAL_RANK", "1")
    with pytest.raises(InputError, match=r"the local rank's GPU \(LOCAL_RANK=1\): index: GPU 1 is not on this machine"):
        GovernedTraining("nvml")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    with pytest.raises(InputError, match="LOCAL_RANK=1: CUDA shows this process 1 GPU"):
        GovernedTraining("nvml")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    monkeypatch.setenv("LOCAL_RANK", "one")
    with pytest.raises(InputError, match="LOCAL_RANK='one': expected an integer >= 0"):
        GovernedTraining("nvml")
    monkeypatch.setenv("LOCAL_RANK", "0")
    gov = GovernedTraining("nvml", quiet=True)
    assert gov.device.index == 0 and gov.device_kind == "nvml"
    gov.close()


class _TwoGpus(FakeNvml):
    def nvmlDeviceGetCount(self) -> int:
        return 2


def test_a_rank_meters_its_local_ranks_gpu_as_cuda_numbers_it(monkeypatch):
    """Stand-in: a `fake_pynvml` machine of two GPUs (only counted here, not opened)."""
    for visible, local, nvml in ((None, "1", 1), ("1,0", "1", 0), ("1,0", "0", 1), (None, None, 0)):
        if visible is None:
            monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
        else:
            monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
        if local is None:
            monkeypatch.delenv("LOCAL_RANK", raising=False)
        else:
            monkeypatch.setenv("LOCAL_RANK", local)
        assert local_gpu_index(_TwoGpus) == nvml
    assert rank_log_path(Path("run/steps.jsonl"), 0) == Path("run/steps.jsonl")
    assert rank_log_path(Path("run/steps.jsonl"), 3) == Path("run/steps.rank3.jsonl")


# ------------------------------------------------------------ real frameworks, on the CPU
def _need(*modules: str) -> None:
    for m in modules:
        pytest.importorskip(m, reason=f"{m} is not installed (pip install gpudvfs[train])")


HF = """
import atexit, json, os, signal, sys
out = {}
# Registered first, so run last: after gpudvfs's exit hook.
atexit.register(lambda: print(json.dumps({**out, "clocks": list(dev.clocks)})))
import torch
from transformers import Trainer, TrainerCallback, TrainingArguments
from gpudvfs.govern.integrations import GpudvfsTrainerCallback

class Data(torch.utils.data.Dataset):
    def __len__(self): return 64
    def __getitem__(self, i): return {"x": torch.randn(16, generator=torch.Generator().manual_seed(i))}

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__(); self.l = torch.nn.Linear(16, 1)
    def forward(self, x): return {"loss": self.l(x).pow(2).mean()}

cb = GpudvfsTrainerCallback(device="sim", dry_run=False, observe_s=0.0, log_path=sys.argv[1])
dev = cb.session.device
out["default"] = list(dev.default_clocks())
seen = set()

class CtrlC(TrainerCallback):
    def on_step_end(self, args, state, control, **kw):
        seen.add(dev.clocks); out["pairs_seen"] = len(seen)
        if state.global_step == 12:
            os.kill(os.getpid(), signal.SIGINT)

args = TrainingArguments(output_dir=sys.argv[2], max_steps=30, per_device_train_batch_size=2, save_strategy="no",
                         report_to=[], use_cpu=True, disable_tqdm=True)
Trainer(model=Net(), args=args, train_dataset=Data(), callbacks=[cb, CtrlC()]).train()
"""


def test_ctrl_c_under_the_hugging_face_trainer_writes_the_summary_and_puts_the_clocks_back(tmp_path):
    _need("torch", "transformers", "accelerate")
    r = _run_child(HF, str(tmp_path / "hf.jsonl"), str(tmp_path / "out"))
    assert r.returncode != 0 and "KeyboardInterrupt" in r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["clocks"] == out["default"] and out["pairs_seen"] > 1
    s = json.loads((tmp_path / "hf.summary.json").read_text())
    assert s["interrupted"] == "KeyboardInterrupt" and s["clocks_set"] and s["steps"]["train"] in (12, 13)


def test_a_callback_registered_twice_with_the_hugging_face_trainer_is_refused(tmp_path):
    _need("torch", "transformers", "accelerate")
    import torch
    from transformers import Trainer, TrainingArguments

    from gpudvfs.govern.integrations import GpudvfsTrainerCallback

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.l = torch.nn.Linear(16, 1)

        def forward(self, x):
            return {"loss": self.l(x).pow(2).mean()}

    data = [{"x": torch.randn(16)} for _ in range(16)]
    cb = GpudvfsTrainerCallback(device="sim", log_path=tmp_path / "hf.jsonl", quiet=True)
    args = TrainingArguments(output_dir=str(tmp_path / "out"), max_steps=4, per_device_train_batch_size=2,
                             save_strategy="no", report_to=[], use_cpu=True, disable_tqdm=True)
    with pytest.raises(InputError, match="GpudvfsTrainerCallback is registered twice with this trainer"):
        Trainer(model=Net(), args=args, train_dataset=data, callbacks=[cb, cb]).train()
    s = json.loads((tmp_path / "hf.summary.json").read_text())
    assert cb.session.closed and s["interrupted"] == "InputError" and s["steps"] == {}


def test_an_exception_under_lightning_writes_the_summary_and_puts_the_clocks_back(tmp_path):
    _need("torch", "lightning")
    import lightning.pytorch as L
    import torch

    from gpudvfs.govern.integrations import GpudvfsLightningCallback

    class Module(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = torch.nn.Linear(16, 1)

        def training_step(self, batch, i):
            if i == 15:
                raise RuntimeError("loss diverged")
            return self.net(batch[0]).pow(2).mean()

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)

    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(200, 16)), batch_size=8)
    dev = SimulatedDevice()
    cb = GpudvfsLightningCallback(device=dev, dry_run=False, log_path=tmp_path / "pl.jsonl", observe_s=0.0,
                                  quiet=True)
    kw = dict(accelerator="cpu", max_steps=20, logger=False, enable_checkpointing=False,
              enable_progress_bar=False, enable_model_summary=False)
    with pytest.raises(RuntimeError, match="diverged"):
        L.Trainer(callbacks=[cb], **kw).fit(Module(), data)
    s = json.loads((tmp_path / "pl.summary.json").read_text())
    assert s["interrupted"] == "RuntimeError" and s["clocks_set"] and s["steps"]["train"] == 16
    assert dev.clocks == dev.default_clocks()
    twice = GpudvfsLightningCallback(device="sim", quiet=True)
    # The callback keeps state in checkpoints, so Lightning itself refuses a second one (`claim` is not reached).
    with pytest.raises(RuntimeError, match="more than one stateful callback of type `GpudvfsLightningCallback`"):
        L.Trainer(callbacks=[twice, twice], **kw)
