"""Streaming, line-aware parsing shared by the readers: every error names file, line and column.

A file is read a block of bytes at a time and parsed a chunk of :data:`CHUNK_LINES` lines at
a time, so memory holds one chunk of rows plus what a reader keeps (numpy arrays), and an
error is raised as soon as the chunk holding it has been read. Data rows are checked column
by column (:class:`~gpudvfs.data.columns.Columns`); a row those checks flag is checked again
cell by cell, which names its first bad cell.

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
import warnings
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from itertools import compress
from pathlib import Path
from types import TracebackType

import numpy as np

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
    """One data file, read lazily a chunk of lines at a time, with helpers that raise located :class:`DataFileError`.

    A context manager: it closes the file when a reader is done. ``on_invalid`` as in the module
    notes (`ValueError` otherwise); a missing file or one that is not a regular file raises
    `DataFileError` at once.
    """

    def __init__(self, path: str | Path, on_invalid: str = "raise", chunk_lines: int | None = None) -> None:
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
        """The source itself."""
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        """Close the file."""
        self._stream.close()

    def error(self, message: str, line: int | None = None, column: int | None = None,
              column_name: str | None = None) -> DataFileError:
        """The located error of a problem in this file (1-based line and column), to raise."""
        return DataFileError.at(self.path, message, line, column, column_name)

    # Reading

    def chunks(self) -> Iterator[Chunk]:
        """The rest of the file's non-blank lines, a chunk at a time.

        A line that is not UTF-8 text, holds a NUL or a field longer than the csv module takes
        raises `DataFileError` after the chunks before it.
        """
        while (chunk := self._next()) is not None:
            yield chunk

    def head(self, n: int) -> list[tuple[int, list[str]]]:
        """The next ``n`` rows (non-blank lines) as (1-based line, fields); what follows stays for :meth:`chunks`."""
        return _numbered(self._take(n))

    def peek(self, n: int) -> list[tuple[int, list[str]]]:
        """The next ``n`` rows as :meth:`head` gives them, left to be read again."""
        taken = self._take(n)
        self._pushed += reversed(taken)
        return _numbered(taken)

    def records(self, start: int = 0) -> Iterator[tuple[int, list[str]]]:
        """The remaining rows after 1-based line ``start`` (0: all), one (line, fields) at a time."""
        for chunk in self.chunks():
            yield from ((line, f) for line, f in _numbered([chunk]) if line > start)

    def _next(self) -> Chunk | None:
        return self._pushed.pop() if self._pushed else next(self._stream, None)

    def _take(self, n: int) -> list[Chunk]:
        """Chunks of the next ``n`` rows, the last cut short; what follows stays for :meth:`chunks`.

        Lines are parsed no more than ``n`` at a time meanwhile: a header costs a line, not a chunk.
        """
        taken, size, self.chunk_lines = [], self.chunk_lines, min(self.chunk_lines, max(n, 1))
        try:
            while n > 0 and (chunk := self._next()) is not None:
                if n < len(chunk):
                    self._pushed.append(chunk[n:])
                    chunk = chunk[:n]
                taken.append(chunk)
                n -= len(chunk)
        finally:
            self.chunk_lines = size
        return taken

    def _chunks(self) -> Generator[Chunk, None, None]:
        """Chunks of ``chunk_lines`` physical lines.

        An unreadable line ends the file with its error, after the lines before it (so an earlier bad
        row is still reported first).
        """
        buf: list[str] = []
        for lines, error in self._blocks():
            buf += lines
            while buf and (len(buf) >= self.chunk_lines or error):
                size = self.chunk_lines  # as read now: _take changes it between chunks
                yield from self._parse(buf[:size])
                del buf[:size]
            if error:
                raise error
        if buf:
            yield from self._parse(buf)

    def _blocks(self) -> Iterator[tuple[list[str], DataFileError | None]]:
        """The file's lines a block at a time, split as str.splitlines does.

        A byte that is not UTF-8 or a NUL ends them with its error.
        """
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
        """A block's lines, or those before its first unreadable one and that line's error.

        The block starts ``line`` lines and ``offset`` bytes into the file.
        """
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
        """A chunk's non-blank lines.

        A line with a field longer than the csv module takes ends the chunk with its error, after the
        lines before it.
        """
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
        """A cell as a finite float within the bounds, else a located `DataFileError`.

        ``maximum`` is what no GPU measures (see :mod:`gpudvfs.limits`); ``exclusive`` makes
        ``minimum`` a strict bound.
        """
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
        """A cell as a utilization, unchanged: within :data:`UTIL_TOLERANCE` of [0, 1], else `DataFileError`."""
        value = self.number(text, line, column, name)
        if not -UTIL_TOLERANCE <= value <= 1 + UTIL_TOLERANCE:
            raise self.error(
                f"expected a utilization in [0, 1] (tolerance {UTIL_TOLERANCE:g}), found {text!r}",
                line, column, name)
        return value

    def expect_fields(self, fields: list[str], line: int, expected: int | Iterable[int]) -> None:
        """A row of another width than ``expected`` raises `DataFileError` at its first missing or extra field."""
        allowed = {expected} if isinstance(expected, int) else set(expected)
        if len(fields) not in allowed:
            want = " or ".join(str(n) for n in sorted(allowed))
            raise self.error(f"expected {want} fields, found {len(fields)}", line,
                             min(len(fields), max(allowed)) + 1)

    def reject(self, err: DataFileError) -> None:
        """Reject an invalid row (or block): raise `InvalidRowError`, or with ``skip`` record it and leave it out."""
        if self.on_invalid == "raise":
            raise InvalidRowError(err.problem)
        self.skipped.append(err.problem)

    def sift(self, flagged: Iterable[Flagged]) -> None:
        """Reject a chunk's invalid rows in file order: the first raises, or with ``skip`` each is recorded."""
        for _, why in sorted(flagged, key=operator.itemgetter(0)):
            self.reject(why())

    def finish(self, rows: int) -> tuple[Problem, ...]:
        """The rows skipped, for the dataset's ``skipped``, with one warning; `DataFileError` where no row was kept."""
        if self.skipped:
            first = self.skipped[0]
            warnings.warn(GpudvfsWarning(
                f"{self.path}: skipped {len(self.skipped)} invalid row(s); first: {first}"), stacklevel=3)
        if not rows:
            raise self.error("no valid measurement rows")
        return tuple(self.skipped)


