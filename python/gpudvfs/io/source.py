"""Line-aware parsing shared by the readers: every error names file, line and column.

``on_invalid="raise"`` (the default) stops at the first bad row. ``on_invalid="skip"``
leaves bad rows out, records each in the dataset's ``skipped`` and warns once; rows are
never dropped without both. Structural problems (missing file, bad header) always raise.
"""

from __future__ import annotations

import csv
import io
import math
import warnings
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TypeVar

from ..errors import DataFileError, GpudvfsWarning, Problem

ON_INVALID = ("raise", "skip")

#: Utilizations are measured ratios; counter noise puts some a hair outside [0, 1]
#: (e.g. -1.4e-11 in the K40c file). Values within this much of the interval are
#: accepted unchanged; anything further out is an error.
UTIL_TOLERANCE = 1e-3

T = TypeVar("T")


class Source:
    """The text of one data file, with helpers that raise located :class:`DataFileError`."""

    def __init__(self, path: str | Path, on_invalid: str = "raise"):
        if on_invalid not in ON_INVALID:
            raise ValueError(f"on_invalid must be one of {ON_INVALID}, got {on_invalid!r}")
        self.path = str(path)
        self.on_invalid = on_invalid
        self.skipped: list[Problem] = []
        p = Path(path)
        if not p.exists():
            raise self.error("file not found")
        if not p.is_file():
            raise self.error("not a regular file")
        try:
            text = p.read_text(encoding="utf-8-sig")
        except UnicodeDecodeError as e:
            raise self.error(f"not UTF-8 text ({e.reason} at byte {e.start})") from None
        self.lines = text.splitlines()

    def error(self, message: str, line: int | None = None, column: int | None = None,
              column_name: str | None = None) -> DataFileError:
        return DataFileError.at(self.path, message, line, column, column_name)

    def records(self, start: int = 0) -> Iterator[tuple[int, list[str]]]:
        """(1-based line number, fields) of every non-blank line from index ``start``."""
        for i, line in enumerate(self.lines[start:], start=start + 1):
            if line.strip():
                yield i, next(csv.reader([line]))

    def number(self, text: str, line: int, column: int, name: str | None = None, *,
               minimum: float | None = None, exclusive: bool = False) -> float:
        """A finite float, optionally bounded below (``exclusive``: strictly above)."""
        try:
            value = float(text.strip())
        except ValueError:
            raise self.error(f"expected a number, found {text!r}", line, column, name) from None
        if not math.isfinite(value):
            raise self.error(f"expected a finite number, found {text!r}", line, column, name)
        if minimum is not None and (value <= minimum if exclusive else value < minimum):
            rel = ">" if exclusive else ">="
            raise self.error(f"expected a value {rel} {minimum:g}, found {text!r}", line, column, name)
        return value

    def utilization(self, text: str, line: int, column: int, name: str | None = None) -> float:
        value = self.number(text, line, column, name)
        if not -UTIL_TOLERANCE <= value <= 1 + UTIL_TOLERANCE:
            raise self.error(
                f"expected a utilization in [0, 1] (tolerance {UTIL_TOLERANCE:g}), found {text!r}",
                line, column, name)
        return value

    def expect_fields(self, fields: list[str], line: int, expected: int | Iterable[int]) -> None:
        allowed = {expected} if isinstance(expected, int) else set(expected)
        if len(fields) not in allowed:
            want = " or ".join(str(n) for n in sorted(allowed))
            raise self.error(f"expected {want} fields, found {len(fields)}", line,
                             min(len(fields), max(allowed)) + 1)

    def parse_rows(self, rows: Iterable[tuple[int, list[str]]],
                   parse: Callable[[int, list[str]], T]) -> list[tuple[int, T]]:
        """Parse each row; a bad row raises, or with ``skip`` is recorded and left out."""
        out = []
        for line, fields in rows:
            try:
                out.append((line, parse(line, fields)))
            except DataFileError as e:
                if self.on_invalid == "raise":
                    raise
                self.skipped.append(e.problem)
        return out

    def drop_duplicates(self, parsed: list[tuple[int, T]], key: Callable[[T], object],
                        what: str) -> list[tuple[int, T]]:
        """Two rows measuring the same thing are an error (or, with ``skip``, the later is left out)."""
        seen: dict[object, int] = {}
        out = []
        for line, row in parsed:
            k = key(row)
            if k in seen:
                err = self.error(f"duplicate measurement of {what} {k!r} (first on line {seen[k]})", line)
                if self.on_invalid == "raise":
                    raise err
                self.skipped.append(err.problem)
                continue
            seen[k] = line
            out.append((line, row))
        return out

    def finish(self, parsed: list) -> tuple[Problem, ...]:
        """Check something was read and warn about skipped rows; returns the skip record."""
        if self.skipped:
            first = self.skipped[0]
            warnings.warn(GpudvfsWarning(
                f"{self.path}: skipped {len(self.skipped)} invalid row(s); first: {first}"), stacklevel=3)
        if not parsed:
            raise self.error("no valid measurement rows")
        return tuple(self.skipped)


def format_number(x: float) -> str:
    """Shortest text that reads back to the same float; integers without a trailing .0."""
    if float(x).is_integer() and abs(x) < 1e15:
        return str(int(x))
    return repr(float(x))


def csv_line(fields: Iterable[str]) -> str:
    """One CSV line, quoting only fields that need it (names with commas or quotes)."""
    buf = io.StringIO()
    csv.writer(buf, lineterminator="").writerow(list(fields))
    return buf.getvalue()
