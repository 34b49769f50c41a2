"""The clock pairs a governor chooses among (the daemon's catalog prior, a training run).

The device's supported clocks, thinned, with its default clocks; or, where the device cannot
list them, a grid from the catalog.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpudvfs.catalog import lookup
from gpudvfs.catalog.clocks import SupportedClocks, thin
from gpudvfs.errors import InputError
from gpudvfs.govern.knob import MAX_CORE_CLOCKS
from gpudvfs.govern.loop import nearest_config
from gpudvfs.hardware.device import Device


@dataclass(frozen=True)
class ClockGrid:
    """The pairs a governor chooses among.

    ``configs``: [K x 2] (core, memory) MHz; ``default_index``: the pair nearest the default clocks;
    ``source``: ``"device"`` (its supported clocks) or ``"catalog"`` (its catalog entry's range);
    ``default_source``: ``"device"``, ``"catalog"`` or ``"highest-pair"``; ``notes``: what could not
    be read.
    """

    configs: np.ndarray
    default_index: int
    default_mhz: tuple[float, float]
    source: str
    default_source: str
    notes: tuple[str, ...] = ()


def _catalog_default(name: str) -> tuple[float, float]:
    core, mem = lookup(name).default_mhz
    return float(core), float(mem)


def catalog_grid(name: str, n: int = MAX_CORE_CLOCKS) -> tuple[np.ndarray, tuple[float, float]]:
    """A catalog entry's supported pairs, ``n`` core clocks per memory clock (:func:`thin`), and its default clocks."""
    spec = lookup(name)
    default = _catalog_default(name)
    supported = SupportedClocks.of_spec(spec).pairs
    pairs = [(c, m) for m in sorted(set(supported[:, 1]), reverse=True)
             for c in thin(supported[supported[:, 1] == m, 0], default[0] if m == default[1] else None, n)]
    return np.array(pairs, dtype=np.float64), default


def clock_grid(device: Device, catalog_name: str | None = None, n: int = MAX_CORE_CLOCKS) -> ClockGrid:
    """The pairs of a device thinned to ``n`` core clocks per memory clock, and its default clocks.

    Where the device cannot list its clocks, its catalog entry gives the grid; where it reports no
    default clocks, the catalog's default (else the highest pair).

    `InputError` where neither gives a grid.
    """
    notes: list[str] = []
    default: tuple[float, float] | None = None
    default_source = "device"
    try:
        core, mem = device.default_clocks()
        default = (float(core), float(mem))
    except Exception as e:  # NVML errors, or no default application clocks (GeForce)
        notes.append(f"the device reports no default clocks ({type(e).__name__}: {e})")
    name = catalog_name or getattr(device, "name", None)
    try:
        pairs = []
        for m in device.memory_clocks():
            keep = default[0] if default is not None and float(m) == default[1] else None
            pairs += [(c, float(m)) for c in thin(device.core_clocks(m), keep, n)]
        if not pairs:
            raise InputError("the device lists no clocks")
        configs, source = np.array(pairs, dtype=np.float64), "device"
    except Exception as e:
        notes.append(f"the device cannot list its clocks ({type(e).__name__}: {e}); the grid is the catalog's")
        if not name:
            raise InputError("the device cannot list its clocks and has no name to look up in the catalog") from e
        try:
            configs, cat_default = catalog_grid(name, n)
        except InputError as e2:
            raise InputError(f"the device cannot list its clocks ({e}), and the catalog has no grid: {e2}") from None
        source = "catalog"
        if default is None:
            default, default_source = cat_default, "catalog"
    if default is None:
        try:
            default, default_source = _catalog_default(name or ""), "catalog"
        except Exception:
            default, default_source = (float(configs[0, 0]), float(configs[0, 1])), "highest-pair"
        notes.append(f"default clocks taken from the {default_source}: {default[0]:g}/{default[1]:g} MHz")
    k = nearest_config(configs, default)
    return ClockGrid(configs, k, (float(default[0]), float(default[1])), source, default_source, tuple(notes))
