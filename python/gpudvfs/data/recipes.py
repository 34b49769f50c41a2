"""Recipes: how a model input is computed from a profiler's counters, and the formula the docs show.

The tables of :mod:`gpudvfs.data.counters` are built of these; each builder here makes one
kind of recipe (a counter as is, a percentage, an nvprof level, a sum, a ratio, ...).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from gpudvfs.data.profilers.units import LEVEL_UNIT

#: The launch geometry's counters (Nsight Compute): blocks in the grid and threads per block.
GRID_SIZE, BLOCK_SIZE = "launch__grid_size", "launch__block_size"
_LAUNCH_WARPS = f"{GRID_SIZE} * ceil({BLOCK_SIZE} / 32)"


@dataclass(frozen=True)
class Recipe:
    """One way to compute an input from the values of the counters it ``needs``.

    ``combine`` maps their values, in that order, to the input, or None where it is undefined for
    them (e.g. 0/0); ``formula`` is what the docs show. ``units`` gives the expected unit of each
    counter where the record states one: '' for any, a tuple for any of those; empty for no
    expectation.
    """

    needs: tuple[str, ...]
    combine: Callable[[Sequence[float]], float | None]
    formula: str
    units: tuple[str | tuple[str, ...], ...] = ()


#: An input -> its recipes (the first usable wins), or a string: why the tool cannot give it.
Table = Mapping[str, "list[Recipe] | str"]


def same(name: str, unit: str = "") -> Recipe:
    """A counter as it is, in ``unit`` ('' for any)."""
    return Recipe((name,), lambda v: v[0], name, (unit,))


def percent(name: str) -> Recipe:
    """A percentage as a ratio: the counter (in %) / 100."""
    return Recipe((name,), lambda v: v[0] / 100.0, f"{name} / 100", ("%",))


def level(name: str) -> Recipe:
    """An nvprof utilization level (``Low (2)``, 0-10 scale) as a ratio: the level / 10."""
    return Recipe((name,), lambda v: v[0] / 10.0, f"{name} / 10", (LEVEL_UNIT,))


def scaled(name: str, divisor: float, unit: str) -> Recipe:
    """A counter in ``unit`` divided by a constant (e.g. DRAM bytes / 32 = sectors)."""
    return Recipe((name,), lambda v: v[0] / divisor, f"{name} / {divisor:g}", (unit,))


def weighted_sum(*terms: tuple[float, str]) -> Recipe:
    """A weighted sum of counters, given as (weight, counter) pairs."""
    parts = [n if w == 1 else f"{w:g} * {n}" for w, n in terms]
    return Recipe(tuple(n for _, n in terms),
                  lambda v: sum(w * x for (w, _), x in zip(terms, v)), " + ".join(parts))


def excess(name: str, over: str) -> Recipe:
    """How far one counter exceeds another, 0 where it does not."""
    return Recipe((name, over), lambda v: max(0.0, v[0] - v[1]), f"max(0, {name} - {over})")


def megahertz(name: str) -> Recipe:
    """A rate in cycle/second or Hz, in MHz.

    The readers convert ncu's printed rates (cycle/nsecond, cycle/usecond) to cycle/second and
    GHz to Hz; a value in any other unit is refused.
    """
    return Recipe((name,), lambda v: v[0] / 1e6, f"{name} / 1e6", (("cycle/second", "Hz"),))


def ratio(num: str, den: str) -> Recipe:
    """One counter over another; undefined where the denominator is 0."""
    return Recipe((num, den), lambda v: v[0] / v[1] if v[1] != 0 else None, f"{num} / {den}")


def percent_sum(*names: str) -> Recipe:
    """Percentages summed, as a ratio."""
    return Recipe(names, lambda v: sum(v) / 100.0, f"({' + '.join(names)}) / 100",
                  tuple("%" for _ in names))


def launch_warps() -> Recipe:
    """The warps of a launch from its geometry: exact, every block has ceil(threads / 32) warps."""
    return Recipe((GRID_SIZE, BLOCK_SIZE), lambda v: v[0] * math.ceil(v[1] / 32), _LAUNCH_WARPS)


def inst_over_launch_warps(inst: str) -> Recipe:
    """Instructions per warp: an instruction count over the warps of the launch geometry; undefined for no warps."""
    def f(v: Sequence[float]) -> float | None:
        warps = v[1] * math.ceil(v[2] / 32)
        return v[0] / warps if warps else None
    return Recipe((inst, GRID_SIZE, BLOCK_SIZE), f, f"{inst} / ({_LAUNCH_WARPS})")


def eq10_split(fu: str, own: str, other: str, own_first: bool) -> Recipe:
    """Guerreiro et al. Eq. 10: a combined FP32/INT unit's utilization split by instruction counts.

    The level ``fu`` (nvprof, 0-10) / 10 times ``own``'s share of ``own`` + ``other``; 0 where
    the unit ran no instruction at level 0, undefined where it ran none at another level.
    ``own_first``: ``own`` is the FP32 count (the formula names FP32 first).
    """
    fp32, integer = (own, other) if own_first else (other, own)

    def f(v: Sequence[float]) -> float | None:
        u, mine, theirs = v[0] / 10.0, v[1], v[2]
        total = mine + theirs
        if total == 0:
            return 0.0 if u == 0 else None
        return u * mine / total
    return Recipe((fu, own, other), f, f"{fu} / 10 * {own} / ({fp32} + {integer})",
                  (LEVEL_UNIT, "", ""))
