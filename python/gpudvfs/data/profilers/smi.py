"""``nvidia-smi --query-gpu=... --format=csv`` logs (also ``csv,nounits``; ``-l``/``-lms`` loops).

The header names each field with its unit in brackets (``power.draw [W]``,
``clocks.current.sm [MHz]``, ``memory.used [MiB]``); values repeat the unit (``74.86 W``) unless
``nounits`` was given. Values are converted like every counter (:mod:`.units`): MiB to bytes,
MHz to Hz, W and % unchanged. ``[N/A]`` and ``[Not Supported]`` become None; fields that are
not numbers (name, uuid, ``P0``, ``Active``, bit masks, timestamps) stay text. A repeated header
line (a restarted logger appending to the file) is skipped and recorded in ``repeated_headers``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpudvfs.data.profilers.records import Text
from gpudvfs.data.profilers.units import normalize_unit, parse_number, split_value_unit
from gpudvfs.data.profilers.values import NOT_AVAILABLE

_FIELD = re.compile(r"^(?P<name>[^\[]+?)\s*(\[(?P<unit>[^\]]*)\])?$")


@dataclass
class SmiLog:
    """Samples of an nvidia-smi query log.

    Parameters
    ----------
    fields : list of str
        The query names, without units.
    units : dict of str to str
        Each field's base unit, that of the converted values; ``printed_units`` the header's.
    samples : list of dict
        Per sample, field -> a float, a string or None (not available).
    lines : list of int
        Each sample's 1-based line.
    repeated_headers : list of int
        The lines of header lines repeated (a restarted logger), skipped.
    """

    path: str
    fields: list[str]
    units: dict[str, str]
    printed_units: dict[str, str]
    samples: list[dict[str, float | str | None]]
    lines: list[int] = field(default_factory=list)
    repeated_headers: list[int] = field(default_factory=list)

    def __len__(self) -> int:
        """The number of samples."""
        return len(self.samples)

    format = "nvidia-smi"  # the format name `gpudvfs.read` knows it by

    def describe(self) -> dict[str, Any]:
        """What the log holds (fields, printed units, GPUs named, repeated headers), for `gpudvfs data info`."""
        gpus = sorted({str(s.get("name")) for s in self.samples} - {"None"}) if "name" in self.fields else []
        return {"format": "nvidia-smi", "path": self.path, "rows": len(self.samples), "samples": len(self.samples),
                "fields": list(self.fields), "units": dict(self.printed_units), "gpus": gpus,
                "repeated_headers": list(self.repeated_headers)}

    def values(self, name: str) -> list[float | None]:
        """A field's value per sample in its base unit, None where not available.

        Raises `KeyError` if the log has no such field, `TypeError` if a sample's value of it is text.
        """
        if name not in self.fields:
            raise KeyError(f"no field {name!r} in {self.path}; fields: {self.fields}")
        out = []
        for line, s in zip(self.lines, self.samples):
            v = s[name]
            if isinstance(v, str):
                raise TypeError(f"{self.path}, line {line}: field {name!r} is text ({v!r}), not a number")
            out.append(v)
        return out


def read_smi_csv(path: str | Path) -> SmiLog:
    """Parse an ``nvidia-smi --query-gpu --format=csv`` log; a malformed one raises a located `DataFileError`."""
    return _parse(Text.from_path(path))


def parse_smi_csv(text: str, source: str = "<nvidia-smi output>") -> SmiLog:
    """Parse an nvidia-smi query log held in a string, as :func:`read_smi_csv` a file; ``source`` is named in errors."""
    return _parse(Text(source, text.splitlines()))


def _split(line: str) -> list[str]:
    # nvidia-smi separates fields with ", " and never quotes; names and uuids hold no commas.
    return [f.strip() for f in line.split(",")]


def _parse(src: Text) -> SmiLog:
    first = next((i for i, ln in enumerate(src.lines) if ln.strip()), None)
    if first is None:
        raise src.error("empty file: expected an nvidia-smi --query-gpu CSV header")
    raw_header = _split(src.lines[first])
    names: list[str] = []
    printed: dict[str, str] = {}
    for j, h in enumerate(raw_header):
        m = _FIELD.match(h)
        if not h or m is None:
            raise src.error(f"expected a query field name like 'power.draw [W]', found {h!r}",
                            first + 1, j + 1)
        name = m.group("name")
        if name in printed:
            raise src.error(f"field {name!r} repeated", first + 1, j + 1)
        names.append(name)
        printed[name] = (m.group("unit") or "").strip()
    if not any(printed.values()) and not any("." in n for n in names):
        raise src.error("not an nvidia-smi --query-gpu header (no 'name [unit]' or dotted field names)",
                        first + 1)
    log = SmiLog(src.source, names, {}, printed, [])
    for n in names:
        log.units[n] = normalize_unit(printed[n])[1]
    for i in range(first + 1, len(src.lines)):
        line = src.lines[i]
        if not line.strip():
            continue
        f = _split(line)
        if f == raw_header:
            log.repeated_headers.append(i + 1)
            continue
        if len(f) != len(names):
            raise src.error(f"expected {len(names)} fields, found {len(f)}", i + 1,
                            min(len(f), len(names)) + 1)
        sample: dict[str, float | str | None] = {}
        for j, (name, cell) in enumerate(zip(names, f)):
            sample[name] = _cell(src, cell, printed[name], i + 1, j + 1, name)
        log.samples.append(sample)
        log.lines.append(i + 1)
    if not log.samples:
        raise src.error("nvidia-smi header but no samples", first + 1)
    return log


def _cell(src: Text, cell: str, unit: str, line: int, column: int, name: str) -> float | str | None:
    if cell in NOT_AVAILABLE:
        return None
    factor, _ = normalize_unit(unit)
    plain = parse_number(cell)
    if plain is not None:  # "csv,nounits", or a unitless field such as temperature.gpu
        return plain * factor
    vu = split_value_unit(cell)
    if vu is not None and unit:
        if vu[1] != unit:
            raise src.error(f"value unit {vu[1]!r} differs from the header's [{unit}]: {cell!r}",
                            line, column, name)
        return vu[0] * factor
    if unit:
        raise src.error(f"expected a number in [{unit}], found {cell!r}", line, column, name)
    return cell
