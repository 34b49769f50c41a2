"""Data rows checked and kept column-wise, a chunk of a :class:`~gpudvfs.data.source.Source` at a time.

Each column of a chunk is checked at once with numpy (:class:`Field`); rows that measure what
an earlier row measured are found by their keys (:class:`Duplicates`). The columns are split
and converted in the Rust core where a chunk is plain (no quotes, numbers as float() reads
them), by the csv module otherwise.
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from itertools import compress

import numpy as np

from gpudvfs import _core
from gpudvfs.data.source import UTIL_TOLERANCE, Chunk, Flagged, Source, split_rows
from gpudvfs.errors import DataFileError


@dataclass(frozen=True)
class Field:
    """One column of a data row and what it must hold: text, a utilization, or a bounded finite number.

    For text (stripped): ``empty`` is the error of an empty cell (None: empty is fine), ``form``
    a pattern a non-empty cell must match and what that is called. For numbers: bounds as
    `Source.number` takes them, or ``utilization``: within :data:`UTIL_TOLERANCE` of [0, 1].
    """

    name: str | None = None
    text: bool = False
    empty: str | None = None
    form: tuple[re.Pattern[str], str] | None = None
    utilization: bool = False
    minimum: float | None = None
    exclusive: bool = False
    maximum: float | None = None

    def bad(self, values: np.ndarray) -> np.ndarray:
        """True for each cell of a column that fails, all at once.

        ``values``: the stripped texts (a str array) or the floats (NaN where a text is not a number).
        """
        if self.text:
            bad = np.zeros(len(values), dtype=bool)
            if self.empty:
                bad |= values == ""
            if self.form:  # an empty cell is `empty`'s to judge
                bad |= np.fromiter((t != "" and self.form[0].match(t) is None for t in values.tolist()), bool,
                                   len(values))
            return bad
        ok = np.isfinite(values)
        if self.utilization:
            ok &= (values >= -UTIL_TOLERANCE) & (values <= 1 + UTIL_TOLERANCE)
        elif self.minimum is not None:
            ok &= values > self.minimum if self.exclusive else values >= self.minimum
        if self.maximum is not None:
            ok &= values <= self.maximum
        return ~ok

    def check(self, src: Source, text: str, line: int, column: int) -> None:
        """Raise the located error of one cell if it is bad: the same test as :meth:`bad`, with the message."""
        if not self.text:
            if self.utilization:
                src.utilization(text, line, column, self.name)
            else:
                src.number(text, line, column, self.name, minimum=self.minimum, exclusive=self.exclusive,
                           maximum=self.maximum)
            return
        text = text.strip()
        if self.empty and not text:
            raise src.error(self.empty, line, column, self.name)
        if self.form and text and not self.form[0].match(text):
            raise src.error(f"expected {self.form[1]}, found {text!r}", line, column, self.name)


class Strings:
    """Distinct strings, each with a code (its index in ``order``): names as int32 codes, each stored once."""

    def __init__(self) -> None:
        self.codes: dict[str, int] = {}
        self.order: list[str] = []

    def encode(self, texts: list[str]) -> np.ndarray:
        """An int32 code per text, new texts given the next codes."""
        new = list(set(texts).difference(self.codes))  # in time of the chunk, not of the table
        self.codes.update(zip(new, range(len(self.order), len(self.order) + len(new))))
        self.order += new
        return np.fromiter(map(self.codes.__getitem__, texts), np.int32, len(texts))

    def names(self, codes: np.ndarray) -> list[str]:
        """The text of each code :meth:`encode` gave."""
        return list(map(self.order.__getitem__, codes.tolist()))

    def decode(self, codes: np.ndarray) -> np.ndarray:
        """The text of each code as a str array, as wide as the longest string used (as np.array(strings) makes it)."""
        used = np.zeros(len(self.order), dtype=bool)
        used[codes] = True
        table = np.array(list(compress(self.order, used.tolist())), dtype=str)
        return table[np.cumsum(used)[codes] - 1]


#: Part of a key: numbers (a 2-D array is a group, shown as a tuple), or text codes and their strings.
KeyPart = np.ndarray | tuple[np.ndarray, Strings]


class Duplicates:
    """Rows that measure what an earlier row measured, across chunks.

    A key is kept as the bytes of its row of floats (text as codes), with the line it was first
    seen on. ``what`` names what a key is (what a row measures), for errors.
    """

    def __init__(self, src: Source, what: str) -> None:
        self.src, self.what = src, what
        self._first: dict[bytes, int] = {}

    def first_lines(self, lines: np.ndarray, ok: np.ndarray, parts: Sequence[KeyPart]) -> np.ndarray:
        """The line each row's key was first seen on: its own for a new key, an earlier one else.

        Rows outside the mask ``ok`` keep their own line.
        """
        cols = [p[0] if isinstance(p, tuple) else p for p in parts]
        keys = np.column_stack(cols)[ok].astype(np.float64) + 0.0  # -0.0 and 0.0 are one value
        blobs = keys.view(np.dtype((np.void, keys.itemsize * keys.shape[1]))).ravel().tolist()
        new = dict(zip(reversed(blobs), reversed(lines[ok].tolist())))  # a key's first line in the chunk wins
        for k in new.keys() & self._first.keys():
            new[k] = self._first[k]
        self._first.update(new)
        first = lines.copy()
        first[ok] = np.fromiter(map(new.__getitem__, blobs), np.int64, len(blobs))
        return first

    def error(self, parts: Sequence[KeyPart], i: int, line: int, first: int) -> DataFileError:
        """The error of the chunk's row ``i``, a duplicate, naming its key and both lines."""
        key = [_key_value(p, i) for p in parts]
        shown = key[0] if len(key) == 1 else tuple(key)
        return self.src.error(f"duplicate measurement of {self.what} {shown!r} (first on line {first})", line)


