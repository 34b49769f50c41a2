"""The analytical kernel-time model of Wang & Chu under core and memory frequency scaling.

Counters profiled once at a reference configuration (:class:`KernelProfile`) and device
parameters from microbenchmarks (:class:`TimeDevice`) give the time of a kernel at any
(fc, fm) (:class:`TimeModel`, batched in the Rust core, `rust/src/time/`). The module
documentation of `rust/src/time/mod.rs` lists every resolution of the paper's ambiguities
(Table II's columns, Eq. 5a's double fc/fm, Eq. 10b/12b, #Wpb vs #Aw, latency per
request, soft instead of hard case switches) and the counter mapping; ``mode="paper"``
evaluates the text as printed.

Counters -> inputs (nvprof names; per warp = kernel total / ``warps``):

| input | from |
|---|---|
| warps_total | blocks x ceil(block size / 32) where the launch is known (a partial warp takes a warp slot), else ``warps`` |
| active_warps | ``achieved_occupancy`` x max warps per SM |
| slot_warps | ``theoretical_occupancy`` x max warps where reported (Nsight Compute), else min(max warps, max blocks x warps per block) where the launch is known |
| gld_trans | (``l2_read_transactions`` + ``l2_write_transactions``) / warps |
| l2_hit_rate | 1 - DRAM / L2 transactions, kept in [0, 1] (DRAM can exceed L2 traffic with partial writes) |
| comp_inst | ``inst_issued`` / warps (``inst_executed`` where the profile has no issue count) |
| shared_trans | (``shared_load_transactions`` + ``shared_store_transactions``) / warps |
| dp_inst | ``inst_fp_64`` / 32 / warps (FP64 warp instructions; 0 where the profile lacks it) |
| warps_per_block | the launch's block size / 32 where known, else 8 (assumed; used by the paper mode only) |
| trans_per_req | L2 transactions per global request: (``l2_*_transactions``) / ``global_requests`` where counted, else 4 (coalesced 32-bit accesses) |

Counters of other tools (Nsight Compute, DCGM) reach these names through
:func:`gpudvfs.measure.counters.time_model_inputs`; ``global_requests``, ``blocks``,
``threads_per_block`` and ``theoretical_occupancy`` are its optional ``TIME_EXTRAS``.

Calibrated predictions of *block-starved* kernels (resolution 14 in `rust/src/time/mod.rs`):
a kernel whose achieved occupancy stays far below what its block size allows, over many
waves, is limited by how fast blocks reach the SMs, not by the SMs. Its reference time
then holds a floor that no clock moves (a GTX 980 kernel of 262144 one-warp blocks keeps
its time within 2% from 500 to 1000 MHz core, while its occupancy falls as Little's law
says). Such a kernel is predicted as the soft maximum of that floor and the model at the
occupancy its block size allows; the floor is what the reference time leaves over.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

import numpy as np

from . import _core
from .errors import InputError
from .jsonfile import read_versioned, write_json_atomic

INPUT_KEYS = ("warps_total", "active_warps", "warps_per_block", "gld_trans", "trans_per_req",
              "l2_hit_rate", "comp_inst", "shared_trans", "dp_inst")
CASES = ("compute", "memory", "few-warps", "few-warps-long-compute", "shared-infrequent", "shared-intensive",
         "block-dispatch")
DISPATCH_CASE = CASES.index("block-dispatch")
MODES = ("default", "paper")
# Block-starved kernels (KernelProfile.block_starved): in gtx980_time_power_dev.csv (the
# grid with launch geometry) every kernel of >= 4 waves reaches >= 0.88 of the occupancy
# its block size allows, except the block-starved one at 0.61; any threshold between the
# two selects the same kernels.
STARVED_OCCUPANCY = 0.75
STARVED_WAVES = 4.0
DEVICE_VERSION = 1


@dataclass(frozen=True)
class TimeDevice:
    """Microbenchmarked parameters of one GPU, in core cycles unless named otherwise.

    ``dm_lat = dm_lat_a * fc/fm + dm_lat_b`` (Eq. 4); the DRAM service time per transaction
    is ``dm_del_a / fm + dm_del_b`` memory cycles (Table III's law), converted by fc/fm."""

    sm_count: float
    max_warps_per_sm: float
    dm_lat_a: float
    dm_lat_b: float
    dm_del_a: float
    dm_del_b: float
    l2_lat: float
    l2_del: float
    sh_lat: float
    sh_del: float
    inst_cycle: float
    overlap_p: float
    dp_inst_cycle: float
    name: str = "custom"
    #: Resident blocks per SM (32 on Maxwell, Pascal, Volta, A100 and Hopper; 24 on Ada;
    #: 16 on Kepler, Turing and GA10x); bounds the occupancy a launch's block size allows.
    max_blocks_per_sm: float = 32.0

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            if f.name != "name" and not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0):
                raise InputError(f"TimeDevice.{f.name} must be a finite number >= 0, got {v!r}")
        if self.sm_count < 1 or self.max_warps_per_sm < 1 or self.max_blocks_per_sm < 1:
            raise InputError("TimeDevice needs sm_count, max_warps_per_sm and max_blocks_per_sm >= 1")

    @classmethod
    def gtx980(cls) -> "TimeDevice":
        """The GTX 980 of the paper: Eq. 4, Table III's delay law, Sec. IV-B's L2."""
        return cls(**_core.time_device_gtx980(), name="gtx980")

    @classmethod
    def preset(cls, name: str) -> "TimeDevice":
        presets = {"gtx980": cls.gtx980}
        if name not in presets:
            raise InputError(f"unknown device preset {name!r}; known: {sorted(presets)}")
        return presets[name]()

    def params(self) -> dict[str, float]:
        return {k: float(v) for k, v in asdict(self).items() if k != "name"}

    def fit(self, dram_latency, dram_delay=None, *, l2_latency_cycles=None,
            shared_latency_cycles=None, name: str | None = None) -> tuple["TimeDevice", dict]:
        """A device with the memory parameters fitted to microbenchmark results.

        ``dram_latency``: (core_mhz, mem_mhz, core cycles) of a pointer chase, fitted to
        Eq. 4's form by least squares; ``dram_delay``: (mem_mhz, memory cycles per
        transaction) of a bandwidth benchmark, fitted to ``a / fm + b``. L2 and shared
        latencies, when given, are averaged. Returns the device and the fits' R^2."""
        def arrays(name, xs, n):
            if len(xs) != n:
                raise InputError(f"{name} must be {n} arrays")
            return [np.ascontiguousarray(x, dtype=np.float64) for x in xs]

        c, m, cyc = arrays("dram_latency", dram_latency, 3)
        try:
            a, b, r2 = _core.time_fit_dm_lat(c, m, cyc)
            report = {"dm_lat": {"a": a, "b": b, "r2": r2, "n": len(cyc)}}
            changes = {"dm_lat_a": a, "dm_lat_b": b}
            if dram_delay is not None:
                dm, dcyc = arrays("dram_delay", dram_delay, 2)
                a, b, r2 = _core.time_fit_dm_del(dm, dcyc)
                report["dm_del"] = {"a": a, "b": b, "r2": r2, "n": len(dcyc)}
                changes |= {"dm_del_a": a, "dm_del_b": b}
        except ValueError as e:
            raise InputError(f"TimeDevice.fit: {e}") from None
        for key, cycles in (("l2_lat", l2_latency_cycles), ("sh_lat", shared_latency_cycles)):
            if cycles is not None:
                arr = np.asarray(cycles, dtype=np.float64)
                if arr.size == 0 or not np.all(np.isfinite(arr)) or np.any(arr <= 0):
                    raise InputError(f"{key} measurements must be positive and finite")
                changes[key] = float(arr.mean())
        return replace(self, **changes, name=name or self.name), report

    def save(self, path: str | Path) -> None:
        write_json_atomic(path, {"kind": "time-device", "version": DEVICE_VERSION, "name": self.name,
                                 "params": self.params()})

    @classmethod
    def load(cls, path: str | Path) -> "TimeDevice":
        doc = read_versioned(path, "time-device", DEVICE_VERSION)
        try:
            return cls(**doc["params"], name=doc.get("name", "custom"))
        except TypeError as e:
            raise InputError(f"{path}: invalid time device: {e}") from None


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


