"""The training governor in a data-parallel job (`gpudvfs.govern.integrations.distributed`):
the ranks' step records merged (the slowest time, the summed energy), every rank running rank
0's pair, a refusal on one rank putting every rank in dry run, and clear errors where the ranks
disagree; a log per rank and the job's one summary by rank 0. Ranks are threads of this process
with a stand-in for ``torch.distributed``'s ``all_gather`` (`ThreadJob`), then two gloo processes
of real ``torch.distributed``, in a plain loop and through the Hugging Face Trainer (skipped
where torch and transformers, of the ``train`` extra, are not installed)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from gpudvfs.errors import InputError
from gpudvfs.govern.integrations import GovernedTraining, StepRecord
from gpudvfs.govern.integrations.distributed import SLOTS, StepExchange
from gpudvfs.hardware.simulated import SimulatedDevice

from virtual_clock import VirtualClock

ROOT = Path(__file__).resolve().parents[2]


class ThreadJob:
    """A stand-in for a ``torch.distributed`` group: ``world`` ranks as threads of one process,
    whose ``all_gather`` meets at a barrier (a rank that never comes times it out)."""

    def __init__(self, world: int):
        self.rows: list[np.ndarray | None] = [None] * world
        self.barrier = threading.Barrier(world, timeout=20)
        self.calls = 0

    def rank(self, r: int) -> _Rank:
        return _Rank(self, r)


class _Rank:
    def __init__(self, job: ThreadJob, rank: int):
        self.job, self.rank, self.world_size = job, rank, len(job.rows)

    def all_gather(self, row: np.ndarray) -> np.ndarray:
        self.job.rows[self.rank] = np.array(row, dtype=np.float64)
        if self.job.barrier.wait() == 0:
            self.job.calls += 1
        out = np.stack(self.job.rows)
        self.job.barrier.wait()
        return out


def _on_ranks(world: int, fn) -> list:
    """``fn(rank, collective)`` on ``world`` threads; their results (an exception is re-raised)."""
    job = ThreadJob(world)
    out: list = [None] * world

    def run(r):
        try:
            out[r] = fn(r, job.rank(r))
        except BaseException as e:  # noqa: BLE001 - handed to the test's thread
            out[r] = e
    threads = [threading.Thread(target=run, args=(r,)) for r in range(world)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return out


def _rec(step: int, time_ms: float, joules: float | None, phase: str = "train", core: float = 1000.0) -> StepRecord:
    return StepRecord(step=step, phase=phase, phase_step=step, start_s=0.0, time_ms=time_ms, joules=joules,
                      watts=None, energy_source="counter", core_mhz=core, mem_mhz=3505.0, throttle_reasons=(),
                      counter_j=None)


# ------------------------------------------------------------------- the record exchange
def test_merged_steps_take_the_slowest_time_the_summed_energy_and_rank_0s_clocks():
    # Rank 1's step 2 is final one exchange later than rank 0's: it is merged then.
    mine = {0: [[_rec(1, 10.0, 2.0, core=1000.0), _rec(2, 11.0, 2.2)], []],
            1: [[_rec(1, 12.0, 3.0, core=900.0)], [_rec(2, 9.0, None)]]}

    def run(r, comm):
        ex = StepExchange(comm)
        return [ex.exchange(recs) for recs in mine[r]], ex.merged
    (a0, m0), (a1, m1) = _on_ranks(2, run)
    assert m0 == m1 == 2
    for merged in (a0, a1):
        assert [[x.step for x in xs] for xs in merged] == [[1], [2]]
        one, two = merged[0][0], merged[1][0]
        assert (one.time_ms, one.joules, one.core_mhz) == (12.0, 5.0, 1000.0)
        assert one.watts == pytest.approx(5.0 / 0.012)
        assert two.time_ms == 11.0 and two.joules is None and two.watts is None  # rank 1 read no energy


def test_many_pending_steps_catch_up_a_few_per_exchange():
    n = 2 * SLOTS + 3

    def run(r, comm):
        ex = StepExchange(comm)
        first = ex.exchange([_rec(s, 1.0 + r, 1.0) for s in range(1, n + 1)])
        return len(first), ex.drain(n), ex.merged
    for first, rest, merged in _on_ranks(2, run):
        assert first == SLOTS and len(rest) == n - SLOTS and merged == n
        assert all(x.time_ms == 2.0 and x.joules == 2.0 for x in rest)


def test_ranks_that_ran_other_phases_are_told_so_on_every_rank():
    def run(r, comm):
        return StepExchange(comm).exchange([_rec(1, 1.0, 1.0, phase="train" if r == 0 else "eval")])
    for out in _on_ranks(2, run):
        assert isinstance(out, InputError) and "rank 1 ran step 1 in another phase" in str(out)


def test_a_rank_with_fewer_steps_leaves_the_rest_unmerged_rather_than_hanging():
    def run(r, comm):
        ex = StepExchange(comm)
        return len(ex.exchange([_rec(s, 1.0, 1.0) for s in range(1, 4 - r)])), ex.drain(3), ex.merged
    assert [(a, b, m) for a, b, m in _on_ranks(2, run)] == [(2, [], 2), (2, [], 2)]


# ------------------------------------------------------------------- governed ranks
def _governed(r: int, comm, *, steps: int = 30, permission: bool = True, **options) -> tuple[dict, list, object]:
    """A rank's run on a simulated GPU of its own; rank 1's steps last twice rank 0's."""
    dev = SimulatedDevice(seed=r, permission=permission)
    gov = GovernedTraining(dev, dry_run=False, observe_s=0.0, distributed=comm, **options)
    seen = []
    for _ in range(steps):
        with gov.step():
            time.sleep(0.002 * (1 + r))
        seen.append(dev.clocks)
    return gov.close(), seen, dev