def _key_value(part: KeyPart, i: int) -> object:
    """Row ``i`` of a key part as Python values: a str, a float, or a tuple of a group's floats."""
    if isinstance(part, tuple):
        codes, strings = part
        return strings.order[codes[i]]
    return tuple(part[i].tolist()) if part.ndim == 2 else float(part[i])


class Columns:
    """Data rows of one layout, checked and kept column-wise a chunk at a time.

    Numbers are kept as float64 arrays, text as str arrays (coded by a :class:`Strings` per
    column where part of a key). ``what`` as for :class:`Duplicates`.
    """

    def __init__(self, src: Source, fields: Sequence[Field], what: str) -> None:
        self.src, self.fields = src, tuple(fields)
        self.strings = [Strings() if f.text else None for f in self.fields]
        self.duplicates = Duplicates(src, what)
        self._kept: list[list[np.ndarray]] = [[] for _ in self.fields]
        self._rows = 0

    def __len__(self) -> int:
        """The rows kept."""
        return self._rows

    def part(self, values: list[np.ndarray], j: int) -> KeyPart:
        """Column ``j`` of a chunk as part of a key: the numbers, or for text the codes and their :class:`Strings`."""
        return values[j] if self.strings[j] is None else self.text_part(values, j)

    def text_part(self, values: list[np.ndarray], j: int) -> tuple[np.ndarray, Strings]:
        """Text column ``j`` of a chunk as part of a key (`TypeError` for a column of numbers)."""
        strings = self.strings[j]
        if strings is None:
            raise TypeError(f"column {j} ({self.fields[j].name}) holds numbers, not text")
        return strings.encode(values[j].tolist()), strings

    def add(self, chunk: Chunk, key: Callable[[list[np.ndarray]], Sequence[KeyPart]]) -> None:
        """Check a chunk's rows; keep the valid ones, rejecting the others (`Source.sift`).

        ``key`` maps the chunk's columns to the parts of each row's key.
        """
        values, flagged, why = self.check(chunk, key)
        self.src.sift(why)
        self.keep(values, ~flagged)

    def check(self, chunk: Chunk, key: Callable[[list[np.ndarray]], Sequence[KeyPart]]
              ) -> tuple[list[np.ndarray], np.ndarray, list[Flagged]]:
        """A chunk's columns, the mask of its rows that are invalid or duplicates, and why each is rejected."""
        values, bad = self._columns(chunk)
        parts = key(values)
        lines = chunk.lines
        first = self.duplicates.first_lines(lines, ~bad, parts)
        dup = first != lines
        flagged = bad | dup
        why: list[Flagged] = [
            (int(lines[i]), partial(self.duplicates.error, parts, i, int(lines[i]), int(first[i])) if dup[i]
             else partial(self.row_error, int(lines[i]), chunk.texts[i]))
            for i in np.flatnonzero(flagged).tolist()]
        return values, flagged, why

    def keep(self, values: list[np.ndarray], rows: np.ndarray) -> None:
        """Keep the rows of a chunk's columns where the mask ``rows`` is true."""
        for f, kept, v in zip(self.fields, self._kept, values):
            kept.append(_narrow(v[rows]) if f.text else v[rows])
        self._rows += int(np.count_nonzero(rows))

    def arrays(self) -> list[np.ndarray]:
        """Each column over the rows kept; this ends the reading.

        A float64 or str array per field. What the checks held and each column's chunks are let
        go as the columns are joined, to keep the peak of memory low.
        """
        self.duplicates = Duplicates(self.src, self.duplicates.what)
        out = []
        for f, kept in zip(self.fields, self._kept):
            out.append(np.concatenate(kept) if kept else np.empty(0, str if f.text else np.float64))
            kept.clear()
        return out

    def row_error(self, line: int, text: str) -> DataFileError:
        """Why a flagged row is invalid, located: its width, else its first bad cell."""
        [row] = split_rows([text])
        try:
            if len(row) != len(self.fields) and text.count('"') % 2:
                raise self.src.error(f"expected {len(self.fields)} fields, found {len(row)}: a quoted field opened "
                                     "here is not closed on this line (a field may not hold a line break)",
                                     line, len(row))
            self.src.expect_fields(row, line, len(self.fields))
            for j, (f, cell) in enumerate(zip(self.fields, row), start=1):
                f.check(self.src, cell, line, j)
        except DataFileError as e:
            return e
        raise AssertionError(f"line {line}: the column checks flag a row that the cell checks pass")

    def _columns(self, chunk: Chunk) -> tuple[list[np.ndarray], np.ndarray]:
        """Each column as an array and the rows failing a check."""
        values, bad = _fast_columns(chunk.texts, self.fields) or _csv_columns(chunk.rows, self.fields)
        for f, col in zip(self.fields, values):
            bad |= f.bad(col)
        return values, bad


