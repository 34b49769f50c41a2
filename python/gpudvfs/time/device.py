"""`TimeDevice`: the microbenchmarked parameters of one GPU that the time model reads."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from gpudvfs import _core
from gpudvfs.catalog import SECTOR_BYTES, SHARED_WAVEFRONT_BYTES, SUSTAINED_DRAM_FRACTION, DeviceSpec, lookup
from gpudvfs.data.jsonfile import read_versioned, write_json_atomic
from gpudvfs.errors import InputError
from gpudvfs.limits import clock_array, is_finite_number

# 2: inst_lat and parallel_queues; max_blocks_per_sm gone. overlapped_rounds, sf_inst_cycle and
# imad_inst_cycle came later and default to what files without them were written under: rounds
# one after another, special-function instructions and integer multiply-adds at the issue rate.
DEVICE_VERSION = 2


@dataclass(frozen=True)
class TimeDevice:
    """Microbenchmarked parameters of one GPU, in core cycles unless named otherwise.

    The DRAM latency is ``dm_lat_a * fc/fm + dm_lat_b`` (Eq. 4), its service time per
    transaction ``dm_del_a / fm + dm_del_b`` memory cycles (Table III's law), converted by fc/fm;
    ``l2_*`` and ``sh_*`` are L2 and shared-memory latency and service time per transaction. The
    ``*_inst_cycle`` are issue costs of one warp instruction on one SM (special-function and
    integer multiply-add over their SFU or IMAD lanes, IMAD at half the FP32 rate from GA10x on;
    at or below ``inst_cycle``, 0 in files written before them, they cost the issue rate).
    ``overlap_p`` (>= 1) is the exponent of the soft maximum that overlaps compute and memory
    time; ``inst_lat`` the latency of a dependent warp instruction in a warp's chain (0: the
    chain costs the issue rate only, as in the paper). ``parallel_queues``: L2 hits and DRAM
    misses queue in parallel, not one after the other as the paper's Eq. 5b has it;
    ``overlapped_rounds``: a round's exposed latency is paid once per kernel (the pipeline's
    fill), not once per round as the paper's Eq. 9/11/17. Raises `InputError` if a parameter is
    not a finite number >= 0 (a switch not a bool), ``sm_count`` or ``max_warps_per_sm`` is below
    1, or ``overlap_p`` below 1.
    """

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
    inst_lat: float = 0.0
    parallel_queues: bool = False
    overlapped_rounds: bool = False
    sf_inst_cycle: float = 0.0
    imad_inst_cycle: float = 0.0

    def __post_init__(self) -> None:
        """Check every parameter (see Raises above)."""
        for f in fields(self):
            v = getattr(self, f.name)
            if f.name == "name":
                if not isinstance(v, str):
                    raise InputError(f"TimeDevice.name must be text, got {v!r}")
            elif f.name in ("parallel_queues", "overlapped_rounds"):
                if not isinstance(v, bool):
                    raise InputError(f"TimeDevice.{f.name} must be true or false, got {v!r}")
            elif not is_finite_number(v, 0):
                raise InputError(f"TimeDevice.{f.name} must be a finite number >= 0, got {str(v)[:40]}")
        if self.sm_count < 1 or self.max_warps_per_sm < 1:
            raise InputError("TimeDevice needs sm_count and max_warps_per_sm >= 1")
        if self.overlap_p < 1:  # the soft maximum's exponent: below 1 it is no maximum
            raise InputError(f"TimeDevice.overlap_p must be >= 1, got {self.overlap_p!r}")

    @classmethod
    def gtx980(cls) -> TimeDevice:
        """The GTX 980 of the paper: Eq. 4, Table III's delay law, Sec. IV-B's L2."""
        # The core's dict holds every field's value, the switches as bools, which its stub's
        # dict[str, float] cannot tell apart.
        return cls(**_core.time_device_gtx980(), name="gtx980")  # type: ignore[arg-type]

    @classmethod
    def from_spec(cls, spec: DeviceSpec, base: TimeDevice | None = None) -> TimeDevice:
        """Time-model parameters of a catalog GPU: SMs, warp slots, issue costs and latencies.

        The DRAM service time per transaction comes from the bandwidth a kernel sustains,
        :data:`SUSTAINED_DRAM_FRACTION` of the peak (no fitted delay law: `gpudvfs time fit-device`
        fits one to a measured grid). The split of the DRAM latency into its core- and memory-clock
        parts (Eq. 4), the overlap exponent and the dependent-instruction latency come from
        ``base``: the GTX 980 preset by default, the only device where a protocol chose them.
        """
        base = base or cls.gtx980()
        lat = spec.latency_cycles
        share_a = base.dm_lat_a / (base.dm_lat_a + base.dm_lat_b)  # Eq. 4's split at fc = fm
        # An entry may leave its SFU or integer lanes at 0 (unpublished): those instructions
        # then cost the issue rate, as before their rates existed.
        sfu = spec.issue_per_sm_per_cycle["sfu"]
        imad = spec.issue_per_sm_per_cycle["int32"]
        return cls(
            sm_count=float(spec.sm_count), max_warps_per_sm=float(spec.max_warps_per_sm),
            dm_lat_a=lat["dram"] * share_a, dm_lat_b=lat["dram"] * (1 - share_a),
            # Memory cycles one SM's share of the channels needs per 32-byte transaction.
            dm_del_a=0.0,
            dm_del_b=spec.sm_count * SECTOR_BYTES / (spec.dram_bytes_per_mem_cycle * SUSTAINED_DRAM_FRACTION),
            l2_lat=lat["l2"], l2_del=spec.sm_count * SECTOR_BYTES / spec.l2_bytes_per_cycle,
            sh_lat=lat["shared"], sh_del=SHARED_WAVEFRONT_BYTES / spec.shared_bytes_per_sm_per_cycle,
            inst_cycle=32 / spec.issue_per_sm_per_cycle["fp32"],
            dp_inst_cycle=32 / max(spec.issue_per_sm_per_cycle["fp64"], 1e-9),
            sf_inst_cycle=32 / sfu if sfu > 0 else 0.0,
            imad_inst_cycle=32 / imad if imad > 0 else 0.0,
            overlap_p=base.overlap_p, inst_lat=base.inst_lat, parallel_queues=base.parallel_queues,
            overlapped_rounds=base.overlapped_rounds,
            name=spec.key)

    @classmethod
    def preset(cls, name: str) -> TimeDevice:
        """A microbenchmarked preset, else a catalog GPU's parameters (:meth:`from_spec`), else a device JSON file.

        Raises `InputError` if the name designates no GPU, or the file is not a time device.
        """
        return cls.resolve(name)[0]

    @classmethod
    def resolve(cls, name: str) -> tuple[TimeDevice, DeviceSpec | None]:
        """The time device of :meth:`preset`, and its catalog entry (None where there is none).

        A device file's entry is the one its name designates.
        """
        if Path(name).suffix == ".json":
            device = cls.load(name)
            try:
                return device, lookup(device.name)
            except InputError:
                return device, None
        spec = lookup(name)
        return (cls.gtx980() if spec.key == "gtx980" else cls.from_spec(spec)), spec

    def dram_busy_ms(self, transactions: ArrayLike, mem_mhz: ArrayLike) -> np.ndarray:
        """Time (ms) the DRAM channels of one SM's share are busy serving a kernel's 32-byte transactions.

        The delay law's memory cycles per transaction, at the memory clock (MHz); broadcast over the
        inputs. Raises `InputError` if a memory clock is not a positive finite number.
        """
        fm = clock_array(mem_mhz, "mem_mhz")
        return np.asarray(transactions) / self.sm_count * (self.dm_del_a / fm + self.dm_del_b) / (fm * 1e3)

    def dram_delay_of(self, busy_ms: ArrayLike, transactions: ArrayLike, mem_mhz: ArrayLike) -> np.ndarray:
        """The inverse of `dram_busy_ms`: memory cycles per transaction that keep DRAM busy ``busy_ms``.

        The memory cycles per transaction of one SM's share (the delay law's value): what a
        bandwidth benchmark measures.
        """
        fm = clock_array(mem_mhz, "mem_mhz")
        return np.asarray(busy_ms) * fm * 1e3 * self.sm_count / np.asarray(transactions)

    def params(self) -> dict[str, float | bool]:
        """The parameters as the Rust core takes them (field -> value, the name left out)."""
        # Field by field, not asdict, which deep-copies each value: every prediction asks
        # for this (`time cv`: 10.3 -> 9.2 s).
        return {f.name: v if isinstance(v := getattr(self, f.name), bool) else float(v)
                for f in fields(self) if f.name != "name"}

    def fit(self, dram_latency: Sequence[ArrayLike], dram_delay: Sequence[ArrayLike] | None = None, *,
            l2_latency_cycles: ArrayLike | None = None, shared_latency_cycles: ArrayLike | None = None,
            name: str | None = None) -> tuple[TimeDevice, dict[str, Any]]:
        """A device with the memory parameters fitted to microbenchmark results, and a report.

        Measured at one clock pair (one memory clock for the delay), a law's two parts cannot be
        told apart: this device's law is scaled through the measurements' mean instead (its R^2
        is None).

        ``dram_latency`` is (core_mhz, mem_mhz, core cycles) of a pointer chase, fitted to Eq. 4's
        form by least squares; ``dram_delay`` (mem_mhz, memory cycles per transaction) of a bandwidth
        benchmark, fitted to ``a / fm + b``; measured L2 and shared latencies are averaged. The
        report gives per law fitted (``dm_lat``, ``dm_del``) its ``a``, ``b``, ``r2`` and point count ``n``.
        """
        def arrays(name: str, xs: Sequence[ArrayLike], n: int) -> list[np.ndarray]:
            if len(xs) != n:
                raise InputError(f"{name} must be {n} arrays")
            return [np.ascontiguousarray(x, dtype=np.float64) for x in xs]

        def law(fit: Callable[[], tuple[float, float, float]], clocks: np.ndarray, x: np.ndarray, y: np.ndarray,
                a: float, b: float, what: str) -> tuple[float, float, float | None]:
            """(a, b, R^2) of ``y = a x + b``: fitted, or the base's (a, b) scaled at one clock pair.

            Scaled where every point was measured at one clock pair.
            """
            if len(y) == 0 or np.unique(clocks, axis=0).shape[0] != 1:
                return fit()
            at = float(a * x[0] + b)
            if not (np.all(np.isfinite(y)) and np.all(y > 0) and at > 0):
                raise InputError(f"TimeDevice.fit: {what} must be positive and finite, and the base's law at "
                                 f"them too, got {y.tolist()} against {at:g}")
            scale = float(y.mean()) / at
            return a * scale, b * scale, None

        c, m, cyc = arrays("dram_latency", dram_latency, 3)
        clock_array(c, "dram_latency's core clocks")
        clock_array(m, "dram_latency's memory clocks")
        try:
            a, b, r2 = law(lambda: _core.time_fit_dm_lat(c, m, cyc), np.c_[c, m], c / m, cyc,
                           self.dm_lat_a, self.dm_lat_b, "the DRAM latency cycles")
            report = {"dm_lat": {"a": a, "b": b, "r2": r2, "n": len(cyc)}}
            changes: dict[str, Any] = {"dm_lat_a": a, "dm_lat_b": b}  # replace()'s keywords
            if dram_delay is not None:
                dm, dcyc = arrays("dram_delay", dram_delay, 2)
                clock_array(dm, "dram_delay's memory clocks")
                a, b, r2 = law(lambda: _core.time_fit_dm_del(dm, dcyc), dm[:, None], 1 / dm, dcyc,
                               self.dm_del_a, self.dm_del_b, "the DRAM delay cycles")
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
        """Write the device as versioned JSON, atomically."""
        write_json_atomic(path, {"kind": "time-device", "version": DEVICE_VERSION, "name": self.name,
                                 "params": self.params()})

    @classmethod
    def load(cls, path: str | Path) -> TimeDevice:
        """Read a device written by :meth:`save`; `InputError` if it is not a valid time device of this version."""
        doc = read_versioned(path, "time-device", DEVICE_VERSION)
        params = doc.get("params")
        if not isinstance(params, dict):
            raise InputError(f"{path}: a time device file needs a 'params' object")
        try:
            return cls(**params, name=doc.get("name", "custom"))
        except (TypeError, InputError) as e:
            raise InputError(f"{path}: invalid time device: {e}") from None
