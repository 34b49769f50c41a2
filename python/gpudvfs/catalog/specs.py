"""The device catalog: what gpudvfs knows of each GPU model, every figure with its source, in ``gpus.json``.

Each model's SMs, limits, issue rates, bandwidths, clocks, TDP and latencies.

Looked up by the NVML name, a profile's device column, an alias (``A100``, ``RTX 4090``),
the catalog key (``a100-sxm4-40gb``) or a compute capability. A user file (the
``GPUDVFS_CATALOG`` environment variable, or ``extra=``) adds entries or overrides them by
key, in the same schema. Clocks follow NVML's convention: the memory clock is the one
``nvidia-smi`` reports, ``dram_transfers_per_clock`` transfers per pin per cycle of it.
``default_mhz`` is the pair the GPU runs by default: the driver's default application clocks
where it reports them, else the rated base clock and the default memory clock. Every built-in
entry states it; a user file may leave it out, and it defaults there to the base clock (the
boost clock without one) and the highest memory clock.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from gpudvfs.catalog.shipped import shipped_json
from gpudvfs.data.jsonfile import read_json
from gpudvfs.errors import InputError
from gpudvfs.limits import is_finite_number, is_number

CATALOG_VERSION = 1
#: GPU Boost runs above the rated boost clock (a Titan Xp at 1911 MHz, 1.21x its rated 1582), and
#: overclocked memory some way above its default; clocks beyond this factor of the catalog's top
#: clocks belong to another GPU, or to another unit of clock.
CLOCK_MARGIN = 1.3
#: Bytes of one L2 / DRAM transaction (a sector), and of one shared-memory wavefront (32 banks x 4 B).
SECTOR_BYTES = 32
SHARED_WAVEFRONT_BYTES = 128
#: DRAM bandwidth a kernel sustains over the spec sheet's peak (refresh, bank and read/write
#: turnarounds): an H100's copy benchmark, its launch overhead taken off, moves 2.83 of 3.35 TB/s
#: (validation/), and Nsight Compute puts its DRAM-bound benchmarks at 84-85% of peak. Not fitted:
#: on the GTX 980 grids, uncalibrated, it gives 7.15 / 9.49% (the spec peak 15.37 / 16.49%).
SUSTAINED_DRAM_FRACTION = 0.845
ISSUE_KEYS = ("fp32", "fp64", "int32", "sfu", "ldst", "tensor_fp16_flops")
LATENCY_KEYS = ("dram", "l2", "shared")
_NUMBERS = ("sm_count", "max_warps_per_sm", "max_blocks_per_sm", "registers_per_sm", "shared_kib_per_sm",
            "shared_bytes_per_sm_per_cycle", "l2_bytes_per_cycle", "l2_kib", "dram_bus_bits",
            "dram_transfers_per_clock", "dram_bandwidth_gbs", "tdp_w")
#: Of those, the ones that count whole things.
_COUNTS = ("sm_count", "max_warps_per_sm", "max_blocks_per_sm", "registers_per_sm")
HOW_TO_CALIBRATE = (
    "add the GPU to a catalog file of your own (the schema of `gpudvfs devices show gtx980 --json`, under "
    '{"version": 1, "devices": {KEY: ENTRY}}) and name it in GPUDVFS_CATALOG; then fit its time-model '
    "memory parameters to a measured grid (`gpudvfs time fit-device GRID --device KEY -o dev.json`) and its "
    "power model (`gpudvfs power fit`) on a sweep of it (`gpudvfs sweep --device nvml`)")


@dataclass(frozen=True)
class DeviceSpec:
    """One GPU model of the catalog; see ``gpus.json`` for each figure's source.

    ``key`` is the catalog key (``a100-sxm4-40gb``), ``name`` the NVML name, ``aliases`` others
    (``A100``). ``issue_per_sm_per_cycle`` gives per unit of :data:`ISSUE_KEYS` the results an
    SM gives per core cycle (the CUDA Guide's throughput table; ``ldst``: its load/store units;
    ``tensor_fp16_flops``: FP16 flops); ``l2_bytes_per_cycle`` is the whole GPU's per core cycle.
    ``core_mhz`` holds ``boost``, and where published ``base`` and ``min``; ``mem_mhz`` and
    ``default_mhz`` are in NVML's unit (see the module); ``dram_transfers_per_clock`` counts per
    pin per cycle of it. ``latency_cycles`` is per level of :data:`LATENCY_KEYS`. ``tdp_w`` is the
    board's power limit. ``core_step_mhz`` is the step of the supported core clocks, from
    ``core_mhz["min"]`` to boost at each memory clock (NVML's list); None where no source gives it.
    """

    key: str
    name: str
    aliases: tuple[str, ...]
    compute_capability: str
    architecture: str
    sm_count: int
    max_warps_per_sm: int
    max_blocks_per_sm: int
    registers_per_sm: int
    shared_kib_per_sm: float
    issue_per_sm_per_cycle: dict[str, float]
    shared_bytes_per_sm_per_cycle: float
    l2_bytes_per_cycle: float
    l2_kib: float
    dram_type: str
    dram_bus_bits: int
    dram_transfers_per_clock: float
    dram_bandwidth_gbs: float
    core_mhz: dict[str, float]
    mem_mhz: tuple[float, ...]
    tdp_w: float
    latency_cycles: dict[str, float]
    default_mhz: tuple[float, float]
    core_step_mhz: float | None = None
    sources: dict[str, str] = field(default_factory=dict)
    notes: str = ""

    @property
    def dram_bytes_per_mem_cycle(self) -> float:
        """DRAM bytes moved per cycle of NVML's memory clock, at the spec sheet's bus width."""
        return self.dram_bus_bits / 8 * self.dram_transfers_per_clock

    def peaks(self, mem_clock_to_nvml: float = 1.0) -> dict[str, tuple[tuple[str, ...], float, str]]:
        """Per power component, (nvprof events, peak events per cycle of its clock, ``core`` or ``memory``).

        For utilizations as achieved over peak rate. ``mem_clock_to_nvml`` is NVML's memory clock per
        unit of the clock a grid records (2 for NVIDIA Inspector's GDDR5 clocks).
        """
        r, n = self.issue_per_sm_per_cycle, self.sm_count
        return {
            "SP": (("inst_fp_32",), r["fp32"] * n, "core"),
            "INT": (("inst_integer",), r["int32"] * n, "core"),
            "DP": (("inst_fp_64",), r["fp64"] * n, "core"),
            "SFU": (("flop_count_sp_special",), r["sfu"] * n, "core"),
            "L2": (("l2_read_transactions", "l2_write_transactions"), self.l2_bytes_per_cycle / SECTOR_BYTES, "core"),
            "Shared": (("shared_load_transactions", "shared_store_transactions"),
                       self.shared_bytes_per_sm_per_cycle / SHARED_WAVEFRONT_BYTES * n, "core"),
            "DRAM": (("dram_read_transactions", "dram_write_transactions"),
                     self.dram_bytes_per_mem_cycle * mem_clock_to_nvml / SECTOR_BYTES, "memory"),
        }

    def clock_warnings(self, core_mhz: ArrayLike, mem_mhz: ArrayLike | None = None) -> list[str]:
        """Messages for clocks (MHz, memory in NVML's unit) this GPU does not run; empty when all fit.

        One for core clocks below its minimum or above :data:`CLOCK_MARGIN` x boost, one for memory
        clocks above that factor of its highest.
        """
        out = []
        core = np.unique(np.asarray(core_mhz, dtype=np.float64))
        lo, hi = self.core_mhz.get("min", 0.0), CLOCK_MARGIN * self.core_mhz["boost"]
        beyond = core[(core < lo) | (core > hi)]
        if beyond.size:
            span = f"{lo:g} to" if lo else "up to"
            out.append(f"core clocks {_listing(beyond)} MHz lie outside what a {self.name} runs ({span} "
                       f"{self.core_mhz['boost']:g} MHz boost, {hi:g} with GPU Boost's margin): is it the GPU that "
                       "measured them?")
        if mem_mhz is not None:
            mem = np.unique(np.asarray(mem_mhz, dtype=np.float64))
            top = CLOCK_MARGIN * max(self.mem_mhz)
            if np.any(mem > top):
                out.append(f"memory clocks {_listing(mem[mem > top])} MHz lie above a {self.name}'s "
                           f"{max(self.mem_mhz):g} MHz (NVML's memory clock): is it the GPU that measured them, and "
                           "are they in NVML's unit?")
        return out

    def to_dict(self) -> dict[str, Any]:
        """The entry as the catalog's JSON schema has it (without its key, tuples as lists)."""
        d = {k: getattr(self, k) for k in self.__dataclass_fields__
             if k != "key" and not (k == "core_step_mhz" and self.core_step_mhz is None)}
        return d | {"aliases": list(self.aliases), "mem_mhz": list(self.mem_mhz), "default_mhz": list(self.default_mhz)}


def _listing(values: np.ndarray, n: int = 6) -> str:
    return ", ".join(f"{v:g}" for v in values[:n]) + (f" (and {len(values) - n} more)" if len(values) > n else "")


def _norm(name: str) -> str:
    """A name to compare without case, vendor words or punctuation.

    'NVIDIA GeForce RTX 4090' -> 'rtx4090', 'Tesla V100-SXM2-16GB' -> 'v100sxm216gb'.
    """
    s = name.lower()
    for word in ("nvidia", "geforce", "tesla", "quadro"):
        s = s.replace(word, "")
    return re.sub(r"[^a-z0-9]", "", s)


def _default_clocks(key: str, d: dict, core: dict, mem: list, where: str, required: bool) -> tuple[float, float]:
    """The entry's ``default_mhz``, checked against its clocks.

    The core clock lies within [min (if stated), boost], the memory clock is one of
    ``mem_mhz``. Left out (a user file), the base clock (the boost clock without one) and the
    highest memory clock.
    """
    if "default_mhz" not in d:
        if required:
            raise InputError(f"{where}: device {key!r}: default_mhz is required: [core MHz, memory MHz], the clocks "
                             "the GPU runs by default")
        return float(core.get("base", core["boost"])), float(max(mem))
    v = d["default_mhz"]
    if not (isinstance(v, (list, tuple)) and len(v) == 2 and all(is_finite_number(x, 0.0) and x > 0 for x in v)):
        raise InputError(f"{where}: device {key!r}: default_mhz must be [core MHz, memory MHz], two numbers > 0, "
                         f"got {v!r}")
    fc, fm = float(v[0]), float(v[1])
    lo, hi = float(core.get("min", 0.0)), float(core["boost"])
    if not lo <= fc <= hi:
        span = f"[{lo:g}, {hi:g}] (min to boost)" if "min" in core else f"up to its {hi:g} MHz boost"
        raise InputError(f"{where}: device {key!r}: default_mhz core clock {fc:g} MHz lies outside core_mhz {span}")
    if fm not in {float(m) for m in mem}:
        raise InputError(f"{where}: device {key!r}: default_mhz memory clock {fm:g} MHz is not one of mem_mhz "
                         f"({', '.join(f'{m:g}' for m in mem)})")
    return fc, fm


def _core_step(key: str, d: dict, core: dict, where: str) -> float | None:
    """The entry's ``core_step_mhz``: whole steps from its lowest core clock to its boost and default ones."""
    step = d.get("core_step_mhz")
    if step is None:
        return None
    if not (is_finite_number(step, 0.0) and step > 0):
        raise InputError(f"{where}: device {key!r}: core_step_mhz must be a number > 0, got {step!r}")
    if "min" not in core:
        raise InputError(f"{where}: device {key!r}: core_step_mhz needs core_mhz.min, the lowest clock it steps from")
    for what, mhz in (("boost", core["boost"]), ("default_mhz's", d.get("default_mhz", [core["boost"]])[0])):
        n = (float(mhz) - float(core["min"])) / float(step)
        if abs(n - round(n)) > 1e-6:
            raise InputError(f"{where}: device {key!r}: the {what} core clock {mhz:g} MHz is not core_mhz.min "
                             f"{core['min']:g} plus whole steps of core_step_mhz {step:g}")
    return float(step)


def _entry(key: str, d: dict, where: str, require_default: bool = False) -> DeviceSpec:
    def need(k: str, kind: type | tuple[type, ...] = (int, float)) -> Any:
        v = d.get(k)
        if isinstance(v, bool) or not isinstance(v, kind):
            raise InputError(f"{where}: device {key!r}: {k} must be {getattr(kind, '__name__', 'a number')}, got {v!r}")
        return v

    try:
        for k in _NUMBERS:
            if not need(k) > 0:
                raise InputError(f"{where}: device {key!r}: {k} must be > 0")
            if k in _COUNTS and d[k] != int(d[k]):
                raise InputError(f"{where}: device {key!r}: {k} counts whole units, got {d[k]!r}")
        if not need("name", str).strip():
            raise InputError(f"{where}: device {key!r}: name must not be empty")
        if not re.fullmatch(r"\d+\.\d+", need("compute_capability", str)):
            raise InputError(f"{where}: device {key!r}: compute_capability must be MAJOR.MINOR (e.g. 8.0), got "
                             f"{d['compute_capability']!r}")
        issue, lat, core = need("issue_per_sm_per_cycle", dict), need("latency_cycles", dict), need("core_mhz", dict)
        # A base clock is not published for every part (B200): only the boost clock is required.
        for group, keys in ((issue, ISSUE_KEYS), (lat, LATENCY_KEYS), (core, ("boost", *[k for k in ("base", "min")
                                                                                        if k in core]))):
            for k in keys:
                v = group.get(k)
                if not (is_number(v) and v >= 0):
                    raise InputError(f"{where}: device {key!r}: {k} must be a number >= 0, got {v!r}")
        order = [core[k] for k in ("min", "base", "boost") if k in core]
        if order != sorted(order):
            raise InputError(f"{where}: device {key!r}: core_mhz must rise from min to base to boost, got {core}")
        mem = need("mem_mhz", list)
        if not mem or not all(is_number(m) and m > 0 for m in mem):
            raise InputError(f"{where}: device {key!r}: mem_mhz must list the memory clocks in MHz")
        if issue["fp32"] <= 0:
            raise InputError(f"{where}: device {key!r}: issue_per_sm_per_cycle.fp32 must be > 0")
        return DeviceSpec(
            key=key, name=need("name", str), aliases=tuple(d.get("aliases", ())),
            compute_capability=need("compute_capability", str), architecture=need("architecture", str),
            **{k: d[k] for k in _NUMBERS}, issue_per_sm_per_cycle=dict(issue), dram_type=need("dram_type", str),
            core_mhz=dict(core), mem_mhz=tuple(float(m) for m in mem), latency_cycles=dict(lat),
            default_mhz=_default_clocks(key, d, core, mem, where, require_default),
            core_step_mhz=_core_step(key, d, core, where), sources=dict(d.get("sources", {})),
            notes=str(d.get("notes", "")))
    except InputError:
        raise
    except (TypeError, KeyError) as e:
        raise InputError(f"{where}: device {key!r}: {e}") from None


def _read(doc: Any, where: str, require_default: bool = False) -> dict[str, DeviceSpec]:
    if not isinstance(doc, dict) or doc.get("version") != CATALOG_VERSION or not isinstance(doc.get("devices"), dict):
        raise InputError(f"{where}: a device catalog is {{\"version\": {CATALOG_VERSION}, \"devices\": {{...}}}}")
    bad = [k for k, v in doc["devices"].items() if not isinstance(v, dict)]
    if bad:
        raise InputError(f"{where}: device entries must be objects: {bad}")
    return {k: _entry(k, v, where, require_default) for k, v in doc["devices"].items()}


@cache
def _builtin() -> dict[str, DeviceSpec]:
    return _read(*shipped_json("gpus.json"), require_default=True)


def catalog(extra: str | Path | None = None) -> dict[str, DeviceSpec]:
    """Key -> device: the built-in catalog, then ``GPUDVFS_CATALOG``'s, then ``extra``'s entries.

    A file's entries add to or override (by key) the others. Raises `InputError` if a catalog file
    cannot be read, an entry is malformed, or an alias is another device's key.
    """
    out = dict(_builtin())
    env = os.environ.get("GPUDVFS_CATALOG")
    for path in (env, extra):
        if path:
            try:
                out |= _added(out, path)
            except InputError as e:
                if path is not env:
                    raise
                raise InputError(f"{e} (the file the GPUDVFS_CATALOG environment variable names: fix it, or unset "
                                 "the variable)") from None
    return out


def _added(known: dict[str, DeviceSpec], path: str | Path) -> dict[str, DeviceSpec]:
    """A catalog file's entries, refused where an alias is another entry's key (it would never be found)."""
    added = _read(read_json(path), str(path))
    keys = {_norm(k): k for k in known | added}
    for d in added.values():
        taken = [keys[_norm(a)] for a in d.aliases if keys.get(_norm(a), d.key) != d.key]
        if taken:
            raise InputError(f"{path}: device {d.key!r}: alias {taken[0]!r} is the key of another device")
    return added


def lookup(name: str, extra: str | Path | None = None) -> DeviceSpec:
    """The device a name designates, or an error that says how to add one.

    ``name`` is a key, NVML name or alias, compared without case, vendor words or punctuation;
    or a compute capability such as ``8.0`` / ``sm_80`` when one device has it. ``extra`` as for
    :func:`catalog`. Raises `InputError` if the name is empty, names no device, or names several.
    """
    devices = catalog(extra)
    if not isinstance(name, str) or not name.strip():
        raise InputError(f"a device name is needed, got {name!r}")
    want = _norm(name)
    hits = [d for d in devices.values() if want in {_norm(d.key), _norm(d.name), *map(_norm, d.aliases)}]
    cc = re.fullmatch(r"(?:sm_?|cc)?(\d+)\.?(\d)", name.strip().lower())
    if not hits and cc:
        hits = [d for d in devices.values() if d.compute_capability == f"{cc[1]}.{cc[2]}"]
        if len(hits) > 1:
            raise InputError(f"compute capability {cc[1]}.{cc[2]} is shared by {', '.join(d.key for d in hits)}: "
                             "name the device")
    if len(hits) > 1:  # an alias two entries share (a GPUDVFS_CATALOG's): choosing one would be a guess
        raise InputError(f"{name!r} names several GPUs of the catalog: {', '.join(d.key for d in hits)}; give one "
                         "of these keys")
    if not hits:
        raise InputError(f"unknown GPU {name!r}: not in the device catalog (known: {', '.join(sorted(devices))}). "
                         f"To use it, {HOW_TO_CALIBRATE}")
    return hits[0]
