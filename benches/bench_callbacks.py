"""The training callbacks' cost per step against the same loop without them, same run, in dry run.

A step is a small CPU step (numpy, element-wise over 256x256, no BLAS threads); the governed loop
calls what the callbacks call at each step's start and end (`GovernedTraining.set_phase`,
`step_begin`, `step_end`). Two devices: the simulated GPU, whose every step end computes its
power over the step (the simulator's own cost, which a real GPU does not have), and a stand-in
whose counter, clocks and name cost nothing to read (polled in a thread as NVML's counter is),
which leaves the callbacks' own cost. Where transformers is installed, a Hugging Face
``Trainer`` run with and without `GpudvfsTrainerCallback` on the simulated GPU too.

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

from _timing import best_of


class FreeCounter:
    """A device whose readings cost nothing: 300 W since the epoch, fixed clocks (an H100 SXM's)."""

    name = "h100-sxm"
    clocks = (1980.0, 2619.0)

    def energy_joules(self) -> float:
        return 300.0 * time.perf_counter()


def _loop(steps: int, gov: GovernedTraining | None) -> None:
    rng = np.random.default_rng(0)
    w, x = rng.standard_normal((256, 256)), rng.standard_normal((256, 256))
    for _ in range(steps):
        if gov is not None:
            gov.set_phase("train")
            gov.step_begin()
        w = np.tanh(0.9 * w + 0.1 * x)
        if gov is not None:
            gov.step_end()


def _session(steps: int, device: Any) -> None:
    gov = GovernedTraining(device() if callable(device) else device, dry_run=True, quiet=True, sync=None,
                           catalog_name="h100-sxm" if device is FreeCounter else None, distributed=None)
    _loop(steps, gov)
    gov.close()


def _trainer(steps: int, callback: bool) -> None:
    import torch
    from transformers import Trainer, TrainingArguments

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
        Trainer(model=Net(), args=args, train_dataset=Data(), callbacks=cbs).train()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=500)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    n = a.steps
    base = best_of(lambda: _loop(n, None), 5) / n
    out: dict[str, float] = {"loop_step_us": base * 1e6}
    for label, device in (("simulated GPU", "sim"), ("free counter", FreeCounter)):
        ours = best_of(lambda d=device: _session(n, d), 5) / n
        print(f"governed loop, {label}: {ours * 1e6:.0f} us a step; the same loop without it (baseline): "
              f"{base * 1e6:.0f} us; x{ours / base:.3f}, +{(ours - base) * 1e6:.0f} us a step")
        out |= {f"{label} step_us": ours * 1e6, f"{label} ratio": ours / base}
    if importlib.util.find_spec("transformers") is not None:
        hf_base = best_of(lambda: _trainer(n, False), 3) / n
        hf = best_of(lambda: _trainer(n, True), 3) / n
        print(f"Hugging Face Trainer with the callback: {hf * 1e6:.0f} us a step; without (baseline): "
              f"{hf_base * 1e6:.0f} us; x{hf / hf_base:.3f}, +{(hf - hf_base) * 1e6:.0f} us a step")
        out |= {"trainer_step_us": hf_base * 1e6, "trainer_with_callback_step_us": hf * 1e6,
                "trainer_ratio": hf / hf_base}
    if a.json:
        print(json.dumps(out))


if __name__ == "__main__":
    main()
