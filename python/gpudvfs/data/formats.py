"""Every format gpudvfs reads and writes, detected from a file's first lines.

The formats and what each reader returns are tabled in :mod:`gpudvfs.data`.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path

from gpudvfs.data import spikes
from gpudvfs.data.datasets import MeasurementGrid, PowerDataset, UtilizationTable
from gpudvfs.data.gpmtool import read_gpmtool, write_gpmtool
from gpudvfs.data.grid_columns import detect_roles, parse_columns
from gpudvfs.data.grid_csv import DCGM, NVDVFS, PERSEUS, SPECS, TIDY, ZEUS, launch_geometry, read_grid, write_grid
from gpudvfs.data.profilers import CounterReport, SmiLog, counter_tool, read_ncu_csv, read_nvprof_csv, read_smi_csv
from gpudvfs.data.ptx import read_ptx, write_ptx
from gpudvfs.data.source import UTIL_TOLERANCE, Source
from gpudvfs.errors import DataFileError, GpudvfsWarning, InputError

#: What each format is, in words, for messages that say what a file holds.
DESCRIPTIONS = {
    "gpmtool": "a gpmTOOL power CSV (power of microbenchmarks over clock pairs, with utilizations)",
    "gpmtool-utils": "a gpmTOOL utilization CSV (component utilizations of applications, no power)",
    "nvdvfs": "an NV-DVFS-Benchmark grid (time and nvprof counters of applications at every clock pair)",
    "dcgm": "a DCGM/SPEC grid (run time, power and DCGM fields of applications per core clock)",
    "ptx": "a gpuPTXModel grid (time and power of benchmarks per clock pair)",
    "tidy": "a gpudvfs sweep (one measurement a row)",
    "zeus": "Zeus's traces (epoch time and average power of training jobs at each GPU power limit)",
    "perseus": "Perseus's stage profiles (time and energy of pipeline stages at each SM clock)",
    "grid": "a grid CSV (workload, clocks, time and maybe power and counters, under common column names)",
    "ncu": "Nsight Compute output (counters of kernel launches)",
    "nvprof": "nvprof output (counters of kernels)",
    "nvidia-smi": "an nvidia-smi query log (samples of GPU state)",
}
FORMATS = tuple(DESCRIPTIONS)
_PROFILERS: dict[str, Callable[[str | Path], CounterReport | SmiLog]] = {
    "ncu": read_ncu_csv, "nvprof": read_nvprof_csv, "nvidia-smi": read_smi_csv}

Dataset = PowerDataset | UtilizationTable | MeasurementGrid | CounterReport | SmiLog

#: Rows read to tell a file's format (a gpmTOOL header and its first data row).
DETECT_LINES = 5

__all__ = ["DESCRIPTIONS", "FORMATS", "UTIL_TOLERANCE", "Dataset", "detect_format", "launch_geometry",
           "parse_columns", "read", "read_measured_grid", "read_power_dataset", "write"]


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def detect_format(path: str | Path) -> str:
    """The format of a data file (one of :data:`FORMATS`), judged from its first lines.

    A profiler's output, which may follow the application's own, is told from its header
    wherever it is. Raises `DataFileError` if the file is missing, empty, or of no format
    gpudvfs reads.
    """
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
    for spec in (NVDVFS, DCGM, TIDY, ZEUS, PERSEUS):
        if spec.matches(header):
            return spec.format
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", GpudvfsWarning)  # the unit warning comes when it is read
            detect_roles(header)
        return "grid"
    except InputError:
        pass
    tool = counter_tool(path)  # a file a tool wrote is that tool's: its parser names what is wrong in it
    if tool is None:
        raise src.error(
            "cannot tell the format: expected a gpmTOOL header (a domain count), a gpuPTXModel "
            "benchmark name, a CSV header with workload, clock and time columns (e.g. benchmark, coreF, "
            "time/ms; name them with --columns workload=...,core_mhz=...,time=...), "
            f"or Nsight Compute, nvprof or nvidia-smi CSV output; pass format= one of {FORMATS}", 1)
    return tool


def read(path: str | Path, format: str | None = None, on_invalid: str = "raise",
         columns: dict[str, str] | None = None, clip_utilization: bool = False, counters: bool = True) -> Dataset:
    """Read any supported measurement file or profiler output, as the format gives (see :mod:`gpudvfs.data`'s table).

    Profilers' output has no rows to skip: it is read whole or refused.

    Parameters
    ----------
    format : str, optional
        One of :data:`FORMATS`; None detects it (:func:`detect_format`).
    on_invalid : str
        ``raise`` raises `DataFileError` at the first invalid row; ``skip`` leaves invalid rows
        out, records each in the dataset's ``skipped`` and warns.
    columns : dict of str to str, optional
        Role -> column (see :func:`parse_columns`): read the file as a `grid` with those roles.
    clip_utilization : bool
        Clip a gpmTOOL file's utilizations into [0, 1] with a warning instead of refusing values
        outside it.
    counters : bool
        False reads a grid's counters as unchecked text (a use of its time and power alone, where
        they may be blank).

    Raises
    ------
    InputError
        If ``format`` is unknown, or ``columns`` is given with a format other than `grid`.
    DataFileError
        If the file cannot be read as its format (naming the format it looks like, where
        ``format`` was given).
    """
    if format is not None and format not in FORMATS:
        raise InputError(f"unknown format {format!r}; expected one of {FORMATS}")
    if columns:
        if format not in (None, "grid"):
            raise InputError(f"columns= names the roles of a 'grid' file, not of format {format!r}")
        format = "grid"
    try:
        return _read(path, format or detect_format(path), on_invalid, columns, clip_utilization, counters)
    except DataFileError as e:
        if format is None:
            raise
        raise _with_hint(e, path, format) from None


def _read(path: str | Path, fmt: str, on_invalid: str, columns: dict[str, str] | None = None,
          clip_utilization: bool = False, counters: bool = True) -> Dataset:
    if fmt in ("gpmtool", "gpmtool-utils"):
        ds = read_gpmtool(path, on_invalid, clip_utilization)
        if ds.format != fmt:
            raise DataFileError.at(path, f"read as {fmt!r} but the rows are of the {ds.format!r} variant", 5)
        return ds
    if fmt in SPECS:
        return read_grid(path, SPECS[fmt], on_invalid, counters=counters)
    if fmt == "grid":
        return read_grid(path, None, on_invalid, columns, counters)
    if fmt == "ptx":
        return read_ptx(path, on_invalid)
    return _PROFILERS[fmt](path)


def _with_hint(error: DataFileError, path: str | Path, asked: str) -> DataFileError:
    """A file read as the wrong format: say which format it looks like."""
    try:
        found = detect_format(path)
    except DataFileError:
        return error
    if found == asked:
        return error
    return type(error)(error.problem.__class__(
        error.problem.path, error.problem.line, error.problem.column, error.problem.column_name,
        f"{error.problem.message} (the file looks like {DESCRIPTIONS[found]}: format {found!r})"))


def read_measured_grid(path: str | Path, needs: str, formats: tuple[str, ...] = (*SPECS, "ptx", "grid"),
                       on_invalid: str = "raise", columns: dict[str, str] | None = None,
                       drop_spikes: float | None = None, counters: bool = True) -> MeasurementGrid:
    """Read a grid of measured times over clock pairs, or fail with what the file is and what is read instead.

    ``needs`` names the command or model that reads it, for the error; ``drop_spikes`` is a
    threshold whose spikes' rows are left out (:mod:`gpudvfs.data.spikes`); the other arguments
    as for :func:`read`. Raises `DataFileError` if the file is not a grid of one of ``formats``,
    or cannot be read.
    """
    ds = read(path, on_invalid=on_invalid, columns=columns, counters=counters)
    if not isinstance(ds, MeasurementGrid) or ds.format not in formats:
        wanted = ", ".join(f"{f} ({DESCRIPTIONS[f]})" for f in formats)
        raise DataFileError.at(path, f"this is {DESCRIPTIONS[ds.format]} (format {ds.format!r}); {needs} reads "
                                     f"{wanted}")
    return ds if drop_spikes is None else spikes.drop_spikes(ds, drop_spikes)


def read_power_dataset(path: str | Path, on_invalid: str = "raise", clip_utilization: bool = False) -> PowerDataset:
    """Read a gpmTOOL power CSV: the training and test input of the power model.

    Raises `DataFileError` naming what the file is if it is another kind, or if it cannot be read.
    """
    found = detect_format(path)
    if found != "gpmtool":
        raise DataFileError.at(path, f"this is {DESCRIPTIONS[found]} (format {found!r}), not a gpmTOOL power CSV "
                                     "(power of benchmarks over clock pairs with their utilizations), which "
                                     "the power model is fitted and scored on")
    # read() checks the variant: format "gpmtool" gives a PowerDataset, which its union type cannot say.
    return read(path, "gpmtool", on_invalid, clip_utilization=clip_utilization)  # type: ignore[return-value]


def write(ds: Dataset, path: str | Path) -> None:
    """Write a dataset :func:`read` returned in the format it was read from (reads back to equal arrays).

    Raises `InputError` for profiler output (read only) or anything :func:`read` does not return.
    """
    if isinstance(ds, (CounterReport, SmiLog)):
        raise InputError("profiler output is read only: gpudvfs does not write Nsight Compute, nvprof or "
                         "nvidia-smi files")
    if isinstance(ds, (PowerDataset, UtilizationTable)):
        write_gpmtool(ds, path)
    elif not isinstance(ds, MeasurementGrid):
        raise InputError(f"write takes a dataset gpudvfs.read returned, got {type(ds).__name__}")
    elif ds.format == "ptx":
        write_ptx(ds, path)
    else:
        write_grid(ds, path)
