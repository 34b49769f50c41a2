"""Readers and writers of the public GPU measurement formats and the profilers' output, with format detection.

| format          | what                                                        | returns            |
|-----------------|-------------------------------------------------------------|--------------------|
| `gpmtool`       | gpmTOOL power CSV (rows with or without a name)             | PowerDataset       |
| `gpmtool-utils` | gpmTOOL utilization-only CSV (`name,U...`)                  | UtilizationTable   |
| `nvdvfs`        | NV-DVFS-Benchmark grid: time, power, nvprof counters per pair | MeasurementGrid    |
| `dcgm`          | nsfcac DCGM/SPEC CSV                                        | MeasurementGrid    |
| `ptx`           | gpuPTXModel block format                                    | MeasurementGrid    |
| `tidy`          | what `gpudvfs sweep` writes, one row a measurement          | MeasurementGrid    |
| `zeus`          | Zeus's traces: training jobs at each GPU power limit        | MeasurementGrid    |
| `perseus`       | Perseus's stage profiles: time and energy per SM clock      | MeasurementGrid    |
| `grid`          | any grid CSV with workload, clock, time (and power) columns | MeasurementGrid    |
| `ncu`           | Nsight Compute `--csv` output                               | CounterReport      |
| `nvprof`        | nvprof's own `--csv` output (metrics, events, GPU trace)    | CounterReport      |
| `nvidia-smi`    | `nvidia-smi --query-gpu --format=csv` log                   | SmiLog             |

Each reader is in a module of its own; :mod:`.formats` detects a file's format and reads or
writes it, and its names are the package's. :mod:`.counters` maps the profilers' counters onto
the models' inputs, :mod:`.activities` onto the activities an observed power model reads.
"""

from gpudvfs.data.formats import (
    DESCRIPTIONS,
    FORMATS,
    UTIL_TOLERANCE,
    detect_format,
    read,
    read_measured_grid,
    read_power_dataset,
    write,
)
from gpudvfs.data.grid_columns import parse_columns
from gpudvfs.data.grid_csv import launch_geometry

__all__ = ["DESCRIPTIONS", "FORMATS", "UTIL_TOLERANCE", "detect_format", "launch_geometry", "parse_columns", "read",
           "read_measured_grid", "read_power_dataset", "write"]