#: Columns as read (stripped texts as str arrays, floats with NaN where a text is not a number)
#: and the rows of the wrong width.
Read = tuple[list[np.ndarray], np.ndarray]


def _csv_columns(rows: list[list[str]], fields: Sequence[Field]) -> Read:
    """The columns of rows split by the csv module; a row of the wrong width reads as blanks."""
    width = len(fields)
    bad = np.fromiter(map(len, rows), np.int64, len(rows)) != width
    if bad.any():
        blank = [""] * width
        rows = [blank if b else r for r, b in zip(rows, bad.tolist())]
    cols = list(zip(*rows)) or [()] * width
    return [np.array(list(map(str.strip, c)), dtype=str) if f.text else _floats(c) for f, c in zip(fields, cols)], bad


def _fast_columns(texts: list[str], fields: Sequence[Field]) -> Read | None:
    """The same columns split and converted in the Rust core, without a Python object per field.

    The core (`rust/src/csv_columns.rs`) reads only lines without a quote and of the right
    width, and numbers that Rust reads as float() does, to the same values; so None (read them
    with the csv module) where a line or a number is anything else.
    """
    if not texts:
        return None
    read = _core.csv_columns("\n".join(texts), [not f.text for f in fields], csv.field_size_limit())
    if read is None:
        return None
    numbers, chars = iter(read[0]), iter(read[1])
    return [_unicode(next(chars)) if f.text else next(numbers) for f in fields], np.zeros(len(texts), bool)


def _unicode(chars: np.ndarray) -> np.ndarray:
    """A text column from its code points [lines x width]: the buffer of a U<width> array."""
    return chars.view(f"U{chars.shape[1]}")[:, 0]


def _narrow(strings: np.ndarray) -> np.ndarray:
    """A str array as wide as its longest string, as np.array(strings) makes it.

    Numpy's reader and rows left out can make it wider.
    """
    return strings.astype(f"U{max(1, int(np.char.str_len(strings).max(initial=0)))}", copy=False)


def _floats(texts: Sequence[str]) -> np.ndarray:
    """The number of each stripped text, as :meth:`Source.number` reads it; NaN where it is not one."""
    try:
        return np.array(texts, dtype=np.float64)
    except ValueError:  # numpy strips ASCII white space only (a unit separator is white space to str)
        return np.array([_float_or_nan(t) for t in texts], dtype=np.float64)


def _float_or_nan(text: str) -> float:
    try:
        return float(text.strip())
    except ValueError:
        return math.nan
