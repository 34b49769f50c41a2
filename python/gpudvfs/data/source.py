"""Streaming, line-aware parsing shared by the readers: every error names file, line and column.

A file is read a block of bytes at a time and parsed a chunk of :data:`CHUNK_LINES` lines at
a time, so memory holds one chunk of rows plus what a reader keeps (numpy arrays), and an
error is raised as soon as the chunk holding it has been read. Data rows are checked column
by column with numpy (:class:`Columns`); a row those checks flag is checked again cell by
cell, which names its first bad cell.

``on_invalid="raise"`` (the default) stops at the first bad row. ``on_invalid="skip"``
leaves bad rows out, records each in the dataset's ``skipped`` and warns once; rows are
never dropped without both. Structural problems (missing file, bad header, bytes that are
not UTF-8 text, a NUL character, a field longer than the csv module takes) always raise.
"""

from __future__ import annotations

import codecs
import csv
import io
import math
import operator
import re
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from itertools import compress
from pathlib import Path

import numpy as np

from gpudvfs import _core
from gpudvfs.errors import DataFileError, GpudvfsWarning, InvalidRowError, Problem

ON_INVALID = ("raise", "skip")

#: Utilizations are measured ratios; counter noise puts some a hair outside [0, 1]
#: (e.g. -1.4e-11 in the K40c file). Values within this much of the interval are
#: accepted unchanged; anything further out is an error.
UTIL_TOLERANCE = 1e-3

#: Physical lines parsed and checked together.
CHUNK_LINES = 1 << 15
#: Bytes read at a time; a block is cut at its last line end so that it decodes on its own.
BLOCK_BYTES = 1 << 20

#: A row to reject: its line and how to make its error (only made when needed).
Flagged = tuple[int, Callable[[], DataFileError]]


