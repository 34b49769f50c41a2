"""The clock pairs a training governor chooses among: the device's supported clocks, thinned,
with its default clocks; or, where the device cannot list them, a grid from the catalog."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpudvfs.errors import InputError
from gpudvfs.govern.loop import nearest_config

#: Core clocks kept per memory clock at most (evenly spaced over the supported ones, the
#: highest, the lowest and the default kept): a GPU lists a hundred or more.
MAX_CORE_CLOCKS = 40


@dataclass(frozen=True)
class ClockGrid:
    """``configs`` [K x 2] (core, memory MHz); ``default_index`` the default clocks' pair;
    ``source``: ``"device"`` (its supported clocks) or ``"catalog"`` (its catalog entry's range);
    ``default_source``: where the default clocks came from; ``notes``: what could not be read."""

    configs: np.ndarray
    default_index: int
    default_mhz: tuple[float, float]
    source: str
    default_source: str
    notes: tuple[str, ...] = ()


def thin(clocks, keep: float | None, n: int = MAX_CORE_CLOCKS) -> list[float]:
    """At most ``n`` of ``clocks`` (plus ``keep`` where it is one of them), evenly spaced by
    position, the highest and lowest kept; descending."""
    c = sorted({float(x) for x in clocks}, reverse=True)
    if len(c) > n:
        idx = np.unique(np.round(np.linspace(0, len(c) - 1, n)).astype(int))
        picked = {c[i] for i in idx}
        if keep is not None and float(keep) in c:
            picked.add(float(keep))
        c = sorted(picked, reverse=True)
    return c


def _catalog_default(spec) -> tuple[float, float]:
    d = getattr(spec, "default_mhz", None)  # being added to the catalog; older entries lack it
    if d is not None:
        return float(d[0]), float(d[1])
    return float(spec.core_mhz.get("base", spec.core_mhz["boost"])), float(max(spec.mem_mhz))


def catalog_grid(name: str, n: int = MAX_CORE_CLOCKS) -> tuple[np.ndarray, tuple[float, float]]:
    """A grid of ``name``'s catalog entry: ``n`` core clocks from its lowest (30% of boost where
    the catalog has none) to its boost clock at each of its memory clocks, the default among
    them; and the default (core, memory) MHz."""
    from gpudvfs.catalog import lookup

    spec = lookup(name)
    default = _catalog_default(spec)
    boost = float(spec.core_mhz["boost"])
    lo = float(spec.core_mhz.get("min") or 0.3 * boost)
    cores = sorted({*np.round(np.linspace(lo, boost, n)).tolist(), default[0]}, reverse=True)
    mems = sorted({*(float(m) for m in spec.mem_mhz), default[1]}, reverse=True)
    return np.array([(c, m) for m in mems for c in cores], dtype=np.float64), default


def clock_grid(device, catalog_name: str | None = None, n: int = MAX_CORE_CLOCKS) -> ClockGrid:
    """The pairs of ``device`` (``memory_clocks()``, ``core_clocks(mem)``) thinned to ``n``
    core clocks per memory clock, and its default clocks (``default_clocks()``). Where the
    device cannot list its clocks, the catalog entry of ``catalog_name`` (default: the device's
    ``name``) gives the grid; where it reports no default clocks, the catalog's default (else
    the highest pair). An `InputError` where neither the device nor the catalog gives a grid."""
    notes: list[str] = []
    default: tuple[float, float] | None = None
    default_source = "device"
    try:
        default = tuple(float(x) for x in device.default_clocks())
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
            from gpudvfs.catalog import lookup

            default, default_source = _catalog_default(lookup(name)), "catalog"
        except Exception:
            default, default_source = tuple(float(x) for x in configs[0]), "highest-pair"
        notes.append(f"default clocks taken from the {default_source}: {default[0]:g}/{default[1]:g} MHz")
    k = nearest_config(configs, default)
    return ClockGrid(configs, k, (float(default[0]), float(default[1])), source, default_source, tuple(notes))
