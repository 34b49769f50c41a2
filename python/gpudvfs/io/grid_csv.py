"""Measurement grids in header-first CSV: the NV-DVFS-Benchmark nvprof CSVs and the
nsfcac DCGM/SPEC CSV. A :class:`GridSpec` says which column plays which part; every other
column is a counter and must be a non-negative number.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .datasets import MeasurementGrid
from .source import Source, csv_line, format_number

# Launch geometry as nvprof printed it: "(grid x y z) (block x y z)".
_GEOMETRY = re.compile(r"^\s*\((\d+) (\d+) (\d+)\) \((\d+) (\d+) (\d+)\)\s*$")


@dataclass(frozen=True)
class GridSpec:
    format: str
    roles: dict[str, str]
    required: tuple[str, ...]
    key_columns: tuple[str, ...]
    text_columns: frozenset[str]
    index_columns: tuple[str, ...] = ()
    time_to_ms: float = 1.0
    geometry_column: str | None = None

    def matches(self, header: list[str]) -> bool:
        return all(c in header for c in self.required)


NVPROF = GridSpec(
    format="nvprof",
    roles={"app": "appName", "core_mhz": "coreF", "mem_mhz": "memF", "time": "time/ms", "watts": "power/W"},
    required=("appName", "coreF", "memF", "time/ms"),
    # The time+power file measures several kernels and argument sets of one application.
    key_columns=("appName", "kernel", "argNo"),
    text_columns=frozenset({"abbr.", "appName", "argNo", "kernel", "blocks"}),
    index_columns=("",),
    geometry_column="blocks",
)

DCGM = GridSpec(
    format="dcgm",
    roles={"app": "application", "core_mhz": "sm_app_clock", "time": "run_time", "watts": "power_usage"},
    required=("application", "sm_app_clock", "run_time"),
    key_columns=("application",),
    text_columns=frozenset({"application"}),
    index_columns=("", "index"),
    time_to_ms=1000.0,  # run_time is in seconds
)

# What `gpudvfs sweep` writes: one measurement per row (see gpudvfs.measure.sweep).
TIDY = GridSpec(
    format="tidy",
    roles={"app": "workload", "core_mhz": "core_mhz", "mem_mhz": "mem_mhz", "time": "time_ms", "watts": "watts"},
    required=("workload", "core_mhz", "mem_mhz", "time_ms", "watts", "power_source"),
    key_columns=("workload",),
    # temperature_c is text: empty where the device cannot read it; result holds key=value
    # pairs of what a benchmark measured itself.
    text_columns=frozenset({"workload", "power_source", "throttle_reasons", "temperature_c", "result"}),
)

SPECS = {s.format: s for s in (NVPROF, DCGM, TIDY)}


def read_grid(path: str | Path, spec: GridSpec, on_invalid: str = "raise") -> MeasurementGrid:
    src = Source(path, on_invalid)
    records = src.records(0)
    first = next(records, None)
    if first is None:
        raise src.error("empty file: expected a header line")
    hline, header = first
    header = [h.strip() for h in header]
    for c in spec.required:
        if c not in header:
            raise src.error(f"header lacks the column {c!r} ({spec.format} format needs "
                            f"{', '.join(spec.required)})", hline)
    for j, h in enumerate(header):
        if h in header[:j]:
            raise src.error(f"column name {h!r} repeated", hline, j + 1)
    roles = {r: c for r, c in spec.roles.items() if c in header}
    keys = tuple(c for c in spec.key_columns if c in header)
    positive = {roles["core_mhz"], roles.get("mem_mhz"), roles["time"]} - {None}

    def parse(line, f):
        src.expect_fields(f, line, len(header))
        row = []
        for j, (name, text) in enumerate(zip(header, f)):
            if name in spec.text_columns:
                text = text.strip()
                if name in keys and not text:
                    raise src.error("expected a non-empty name", line, j + 1, name)
                if name == spec.geometry_column and not _GEOMETRY.match(text):
                    raise src.error(f"expected launch geometry '(x y z) (x y z)', found {text!r}",
                                    line, j + 1, name)
                row.append(text)
            else:
                row.append(src.number(text, line, j + 1, name, minimum=0, exclusive=name in positive))
        return row

    mem_col = roles.get("mem_mhz")
    idx = {c: header.index(c) for c in header}

    def key(row):
        clocks = (row[idx[roles["core_mhz"]]],) + ((row[idx[mem_col]],) if mem_col else ())
        return tuple(row[idx[k]] for k in keys) + clocks

    parsed = src.drop_duplicates(src.parse_rows(records, parse), key,
                                 f"({', '.join(keys)}, clocks)")
    skipped = src.finish(parsed)
    rows = [r for _, r in parsed]
    columns = {}
    for j, name in enumerate(header):
        values = [r[j] for r in rows]
        columns[name] = np.array(values, dtype=str if name in spec.text_columns else np.float64)
    return MeasurementGrid(
        format=spec.format,
        path=src.path,
        columns=columns,
        roles=roles,
        key_columns=keys,
        time_to_ms=spec.time_to_ms,
        index_columns=tuple(c for c in spec.index_columns if c in header),
        skipped=skipped,
    )


def launch_geometry(grid: MeasurementGrid) -> tuple[np.ndarray, np.ndarray] | None:
    """(blocks, threads) as int arrays [n_rows x 3] where the grid records launch geometry."""
    spec = SPECS.get(grid.format)
    if spec is None or spec.geometry_column not in grid.columns:
        return None
    nums = np.array([[int(g) for g in _GEOMETRY.match(t).groups()] for t in grid.columns[spec.geometry_column]],
                    dtype=np.int64).reshape(-1, 6)
    return nums[:, :3], nums[:, 3:]


def write_grid(grid: MeasurementGrid, path: str | Path) -> None:
    cols = list(grid.columns)
    lines = [csv_line(cols)]
    for i in range(len(grid)):
        lines.append(csv_line(
            str(grid.columns[c][i]) if grid.columns[c].dtype.kind == "U" else format_number(grid.columns[c][i])
            for c in cols))
    Path(path).write_text("\n".join(lines) + "\n")
