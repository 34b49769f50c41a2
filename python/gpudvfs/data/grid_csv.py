"""Measurement grids in header-first CSV, read and written.

The NV-DVFS-Benchmark grids (`nvdvfs`: time, power and nvprof counters at every clock pair),
the nsfcac DCGM/SPEC CSV, gpudvfs's own sweeps, Zeus's training jobs at each power limit and
Perseus's pipeline stages at each SM clock, and any other grid whose columns go by common
names (`grid`, see :mod:`.grid_columns`). A :class:`GridSpec` says which column plays which
part; every other column is a counter and must be a non-negative number (in a `grid`, a
column whose first value is not a number is text).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gpudvfs.data.columns import Columns, Field, KeyPart
from gpudvfs.data.datasets import MeasurementGrid
from gpudvfs.data.grid_columns import detect_roles
from gpudvfs.data.source import Source, csv_line, format_number, repeated_at
from gpudvfs.data.valid_csv import read_valid
from gpudvfs.errors import InputError
from gpudvfs.limits import MAX_COUNT, MAX_MHZ, MAX_WATTS

# Launch geometry as nvprof printed it: "(grid x y z) (block x y z)".
_GEOMETRY = re.compile(r"^\s*\((\d+) (\d+) (\d+)\) \((\d+) (\d+) (\d+)\)\s*$")


@dataclass(frozen=True)
class GridSpec:
    """Which column of a grid CSV format plays which part.

    Parameters
    ----------
    format : str
        The format's name.
    roles : dict of str to str
        Role (``app``, ``core_mhz``, ``mem_mhz``, ``time``, ``watts``, ``energy``) -> column.
    required : tuple of str
        The columns a header must have (also how a header is told to be of the format).
    key_columns : tuple of str
        The columns that name a workload (with the clocks, a row's key).
    text_columns : frozenset of str
        The columns of text; every other is a number.
    index_columns : tuple of str
        Columns that number the rows (a pandas index), not measurements.
    time_to_ms : float
        The time column's factor to milliseconds.
    geometry_column : str, optional
        The column of launch geometry, ``(x y z) (x y z)``.
    mem_clock_to_nvml : float
        NVML's memory clock per unit of the file's memory clock.
    knob : str
        What the ``core_mhz`` role's column sets: ``clocks`` (MHz), or ``power-limit`` (W).
    reference_mhz : tuple of (float, float), optional
        The clock pair (the file's units) the format's protocol profiles each workload at.
    """

    format: str
    roles: dict[str, str]
    required: tuple[str, ...]
    key_columns: tuple[str, ...]
    text_columns: frozenset[str]
    index_columns: tuple[str, ...] = ()
    time_to_ms: float = 1.0
    geometry_column: str | None = None
    #: NVML's memory clock per unit of the file's memory clock.
    mem_clock_to_nvml: float = 1.0
    #: What the `core_mhz` role's column sets: "clocks" (MHz), or "power-limit" (W).
    knob: str = "clocks"
    #: The clock pair (the file's units) the format's protocol profiles each workload at, if it has one.
    reference_mhz: tuple[float, float] | None = None

    def matches(self, header: list[str]) -> bool:
        """Whether a header is of this format: it has every column of :attr:`required`."""
        return all(c in header for c in self.required)


NVDVFS = GridSpec(
    format="nvdvfs",
    roles={"app": "appName", "core_mhz": "coreF", "mem_mhz": "memF", "time": "time/ms", "watts": "power/W"},
    required=("appName", "coreF", "memF", "time/ms"),
    # The time+power file measures several kernels and argument sets of one application.
    key_columns=("appName", "kernel", "argNo"),
    text_columns=frozenset({"abbr.", "appName", "argNo", "kernel", "blocks"}),
    index_columns=("",),
    geometry_column="blocks",
    # NVIDIA Inspector's GDDR5 memory clock (1752 MHz at the GTX 980's default) is half of NVML's (3505).
    mem_clock_to_nvml=2.0,
    reference_mhz=(700.0, 700.0),  # Wang & Chu's profiling pair
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

# What `gpudvfs sweep` writes: one measurement per row (see gpudvfs.hardware.sweep).
TIDY = GridSpec(
    format="tidy",
    roles={"app": "workload", "core_mhz": "core_mhz", "mem_mhz": "mem_mhz", "time": "time_ms", "watts": "watts"},
    required=("workload", "core_mhz", "mem_mhz", "time_ms", "watts", "power_source"),
    key_columns=("workload",),
    # temperature_c is text: empty where the device cannot read it; result holds key=value
    # pairs of what a benchmark measured itself.
    text_columns=frozenset({"workload", "power_source", "throttle_reasons", "temperature_c", "result"}),
)

# Zeus's NSDI'23 traces: a training job (dataset, network, batch size, optimizer) at each GPU
# power limit; the knob is the limit in watts, the time one epoch's.
ZEUS = GridSpec(
    format="zeus",
    roles={"app": "dataset", "core_mhz": "power_limit", "time": "time_per_epoch", "watts": "average_power"},
    required=("dataset", "network", "batch_size", "optimizer", "power_limit", "time_per_epoch", "average_power"),
    key_columns=("dataset", "network", "batch_size", "optimizer"),
    text_columns=frozenset({"dataset", "network", "batch_size", "optimizer"}),
    time_to_ms=1000.0,
    knob="power-limit",
)

# Perseus's SOSP'24 stage profiles: the forward and backward computation of each pipeline
# stage at each SM clock (one memory clock), time in seconds and energy, not power.
PERSEUS = GridSpec(
    format="perseus",
    roles={"app": "stage", "core_mhz": "frequency", "time": "time", "energy": "energy"},
    required=("stage", "instruction", "frequency", "time", "energy"),
    key_columns=("stage", "instruction"),
    text_columns=frozenset({"stage", "instruction"}),
    time_to_ms=1000.0,
)

SPECS = {s.format: s for s in (NVDVFS, DCGM, TIDY, ZEUS, PERSEUS)}
GRID_ROLES = ("app", "core_mhz", "mem_mhz", "time", "watts", "energy")


def generic_spec(header: list[str], first_row: list[str] | None, columns: dict[str, str] | None = None) -> GridSpec:
    """The spec (format ``grid``) of a grid CSV of no known format, from its header and first data row.

    Roles are told by ``columns`` (role -> column), then by common names
    (:func:`~.grid_columns.detect_roles`: `InputError` where two columns could play a role or none
    plays a required one); columns that are not numbers in the first row are text.
    """
    roles, to_ms = detect_roles(header, columns)
    keys = tuple(roles[r] for r in ("app", "kernel", "args") if r in roles)
    numeric = {roles[r] for r in GRID_ROLES if r in roles and r != "app"}

    def is_text(j: int, name: str) -> bool:
        if name in keys:
            return True
        if name in numeric or first_row is None or j >= len(first_row):
            return False
        try:
            float(first_row[j])
        except ValueError:
            return True
        return False

    grid_roles = {r: roles[r] for r in GRID_ROLES if r in roles}
    return GridSpec(format="grid", roles=grid_roles, required=tuple(grid_roles.values()), key_columns=keys,
                    text_columns=frozenset(h for j, h in enumerate(header) if is_text(j, h)),
                    index_columns=("", "index", "Unnamed: 0"), time_to_ms=to_ms)


def read_grid(path: str | Path, spec: GridSpec | None, on_invalid: str = "raise",
              columns: dict[str, str] | None = None, counters: bool = True) -> MeasurementGrid:
    """Read a grid CSV with a spec, or (``spec`` None) with :func:`generic_spec`'s from its header and ``columns``.

    ``on_invalid`` as :class:`~.source.Source` takes it. ``counters=False`` keeps the columns that
    play no role and name no workload as unchecked text (the counters, launch geometry left blank
    included), for a use of time and power alone. A header that lacks a required column or
    repeats one raises `DataFileError`.
    """
    with Source(path, on_invalid) as src:
        head = src.head(1)
        if not head:
            raise src.error("empty file: expected a header line")
        [(hline, header)] = head
        header = [h.strip() for h in header]
        if spec is None:
            first = src.peek(1)
            try:
                spec = generic_spec(header, first[0][1] if first else None, columns)
            except InputError as e:
                raise src.error(str(e), hline) from None
        for c in spec.required:
            if c not in header:
                raise src.error(f"header lacks the column {c!r} ({spec.format} format needs "
                                f"{', '.join(spec.required)})", hline)
        if (j := repeated_at(header)) is not None:
            raise src.error(f"column name {header[j]!r} repeated", hline, j + 1)
        roles = {r: c for r, c in spec.roles.items() if c in header}
        keys = tuple(c for c in spec.key_columns if c in header)
        clocks = [c for c in (roles["core_mhz"], roles.get("mem_mhz")) if c]
        positive = {*clocks, roles["time"], roles.get("watts"), roles.get("energy")}  # a GPU at work never draws 0 W
        clock_max = MAX_WATTS if spec.knob == "power-limit" else MAX_MHZ
        maxima: dict[str | None, float] = {**dict.fromkeys(clocks, clock_max), roles.get("watts"): MAX_WATTS}
        used = {*roles.values(), *keys} if not counters else set(header)
        cols = Columns(src, [_field(spec, name, name in keys, name in positive, maxima.get(name)) if name in used
                             else Field(name, text=True) for name in header], f"({', '.join(keys)}, clocks)")
        key_at = [header.index(c) for c in (*keys, *clocks)]

        def key(values: list[np.ndarray]) -> list[KeyPart]:
            return [cols.part(values, j) for j in key_at]

        arrays = read_valid(src.path, cols.fields, key_at) if hline == 1 else None
        if arrays is None:
            for chunk in src.chunks():
                cols.add(chunk, key)
            arrays = cols.arrays()
        skipped = src.finish(len(arrays[0]))
    return MeasurementGrid(
        format=spec.format,
        path=src.path,
        columns=dict(zip(header, arrays)),
        roles=roles,
        key_columns=keys,
        time_to_ms=spec.time_to_ms,
        index_columns=tuple(c for c in spec.index_columns if c in header),
        skipped=skipped,
        knob=spec.knob,
        mem_clock_to_nvml=spec.mem_clock_to_nvml,
    )


def _field(spec: GridSpec, name: str, key: bool, positive: bool, maximum: float | None) -> Field:
    """What a column holds: text (a key column not empty), else a number >= 0.

    Numbers are > 0 for clocks, time and power, and at most what a GPU can measure:
    ``maximum``, else :data:`MAX_COUNT`.
    """
    if name not in spec.text_columns:
        return Field(name, minimum=0, exclusive=positive, maximum=MAX_COUNT if maximum is None else maximum)
    return Field(name, text=True, empty="expected a non-empty name" if key else None,
                 form=(_GEOMETRY, "launch geometry '(x y z) (x y z)'") if name == spec.geometry_column else None)


def launch_geometry(grid: MeasurementGrid) -> tuple[np.ndarray, np.ndarray] | None:
    """Each row's (blocks, threads) as int arrays [rows x 3]; None where the grid records no geometry.

    A column left blank anywhere records none. `InputError` where a row's geometry is not
    ``(x y z) (x y z)`` (a grid built other than by reading).
    """
    spec = SPECS.get(grid.format)
    if spec is None or spec.geometry_column not in grid.columns or (grid.columns[spec.geometry_column] == "").any():
        return None
    nums = np.array([_geometry(grid.path, t) for t in grid.columns[spec.geometry_column]],
                    dtype=np.int64).reshape(-1, 6)
    return nums[:, :3], nums[:, 3:]


def _geometry(path: str, text: str) -> list[int]:
    m = _GEOMETRY.match(text)
    if m is None:
        raise InputError(f"{path}: launch geometry {text!r} is not '(x y z) (x y z)'")
    return [int(g) for g in m.groups()]


def write_grid(grid: MeasurementGrid, path: str | Path) -> None:
    """Write a grid in header-first CSV, its columns as read; floats round-trip exactly."""
    cols = list(grid.columns)
    lines = [csv_line(cols)]
    for i in range(len(grid)):
        lines.append(csv_line(
            str(grid.columns[c][i]) if grid.columns[c].dtype.kind == "U" else format_number(grid.columns[c][i])
            for c in cols))
    Path(path).write_text("\n".join(lines) + "\n")
