"""The closed-loop governor in deep-learning training.

A step meter, phases, and callbacks for Hugging Face ``transformers`` and PyTorch Lightning.
Dry run by default: it measures, decides and logs the clocks it would set, and sets none.

A plain PyTorch loop (`GovernedTraining`, built on `GovernedLoop`)::

    from gpudvfs.govern.integrations import GovernedTraining
    gov = GovernedTraining(device="nvml", policy="energy", dry_run=True, log_path="run/steps.jsonl")
    for i, batch in enumerate(loader):
        with gov.step():
            loss = model(batch).mean(); loss.backward(); opt.step(); opt.zero_grad()
        if i % 50 == 0:
            with gov.phase("checkpoint"): snapshot = {k: v.cpu() for k, v in model.state_dict().items()}
    summary = gov.close()   # also written to run/steps.summary.json

Hugging Face: ``Trainer(..., callbacks=[GpudvfsTrainerCallback(device="nvml", log_path=...)])``
(`gpudvfs.govern.integrations.huggingface`). Lightning: ``Trainer(callbacks=[
GpudvfsLightningCallback(...)])`` (`gpudvfs.govern.integrations.lightning`). Both take the
options of `GovernedTraining` and import their framework only when used: ``import gpudvfs``
and this package import neither torch, transformers nor lightning.

| module        | what                                                                  |
|---------------|-----------------------------------------------------------------------|
| `meter`       | `StepMeter`, `StepRecord`: per-step time, energy, power, clocks       |
| `devices`     | `open_device`: an NVML GPU, the simulated one, or a device object     |
| `session`     | `GovernedTraining`: meter + phases + governor                         |
| `summary`     | the run's summary per phase                                           |
| `between_runs`| the job's profile kept between runs, and a resumed run's log          |
| `resume`      | a resumed run's log read back: step numbers, the merged summary       |
| `callback`    | `SessionCallback`: what the framework callbacks share                 |
| `distributed` | data parallel: the ranks' steps merged, rank 0's pair on every rank   |
| `ranks`       | a rank's GPU (its local rank's), its log, the job's one summary       |
| `closing`     | the line printed at the end; runs left open closed at exit            |
| `huggingface` | `GpudvfsTrainerCallback` (``transformers.TrainerCallback``)           |
| `lightning`   | `GpudvfsLightningCallback` (``lightning.pytorch.Callback``)           |

A phase's prior (`step_prior`) and the pairs chosen among (`clock_grid`) are the daemon's too:
`gpudvfs.govern.priors` and `gpudvfs.govern.clock_grid`.
"""

from __future__ import annotations

import importlib
from typing import Any

from gpudvfs.govern.clock_grid import MAX_CORE_CLOCKS, ClockGrid, clock_grid
from gpudvfs.govern.integrations.devices import open_device
from gpudvfs.govern.integrations.meter import SIM_STEP, StepMeter, StepRecord
from gpudvfs.govern.integrations.session import GovernedTraining
from gpudvfs.govern.priors import GENERIC_UTIL, LIMIT_PRIOR_SD, MEMORY_SHARE, STEP_PRIOR_SD, step_prior

_LAZY = {"GpudvfsTrainerCallback": ".huggingface", "GpudvfsLightningCallback": ".lightning"}

__all__ = ["GENERIC_UTIL", "LIMIT_PRIOR_SD", "MAX_CORE_CLOCKS", "MEMORY_SHARE", "SIM_STEP", "STEP_PRIOR_SD",
           "ClockGrid", "GovernedTraining", "GpudvfsLightningCallback", "GpudvfsTrainerCallback", "StepMeter",
           "StepRecord", "clock_grid", "open_device", "step_prior"]


def __getattr__(name: str) -> Any:
    """The callbacks load their framework on first use."""
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
