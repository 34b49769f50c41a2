"""gpuPTXModel block format (hpc-ulisboa/gpuPTXModel): a benchmark name on a line of its
own, then rows ``fmem,fcore,time,power_W,energy`` for each configuration.

The files do not state the time unit; energy equals power times time in them, so energy
carries the same unit times watts. Times are read as milliseconds (kernel-scale values).
A name that starts another block with the name of an earlier one measures that benchmark
again: a duplicate, like any other.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .datasets import MeasurementGrid
from .source import Source, format_number

COLUMNS = ("fmem", "fcore", "time", "power_W", "energy")


def read_ptx(path: str | Path, on_invalid: str = "raise") -> MeasurementGrid:
    src = Source(path, on_invalid)
    blocks: list[tuple[int, str, list]] = []  # (line of the name, name, data records)
    for line, fields in src.records(0):
        if len(fields) == 1:
            name = fields[0].strip()
            if not name:
                raise src.error("expected a benchmark name", line, 1)
            blocks.append((line, name, []))
        elif not blocks:
            raise src.error("expected a benchmark name line before the first data row", line, 1)
        else:
            blocks[-1][2].append((line, fields))
    if not blocks:
        raise src.error("no benchmark blocks")

    def parse_block_row(name):
        def parse(line, f):
            src.expect_fields(f, line, len(COLUMNS))
            vals = [src.number(t, line, j + 1, c, minimum=0, exclusive=c in ("fmem", "fcore", "time"))
                    for j, (t, c) in enumerate(zip(f, COLUMNS))]
            return name, vals
        return parse

    parsed = []
    first_block: dict[str, int] = {}
    for bline, name, recs in blocks:
        if name in first_block:
            err = src.error(f"benchmark {name!r} measured again (its first block starts on line "
                            f"{first_block[name]})", bline, 1)
            if on_invalid == "raise":
                raise err
            src.skipped.append(err.problem)
            continue
        first_block[name] = bline
        if not recs:
            err = src.error(f"benchmark {name!r} has no measurement rows", bline, 1)
            if on_invalid == "raise":
                raise err
            src.skipped.append(err.problem)
            continue
        parsed += src.parse_rows(recs, parse_block_row(name))
    parsed = src.drop_duplicates(parsed, lambda r: (r[0], r[1][0], r[1][1]), "(benchmark, fmem, fcore)")
    skipped = src.finish(parsed)
    rows = [r for _, r in parsed]
    columns = {"benchmark": np.array([r[0] for r in rows], dtype=str)}
    for j, c in enumerate(COLUMNS):
        columns[c] = np.array([r[1][j] for r in rows], dtype=np.float64)
    return MeasurementGrid(
        format="ptx",
        path=src.path,
        columns=columns,
        roles={"app": "benchmark", "core_mhz": "fcore", "mem_mhz": "fmem", "time": "time", "watts": "power_W"},
        key_columns=("benchmark",),
        skipped=skipped,
    )


def write_ptx(grid: MeasurementGrid, path: str | Path) -> None:
    lines = []
    bench = grid.columns["benchmark"]
    for i in range(len(grid)):
        if i == 0 or bench[i] != bench[i - 1]:
            lines.append(str(bench[i]))
        lines.append(",".join(format_number(grid.columns[c][i]) for c in COLUMNS))
    Path(path).write_text("\n".join(lines) + "\n")