def test_every_rank_runs_rank_0s_pair_decided_from_every_ranks_steps():
    out = _on_ranks(2, _governed)
    (s0, seen0, dev0), (s1, seen1, dev1) = out
    assert seen0 == seen1 and len(set(seen0)) > 1  # the same pairs, step by step
    for r, s in enumerate((s0, s1)):
        assert s["ranks"].items() >= {"rank": r, "world_size": 2, "merged_steps": 30}.items()
        assert s["clocks_set"] and not s["dry_run"] and s["decisions"] == s0["decisions"] > 1
        assert s["observations"] == s0["observations"] > 0
    assert dev0.clocks == dev0.default_clocks() and dev1.clocks == dev1.default_clocks()  # put back
    assert not any("rank 0 chose" in n for n in s1["notes"])  # the governors agreed by themselves


def test_the_governor_observes_the_slowest_rank_and_the_summed_energy():
    """Each rank's meter on a virtual clock: rank 1's steps last 8 ms, rank 0's 2 ms, whatever
    the machine's load (a real sleep of 2 ms could outlast one of 8 ms on a busy CPU)."""
    def run(r, comm):
        dev = SimulatedDevice(seed=r)
        gov = GovernedTraining(dev, dry_run=True, observe_s=0.0, distributed=comm)
        clock = gov.meter.clock = VirtualClock()
        seen = []
        gov._take = seen.extend  # the merged records the governor is fed
        for _ in range(5):
            with gov.step():
                clock.t += 0.002 * (1 + 3 * r)
        gov.close()
        return gov.meter.records, seen
    (own0, fed0), (own1, fed1) = _on_ranks(2, run)
    assert [x.step for x in fed0] == [x.step for x in fed1] == [1, 2, 3, 4, 5]
    for a, b, m in zip(own0, own1, fed0):
        assert m.time_ms == max(a.time_ms, b.time_ms) == b.time_ms == pytest.approx(8.0)
        assert m.joules == pytest.approx(a.joules + b.joules)


@pytest.mark.filterwarnings("ignore::gpudvfs.errors.GpudvfsWarning")
def test_a_rank_that_may_not_set_clocks_puts_every_rank_in_dry_run():
    (s0, _, dev0), (s1, _, dev1) = _on_ranks(2, lambda r, c: _governed(r, c, steps=10, permission=r == 0))
    assert s0["dry_run"] and s1["dry_run"] and not s1["clocks_set"]
    # (Its warning, once per run, says the same: warnings are caught per process, not per thread.)
    assert any("rank(s) [1] of the job could not set the clocks" in n for n in s0["notes"])
    assert dev0.clocks == dev0.default_clocks()  # rank 0 had set them: put back at once


def test_ranks_with_another_clock_grid_are_refused():
    def run(r, comm):
        gov = GovernedTraining(SimulatedDevice(), distributed=comm, max_core_clocks=4 + r)
        try:
            gov.begin()
        finally:
            gov.close()
    for out in _on_ranks(2, run):
        assert isinstance(out, InputError) and "another clock grid than rank 0" in str(out)


def test_ranks_that_govern_another_knob_are_refused():
    def run(r, comm):
        gov = GovernedTraining("sim", distributed=comm, knob="power-limit" if r else "clocks")
        try:
            gov.begin()
        finally:
            gov.close()
    for out in _on_ranks(2, run):
        assert isinstance(out, InputError) and "rank(s) [1] of the job govern another knob than rank 0's 'clocks'" \
            in str(out)


class _OneNvmlGpu(SimulatedDevice):
    """A simulated GPU that says it is NVML GPU ``uuid``: ranks opening one GPU (a stand-in for NVML)."""

    def __init__(self, uuid: str):
        super().__init__()
        self.uuid = uuid

    def identity(self):
        return {**super().identity(), "kind": "nvml", "uuid": self.uuid}