class Source:
    """One data file, read lazily a chunk of ``chunk_lines`` lines (default :data:`CHUNK_LINES`)
    at a time, with helpers that raise located :class:`DataFileError`. Use as a context manager
    to close the file as soon as a reader is done."""

    def __init__(self, path: str | Path, on_invalid: str = "raise", chunk_lines: int | None = None):
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
        self.chunk_lines = chunk_lines or CHUNK_LINES
        #: Physical lines parsed so far: how far into the file reading has gone.
        self.lines_read = 0
        self._stream = self._chunks()
        self._pushed: list[Chunk] = []  # chunks handed back by head/peek, next first

    def __enter__(self) -> Source:
        return self

    def __exit__(self, *exc) -> None:
        self._stream.close()

    def error(self, message: str, line: int | None = None, column: int | None = None,
              column_name: str | None = None) -> DataFileError:
        return DataFileError.at(self.path, message, line, column, column_name)

    # Reading

    def chunks(self) -> Iterator[Chunk]:
        """The rest of the file, a chunk at a time."""
        while (chunk := self._next()) is not None:
            yield chunk

    def head(self, n: int) -> list[tuple[int, list[str]]]:
        """The next ``n`` rows as (line, fields); what follows stays for :meth:`chunks`."""
        return _numbered(self._take(n))

    def peek(self, n: int) -> list[tuple[int, list[str]]]:
        """The next ``n`` rows, left to be read again."""
        taken = self._take(n)
        self._pushed += reversed(taken)
        return _numbered(taken)

    def records(self, start: int = 0) -> Iterator[tuple[int, list[str]]]:
        """(1-based line number, fields) of the remaining rows after line ``start``."""
        for chunk in self.chunks():
            yield from ((line, f) for line, f in _numbered([chunk]) if line > start)

    def _next(self) -> Chunk | None:
        return self._pushed.pop() if self._pushed else next(self._stream, None)

    def _take(self, n: int) -> list[Chunk]:
        """Chunks of the next ``n`` rows, the last cut short; what follows stays for :meth:`chunks`."""
        taken = []
        while n > 0 and (chunk := self._next()) is not None:
            if n < len(chunk):
                self._pushed.append(chunk[n:])
                chunk = chunk[:n]
            taken.append(chunk)
            n -= len(chunk)
        return taken

    def _chunks(self) -> Iterator[Chunk]:
        """Chunks of ``chunk_lines`` physical lines. An unreadable line ends the file with its
        error, after the lines before it (so an earlier bad row is still reported first)."""
        buf: list[str] = []
        for lines, error in self._blocks():
            buf += lines
            while buf and (len(buf) >= self.chunk_lines or error):
                yield from self._parse(buf[:self.chunk_lines])
                del buf[:self.chunk_lines]
            if error:
                raise error
        if buf:
            yield from self._parse(buf)

    def _blocks(self) -> Iterator[tuple[list[str], DataFileError | None]]:
        """The file's lines a block at a time, split as str.splitlines does; a byte that is not
        UTF-8 or a NUL ends them with its error."""
        line = 0
        with open(self.path, "rb") as f:
            start = f.read(len(codecs.BOM_UTF8))
            offset = len(start) if start == codecs.BOM_UTF8 else 0
            tail = [start[offset:]]  # the bytes of a line not ended yet
            while True:
                data = f.read(BLOCK_BYTES)
                end = data.rfind(b"\n") + 1
                if data and not end:
                    tail.append(data)
                    continue
                block = b"".join([*tail, data[:end]])
                tail = [data[end:]]
                if block:
                    lines, error = self._decode(block, line, offset)
                    yield lines, error
                    line += len(lines)
                    offset += len(block)
                if not data:
                    return

    def _decode(self, block: bytes, line: int, offset: int) -> tuple[list[str], DataFileError | None]:
        """A block's lines (``line`` lines and ``offset`` bytes into the file), or those before
        its first unreadable one and that line's error."""
        try:
            text = block.decode("utf-8")
        except UnicodeDecodeError as e:
            good, why = block[:e.start].decode("utf-8"), f"not UTF-8 text ({e.reason} at byte {offset + e.start})"
        else:
            nul = text.find("\0")
            if nul < 0:
                return text.splitlines(), None
            good, why = text[:nul], "unexpected NUL character"
        lines = (good + "?").splitlines()  # "?" stands for the bad character: the last line holds it
        before = lines.pop()[:-1]
        return lines, self.error(why, line + len(lines) + 1, _field_number(before))

    def _parse(self, lines: list[str]) -> Iterator[Chunk]:
        """A chunk's non-blank lines. A line with a field longer than the csv module takes ends
        the chunk with its error, after the lines before it."""
        base = self.lines_read
        self.lines_read += len(lines)
        stripped = list(map(str.strip, lines))
        chunk = Chunk(np.flatnonzero(np.fromiter(map(bool, stripped), bool, len(lines))) + (base + 1),
                      list(compress(lines, stripped)))
        # Only a line longer than the limit can hold a field longer than it.
        long = np.fromiter(map(len, chunk.texts), np.int64, len(chunk)) > csv.field_size_limit()
        for i in np.flatnonzero(long).tolist():
            try:
                next(csv.reader([chunk.texts[i]]))
            except csv.Error as e:
                if i:
                    yield chunk[:i]
                raise self._csv_error(e, int(chunk.lines[i])) from None
        if len(chunk):
            yield chunk

    def _csv_error(self, e: csv.Error, line: int) -> DataFileError:
        limit = csv.field_size_limit()
        return self.error(f"field longer than {limit} characters" if "field limit" in str(e) else f"not CSV ({e})",
                          line)

    # Checking

    def number(self, text: str, line: int, column: int, name: str | None = None, *,
               minimum: float | None = None, exclusive: bool = False, maximum: float | None = None) -> float:
        """A finite float, optionally bounded below (``exclusive``: strictly above) and above
        (``maximum``: what no GPU measures, see :mod:`gpudvfs.limits`)."""
        try:
            value = float(text.strip())
        except ValueError:
            raise self.error(f"expected a number, found {text!r}", line, column, name) from None
        if not math.isfinite(value):
            raise self.error(f"expected a finite number, found {text!r}", line, column, name)
        if minimum is not None and (value <= minimum if exclusive else value < minimum):
            rel = ">" if exclusive else ">="
            raise self.error(f"expected a value {rel} {minimum:g}, found {text!r}", line, column, name)
        if maximum is not None and value > maximum:
            raise self.error(f"expected a value <= {maximum:g} (no GPU measures more), found {text!r}",
                             line, column, name)
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

    def reject(self, err: DataFileError) -> None:
        """An invalid row (or block): raised, or with ``skip`` recorded and left out."""
        if self.on_invalid == "raise":
            raise InvalidRowError(err.problem)
        self.skipped.append(err.problem)

    def sift(self, flagged: Iterable[Flagged]) -> None:
        """Reject a chunk's invalid rows in file order: the first raises, or with ``skip`` each is recorded."""
        for _, why in sorted(flagged, key=operator.itemgetter(0)):
            self.reject(why())

    def finish(self, rows: int) -> tuple[Problem, ...]:
        """Check something was read and warn about skipped rows; returns the skip record."""
        if self.skipped:
            first = self.skipped[0]
            warnings.warn(GpudvfsWarning(
                f"{self.path}: skipped {len(self.skipped)} invalid row(s); first: {first}"), stacklevel=3)
        if not rows:
            raise self.error("no valid measurement rows")
        return tuple(self.skipped)


