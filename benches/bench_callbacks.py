"""The training callbacks' cost per step against the same loop without them, same run, in dry run.

A step is a small CPU step (numpy, element-wise over 256x256, no BLAS threads), or nothing (the
callbacks' own cost per step, with the run's opening and closing spread over it); the governed loop
calls what the callbacks call at each step's start and end (`GovernedTraining.set_phase`,
`step_begin`, `step_end`). Two devices: the simulated GPU, whose every step end computes its
power over the step (the simulator's own cost, which a real GPU does not have), and a stand-in
whose counter, clocks and name cost nothing to read (polled in a thread as NVML's counter is),
which leaves the callbacks' own cost. Where transformers is installed, a Hugging Face
``Trainer`` run with and without `GpudvfsTrainerCallback` on the simulated GPU too. The runs
alternate (baseline, then each variant, ``--repeat`` times; the best of each), so that a load
that comes and goes on a shared machine weighs on all of them alike.

    python benches/bench_callbacks.py [--steps N] [--json]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import tempfile
import time
from typing import Any

import numpy as np

from gpudvfs.govern.integrations import GovernedTraining
from gpudvfs.hardware.sim_training import catalog_gpu
from gpudvfs.hardware.simulated import SimulatedDevice


class FreeCounter:
    """A device whose counter, clocks and name cost nothing to read: 300 W since the epoch, an H100 SXM's
    default clocks; the rest of the `Device` protocol is the simulated H100 SXM's (not read per step).

    Not a `SimulatedDevice`, so the meter polls its counter in a thread, as it does NVML's.
    """

    name = "h100-sxm"

    def __init__(self) -> None:
        self._sim = SimulatedDevice(catalog_gpu(self.name))
        self.clocks = self._sim.default_clocks()

    def __getattr__(self, member: str) -> Any:
        return getattr(self._sim, member)

    def energy_joules(self) -> float:
        return 300.0 * time.perf_counter()


def _loop(steps: int, gov: GovernedTraining | None, work: bool = True) -> None:
    rng = np.random.default_rng(0)
    w, x = rng.standard_normal((256, 256)), rng.standard_normal((256, 256))
    for _ in range(steps):
        if gov is not None:
            gov.set_phase("train")
            gov.step_begin()
        if work:
            w = np.tanh(0.9 * w + 0.1 * x)
        if gov is not None:
            gov.step_end()


def _session(steps: int, device: Any, work: bool = True) -> None:
    gov = GovernedTraining(device() if callable(device) else device, dry_run=True, quiet=True, sync=None,
                           catalog_name="h100-sxm" if device is FreeCounter else None, distributed=None)
    _loop(steps, gov, work)
    gov.close()


def _trainer(steps: int, callback: bool) -> None:
    import torch
    from transformers import PrinterCallback, Trainer, TrainingArguments

    from gpudvfs.govern.integrations import GpudvfsTrainerCallback

    class Data(torch.utils.data.Dataset):
        def __len__(self) -> int:
            return 4 * steps

        def __getitem__(self, i: int) -> dict:
            return {"x": torch.full((64,), float(i % 7))}

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.l = torch.nn.Linear(64, 64)

        def forward(self, x: torch.Tensor) -> dict:
            return {"loss": self.l(x).pow(2).mean()}

    with tempfile.TemporaryDirectory() as tmp:
        args = TrainingArguments(output_dir=tmp, max_steps=steps, per_device_train_batch_size=4, save_strategy="no",
                                 report_to=[], use_cpu=True, disable_tqdm=True, logging_strategy="no")
        cbs = [GpudvfsTrainerCallback(device="sim", quiet=True, sync=None)] if callback else []
        trainer = Trainer(model=Net(), args=args, train_dataset=Data(), callbacks=cbs)
        trainer.remove_callback(PrinterCallback)  # its train_runtime line per run
        trainer.train()


def _alternated(runs: dict[str, Any], repeat: int) -> dict[str, float]:
    """The best wall time of each run (seconds), the runs taken in turn ``repeat`` times after a warm-up."""
    best = dict.fromkeys(runs, float("inf"))
    for i in range(repeat + 1):
        for name, fn in runs.items():
            t0 = time.perf_counter()
            fn()
            if i:
                best[name] = min(best[name], time.perf_counter() - t0)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=500)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    n = a.steps
    t = _alternated({"baseline": lambda: _loop(n, None), "simulated GPU": lambda: _session(n, "sim"),
                     "free counter": lambda: _session(n, FreeCounter),
                     "free counter, empty steps": lambda: _session(n, FreeCounter, work=False)}, a.repeat)
    base = t["baseline"] / n
    out: dict[str, float] = {"loop_step_us": base * 1e6}
    for label in ("simulated GPU", "free counter"):
        ours = t[label] / n
        print(f"governed loop, {label}: {ours * 1e6:.0f} us a step; the same loop without it (baseline): "
              f"{base * 1e6:.0f} us; x{ours / base:.3f}, +{(ours - base) * 1e6:.0f} us a step")
        out |= {f"{label} step_us": ours * 1e6, f"{label} ratio": ours / base}
    own = t["free counter, empty steps"] / n
    print(f"governed empty steps, free counter: {own * 1e6:.0f} us a step (the callbacks' own, open and close in)")
    out["free counter empty step_us"] = own * 1e6
    if importlib.util.find_spec("transformers") is not None:
        t = _alternated({"baseline": lambda: _trainer(n, False), "callback": lambda: _trainer(n, True)}, a.repeat)
        hf_base, hf = t["baseline"] / n, t["callback"] / n
        print(f"Hugging Face Trainer with the callback: {hf * 1e6:.0f} us a step; without (baseline): "
              f"{hf_base * 1e6:.0f} us; x{hf / hf_base:.3f}, +{(hf - hf_base) * 1e6:.0f} us a step")
        out |= {"trainer_step_us": hf_base * 1e6, "trainer_with_callback_step_us": hf * 1e6,
                "trainer_ratio": hf / hf_base}
    if a.json:
        print(json.dumps(out))


if __name__ == "__main__":
    main()
