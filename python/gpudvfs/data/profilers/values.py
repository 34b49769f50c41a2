"""Storing one printed value into a :class:`KernelCounters`, the same way for every parser."""

from __future__ import annotations

from gpudvfs.data.profilers.records import KernelCounters, Text
from gpudvfs.data.profilers.units import normalize_unit, parse_number
from gpudvfs.limits import MAX_COUNT

NOT_AVAILABLE = ("n/a", "N/A", "[N/A]", "[Not Supported]")


def store(rec: KernelCounters, name: str, raw: str, unit: str, src: Text, line: int,
          column: int) -> None:
    """Store a printed value under its metric's name in a kernel's counters.

    A number goes to ``metrics`` in the base unit, a ``"; "``-joined list of numbers to
    ``lists``, anything else to ``text``. Raises `DataFileError` at 1-based ``line`` and
    ``column`` of ``src`` if the metric is already stored for the kernel, the value is beyond
    what a GPU measures, or under a scalable unit (bytes, time, ...) it is neither a number nor
    ``n/a``: the column says it holds a quantity.
    """
    if name in rec.metrics or name in rec.text or name in rec.lists:
        raise src.error(f"metric {name!r} appears twice for kernel {rec.name!r} (ID {rec.id})",
                        line, column, name)
    factor, base = normalize_unit(unit)
    value = parse_number(raw)
    if value is not None:
        value *= factor
        if abs(value) > MAX_COUNT:
            raise src.error(f"{raw.strip()!r}{f' {unit}' if unit else ''} is beyond what a GPU measures (at most "
                            f"{MAX_COUNT:g} in base units)", line, column, name)
        rec.metrics[name] = value
        rec.units[name] = base
        return
    if ";" in raw:
        parts = [parse_number(p) for p in raw.split(";")]
        numbers = [p for p in parts if p is not None]
        if len(numbers) == len(parts):
            rec.lists[name] = tuple(p * factor for p in numbers)
            rec.units[name] = base
            return
    stripped = raw.strip()
    if stripped not in NOT_AVAILABLE and (factor != 1.0 or base in ("byte", "ns", "Hz")):
        raise src.error(f"expected a number in {unit!r}, found {raw!r}", line, column, name)
    rec.text[name] = stripped
    if unit:
        rec.units[name] = base
