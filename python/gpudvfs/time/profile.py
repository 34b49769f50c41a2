"""A kernel's time-model inputs, from profiler counters at a reference configuration.

Counters -> inputs (nvprof names; per warp = kernel total / ``warps``):

| input | from |
|---|---|
| warps_total | blocks x ceil(block size / 32) where the launch is known (a partial warp takes a warp slot), else ``warps`` |
| active_warps | ``achieved_occupancy`` x max warps per SM |
| slot_warps | ``theoretical_occupancy`` x max warps where reported (Nsight Compute); else None (nvprof grids do not tell) |
| gld_trans | (``l2_read_transactions`` + ``l2_write_transactions``) / warps |
| l2_hit_rate | 1 - DRAM / L2 transactions, kept in [0, 1] (DRAM can exceed L2 traffic with partial writes) |
| comp_inst | ``inst_issued`` / warps (``inst_executed`` where the profile has no issue count) |
| shared_trans | (``shared_load_transactions`` + ``shared_store_transactions``) / warps |
| dp_inst | ``inst_fp_64`` / 32 / warps (FP64 warp instructions; 0 where the profile lacks it) |
| sf_inst | ``flop_count_sp_special`` / 32 / warps (special-function warp instructions; 0 where the profile lacks it) |
| imad_inst | ``inst_fma_heavy_only`` / warps (warp instructions the FMA-heavy pipe alone runs: integer multiply-adds; 0 where the profile lacks it) |
| warps_per_block | the launch's block size / 32 where known, else 8 (assumed; used by the paper mode only) |
| trans_per_req | L2 transactions per global request: (``l2_*_transactions``) / ``global_requests`` where counted, else 4 (coalesced 32-bit accesses) |
| extra_chain | not a counter: latency in a warp's chain a calibration attributes to what no counter shows (0) |

Counters of other tools (Nsight Compute, DCGM) reach these names through
:func:`gpudvfs.data.counters.time_model_inputs`; ``global_requests``, ``blocks``,
``threads_per_block``, ``theoretical_occupancy``, ``flop_count_sp_special`` and
``inst_fma_heavy_only`` are its optional ``TIME_EXTRAS``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from gpudvfs.data.counters import time_model_inputs
from gpudvfs.errors import InputError
from gpudvfs.limits import clock_array, is_finite_number
from gpudvfs.time.device import TimeDevice

INPUT_KEYS = ("warps_total", "active_warps", "warps_per_block", "gld_trans", "trans_per_req",
              "l2_hit_rate", "comp_inst", "shared_trans", "dp_inst", "sf_inst", "extra_chain", "imad_inst")
# Block-starved kernels (KernelProfile.block_starved), judged against the theoretical
# occupancy Nsight Compute reports. Designed after one GTX 980 kernel (0.61 of the
# occupancy its block size allows, all others of >= 4 waves at >= 0.88); nvprof grids lack
# the theoretical occupancy, and against the block-size bound the rule fired on kernels held
# back by registers or shared memory, so it applies to ncu profiles only.
STARVED_OCCUPANCY = 0.75
STARVED_WAVES = 4.0


def _counter(counters: Mapping[str, float], name: str, kernel: str) -> float:
    if name not in counters:
        raise InputError(f"kernel {kernel!r}: counter {name!r} is missing")
    try:
        v = float(counters[name])
    except (TypeError, ValueError):
        raise InputError(f"kernel {kernel!r}: counter {name!r} is not a number: {counters[name]!r}") from None
    if not math.isfinite(v) or v < 0:
        raise InputError(f"kernel {kernel!r}: counter {name!r} must be finite and >= 0, got {v}")
    return v


def _finite(v: object, allow_none: bool = False) -> bool:
    """A number in [0, inf) (numpy scalars included); None where ``allow_none``."""
    return allow_none if v is None else is_finite_number(v, 0)


class _Checked(Mapping[str, float]):
    """A kernel's counters, each checked by :func:`_counter` when read.

    The mapping tables then read only numbers, and a bad value is reported with the kernel's name.
    """

    def __init__(self, counters: Mapping[str, float], kernel: str) -> None:
        self._counters, self._kernel = counters, kernel

    def __getitem__(self, name: str) -> float:
        if name not in self._counters:
            raise KeyError(name)
        return _counter(self._counters, name, self._kernel)

    def __iter__(self) -> Iterator[str]:
        return iter(self._counters)

    def __len__(self) -> int:
        return len(self._counters)


@dataclass(frozen=True)
class KernelProfile:
    """The time model's inputs for one kernel, from counters at a reference configuration.

    The module's table says how each input comes from the counters; counts are per warp unless
    named otherwise.

    ``reference_time_ms``, measured at ``reference_mhz`` (core, memory), enables calibrated
    predictions; ``slot_warps`` (resident warps per SM the kernel's resources allow, from the
    theoretical occupancy; None where the profiler does not tell) lets them recognise
    block-starved kernels. ``extra_chain`` is latency a calibration put into a warp's chain (core
    cycles). Raises `InputError` if an input is not a finite number >= 0, ``slot_warps`` is 0, or
    the reference is invalid.
    """

    name: str
    warps_total: float
    active_warps: float
    warps_per_block: float
    gld_trans: float
    trans_per_req: float
    l2_hit_rate: float
    comp_inst: float
    shared_trans: float
    dp_inst: float = 0.0
    sf_inst: float = 0.0
    extra_chain: float = 0.0
    imad_inst: float = 0.0
    reference_mhz: tuple[float, float] | None = None
    reference_time_ms: float | None = None
    slot_warps: float | None = None

    def __post_init__(self) -> None:
        """Check the inputs (see Raises above) and store the reference clocks as floats."""
        bad = [k for k in (*INPUT_KEYS, "slot_warps") if not _finite(getattr(self, k), allow_none=k == "slot_warps")]
        if bad:
            raise InputError(f"kernel {self.name!r}: {', '.join(bad)} must be finite numbers >= 0")
        if self.slot_warps == 0:
            raise InputError(f"kernel {self.name!r}: slot_warps (resident warps the resources allow) must be > 0")
        if self.reference_mhz is not None:
            ref = clock_array(self.reference_mhz, f"kernel {self.name!r}: reference_mhz")
            if ref.shape != (2,):
                raise InputError(f"kernel {self.name!r}: reference_mhz must be (core, memory) MHz, got {ref.tolist()}")
            object.__setattr__(self, "reference_mhz", (float(ref[0]), float(ref[1])))
        if self.reference_time_ms is not None and not (_finite(self.reference_time_ms) and self.reference_time_ms > 0):
            raise InputError(f"kernel {self.name!r}: reference_time_ms must be finite and > 0, "
                             f"got {self.reference_time_ms!r}")

    @classmethod
    def from_counters(cls, name: str, counters: Mapping[str, float], *, tool: str = "nvprof",
                      device: TimeDevice | None = None, reference_mhz: tuple[float, float] | None = None,
                      reference_time_ms: float | None = None, launch: tuple[float, float] | None = None,
                      trans_per_req: float | None = None) -> KernelProfile:
        """A profile from one kernel's counters: nvprof names, or those of ``tool`` mapped through :mod:`gpudvfs.data.counters`.

        ``tool`` is ``nvprof``, ``ncu``, ``ncu-pascal`` or ``dcgm``; ``device`` gives the warp slots per
        SM (the GTX 980's by default); ``launch`` (blocks, threads per block) replaces the ``warps``
        counter, else the counters' ``blocks`` and ``threads_per_block`` do where present. Raises
        `InputError` if a counter the model needs is missing or not a finite number >= 0, an
        occupancy is outside (0, 1], or the launch is invalid.
        """
        if tool != "nvprof":
            # Inputs the model does not use (flop counts) may be absent; the ones it needs
            # are checked below under their nvprof names.
            mapped = time_model_inputs(dict(counters), scheme=tool, missing="none")
            counters = {k: v for k, v in mapped.items() if v is not None}
        else:
            # nvprof's own names go through the same table (warps_launched or unique_warps_launched
            # stand in for warps); counters it does not list (inst_executed, blocks) stay as given.
            mapped = time_model_inputs(_Checked(counters, name), scheme="nvprof", missing="none")
            counters = {**counters, **{k: v for k, v in mapped.items() if v is not None}}
        dev = device or TimeDevice.gtx980()
        if launch is None and "blocks" in counters and "threads_per_block" in counters:
            launch = (counters["blocks"], counters["threads_per_block"])
        if launch is None:
            warps, per_block = _counter(counters, "warps", name), 8.0
        else:
            blocks, threads = (float(x) for x in launch)
            if not (math.isfinite(blocks) and math.isfinite(threads) and blocks >= 1 and threads >= 1):
                raise InputError(f"kernel {name!r}: launch needs blocks >= 1 and threads >= 1, got {launch!r}")
            per_block = float(math.ceil(threads / 32))
            warps = blocks * per_block
        # Only the profiler's theoretical occupancy (registers and shared memory included) tells
        # a block-starved kernel from one its resources hold back; the block size alone cannot.
        slot = None
        if "theoretical_occupancy" in counters:
            theory = _counter(counters, "theoretical_occupancy", name)
            if not 0 < theory <= 1:
                raise InputError(f"kernel {name!r}: theoretical_occupancy must be in (0, 1], got {theory}")
            slot = theory * dev.max_warps_per_sm
        if warps <= 0:
            raise InputError(f"kernel {name!r}: warps must be > 0")
        occ = _counter(counters, "achieved_occupancy", name)
        if not 0 < occ <= 1:
            raise InputError(f"kernel {name!r}: achieved_occupancy must be in (0, 1], got {occ}")
        l2 = _counter(counters, "l2_read_transactions", name) + _counter(counters, "l2_write_transactions", name)
        dram = _counter(counters, "dram_read_transactions", name) + _counter(counters, "dram_write_transactions", name)
        inst_key = "inst_issued" if "inst_issued" in counters else "inst_executed"
        shared = (_counter(counters, "shared_load_transactions", name)
                  + _counter(counters, "shared_store_transactions", name))
        if trans_per_req is None:
            requests = counters.get("global_requests", 0.0)
            trans_per_req = l2 / requests if requests > 0 and l2 > 0 else 4.0
        return cls(
            name=name,
            warps_total=warps,
            active_warps=occ * dev.max_warps_per_sm,
            warps_per_block=per_block,
            gld_trans=l2 / warps,
            trans_per_req=float(trans_per_req),
            l2_hit_rate=min(1.0, max(0.0, 1.0 - dram / l2)) if l2 > 0 else 0.0,
            comp_inst=_counter(counters, inst_key, name) / warps,
            shared_trans=shared / warps,
            dp_inst=_counter(counters, "inst_fp_64", name) / 32 / warps if "inst_fp_64" in counters else 0.0,
            sf_inst=(_counter(counters, "flop_count_sp_special", name) / 32 / warps
                     if "flop_count_sp_special" in counters else 0.0),
            imad_inst=(_counter(counters, "inst_fma_heavy_only", name) / warps
                       if "inst_fma_heavy_only" in counters else 0.0),
            reference_mhz=reference_mhz,
            reference_time_ms=reference_time_ms,
            slot_warps=slot,
        )

    def inputs(self) -> list[float]:
        """The values of :data:`INPUT_KEYS`, in order: one row of the Rust core's batch."""
        return [float(getattr(self, k)) for k in INPUT_KEYS]

    @property
    def dram_transactions(self) -> float:
        """The whole kernel's global-load transactions that miss L2 and go to DRAM."""
        return self.warps_total * self.gld_trans * (1 - self.l2_hit_rate)

    def block_starved(self, device: TimeDevice) -> bool:
        """Whether the SMs waited for blocks at the reference.

        True where the achieved occupancy is below :data:`STARVED_OCCUPANCY` of the theoretical one
        over at least :data:`STARVED_WAVES` waves of ``device``'s SMs (fewer waves leave occupancy
        short through the tail alone); False where the theoretical occupancy is not known.
        """
        if self.slot_warps is None:
            return False
        waves = self.warps_total / (self.slot_warps * device.sm_count)
        return self.active_warps < STARVED_OCCUPANCY * self.slot_warps and waves >= STARVED_WAVES
