"""gpuPTXModel block format (hpc-ulisboa/gpuPTXModel), read and written.

A benchmark name on a line of its own, then rows ``fmem,fcore,time,power_W,energy`` for each
configuration.

The files do not state the time unit; energy equals power times time in them, so energy
carries the same unit times watts. Times are read as milliseconds (kernel-scale values).
A name that starts another block with the name of an earlier one measures that benchmark
again: a duplicate, like any other.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

import numpy as np

from gpudvfs.data.columns import Columns, Field, KeyPart, Strings
from gpudvfs.data.datasets import MeasurementGrid
from gpudvfs.data.source import Flagged, Source, format_number
from gpudvfs.limits import MAX_MHZ, MAX_WATTS

COLUMNS = ("fmem", "fcore", "time", "power_W", "energy")
_MAXIMA = {"fmem": MAX_MHZ, "fcore": MAX_MHZ, "power_W": MAX_WATTS}
FIELDS = tuple(Field(c, minimum=0, exclusive=c in ("fmem", "fcore", "time", "power_W"), maximum=_MAXIMA.get(c))
               for c in COLUMNS)


def read_ptx(path: str | Path, on_invalid: str = "raise") -> MeasurementGrid:
    """Read a gpuPTXModel block file: a row per configuration, workloads in the ``benchmark`` column.

    ``on_invalid`` as for `gpudvfs.data.read`, a skipped block recorded like a row. Raises
    `DataFileError` if the file cannot be read as the format.
    """
    with Source(path, on_invalid) as src:
        blocks = _Blocks(src)
        cols = Columns(src, FIELDS, "(benchmark, fmem, fcore)")
        bench = []
        for chunk in src.chunks():
            live, codes, flagged = blocks.scan(chunk.lines, chunk.rows)
            codes = codes[live]
            values, bad, why = cols.check(chunk[live], partial(_key, (codes, blocks.names)))
            src.sift(flagged + why)
            cols.keep(values, ~bad)
            bench.append(codes[~bad])
        src.sift(blocks.close())
        if not blocks.first:
            raise src.error("no benchmark blocks")
        skipped = src.finish(len(cols))
    return MeasurementGrid(
        format="ptx",
        path=src.path,
        columns={"benchmark": blocks.names.decode(np.concatenate(bench)), **dict(zip(COLUMNS, cols.arrays()))},
        roles={"app": "benchmark", "core_mhz": "fcore", "mem_mhz": "fmem", "time": "time", "watts": "power_W"},
        key_columns=("benchmark",),
        skipped=skipped,
    )


def _key(bench: KeyPart, values: list[np.ndarray]) -> list[KeyPart]:
    return [bench, values[0], values[1]]


class _Blocks:
    """The benchmark blocks read so far, across chunks.

    Which block each data row belongs to, and the problems of whole blocks (a benchmark
    measured again, whose rows are left out; a block without rows).
    """

    def __init__(self, src: Source) -> None:
        self.src = src
        self.names = Strings()
        self.first: dict[str, int] = {}  # benchmark -> line of its first block
        self.line: int | None = None  # the current block: line of its name, name, code, whether it has rows
        self.name = ""
        self.code: int | None = None  # None: a benchmark measured again
        self.has_rows = False

    def scan(self, lines: np.ndarray, rows: list[list[str]]) -> tuple[np.ndarray, np.ndarray, list[Flagged]]:
        """(data rows of a block read, each row's benchmark code, problems of blocks) of a chunk."""
        n = len(rows)
        is_name = np.fromiter(map(len, rows), np.int64, n) == 1
        live, codes, flagged = ~is_name, np.zeros(n, np.int32), []
        start = 0
        for i in [*np.flatnonzero(is_name).tolist(), n]:
            if i > start:  # rows start..i-1 are data rows of the current block
                if self.line is None:
                    raise self.src.error("expected a benchmark name line before the first data row",
                                         int(lines[start]), 1)
                self.has_rows = True
                if self.code is None:
                    live[start:i] = False
                else:
                    codes[start:i] = self.code
            if i < n:
                flagged += self.close()
                flagged += self._open(int(lines[i]), rows[i][0].strip())
            start = i + 1
        return live, codes, flagged

    def close(self) -> list[Flagged]:
        """The problem of the current block, if it has no rows: when the next starts, and at the end."""
        if self.line is None or self.code is None or self.has_rows:
            return []
        return [(self.line, partial(self.src.error, f"benchmark {self.name!r} has no measurement rows", self.line, 1))]

    def _open(self, line: int, name: str) -> list[Flagged]:
        if not name:
            raise self.src.error("expected a benchmark name", line, 1)
        self.line, self.name, self.has_rows = line, name, False
        if name in self.first:
            self.code = None
            return [(line, partial(self.src.error, f"benchmark {name!r} measured again (its first block starts on "
                                                   f"line {self.first[name]})", line, 1))]
        self.first[name] = line
        self.code = int(self.names.encode([name])[0])
        return []


def write_ptx(grid: MeasurementGrid, path: str | Path) -> None:
    """Write a grid with the format's columns (``benchmark`` and :data:`COLUMNS`) back in the format."""
    lines = []
    bench = grid.columns["benchmark"]
    for i in range(len(grid)):
        if i == 0 or bench[i] != bench[i - 1]:
            lines.append(str(bench[i]))
        lines.append(",".join(format_number(grid.columns[c][i]) for c in COLUMNS))
    Path(path).write_text("\n".join(lines) + "\n")