@pytest.mark.filterwarnings("ignore::gpudvfs.errors.GpudvfsWarning")
def test_ranks_that_meter_one_gpu_are_told_so():
    def run(r, comm):
        gov = GovernedTraining(_OneNvmlGpu("GPU-0" if r < 2 else "GPU-2"), distributed=comm)
        gov.begin()
        return gov.close()["notes"]
    for notes in _on_ranks(3, run):
        assert any("rank(s) [0, 1] of the job meter one and the same GPU" in n for n in notes)
    def sim(r, comm):
        gov = GovernedTraining(SimulatedDevice(), distributed=comm)
        gov.begin()
        return gov.close()
    for s in _on_ranks(2, sim):
        assert s["ranks"]["world_size"] == 2 and not any("same GPU" in n for n in s["notes"])  # each its own


def test_each_rank_logs_apart_and_rank_0_writes_the_jobs_one_summary(tmp_path):
    """Every rank is given one log name, as one script under torchrun is."""
    def run(r, comm):
        gov = GovernedTraining(SimulatedDevice(seed=r), observe_s=0.0, distributed=comm, log_path=tmp_path / "s.jsonl",
                               quiet=True)
        for _ in range(6):
            with gov.step():
                time.sleep(0.002)
        return gov.close()
    s0, s1 = _on_ranks(2, run)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.jsonl", "s.rank1.jsonl", "s.summary.json"]
    assert s1["log_path"] == str(tmp_path / "s.rank1.jsonl") and s1["summary_path"] is None
    written = json.loads((tmp_path / "s.summary.json").read_text())  # one document
    assert written == json.loads(json.dumps(s0)) and written["ranks"]["rank"] == 0
    per = written["ranks"]["per_rank"]
    assert [p["rank"] for p in per] == [0, 1] and all(p["steps"] == 6 for p in per)
    assert [p["energy_j"] for p in per] == pytest.approx([s0["energy_j"]["step_sum"], s1["energy_j"]["step_sum"]])
    assert written["ranks"]["job_energy_j"] == pytest.approx(per[0]["energy_j"] + per[1]["energy_j"])
    for name in ("s.jsonl", "s.rank1.jsonl"):
        steps = [json.loads(x) for x in (tmp_path / name).read_text().splitlines() if '"kind": "step"' in x]
        assert [x["step"] for x in steps] == list(range(1, 7))


class _Mirror:
    """Rank 1 of two whose rank 0 answers with rank 1's own row (a stand-in), counting the gathers."""

    rank, world_size = 1, 2

    def __init__(self):
        self.calls = 0

    def all_gather(self, row: np.ndarray) -> np.ndarray:
        self.calls += 1
        return np.stack([row, row])


def test_an_interrupted_rank_closes_without_waiting_for_the_others(tmp_path):
    comm = _Mirror()
    gov = GovernedTraining(SimulatedDevice(), observe_s=0.0, distributed=comm, log_path=tmp_path / "s.jsonl",
                           quiet=True)
    gov.step_begin()
    calls = comm.calls
    s = gov.close(interrupted="KeyboardInterrupt")
    assert comm.calls == calls and s["interrupted"] == "KeyboardInterrupt" and s["steps"] == {"train": 1}
    assert "per_rank" not in s["ranks"] and not (tmp_path / "s.summary.json").exists()  # rank 0's to write
    assert (tmp_path / "s.rank1.jsonl").read_text().count('"kind": "step"') == 1
    normal = GovernedTraining(SimulatedDevice(), distributed=_Mirror(), quiet=True)
    normal.begin()
    assert normal.close()["ranks"]["per_rank"][1]["steps"] == 0  # a normal close gathers


def test_a_job_of_one_process_and_bad_collectives():
    s = GovernedTraining("sim", distributed=None).close()
    assert s["ranks"] is None
    with pytest.raises(InputError, match="distributed must be 'auto', None or a Collective"):
        GovernedTraining("sim", distributed="nccl")