@dataclass(frozen=True)
class KernelProfile:
    """The time model's inputs for one kernel, from counters at a reference configuration.
    ``reference_time_ms`` (the measured time there) enables calibrated predictions;
    ``slot_warps`` (resident warps per SM its block size allows, None if the launch is
    unknown) lets them recognise block-starved kernels."""

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
    reference_mhz: tuple[float, float] | None = None
    reference_time_ms: float | None = None
    slot_warps: float | None = None

    @classmethod
    def from_counters(cls, name: str, counters: Mapping[str, float], *, tool: str = "nvprof",
                      device: TimeDevice | None = None, reference_mhz: tuple[float, float] | None = None,
                      reference_time_ms: float | None = None, launch: tuple[float, float] | None = None,
                      trans_per_req: float | None = None) -> "KernelProfile":
        """Build a profile from one kernel's counters (nvprof names, or ``tool="ncu"`` /
        ``"ncu-pascal"`` / ``"dcgm"`` names mapped through gpudvfs.measure.counters).

        ``launch`` = (blocks, threads per block) of the profiled launch; without it, the
        counters' ``blocks`` and ``threads_per_block`` (Nsight Compute reports them) where
        present. It replaces the ``warps`` counter. ``trans_per_req`` overrides the one
        from counters."""
        from .measure.counters import time_model_extras, time_model_inputs

        if tool != "nvprof":
            # Inputs the model does not use (flop counts) may be absent; the ones it needs
            # are checked below under their nvprof names.
            mapped = time_model_inputs(dict(counters), scheme=tool, missing="none")
            counters = {k: v for k, v in mapped.items() if v is not None}
        else:
            counters = {**counters, **time_model_extras(dict(counters), "nvprof")}
        dev = device or TimeDevice.gtx980()
        if launch is None and "blocks" in counters and "threads_per_block" in counters:
            launch = (counters["blocks"], counters["threads_per_block"])
        if launch is None:
            warps, per_block, slot = _counter(counters, "warps", name), 8.0, None
        else:
            blocks, threads = (float(x) for x in launch)
            if not (math.isfinite(blocks) and math.isfinite(threads) and blocks >= 1 and threads >= 1):
                raise InputError(f"kernel {name!r}: launch needs blocks >= 1 and threads >= 1, got {launch!r}")
            per_block = float(math.ceil(threads / 32))
            warps = blocks * per_block
            slot = min(dev.max_warps_per_sm, dev.max_blocks_per_sm * per_block)
        if "theoretical_occupancy" in counters:
            # Registers, shared memory and barriers included, where the profiler tells.
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
            reference_mhz=reference_mhz,
            reference_time_ms=reference_time_ms,
            slot_warps=slot,
        )

    def inputs(self) -> list[float]:
        return [float(getattr(self, k)) for k in INPUT_KEYS]

    def block_starved(self, device: TimeDevice) -> bool:
        """Whether the SMs waited for blocks at the reference: achieved occupancy below
        STARVED_OCCUPANCY of what the block size allows, over at least STARVED_WAVES waves
        (fewer waves leave occupancy short through the tail alone)."""
        if self.slot_warps is None:
            return False
        waves = self.warps_total / (self.slot_warps * device.sm_count)
        return self.active_warps < STARVED_OCCUPANCY * self.slot_warps and waves >= STARVED_WAVES


