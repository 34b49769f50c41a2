"""Data-parallel training: every rank of a job runs one pair of clocks.

Rank 0 chooses the pair from every rank's measurements.

A data-parallel step takes as long as its slowest rank and costs the energy of all of them, so
the governor observes, per step, the longest of the ranks' times and the sum of their energies
(`StepExchange`). Every rank merges the same records in the same order and so feeds its
governor the same observations at the same points; where clocks are set, each decision goes
through `agree_pair`, which sets rank 0's pair on every rank (the governors agree, being
deterministic on the same inputs; rank 0's word is what holds if they ever do not).

The ranks talk through a `Collective`, one ``all_gather`` of a short float64 row per step end:
`torch_collective` wraps ``torch.distributed`` (any backend: CUDA tensors under NCCL, CPU
tensors otherwise). Every rank must run the same steps and marked regions in the same order,
as data parallelism does anyway; a rank whose step was of another phase is an `InputError` on
every rank at once (their rows say so), rather than a silent mix.

Energy is known late (see `meter`): a rank's step joins the exchange once its own record is
final, and a merged record is made once every rank's is, at most `SLOTS` steps per exchange.
"""

from __future__ import annotations

import math
import sys
import zlib
from dataclasses import replace
from typing import Any, Protocol

import numpy as np

from gpudvfs.errors import InputError
from gpudvfs.govern.integrations.meter import StepRecord

#: Steps one exchange carries per rank. More pending steps (steps far shorter than the energy
#: counter's update period) catch up over the next exchanges.
SLOTS = 16
#: Floats per step in a row: time (ms), joules (NaN: none), the phase's CRC-32, core and memory MHz.
_FIELDS = 5


class Collective(Protocol):
    """The ranks of one job."""

    rank: int
    world_size: int

    def all_gather(self, row: np.ndarray) -> np.ndarray:
        """Every rank's row: [world_size x n], rank 0 first; every rank calls it at the same point."""


class TorchCollective:
    """`Collective` over a ``torch.distributed`` process group.

    ``group``: None for the world.
    """

    def __init__(self, group: Any = None) -> None:
        torch = sys.modules["torch"]
        self._torch, self._dist, self.group = torch, torch.distributed, group
        self.rank = self._dist.get_rank(group)
        self.world_size = self._dist.get_world_size(group)
        # NCCL gathers CUDA tensors only; every other backend (gloo, or gloo beside NCCL) takes CPU ones.
        nccl = self._dist.get_backend(group) == "nccl"
        self._device = torch.device("cuda", torch.cuda.current_device()) if nccl else torch.device("cpu")

    def all_gather(self, row: np.ndarray) -> np.ndarray:
        """Every rank's row, gathered through ``torch.distributed``."""
        t = self._torch.as_tensor(np.asarray(row, dtype=np.float64), device=self._device)
        out = [self._torch.empty_like(t) for _ in range(self.world_size)]
        self._dist.all_gather(out, t, group=self.group)
        return self._torch.stack(out).cpu().numpy()


def torch_collective(group: Any = None) -> TorchCollective | None:
    """The job's ``torch.distributed`` group, where this process uses torch with more than one rank.

    Torch must already be imported and the group initialized (torch is never imported here).

    None where torch is not in use, not initialized, or runs one rank.
    """
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    dist = torch.distributed
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size(group) < 2:
        return None
    return TorchCollective(group)


def collective_of(distributed: Collective | str | None) -> Collective | None:
    """The ranks of a job, as a training session is given them.

    ``distributed``: ``"auto"`` (`torch_collective`), None (a job of its own) or a
    `Collective`; anything else is an `InputError`.
    """
    if distributed == "auto":
        return torch_collective()
    if distributed is None:
        return None
    if isinstance(distributed, str) or not (
            callable(getattr(distributed, "all_gather", None)) and isinstance(getattr(distributed, "rank", None), int)
            and isinstance(getattr(distributed, "world_size", None), int)):
        raise InputError(f"distributed must be 'auto', None or a Collective (rank, world_size, all_gather), "
                         f"got {distributed!r}")
    return distributed


def _phase_code(phase: str) -> float:
    return float(zlib.crc32(phase.encode()))


class StepExchange:
    """Merges the ranks' step records (module notes): `exchange` at every step end."""

    def __init__(self, comm: Collective) -> None:
        self.comm = comm
        self.merged = 0  # the last step merged, the same on every rank
        self._local: dict[int, StepRecord] = {}

    def _row(self) -> np.ndarray:
        row = np.full(1 + SLOTS * _FIELDS, np.nan)
        ready = self.merged
        while ready + 1 in self._local and ready - self.merged < SLOTS:
            ready += 1
            r = self._local[ready]
            row[1 + (ready - self.merged - 1) * _FIELDS:][:_FIELDS] = (
                r.time_ms, np.nan if r.joules is None else r.joules, _phase_code(r.phase),
                np.nan if r.core_mhz is None else r.core_mhz, np.nan if r.mem_mhz is None else r.mem_mhz)
        row[0] = ready
        return row

    def exchange(self, recs: list[StepRecord]) -> list[StepRecord]:
        """Add this rank's newly final records and merge the steps every rank has finalized.

        One ``all_gather``. A merged step has the longest time, the summed joules (None if a rank has
        none), rank 0's clocks and this rank's other fields.

        Returns the steps merged now, in order; `InputError` where a rank ran a step in another
        phase than rank 0.
        """
        for r in recs:
            self._local[r.step] = r
        rows = self.comm.all_gather(self._row())
        upto = int(rows[:, 0].min())
        out = []
        for i, step in enumerate(range(self.merged + 1, upto + 1)):
            f = rows[:, 1 + i * _FIELDS:][:, :_FIELDS]
            rec = self._local.pop(step)
            odd = np.flatnonzero(f[:, 2] != f[0, 2])
            if odd.size:
                raise InputError(f"rank {odd[0]} ran step {step} in another phase than rank 0 "
                                 f"(this rank: {rec.phase!r}): every rank must run the same steps and marked "
                                 "regions in the same order")
            time_ms = float(f[:, 0].max())
            joules = None if np.isnan(f[:, 1]).any() else float(f[:, 1].sum())
            core, mem = (None if math.isnan(x) else float(x) for x in f[0, 3:5])
            out.append(replace(rec, time_ms=time_ms, joules=joules, core_mhz=core, mem_mhz=mem,
                               watts=None if joules is None or time_ms <= 0 else joules / (time_ms / 1e3)))
        self.merged = upto
        return out

    def drain(self, last_step: int) -> list[StepRecord]:
        """At the end, every rank's records final: exchange until step ``last_step`` is merged.

        Where no exchange moves (a rank ran fewer steps), the rest stays unmerged.

        Returns the steps merged now, in order.
        """
        out: list[StepRecord] = []
        while self.merged < last_step:
            before = self.merged
            out += self.exchange([])
            if self.merged == before:
                break
        return out


def agree_pair(comm: Collective, index: int) -> int:
    """Rank 0's pair index; every rank calls this at the same decision."""
    return int(comm.all_gather(np.array([float(index)]))[0, 0])


def agree_all(comm: Collective, flag: bool) -> tuple[bool, list[int]]:
    """Whether a flag holds on every rank; every rank calls this at the same point.

    Also the ranks where it does not.
    """
    flags = comm.all_gather(np.array([1.0 if flag else 0.0]))[:, 0]
    return bool(flags.all()), [int(r) for r in np.flatnonzero(flags == 0)]