# ------------------------------------------------------- torch.distributed, two gloo processes
WORKER = """
import json, os, sys, time
import torch, torch.distributed as dist
from gpudvfs.govern.integrations import GovernedTraining
dist.init_process_group("gloo")
r = dist.get_rank()
torch.manual_seed(0)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(16, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
gov = GovernedTraining("sim", dry_run=False, observe_s=0.0, log_path=sys.argv[1] + f"/rank{r}.jsonl")
seen = []
for i in range(30):
    with gov.step():
        x = torch.randn(8 * (1 + r), 16)
        model(x).pow(2).mean().backward(); opt.step(); opt.zero_grad()
        time.sleep(0.002 * (1 + r))
    seen.append(gov.device.clocks)
s = gov.close()
with open(sys.argv[1] + f"/rank{r}.json", "w") as f:
    json.dump({"summary": s, "seen": seen}, f)
# Both ranks done before either tears gloo down, and no interpreter finalization after it: a
# rank exiting while gloo's threads still run can abort ("terminate called without an active
# exception", seen once in CI), a teardown of torch's that this test does not check.
dist.barrier()
dist.destroy_process_group()
os._exit(0)
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_gloo_processes_run_one_pair(tmp_path):
    pytest.importorskip("torch", reason="torch is not installed (pip install gpudvfs[train])")
    env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(_free_port()), "WORLD_SIZE": "2"}
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, str(tmp_path)], env={**env, "RANK": str(r)},
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for r in range(2)]
    for p in procs:
        out, _ = p.communicate(timeout=240)
        assert p.returncode == 0, out
    runs = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    assert runs[0]["seen"] == runs[1]["seen"] and len({tuple(x) for x in runs[0]["seen"]}) > 1
    for r, run in enumerate(runs):
        s = run["summary"]
        assert s["ranks"].items() >= {"rank": r, "world_size": 2, "merged_steps": 30}.items()
        assert s["clocks_set"] and not s["dry_run"] and s["decisions"] == runs[0]["summary"]["decisions"]


# ------------------------------------- the Hugging Face Trainer, two gloo processes (as torchrun)
HF_WORKER = """
import json, os, sys
import torch, torch.distributed as dist
dist.init_process_group("gloo")  # before the Trainer, which then uses it (torchrun's env: RANK, ...)
from transformers import Trainer, TrainingArguments
from gpudvfs.govern.integrations import GpudvfsTrainerCallback

class Data(torch.utils.data.Dataset):
    def __len__(self): return 96
    def __getitem__(self, i): return {"x": torch.randn(16, generator=torch.Generator().manual_seed(i))}

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__(); self.l = torch.nn.Linear(16, 1)
    def forward(self, x): return {"loss": self.l(x).pow(2).mean()}

torch.manual_seed(0)
cb = GpudvfsTrainerCallback(device="sim", dry_run=False, observe_s=0.0, log_path=sys.argv[1] + "/steps.jsonl")
args = TrainingArguments(output_dir=sys.argv[1] + "/out", max_steps=20, per_device_train_batch_size=2,
                         save_strategy="no", report_to=[], use_cpu=True, disable_tqdm=True)
Trainer(model=Net(), args=args, train_dataset=Data(), callbacks=[cb]).train()
with open(sys.argv[1] + f"/rank{dist.get_rank()}.json", "w") as f:
    json.dump(cb.summary, f)
dist.barrier()  # as WORKER: no rank tears gloo down while the other still runs
dist.destroy_process_group()
os._exit(0)
"""


def test_the_hugging_face_trainer_under_two_gloo_processes_logs_per_rank_and_one_summary(tmp_path):
    pytest.importorskip("torch", reason="torch is not installed (pip install gpudvfs[train])")
    pytest.importorskip("transformers", reason="transformers is not installed (pip install gpudvfs[train])")
    env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(_free_port()), "WORLD_SIZE": "2",
           "LOCAL_WORLD_SIZE": "2"}
    procs = [subprocess.Popen([sys.executable, "-c", HF_WORKER, str(tmp_path)],
                              env={**env, "RANK": str(r), "LOCAL_RANK": str(r)},
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for r in range(2)]
    outs = [p.communicate(timeout=300)[0] for p in procs]
    for p, out in zip(procs, outs):
        assert p.returncode == 0, out
    assert sorted(p.name for p in tmp_path.glob("steps*")) == ["steps.jsonl", "steps.rank1.jsonl",
                                                                "steps.summary.json"]
    written = json.loads((tmp_path / "steps.summary.json").read_text())  # one document
    runs = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    assert written == runs[0] and written["ranks"]["rank"] == 0 and written["ranks"]["world_size"] == 2
    per = written["ranks"]["per_rank"]
    assert [(p["rank"], p["steps"]) for p in per] == [(0, 20), (1, 20)]
    assert written["ranks"]["job_energy_j"] == pytest.approx(sum(p["energy_j"] for p in per))
    assert per[1]["energy_j"] == pytest.approx(runs[1]["energy_j"]["step_sum"])
    assert written["clocks_set"] and written["decisions"] == runs[1]["decisions"] > 0
    for name in ("steps.jsonl", "steps.rank1.jsonl"):
        lines = [json.loads(x) for x in (tmp_path / name).read_text().splitlines()]
        assert [x["step"] for x in lines if x["kind"] == "step"] == list(range(1, 21))
    assert "over 2 ranks" in outs[0] and "gpudvfs: 20 steps" not in outs[1]  # rank 0 alone says how it ended
