"""The unit of a grid's memory clocks on a catalog GPU: NVML's, its data rate, or half NVML's.

NVML (and ``nvidia-smi``) report GDDR memory at half its data rate and HBM at its clock;
``nvidia-settings`` gives the data rate (``dram_transfers_per_clock`` x NVML's: 11010 MHz on a
GTX 1080 Ti whose NVML clock is 5505), NVIDIA Inspector a GDDR5 clock half NVML's (1752 on a
GTX 980 at 3505). ``unit`` is one of :data:`MEM_CLOCK_UNITS` throughout.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike

from gpudvfs.catalog.specs import CLOCK_MARGIN
from gpudvfs.errors import GpudvfsWarning, InputError

if TYPE_CHECKING:
    from gpudvfs.catalog.specs import DeviceSpec
    from gpudvfs.data.datasets import MeasurementGrid

#: The units --mem-clock-unit names, as what each is.
MEM_CLOCK_UNITS = {
    "nvml": "NVML's clock (nvidia-smi's)",
    "data-rate": "the data rate (nvidia-settings' GDDR clock, NVML's x transfers per clock)",
    "half-nvml": "half NVML's (NVIDIA Inspector's GDDR5 clock)",
}
#: How far (relative) a clock may lie from the catalog's and still be it: a file's rounding of a
#: clock it halves or doubles (1753 for 3505 / 2) and 1-MHz differences between boards (7000, 7001).
CLOCK_ROUNDING = 0.01


def nvml_per_unit(unit: str, spec: DeviceSpec) -> float:
    """NVML's memory clock (MHz) per MHz of ``unit`` on a GPU (its transfers per clock give the data rate)."""
    return {"nvml": 1.0, "data-rate": 1.0 / spec.dram_transfers_per_clock, "half-nvml": 2.0}[unit]


def infer_mem_unit(mem_mhz: ArrayLike, spec: DeviceSpec, own: float, where: str) -> tuple[float, str | None]:
    """The unit of a grid's memory clocks, told from the clocks and the GPU's.

    A grid at or below the GPU's highest memory clock in its format's own unit is read in it.
    Above, it is read in the one other unit that puts one of its clocks on a memory clock of
    the catalog's (and none above :data:`CLOCK_MARGIN` x the highest). Where none does, or two
    do, while some unit holds every clock within that margin, the unit is ambiguous: an
    `InputError` naming --mem-clock-unit.

    ``own`` is NVML's clock per unit of the format's own (2 for NV-DVFS-Benchmark's, 1 for the
    others). Returns NVML's clock per unit of the grid's, and what was read where it is not the
    format's own unit (None where it is, and where no unit holds the clocks: the clock check then
    refuses them).
    """
    mem = np.unique(np.asarray(mem_mhz, dtype=np.float64))
    listed = np.asarray(spec.mem_mhz, dtype=np.float64)
    top, highest = float(mem.max()), float(listed.max())
    if top * own <= highest * (1 + CLOCK_ROUNDING):
        return own, None
    factors = {u: nvml_per_unit(u, spec) for u in MEM_CLOCK_UNITS}
    held = {u: f for u, f in factors.items() if top * f <= CLOCK_MARGIN * highest}
    landing = [u for u, f in held.items()
               if f != own and np.any(np.abs(np.subtract.outer(mem * f, listed)) <= CLOCK_ROUNDING * listed)]
    own_unit = next((f"as {MEM_CLOCK_UNITS[u]}, up to {top * f:g} MHz" for u, f in factors.items() if f == own),
                    "in the format's unit")
    above = (f"{where}: memory clocks {mem.min():g}-{top:g} MHz, read {own_unit}, lie above a {spec.name}'s "
             f"{highest:g} MHz (NVML's highest memory clock)")
    if len(landing) == 1:
        f = factors[landing[0]]
        return f, (f"{above}: read as {MEM_CLOCK_UNITS[landing[0]]}, converted to NVML's ({mem.min() * f:g}-"
                   f"{top * f:g} MHz); --mem-clock-unit names the unit if not")
    if not held or list(held.values()) == [own]:
        return own, None
    readings = "; ".join(f"as {MEM_CLOCK_UNITS[u]}, up to {top * f:g} MHz" for u, f in held.items())
    raise InputError(f"{above}, and their unit is ambiguous: is it the GPU that measured them? They could be read "
                     f"{readings}; name their unit with --mem-clock-unit {'|'.join(MEM_CLOCK_UNITS)}")


def in_gpu_mem_unit(grid: MeasurementGrid, spec: DeviceSpec, unit: str | None = None) -> MeasurementGrid:
    """A grid measured on a GPU with its memory clocks in ``unit``, else the one :func:`infer_mem_unit` tells.

    A unit other than the format's own is converted to NVML's, with a warning where inferred;
    the grid given is returned where nothing changes. Raises `InputError` if ``unit`` is
    unknown, or inferred and ambiguous.
    """
    if grid.mem_mhz is None:
        return grid
    if unit is not None:
        if unit not in MEM_CLOCK_UNITS:
            raise InputError(f"memory clock unit {unit!r}: expected one of {', '.join(MEM_CLOCK_UNITS)}")
        return grid.in_mem_unit(nvml_per_unit(unit, spec))
    factor, why = infer_mem_unit(grid.mem_mhz, spec, grid.mem_clock_to_nvml, grid.path)
    if why:
        warnings.warn(GpudvfsWarning(why), stacklevel=2)
    return grid.in_mem_unit(factor)
