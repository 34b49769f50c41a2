"""Hardware counters at the reference configuration: reading the NVIDIA tools' CSV output,
mapping it onto the time and power models' inputs, and collecting it with Nsight Compute.

| module      | what                                                                        |
|-------------|-----------------------------------------------------------------------------|
| `ncu`       | Nsight Compute `--csv` (wide `--page raw` and long `--metrics`/details), `ncu_command`, `run_ncu` |
| `nvprof`    | nvprof `--csv` metrics/events, summary (long) and `--print-gpu-trace` (wide) |
| `smi`       | `nvidia-smi --query-gpu --format=csv` logs                                   |
| `mapping`   | counters -> time-model inputs (nvprof names) and power-model utilizations, per tool and architecture generation |
| `_units`    | unit conversion table (bytes, ns, Hz, rates; nvprof binary vs ncu SI prefixes) |

Every parser returns values in base units (:mod:`._units`) and raises
:class:`~gpudvfs.errors.DataFileError` naming file, line and column for malformed input;
:class:`ProfilerError` (a ``DataFileError``) when the tool reported an error and printed no
counters. DCGM has no parser here (no real `dcgmi dmon` log was available to test one); its
field values map through :func:`power_utilizations`/:func:`time_model_inputs` with
``scheme="dcgm"`` from any mapping of field name to value.
"""

from __future__ import annotations

from pathlib import Path

from ...errors import DataFileError
from ._records import ERROR_LINE, CounterReport, KernelCounters, ProfilerError, Rule, Text
from ._units import normalize_unit
from .mapping import (COMPONENTS, DOMAIN_SIZES, SCHEMES, TIME_EXTRAS, TIME_INPUTS, Mapped, MissingCountersError,
                      explain, power_utilizations, required_metrics, scheme_of, time_model_extras,
                      time_model_inputs)
from .ncu import (CounterPermissionError, NcuNotFoundError, NcuTimeoutError, ncu_command,
                  parse_ncu_csv, read_ncu_csv, run_ncu)
from .nvprof import parse_nvprof_csv, read_nvprof_csv
from .smi import SmiLog, parse_smi_csv, read_smi_csv

__all__ = [
    "COMPONENTS", "DOMAIN_SIZES", "SCHEMES", "TIME_EXTRAS", "TIME_INPUTS", "CounterPermissionError", "CounterReport",
    "KernelCounters", "Mapped", "MissingCountersError", "NcuNotFoundError", "NcuTimeoutError",
    "ProfilerError", "Rule", "SmiLog", "explain", "ncu_command", "normalize_unit",
    "parse_ncu_csv", "parse_nvprof_csv", "parse_smi_csv", "power_utilizations",
    "read_counters", "read_ncu_csv", "read_nvprof_csv", "read_smi_csv", "required_metrics",
    "run_ncu", "scheme_of", "time_model_extras", "time_model_inputs",
]


def read_counters(path: str | Path) -> CounterReport | SmiLog:
    """Read an Nsight Compute, nvprof or nvidia-smi CSV, told apart by its header line."""
    src = Text.from_path(path)
    first = next((ln for ln in src.lines if ln.strip()), "")
    # nvidia-smi: an unquoted header of dotted query names, units in brackets.
    if not first.startswith(('"', "==")) and (first.startswith("timestamp,") or " [" in first):
        return read_smi_csv(path)
    for line in src.lines:
        if line.startswith('"ID","Process ID"'):
            return read_ncu_csv(path)
        if line.startswith(('"Device","Kernel","Invocations"', '"Device","Context","Stream","Kernel"')):
            return read_nvprof_csv(path)
    # No CSV: let the parser of the tool that wrote the messages raise ProfilerError quoting them.
    if any(ln.startswith(("==ERROR==", "==PROF==")) for ln in src.lines):
        return read_ncu_csv(path)
    if any(ERROR_LINE.match(ln) for ln in src.lines):
        return read_nvprof_csv(path)
    raise DataFileError.at(path, "not a recognised counter file: expected an Nsight Compute "
                           '("ID","Process ID",...), nvprof ("Device","Kernel",... or '
                           '"Device","Context",...) or nvidia-smi --query-gpu CSV header')