class Chunk:
    """The non-blank lines of a run of physical lines: their 1-based numbers, texts and, once split, fields."""

    def __init__(self, lines: np.ndarray, texts: list[str], rows: list[list[str]] | None = None) -> None:
        self.lines, self.texts, self._rows = lines, texts, rows

    def __len__(self) -> int:
        """The number of lines."""
        return len(self.texts)

    def __getitem__(self, which: slice | np.ndarray) -> Chunk:
        """The lines at a slice, or where a boolean mask of the chunk's length is true."""
        return Chunk(self.lines[which], _pick(self.texts, which),
                     None if self._rows is None else _pick(self._rows, which))

    @property
    def rows(self) -> list[list[str]]:
        """Each line's fields as the csv module splits them, one row a line (split when first asked for)."""
        if self._rows is None:
            self._rows = split_rows(self.texts)
        return self._rows


def _numbered(chunks: Iterable[Chunk]) -> list[tuple[int, list[str]]]:
    return [row for chunk in chunks for row in zip(chunk.lines.tolist(), chunk.rows)]


def _pick(items: list, which: slice | np.ndarray) -> list:
    return items[which] if isinstance(which, slice) else list(compress(items, which.tolist()))


def split_rows(texts: list[str]) -> list[list[str]]:
    """Each line's fields as the csv module splits them, one row a line even where a quote left open would join lines.

    Lines holding a field over the csv module's limit are refused before this.
    """
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
    """The 0-based position of the first name seen before (None: all differ).

    In one pass: a header may have a hundred thousand columns.
    """
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


def format_number(x: float) -> str:
    """Shortest text that reads back to the same float; integers without a trailing .0."""
    if float(x).is_integer() and abs(x) < 1e15:
        return str(int(x))
    return repr(float(x))


def csv_line(fields: Iterable[str]) -> str:
    """One CSV line without a line end, quoting only fields that need it (names with commas or quotes)."""
    buf = io.StringIO()
    csv.writer(buf, lineterminator="").writerow(list(fields))
    return buf.getvalue()