class Chunk:
    """The non-blank lines of a run of physical lines: their numbers (1-based) and text, and
    ``rows``, their fields as the csv module splits them, one row a line (computed when asked)."""

    def __init__(self, lines: np.ndarray, texts: list[str], rows: list[list[str]] | None = None):
        self.lines, self.texts, self._rows = lines, texts, rows

    def __len__(self) -> int:
        return len(self.texts)

    def __getitem__(self, which: slice | np.ndarray) -> Chunk:
        """The rows at a slice, or where a boolean mask is true."""
        return Chunk(self.lines[which], _pick(self.texts, which),
                     None if self._rows is None else _pick(self._rows, which))

    @property
    def rows(self) -> list[list[str]]:
        if self._rows is None:
            self._rows = _split(self.texts)
        return self._rows


def _numbered(chunks: Iterable[Chunk]) -> list[tuple[int, list[str]]]:
    return [row for chunk in chunks for row in zip(chunk.lines.tolist(), chunk.rows)]


def _pick(items: list, which: slice | np.ndarray) -> list:
    return items[which] if isinstance(which, slice) else list(compress(items, which.tolist()))


def _split(texts: list[str]) -> list[list[str]]:
    """Each line's fields (lines holding a field over the csv limit are refused before this)."""
    try:
        rows = list(csv.reader(texts))
    except csv.Error:
        rows = []
    if len(rows) != len(texts):
        # A quote left open ran on into the next line (maybe into a field over the limit):
        # each line is a row of its own.
        rows = [next(csv.reader([t])) for t in texts]
    return rows


def repeated_at(names: Sequence[str]) -> int | None:
    """0-based position of the first name seen before, or None (in one pass: a header may
    have a hundred thousand columns)."""
    seen: set[str] = set()
    for j, name in enumerate(names):
        if name in seen:
            return j
        seen.add(name)
    return None


def _field_number(before: str) -> int | None:
    """1-based CSV field of the character that follows ``before`` on its line."""
    try:
        return max(1, len(next(csv.reader([before]))))
    except csv.Error:
        return None


@dataclass(frozen=True)
class Field:
    """One column of a data row and what it must hold: text (stripped; ``empty`` is the error
    for an empty one, None where empty is fine; ``form`` a pattern it must match and what that
    is called), a utilization, or a finite number at least (``exclusive``: above) ``minimum`` and
    at most ``maximum``."""

    name: str | None = None
    text: bool = False
    empty: str | None = None
    form: tuple[re.Pattern[str], str] | None = None
    utilization: bool = False
    minimum: float | None = None
    exclusive: bool = False
    maximum: float | None = None

    def bad(self, values: np.ndarray) -> np.ndarray:
        """Which cells of a column fail, all at once: ``values`` are the stripped texts (a str
        array) or the floats (NaN where a text is not a number)."""
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
        """Raise the error of one cell if it is bad: the same test as :meth:`bad`, with the message."""
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
    """Distinct strings, each with a code (its index in ``order``): names as int32 codes, for
    keys, and each repeated name stored once."""

    def __init__(self) -> None:
        self.codes: dict[str, int] = {}
        self.order: list[str] = []

    def encode(self, texts: list[str]) -> np.ndarray:
        new = list(set(texts).difference(self.codes))  # in time of the chunk, not of the table
        self.codes.update(zip(new, range(len(self.order), len(self.order) + len(new))))
        self.order += new
        return np.fromiter(map(self.codes.__getitem__, texts), np.int32, len(texts))

    def names(self, codes: np.ndarray) -> list[str]:
        return list(map(self.order.__getitem__, codes.tolist()))

    def decode(self, codes: np.ndarray) -> np.ndarray:
        """A str array, as wide as the longest string used (as np.array(strings) would be)."""
        used = np.zeros(len(self.order), dtype=bool)
        used[codes] = True
        table = np.array(list(compress(self.order, used.tolist())), dtype=str)
        return table[np.cumsum(used)[codes] - 1]


#: Part of a key: numbers (a 2-D array is a group, shown as a tuple), or text codes and their strings.
KeyPart = np.ndarray | tuple[np.ndarray, Strings]


