"""Readers and writers of the public GPU measurement formats, with format detection.

| format          | what                                            | returns            |
|-----------------|-------------------------------------------------|--------------------|
| `gpmtool`       | gpmTOOL power CSV (rows with or without a name) | PowerDataset       |
| `gpmtool-utils` | gpmTOOL utilization-only CSV (`name,U...`)      | UtilizationTable   |
| `nvprof`        | NV-DVFS-Benchmark nvprof CSV (time, time+power) | MeasurementGrid    |
| `dcgm`          | nsfcac DCGM/SPEC CSV                            | MeasurementGrid    |
| `ptx`           | gpuPTXModel block format                        | MeasurementGrid    |
| `tidy`          | what `gpudvfs sweep` writes, one row a measurement | MeasurementGrid |
"""

from __future__ import annotations

from pathlib import Path

from ..errors import DataFileError, InputError
from .datasets import MeasurementGrid, PowerDataset, UtilizationTable
from .gpmtool import read_gpmtool, write_gpmtool
from .grid_csv import DCGM, NVPROF, SPECS, TIDY, launch_geometry, read_grid, write_grid
from .ptx import read_ptx, write_ptx
from .source import UTIL_TOLERANCE, Source

FORMATS = ("gpmtool", "gpmtool-utils", "nvprof", "dcgm", "ptx", "tidy")

Dataset = PowerDataset | UtilizationTable | MeasurementGrid

#: Rows read to tell a file's format (a gpmTOOL header and its first data row).
DETECT_LINES = 5

__all__ = ["FORMATS", "UTIL_TOLERANCE", "Dataset", "detect_format", "launch_geometry", "read",
           "read_power_dataset", "write"]


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def detect_format(path: str | Path) -> str:
    """The format of a data file, judged from its first lines."""
    with Source(path, chunk_lines=DETECT_LINES) as src:
        recs = [f for _, f in src.head(DETECT_LINES)]
    if not recs:
        raise src.error("empty file: cannot tell its format")
    first = recs[0]
    if len(first) == 1 and _is_number(first[0]):
        if len(recs) < 5:
            raise src.error("looks like a gpmTOOL CSV but the header is truncated "
                            "(expected 4 header lines and data rows)")
        # Utilization-only rows are a name plus one value per component.
        return "gpmtool-utils" if len(recs[4]) == len(recs[3]) + 1 and not _is_number(recs[4][0]) else "gpmtool"
    if len(first) == 1 and len(recs) > 1 and len(recs[1]) == 5 and all(map(_is_number, recs[1])):
        return "ptx"
    header = [h.strip() for h in first]
    for spec in (NVPROF, DCGM, TIDY):
        if spec.matches(header):
            return spec.format
    raise src.error(
        "cannot tell the format: expected a gpmTOOL header (a domain count), a gpuPTXModel "
        f"benchmark name, or a CSV header with {NVPROF.required}, {DCGM.required} or {TIDY.required}; "
        f"pass format= one of {FORMATS}", 1)


def read(path: str | Path, format: str | None = None, on_invalid: str = "raise") -> Dataset:
    """Read any supported measurement file. ``format=None`` detects it.

    ``on_invalid="skip"`` leaves out invalid rows instead of raising, records each in the
    dataset's ``skipped`` and warns; the default raises :class:`DataFileError` at the first.
    """
    fmt = format or detect_format(path)
    if fmt in ("gpmtool", "gpmtool-utils"):
        ds = read_gpmtool(path, on_invalid)
        got = ds.format
        if got != fmt:
            raise DataFileError.at(path, f"read as {fmt!r} but the rows are of the {got!r} variant", 5)
        return ds
    if fmt in SPECS:
        return read_grid(path, SPECS[fmt], on_invalid)
    if fmt == "ptx":
        return read_ptx(path, on_invalid)
    raise InputError(f"unknown format {fmt!r}; expected one of {FORMATS}")


def read_power_dataset(path: str | Path, on_invalid: str = "raise") -> PowerDataset:
    """Read a gpmTOOL power CSV: the training and test input of the power model."""
    return read(path, "gpmtool", on_invalid)  # type: ignore[return-value]


def write(ds: Dataset, path: str | Path) -> None:
    """Write a dataset in the format it was read from (reads back to equal arrays)."""
    if isinstance(ds, (PowerDataset, UtilizationTable)):
        write_gpmtool(ds, path)
    elif ds.format == "ptx":
        write_ptx(ds, path)
    else:
        write_grid(ds, path)
