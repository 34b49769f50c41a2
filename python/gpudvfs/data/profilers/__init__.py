"""Reading the NVIDIA tools' CSV output: Nsight Compute, nvprof and nvidia-smi.

| module    | what                                                                        |
|-----------|-----------------------------------------------------------------------------|
| `ncu`     | Nsight Compute `--csv` (wide `--page raw` and long `--metrics`/details)       |
| `nvprof`  | nvprof `--csv` metrics/events, summary (long) and `--print-gpu-trace` (wide) |
| `smi`     | `nvidia-smi --query-gpu --format=csv` logs                                   |
| `units`   | unit conversion table (bytes, ns, Hz, rates; nvprof binary vs ncu SI prefixes) |

Every parser returns values in base units (:mod:`.units`) and raises
:class:`~gpudvfs.errors.DataFileError` naming file, line and column for malformed input;
:class:`ProfilerError` (a ``DataFileError``) when the tool reported an error and printed no
counters. Mapping the counters onto the models' inputs, and collecting them with Nsight
Compute, is :mod:`gpudvfs.data.counters`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from gpudvfs.data.profilers.ncu import parse_ncu_csv, read_ncu_csv
from gpudvfs.data.profilers.nvprof import parse_nvprof_csv, read_nvprof_csv
from gpudvfs.data.profilers.records import ERROR_LINE, CounterReport, KernelCounters, ProfilerError, Rule, Text
from gpudvfs.data.profilers.smi import SmiLog, parse_smi_csv, read_smi_csv
from gpudvfs.data.profilers.units import normalize_unit
from gpudvfs.errors import DataFileError

__all__ = [
    "CounterReport", "KernelCounters", "ProfilerError", "Rule", "SmiLog", "counter_tool", "normalize_unit",
    "parse_ncu_csv", "parse_nvprof_csv", "parse_smi_csv", "read_counters", "read_ncu_csv",
    "read_nvprof_csv", "read_smi_csv",
]


_READERS: dict[str, Callable[[str | Path], CounterReport | SmiLog]] = {
    "nvidia-smi": read_smi_csv, "ncu": read_ncu_csv, "nvprof": read_nvprof_csv}


def counter_tool(path: str | Path) -> str | None:
    """Which tool wrote a file: ``ncu``, ``nvprof``, ``nvidia-smi``, else None.

    Told by its header line or, without CSV, by the messages the tool printed.
    """
    src = Text.from_path(path)
    first = next((ln for ln in src.lines if ln.strip()), "")
    # nvidia-smi: an unquoted header of dotted query names, units in brackets.
    if not first.startswith(('"', "==")) and (first.startswith("timestamp,") or " [" in first):
        return "nvidia-smi"
    for line in src.lines:
        if line.startswith('"ID","Process ID"'):
            return "ncu"
        if line.startswith(('"Device","Kernel","Invocations"', '"Device","Context","Stream","Kernel"')):
            return "nvprof"
    # No CSV: the parser of the tool that wrote the messages raises ProfilerError quoting them.
    if any(ln.startswith(("==ERROR==", "==PROF==")) for ln in src.lines):
        return "ncu"
    if any(ERROR_LINE.match(ln) for ln in src.lines):
        return "nvprof"
    return None


def read_counters(path: str | Path) -> CounterReport | SmiLog:
    """Read an Nsight Compute, nvprof or nvidia-smi CSV, told apart by :func:`counter_tool`.

    Raises `DataFileError` if no tool is recognised, or the tool's output is malformed or holds
    only its errors.
    """
    tool = counter_tool(path)
    if tool is None:
        raise DataFileError.at(path, "not a recognised counter file: expected an Nsight Compute "
                               '("ID","Process ID",...), nvprof ("Device","Kernel",... or '
                               '"Device","Context",...) or nvidia-smi --query-gpu CSV header')
    return _READERS[tool](path)
