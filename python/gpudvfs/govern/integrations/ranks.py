"""What each rank of a data-parallel job meters and writes.

A rank meters its local rank's GPU unless given an index: CUDA's GPU ``LOCAL_RANK`` (which
torchrun and the frameworks' launchers set; 0 where unset), through ``CUDA_VISIBLE_DEVICES`` to
NVML's index (NVML numbers every GPU of the machine).

Rank 0 keeps the log's name and writes the job's one summary, so that a job's main files are
where a single process puts them; rank r > 0 logs to ``<stem>.rank<r><suffix>`` beside it and
writes no summary file. Rank 0's summary adds each rank's steps and energy (`gather_ranks`).
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from gpudvfs.errors import InputError
from gpudvfs.govern.integrations.distributed import Collective
from gpudvfs.govern.integrations.meter import StepRecord
from gpudvfs.hardware.nvml.visible import visible_nvml_indices


def local_rank() -> int:
    """``LOCAL_RANK``, 0 where unset."""
    raw = os.environ.get("LOCAL_RANK")
    if raw is None:
        return 0
    if not raw.strip().isdigit():
        raise InputError(f"LOCAL_RANK={raw!r}: expected an integer >= 0 (the rank's GPU among the node's)")
    return int(raw)


def local_gpu_index(bindings: Callable[[], Any]) -> int:
    """NVML's index of this rank's GPU (module notes); ``bindings()`` read where CUDA_VISIBLE_DEVICES is set.

    `InputError` where CUDA shows this process no GPU ``LOCAL_RANK``.
    """
    rank = local_rank()
    if os.environ.get("CUDA_VISIBLE_DEVICES") is None:
        return rank
    nv = bindings()
    nv.nvmlInit()
    try:
        visible = visible_nvml_indices(nv, int(nv.nvmlDeviceGetCount()))
    finally:
        nv.nvmlShutdown()
    if rank >= len(visible):
        raise InputError(f"LOCAL_RANK={rank}: CUDA shows this process {len(visible)} GPU(s) "
                         f"(CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')!r}); pass index= (NVML's)")
    return visible[rank]


def rank_log_path(path: Path | None, rank: int) -> Path | None:
    """Rank ``rank``'s log (module notes; None: no log)."""
    return path if rank == 0 or path is None else path.with_name(f"{path.stem}.rank{rank}{path.suffix}")


def gather_ranks(comm: Collective, records: list[StepRecord], counter_j: float | None) -> dict:
    """Every rank's steps and energy, and the job's: one ``all_gather``, every rank at the same point.

    ``per_rank``: each rank's steps, the steps' energy sum and the counter's total (None where
    unread); ``job_energy_j``: the ranks' sums added.
    """
    known = [r.joules for r in records if r.joules is not None]
    rows = comm.all_gather(np.array([len(records), sum(known) if known else np.nan,
                                     np.nan if counter_j is None else counter_j], dtype=np.float64))
    per = [{"rank": r, "steps": int(row[0]), "energy_j": None if np.isnan(row[1]) else float(row[1]),
            "counter_total_j": None if np.isnan(row[2]) else float(row[2])} for r, row in enumerate(rows)]
    return {"per_rank": per, "job_energy_j": None if np.isnan(rows[:, 1]).any() else float(rows[:, 1].sum())}


def gpu_code(device: Any) -> float:
    """A real GPU's UUID as a number the ranks can compare (-1: none, or simulated)."""
    try:
        ident = device.identity()
    except Exception:  # no device, or one without identity(): nothing to compare
        return -1.0
    if ident.get("kind") != "nvml" or not ident.get("uuid"):
        return -1.0
    return float(zlib.crc32(str(ident["uuid"]).encode()))