class TimeModel:
    """Kernel time (ms) at core/memory clock pairs, from profiles and a device.

    ``mode="default"`` is the resolved model, ``"paper"`` the text as printed."""

    def __init__(self, device: TimeDevice | str = "gtx980", mode: str = "default"):
        if mode not in MODES:
            raise InputError(f"unknown mode {mode!r}; expected one of {MODES}")
        self.device = TimeDevice.preset(device) if isinstance(device, str) else device
        self.mode = mode

    def _raw(self, rows: np.ndarray, core: np.ndarray, mem: np.ndarray):
        try:
            return _core.time_predict(rows, core, mem, self.device.params(), self.mode)
        except ValueError as e:
            raise InputError(str(e)) from None

    def predict(self, profiles: KernelProfile | Sequence[KernelProfile], core_mhz, mem_mhz, *,
                calibrate: bool = False, return_cases: bool = False):
        """Time [n_profiles, *clocks] in ms (a single profile drops the first axis; scalars
        give a float). ``calibrate`` scales each kernel so the model matches its measured
        reference time (block-starved kernels: see the module notes); ``return_cases`` also
        returns the regime label of each prediction."""
        single = isinstance(profiles, KernelProfile)
        profs = [profiles] if single else list(profiles)
        if not profs:
            raise InputError("no kernel profiles given")
        c, m = np.broadcast_arrays(np.asarray(core_mhz, dtype=np.float64), np.asarray(mem_mhz, dtype=np.float64))
        c_flat, m_flat = np.ascontiguousarray(c.ravel()), np.ascontiguousarray(m.ravel())
        rows = np.array([p.inputs() for p in profs], dtype=np.float64)
        t, case = self._raw(rows, c_flat, m_flat)
        if calibrate:
            t = t * self.calibration(profs)[:, None]
            for i, p in enumerate(profs):
                if self.mode == "default" and p.block_starved(self.device):
                    self._dispatch_floor(p, c_flat, m_flat, t[i], case[i])
        t = t.reshape((len(profs),) + c.shape)
        if single:
            t = t[0]
            t = float(t) if t.ndim == 0 else t
        if not return_cases:
            return t
        # Labels only on request: a string per prediction costs more than the prediction.
        labels = np.asarray(CASES, dtype=object)[case].reshape((len(profs),) + c.shape)
        if single:
            labels = labels[0]  # a str at one pair: the object array holds Python strings
        return t, labels

    def _dispatch_floor(self, p: KernelProfile, core: np.ndarray, mem: np.ndarray, t: np.ndarray,
                        case: np.ndarray) -> None:
        """Overwrite a block-starved kernel's calibrated times with soft-max(floor, model at
        the occupancy its block size allows); the floor is what the reference time leaves
        over that model. Nothing changes if the model alone already exceeds the reference."""
        full = replace(p, active_warps=p.slot_warps)
        t_full, case_full = self._raw(np.array([full.inputs()], dtype=np.float64), core, mem)
        q = self.device.overlap_p
        rest = p.reference_time_ms ** q - self._at_reference(full) ** q
        if rest <= 0:
            return
        floor = rest ** (1 / q)
        t[:] = (floor ** q + t_full[0] ** q) ** (1 / q)
        case[:] = np.where(t_full[0] > floor, case_full[0], DISPATCH_CASE)

    def calibration(self, profiles: Sequence[KernelProfile]) -> np.ndarray:
        """Per kernel: measured reference time over the model's time at the reference."""
        missing = [p.name for p in profiles if p.reference_time_ms is None or p.reference_mhz is None]
        if missing:
            raise InputError(f"calibration needs each profile's reference_mhz and reference_time_ms; missing for {missing}")
        return np.array([p.reference_time_ms / self._at_reference(p) for p in profiles])

    def _at_reference(self, p: KernelProfile) -> float:
        """The model's time (ms) of one profile at its reference pair."""
        t, _ = self._raw(np.array([p.inputs()], dtype=np.float64), np.array([p.reference_mhz[0]]),
                         np.array([p.reference_mhz[1]]))
        return float(t[0, 0])
