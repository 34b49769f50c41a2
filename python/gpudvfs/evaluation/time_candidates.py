"""The time model's candidate settings and the kernels the protocol scores them on.

Every structural choice, extension and hyper-parameter of the time model is a candidate
(:data:`CANDIDATES`), scored on each kernel of the measured grids by its calibrated MAPE
(:func:`error_matrix`), beside the two-term baseline (:func:`two_term_errors`).
`gpudvfs.evaluation.time_cv` chooses among them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from gpudvfs.data.datasets import MeasurementGrid
from gpudvfs.evaluation.time_errors import two_term
from gpudvfs.stats import mape
from gpudvfs.time.device import TimeDevice
from gpudvfs.time.from_grid import profiles_from_grid
from gpudvfs.time.model import TimeModel
from gpudvfs.time.profile import KernelProfile

#: Soft-max exponents tried (the overlap of the memory queue with SM work).
OVERLAP_PS = (4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 12.0)


@dataclass(frozen=True)
class Candidate:
    """One setting of the time model, a candidate of the protocol.

    ``overlap_p`` is the soft-max exponent. ``dependent_latency``: a warp's chain waits the
    device's dependent-instruction latency (the base device's ``inst_lat``).
    ``parallel_queues``: L2 hits and DRAM misses queue in parallel, not in series (Eq. 5b).
    ``pipe_rates``: FP64, special-function and integer multiply-add instructions issue at their
    pipe's rate (the base device's ``dp_inst_cycle``, ``sf_inst_cycle``, ``imad_inst_cycle``),
    not like any other. ``calibration``: how a calibrated prediction meets the reference time
    (``TimeModel(calibration=...)``). ``overlapped_rounds``: consecutive rounds of resident
    warps overlap, a round's exposed latency paid once per kernel
    (`TimeDevice.overlapped_rounds`).
    """

    overlap_p: float
    dependent_latency: bool
    parallel_queues: bool
    pipe_rates: bool
    calibration: str
    overlapped_rounds: bool = False

    @property
    def label(self) -> str:
        """The setting in words, as the reports name it."""
        return ", ".join([f"p={self.overlap_p:g}", "dependent latency" if self.dependent_latency else "issue only",
                          "parallel queues" if self.parallel_queues else "queues in series",
                          "pipe rates" if self.pipe_rates else "one issue rate", self.calibration]
                         + (["overlapped rounds"] if self.overlapped_rounds else []))

    def model(self, base: TimeDevice) -> TimeModel:
        """The time model of this setting on ``base``, whose constants the setting keeps or switches off."""
        dev = replace(base, overlap_p=self.overlap_p, inst_lat=base.inst_lat if self.dependent_latency else 0.0,
                      parallel_queues=self.parallel_queues, overlapped_rounds=self.overlapped_rounds,
                      dp_inst_cycle=base.dp_inst_cycle if self.pipe_rates else base.inst_cycle,
                      sf_inst_cycle=base.sf_inst_cycle if self.pipe_rates else base.inst_cycle,
                      imad_inst_cycle=base.imad_inst_cycle if self.pipe_rates else base.inst_cycle)
        return TimeModel(dev, calibration=self.calibration)


CANDIDATES = tuple(Candidate(p, lat, par, pipes, cal, rounds) for p in OVERLAP_PS for lat in (False, True)
                   for par in (False, True) for pipes in (False, True) for cal in ("scale", "dram-check")
                   for rounds in (False, True))
#: The switches of a candidate, for the report of what each does under the protocol.
EXTENSIONS = {"dependent latency": lambda c: c.dependent_latency, "parallel queues": lambda c: c.parallel_queues,
              "pipe rates": lambda c: c.pipe_rates, "DRAM check": lambda c: c.calibration == "dram-check",
              "overlapped rounds": lambda c: c.overlapped_rounds}


@dataclass(frozen=True)
class KernelCase:
    """One kernel of a measured grid: its reference profile and its measured times."""

    file: str
    profile: KernelProfile
    core_mhz: np.ndarray
    mem_mhz: np.ndarray
    time_ms: np.ndarray

    @property
    def name(self) -> str:
        """The kernel's name (its profile's)."""
        return self.profile.name


def kernel_cases(grids: list[MeasurementGrid], reference: tuple[float, float], device: TimeDevice
                 ) -> list[KernelCase]:
    """Every kernel of every grid, grid by grid, profiled at the (core, memory) ``reference`` pair."""
    cases = []
    for g in grids:
        work, mem = g.workload, g.mem_mhz
        for p in profiles_from_grid(g, reference, device):
            assert mem is not None  # profiles_from_grid refuses a grid without memory clocks
            rows = work == p.name
            cases.append(KernelCase(g.path, p, g.core_mhz[rows], mem[rows], g.time_ms[rows]))
    return cases


def calibrated_times(model: TimeModel, profiles: Sequence[KernelProfile], core_mhz: Sequence[np.ndarray],
                     mem_mhz: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Each profile's calibrated time (ms) at its own pairs, all in one batch over the union of the pairs.

    A batch costs about what one profile does (the Rust call's fixed cost dominates); a time
    at a pair depends on that profile and pair alone, so each row is what the profile alone gives.
    """
    pairs = [np.column_stack([c, m]).astype(np.float64) for c, m in zip(core_mhz, mem_mhz)]
    union, at = np.unique(np.vstack(pairs), axis=0, return_inverse=True)
    t = model.predict(list(profiles), union[:, 0], union[:, 1], calibrate=True)
    ends = np.cumsum([0] + [len(p) for p in pairs])
    return [t[j, at.ravel()[ends[j]:ends[j + 1]]] for j in range(len(profiles))]


def error_matrix(cases: list[KernelCase], candidates: Sequence[Candidate], device: TimeDevice) -> np.ndarray:
    """Each candidate's calibrated MAPE (%) on each kernel: [candidates x kernels]."""
    profiles, core, mem = [k.profile for k in cases], [k.core_mhz for k in cases], [k.mem_mhz for k in cases]
    out = np.empty((len(candidates), len(cases)))
    for i, cand in enumerate(candidates):
        times = calibrated_times(cand.model(device), profiles, core, mem)
        out[i] = [mape(t, k.time_ms) for t, k in zip(times, cases)]
    return out


def two_term_errors(cases: list[KernelCase], device: TimeDevice, reference: tuple[float, float]) -> np.ndarray:
    """MAPE (%) per kernel of the two-term baseline (`gpudvfs.evaluation.time_errors.two_term`)."""
    return np.array([mape(two_term(k.profile, device, reference, k.core_mhz, k.mem_mhz), k.time_ms) for k in cases])