class Duplicates:
    """Rows that measure what an earlier row measured, across chunks. A key is kept as the bytes
    of its row of floats (text as codes), with the line it was first seen on."""

    def __init__(self, src: Source, what: str):
        self.src, self.what = src, what
        self._first: dict[bytes, int] = {}

    def first_lines(self, lines: np.ndarray, ok: np.ndarray, parts: Sequence[KeyPart]) -> np.ndarray:
        """The line each ``ok`` row's key was first seen on (its own for a new key; so for the others)."""
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
    """Data rows of one layout, checked and kept column-wise a chunk at a time: numbers as
    float64 arrays, text as str arrays (coded by a :class:`Strings` per column where part of a
    key). ``what`` names the key (what a row measures) in duplicate errors."""

    def __init__(self, src: Source, fields: Sequence[Field], what: str):
        self.src, self.fields = src, tuple(fields)
        self.strings = [Strings() if f.text else None for f in self.fields]
        self.duplicates = Duplicates(src, what)
        self._kept: list[list[np.ndarray]] = [[] for _ in self.fields]
        self._rows = 0

    def __len__(self) -> int:
        return self._rows

    def part(self, values: list[np.ndarray], j: int) -> KeyPart:
        """Column ``j`` of a chunk as part of a key."""
        strings = self.strings[j]
        return values[j] if strings is None else (strings.encode(values[j].tolist()), strings)

    def add(self, chunk: Chunk, key: Callable[[list[np.ndarray]], Sequence[KeyPart]]) -> None:
        """Check a chunk's rows; keep the valid ones, rejecting the others (see :meth:`check`)."""
        values, flagged, why = self.check(chunk, key)
        self.src.sift(why)
        self.keep(values, ~flagged)

    def check(self, chunk: Chunk, key: Callable[[list[np.ndarray]], Sequence[KeyPart]]
              ) -> tuple[list[np.ndarray], np.ndarray, list[Flagged]]:
        """Each column of a chunk, the rows that are invalid or measure what an earlier row
        measured (``key(columns)``), and why each of those is rejected."""
        values, bad = self._columns(chunk)
        parts = key(values)
        lines = chunk.lines
        first = self.duplicates.first_lines(lines, ~bad, parts)
        dup = first != lines
        flagged = bad | dup
        why = [(int(lines[i]),
                partial(self.duplicates.error, parts, i, int(lines[i]), int(first[i])) if dup[i]
                else partial(self.row_error, int(lines[i]), chunk.texts[i]))
               for i in np.flatnonzero(flagged).tolist()]
        return values, flagged, why

    def keep(self, values: list[np.ndarray], rows: np.ndarray) -> None:
        for f, kept, v in zip(self.fields, self._kept, values):
            kept.append(_narrow(v[rows]) if f.text else v[rows])
        self._rows += int(np.count_nonzero(rows))

    def arrays(self) -> list[np.ndarray]:
        """Each column over the rows kept, float64 or str. This ends the reading: what the checks
        held and each column's chunks are let go as the columns are joined, to keep the peak low."""
        self.duplicates = Duplicates(self.src, self.duplicates.what)
        out = []
        for f, kept in zip(self.fields, self._kept):
            out.append(np.concatenate(kept) if kept else np.empty(0, str if f.text else np.float64))
            kept.clear()
        return out

    def row_error(self, line: int, text: str) -> DataFileError:
        """Why a flagged row is invalid: its width, else its first bad cell."""
        [row] = _split([text])
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
    """The same columns split and converted in the Rust core, without a Python object per
    field (`rust/src/csv_columns.rs`). It reads only lines without a quote and of the right
    width, and numbers that Rust reads as float() does, to the same values; so None (read them
    with the csv module) where a line or a number is anything else."""
    if not texts:
        return None
    read = _core.csv_columns("\n".join(texts), [not f.text for f in fields])
    if read is None:
        return None
    numbers, chars = map(iter, read)
    return [_unicode(next(chars)) if f.text else next(numbers) for f in fields], np.zeros(len(texts), bool)


def _unicode(chars: np.ndarray) -> np.ndarray:
    """A text column from its code points [lines x width]: the buffer of a U<width> array."""
    return chars.view(f"U{chars.shape[1]}")[:, 0]


def _narrow(strings: np.ndarray) -> np.ndarray:
    """A str array as wide as its longest string, as np.array(strings) makes it (numpy's reader
    and rows left out can make it wider)."""
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
