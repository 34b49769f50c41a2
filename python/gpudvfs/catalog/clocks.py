"""The clock pairs a GPU supports: NVML's lists on a live GPU, else its catalog entry's range and step.

A GPU takes only the pairs NVML lists (``nvmlDeviceGetSupportedMemoryClocks``, then
``nvmlDeviceGetSupportedGraphicsClocks`` per memory clock): an H100 or H200 runs its core in
15 MHz steps from 345 to 1980 MHz at each of two memory clocks (validation/*/
nvidia-smi-supported-clocks.txt). A catalog entry with ``core_step_mhz`` gives the same list.
One without gives :data:`RANGE_CORE_CLOCKS` evenly spaced core clocks over its range (its
default among them): ``exact`` is then False, and a chosen clock is a point of the range, not
one the GPU is known to take. Clocks are in MHz throughout.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from gpudvfs.catalog.specs import DeviceSpec
from gpudvfs.errors import InputError

#: Core clocks per memory clock where the catalog gives no step: between the GPU's lowest clock
#: (30% of its boost where the catalog has none) and its boost clock.
RANGE_CORE_CLOCKS = 16
_SOURCES = {"nvml": "NVML's list", "catalog": "the catalog's range and step", "catalog-range": "the catalog's range"}
#: Nearest supported pairs an error lists.
NEAREST = 4


class ListsClocks(Protocol):
    """What lists its supported clocks: NVML's GPU, the simulated one."""

    name: str

    def memory_clocks(self) -> list[float]:
        """Supported memory clocks."""

    def core_clocks(self, mem_mhz: float) -> list[float]:
        """The core clocks (MHz) it takes at a memory clock."""


def thin(clocks: Iterable[float], keep: float | None, n: int) -> list[float]:
    """At most ``n`` of ``clocks`` evenly spaced by position, the highest and lowest kept, descending.

    ``keep`` (the default clock) is kept too where it is one of them.
    """
    c = sorted({float(x) for x in clocks}, reverse=True)
    if len(c) > n:
        idx = np.unique(np.round(np.linspace(0, len(c) - 1, n)).astype(int))
        picked = {c[i] for i in idx}
        if keep is not None and float(keep) in c:
            picked.add(float(keep))
        c = sorted(picked, reverse=True)
    return c


@dataclass(frozen=True)
class SupportedClocks:
    """The (core, memory) pairs a GPU supports.

    ``pairs`` is [K x 2], memory clocks ascending, core clocks ascending within each; ``source``
    ``"nvml"`` (the GPU's own lists), ``"catalog"`` (its entry's range and step) or
    ``"catalog-range"`` (no step known: evenly spaced over the range).
    """

    pairs: np.ndarray
    source: str
    device: str

    @classmethod
    def from_lists(cls, lists: Mapping[float, Iterable[float]], device: str, source: str = "nvml"
                   ) -> SupportedClocks:
        """From core clocks per memory clock, as NVML lists them; `InputError` if none is listed or one is not > 0."""
        pairs = sorted({(float(c), float(m)) for m, cores in lists.items() for c in cores},
                       key=lambda p: (p[1], p[0]))
        arr = np.array(pairs, dtype=np.float64).reshape(-1, 2)
        if not len(arr) or not (np.all(np.isfinite(arr)) and np.all(arr > 0)):
            raise InputError(f"{device}: the supported clocks must list core clocks > 0 MHz per memory clock, "
                             f"got {dict(lists)!r}")
        return cls(arr, source, device)

    @classmethod
    def of_device(cls, device: ListsClocks) -> SupportedClocks:
        """A live GPU's own lists (an `NvmlGpu`, a `Device`)."""
        return cls.from_lists({m: device.core_clocks(m) for m in device.memory_clocks()}, device.name)

    @classmethod
    def of_spec(cls, spec: DeviceSpec) -> SupportedClocks:
        """A catalog GPU's: its step from its lowest to its boost clock at every memory clock."""
        boost, default = float(spec.core_mhz["boost"]), spec.default_mhz
        if spec.core_step_mhz is not None:
            lo = float(spec.core_mhz["min"])
            cores = lo + spec.core_step_mhz * np.arange(round((boost - lo) / spec.core_step_mhz) + 1)
            source = "catalog"
        else:
            lo = float(spec.core_mhz.get("min") or 0.3 * boost)
            cores = np.unique(np.r_[np.round(np.linspace(lo, boost, RANGE_CORE_CLOCKS)), default[0]])
            source = "catalog-range"
        return cls.from_lists({m: cores.tolist() for m in {*spec.mem_mhz, default[1]}}, spec.key, source)

    @property
    def exact(self) -> bool:
        """Whether these are the pairs the GPU takes (not points of a range)."""
        return self.source != "catalog-range"

    @property
    def memory_clocks(self) -> list[float]:
        """The memory clocks, ascending."""
        return sorted({float(m) for m in self.pairs[:, 1]})

    def supports(self, core_mhz: float, mem_mhz: float) -> bool:
        """Whether the pair is one of them."""
        return bool(np.any((self.pairs[:, 0] == core_mhz) & (self.pairs[:, 1] == mem_mhz)))

    def nearest(self, core_mhz: float, mem_mhz: float, n: int = NEAREST) -> np.ndarray:
        """The ``n`` pairs nearest a pair in log-frequency distance, [n x 2]."""
        d = np.log(self.pairs[:, 0] / core_mhz) ** 2 + np.log(self.pairs[:, 1] / mem_mhz) ** 2
        return self.pairs[np.argsort(d, kind="stable")[:n]]

    def check(self, what: str, core_mhz: Iterable[float], mem_mhz: Iterable[float]) -> None:
        """Refuse pairs the GPU does not support: `InputError` naming ``what`` and the nearest pairs.

        Points of a range pass.
        """
        if not self.exact:
            return
        for c, m in zip(core_mhz, mem_mhz):
            if not self.supports(float(c), float(m)):
                near = ", ".join(f"{a:g}/{b:g}" for a, b in self.nearest(float(c), float(m)))
                mems = "" if float(m) in self.memory_clocks else (
                    f"; its memory clocks are {', '.join(f'{x:g}' for x in self.memory_clocks)} MHz")
                raise InputError(f"{what}: {float(c):g}/{float(m):g} MHz is not a clock pair {self.device} supports "
                                 f"({_SOURCES[self.source]}){mems}; the nearest supported: {near} MHz")

    def display(self, core_clocks: int, keep: Iterable[tuple[float, float]] = ()) -> np.ndarray:
        """A coarse grid for display: ``core_clocks`` per memory clock (:func:`thin`) plus the pairs ``keep``."""
        held = {(float(c), float(m)) for c, m in keep}
        rows: list[tuple[float, float]] = []
        for m in self.memory_clocks:
            cores = self.pairs[self.pairs[:, 1] == m, 0]
            shown = set(thin(cores, None, core_clocks)) | {c for c, mm in held if mm == m and c in set(cores)}
            rows += [(c, m) for c in sorted(shown)]
        return np.array(rows, dtype=np.float64).reshape(-1, 2)
