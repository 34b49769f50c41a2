"""Typed datasets with numpy columns, as the readers return them.

* :class:`PowerDataset`: power measured per (benchmark, frequency configuration) with the
  benchmark's component utilizations (gpmTOOL power CSV).
* :class:`UtilizationTable`: component utilizations of named applications, no power
  (gpmTOOL utilization-only CSV): the input of power predictions.
* :class:`MeasurementGrid`: time (and possibly power) of applications over a clock grid,
  with profiler counters (NV-DVFS nvprof CSV, nsfcac DCGM CSV, gpuPTXModel blocks).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from gpudvfs.errors import GpudvfsWarning, InputError, Problem


def _levels(x: np.ndarray) -> list[float]:
    return [float(v) for v in np.unique(x)]


def _range(x: np.ndarray) -> list[float]:
    return [float(np.min(x)), float(np.max(x))] if len(x) else []


@dataclass(frozen=True, eq=False)
class PowerDataset:
    """Average power of benchmarks at frequency configurations (gpmTOOL CSV), one row per measurement.

    A benchmark is identified by its name and utilization vector (names repeat in some files for
    different sweeps).

    Parameters
    ----------
    reference_mhz : tuple of float
        The reference frequency of each V-F domain, core first.
    domain_sizes : tuple of int
        The number of components in each domain; ``components`` lists domain 0's first.
    watts : numpy.ndarray
        Measured power (W) per row.
    freqs_mhz : numpy.ndarray
        [rows x domains] frequencies (MHz), core first.
    utilization : numpy.ndarray
        [rows x components] utilizations in [0, 1].
    row_names : tuple of str or None
        None where the file's rows have no names.
    benchmark : numpy.ndarray
        Each row's benchmark, an index into ``benchmarks``: the name, with ``#k`` added for the
        k-th benchmark sharing it.
    skipped : tuple of Problem
        The invalid rows left out in reading.
    """

    path: str
    reference_mhz: tuple[float, ...]
    domain_sizes: tuple[int, ...]
    components: tuple[str, ...]
    watts: np.ndarray
    freqs_mhz: np.ndarray
    utilization: np.ndarray
    row_names: tuple[str, ...] | None
    benchmark: np.ndarray
    benchmarks: tuple[str, ...]
    skipped: tuple[Problem, ...] = field(default=())
    format: str = "gpmtool"

    def __len__(self) -> int:
        """The number of rows (measurements)."""
        return len(self.watts)

    @property
    def n_domains(self) -> int:
        """The number of V-F domains."""
        return len(self.domain_sizes)

    @property
    def core_mhz(self) -> np.ndarray:
        """The core frequency (MHz) per row."""
        return self.freqs_mhz[:, 0]

    @property
    def mem_mhz(self) -> np.ndarray:
        """The memory frequency (MHz) per row; NaN in a dataset of one domain."""
        return self.freqs_mhz[:, 1] if self.n_domains > 1 else np.full(len(self), np.nan)

    @property
    def configs(self) -> np.ndarray:
        """Distinct frequency configurations, [n_configs x n_domains], sorted."""
        return np.unique(self.freqs_mhz, axis=0)

    def benchmark_utilization(self) -> np.ndarray:
        """[benchmarks x components] utilizations, in the order of ``benchmarks``."""
        out = np.empty((len(self.benchmarks), len(self.components)))
        out[self.benchmark] = self.utilization
        return out

    def subset(self, rows: np.ndarray) -> PowerDataset:
        """The dataset of some rows (a mask or indices), with only the benchmarks they measure, renumbered."""
        idx = np.arange(len(self))[rows]
        kept, bench = np.unique(self.benchmark[idx], return_inverse=True)
        return replace(self, watts=self.watts[idx], freqs_mhz=self.freqs_mhz[idx],
                       utilization=self.utilization[idx],
                       row_names=None if self.row_names is None else tuple(self.row_names[i] for i in idx),
                       benchmark=bench.astype(np.int64), benchmarks=tuple(self.benchmarks[k] for k in kept))

    def without_components(self, names: Iterable[str]) -> PowerDataset:
        """The dataset without some components (e.g. ones no benchmark exercises), domain sizes adjusted.

        Raises `ValueError` if a name is not one of the components.
        """
        drop = set(names)
        unknown = drop - set(self.components)
        if unknown:
            raise ValueError(f"unknown components {sorted(unknown)}")
        keep = [j for j, c in enumerate(self.components) if c not in drop]
        sizes: list[int] = []
        start = 0
        for size in self.domain_sizes:
            sizes.append(sum(1 for j in keep if start <= j < start + size))
            start += size
        return replace(self, components=tuple(self.components[j] for j in keep),
                       utilization=self.utilization[:, keep], domain_sizes=tuple(sizes))

    def unused_components(self) -> list[str]:
        """Components that are zero in every row, in the order of ``components``."""
        return [c for j, c in enumerate(self.components) if not np.any(self.utilization[:, j] > 0)]

    def describe(self) -> dict[str, Any]:
        """What the dataset holds, for `gpudvfs data info`: format, grid, components, benchmarks, ranges."""
        return {
            "format": self.format,
            "path": self.path,
            "rows": len(self),
            "reference_mhz": list(self.reference_mhz),
            "domains": self.n_domains,
            "domain_sizes": list(self.domain_sizes),
            "components": list(self.components),
            "named_rows": self.row_names is not None,
            "benchmarks": len(self.benchmarks),
            "benchmark_names": list(self.benchmarks),
            "configurations": len(self.configs),
            "core_mhz_levels": _levels(self.core_mhz),
            "mem_mhz_levels": _levels(self.freqs_mhz[:, 1]) if self.n_domains > 1 else [],
            "ranges": {
                "watts": _range(self.watts),
                **{f"util:{c}": _range(self.utilization[:, j]) for j, c in enumerate(self.components)},
            },
            "skipped": [str(p) for p in self.skipped],
        }


@dataclass(frozen=True, eq=False)
class UtilizationTable:
    """Component utilizations [applications x components] of named applications at the reference configuration.

    ``reference_mhz`` and ``domain_sizes`` as in `PowerDataset`.
    """

    path: str
    reference_mhz: tuple[float, ...]
    domain_sizes: tuple[int, ...]
    components: tuple[str, ...]
    names: tuple[str, ...]
    utilization: np.ndarray
    skipped: tuple[Problem, ...] = field(default=())
    format: str = "gpmtool-utils"

    def __len__(self) -> int:
        """The number of applications."""
        return len(self.names)

    def describe(self) -> dict[str, Any]:
        """What the table holds, as `PowerDataset.describe` says it, without the grid."""
        return {
            "format": self.format,
            "path": self.path,
            "rows": len(self),
            "reference_mhz": list(self.reference_mhz),
            "domain_sizes": list(self.domain_sizes),
            "components": list(self.components),
            "benchmarks": len(self.names),
            "benchmark_names": list(self.names),
            "ranges": {f"util:{c}": _range(self.utilization[:, j]) for j, c in enumerate(self.components)},
            "skipped": [str(p) for p in self.skipped],
        }


@dataclass(frozen=True, eq=False)
class MeasurementGrid:
    """Applications measured over a grid of clocks, with profiler counters.

    Parameters
    ----------
    columns : dict of str to numpy.ndarray
        Every column of the file in its order (numbers as float64 arrays, text as str arrays), so
        a grid writes back as it was read.
    roles : dict of str to str
        The column that plays each part: ``app``, ``core_mhz``, ``mem_mhz``, ``time``, ``watts``,
        or ``energy`` where a file gives energy instead of power.
    key_columns : tuple of str
        The columns that name a workload (joined, :attr:`workload`).
    time_to_ms : float
        The time column's factor to milliseconds.
    index_columns : tuple of str
        Columns that number the rows, not measurements.
    knob : str
        What the ``core_mhz`` column sets: ``clocks`` (MHz) or ``power-limit`` (W: Zeus's traces,
        one setting a power limit).
    mem_clock_to_nvml : float
        NVML's memory clock per unit of the ``mem_mhz`` column's (2 for NVIDIA Inspector's GDDR5
        clocks).
    """

    format: str
    path: str
    columns: dict[str, np.ndarray]
    roles: dict[str, str]
    key_columns: tuple[str, ...]
    time_to_ms: float = 1.0
    index_columns: tuple[str, ...] = ()
    skipped: tuple[Problem, ...] = field(default=())
    knob: str = "clocks"
    mem_clock_to_nvml: float = 1.0

    def __len__(self) -> int:
        """The number of rows."""
        return len(self.columns[self.roles["app"]])

    def _role(self, role: str) -> np.ndarray | None:
        name = self.roles.get(role)
        return None if name is None else self.columns[name]

    @property
    def app(self) -> np.ndarray:
        """The application per row."""
        return self.columns[self.roles["app"]]

    @cached_property
    def workload(self) -> np.ndarray:
        """Identity of the measured workload per row: the key columns joined, e.g. app/kernel/args (computed once)."""
        keys = [self.columns[k].astype(str) for k in self.key_columns]
        out = keys[0]
        for k in keys[1:]:
            out = np.char.add(np.char.add(out, "/"), k)
        return out

    @property
    def core_mhz(self) -> np.ndarray:
        """Core clock per row (MHz; W where the knob is a power limit)."""
        return self.columns[self.roles["core_mhz"]]

    @property
    def mem_mhz(self) -> np.ndarray | None:
        """Memory clock per row, or None where the file has a single fixed memory clock."""
        return self._role("mem_mhz")

    def in_mem_unit(self, nvml_per_unit: float) -> MeasurementGrid:
        """The grid with its memory clocks, read in units of ``nvml_per_unit`` NVML MHz, in NVML's.

        This grid where nothing changes.
        """
        mem = self.roles.get("mem_mhz")
        if mem is None or nvml_per_unit == self.mem_clock_to_nvml:
            return self
        return replace(self, columns={**self.columns, mem: self.columns[mem] * nvml_per_unit}, mem_clock_to_nvml=1.0)

    @property
    def time_ms(self) -> np.ndarray:
        """Time per row in milliseconds."""
        return self.columns[self.roles["time"]] * self.time_to_ms

    @property
    def watts(self) -> np.ndarray | None:
        """Power per row: the file's, or its energy over its time."""
        energy = self._role("energy")
        if energy is not None and "watts" not in self.roles:
            return energy / (self.time_ms / 1e3)
        return self._role("watts")

    @property
    def metrics(self) -> dict[str, np.ndarray]:
        """Numeric columns other than the clocks, time, power and row indices: the counters."""
        used = set(self.roles.values()) | set(self.index_columns)
        return {
            k: v for k, v in self.columns.items() if k not in used and v.dtype.kind == "f"
        }

    def reference_rows(self, reference: tuple[float, float | None]) -> tuple[list[str], np.ndarray]:
        """The workloads measured at the reference (core, memory) MHz, in file order, and each one's first row there.

        Workloads never measured at the reference (a failed run) are left out with a warning. In a
        grid without a memory clock column (one memory clock) only the core clock is matched, and the
        reference's memory clock may be None. Computed (and warned about) once per reference: the
        steps of one command share it.

        Raises `InputError` if no workload was measured at the reference (most likely a wrong
        reference), or the grid varies the memory clock and the reference gives none.
        """
        known = self.__dict__.setdefault("_reference_rows", {})
        key = tuple(reference)
        if key not in known:
            known[key] = self._find_reference_rows(reference)
        names, rows = known[key]
        return list(names), rows.copy()

    def _find_reference_rows(self, reference: tuple[float, float | None]) -> tuple[list[str], np.ndarray]:
        at = self.core_mhz == reference[0]
        mem = self.mem_mhz
        if mem is not None:
            if reference[1] is None:
                raise InputError(f"{self.path}: the grid varies the memory clock; give the reference as CORE,MEM")
            at &= mem == reference[1]
        work = self.workload
        names, rows, lacking = [], [], []
        for n in dict.fromkeys(work.tolist()):
            hit = np.flatnonzero(at & (work == n))
            if len(hit):
                names.append(n)
                rows.append(hit[0])
            else:
                lacking.append(n)
        if lacking:
            where = f"{reference[0]:g}" + ("" if mem is None else f"/{reference[1]:g}")
            if not names:
                raise InputError(f"{self.path}: workload {lacking[0]!r} has no row at the reference {where} MHz "
                                 "(nor has any other)")
            shown = ", ".join(map(repr, lacking[:3])) + (", ..." if len(lacking) > 3 else "")
            warnings.warn(GpudvfsWarning(
                f"{self.path}: {len(lacking)} of {len(lacking) + len(names)} workloads have no row at the reference "
                f"{where} MHz and are left out ({shown})"), stacklevel=4)
        return names, np.array(rows, dtype=np.int64)

    def table(self, names: list[str], *values: ArrayLike,
              mem_mhz: float | None = None) -> tuple[np.ndarray, list[np.ndarray]]:
        """Per-row arrays as [W x K] tables of workloads by the [K x 2] (core, memory) pairs.

        The pairs are those every workload was measured at. Where a workload repeats a pair, its last
        row counts. Pairs some workload lacks (a run that failed) are left out with a warning, since
        every table compares workloads pair by pair. ``mem_mhz`` is the memory clock of a grid
        without a memory clock column.

        Raises `InputError` if the grid has no memory clock column and ``mem_mhz`` is not given,
        fewer than two pairs are common to all workloads, or a workload has no value at a pair.
        """
        mem = self.mem_mhz
        if mem is None:
            if mem_mhz is None:
                raise InputError(f"{self.path}: the grid has no memory clock column; give the memory clock")
            mem = np.full(len(self), float(mem_mhz))
        configs, config_of = np.unique(np.column_stack([self.core_mhz, mem]), axis=0, return_inverse=True)
        config_of = config_of.ravel()
        work = self.workload
        # Per workload, its rows and the pair of each: found once, for every array.
        rows = [np.flatnonzero(work == n) for n in names]
        lacking = [(n, np.setdiff1d(np.arange(len(configs)), config_of[r])) for n, r in zip(names, rows)]
        lacking = [(n, m) for n, m in lacking if len(m)]
        if lacking:
            configs, config_of, rows = self._common_pairs(configs, config_of, rows, lacking)
        tables = []
        for v in values:
            v = np.asarray(v, dtype=np.float64)
            out = np.empty((len(names), len(configs)))
            for a, r in enumerate(rows):
                out[a, config_of[r]] = v[r]
            if np.isnan(out).any():
                a, k = np.argwhere(np.isnan(out))[0]
                raise InputError(f"{self.path}: {names[a]!r} has no value at {configs[k, 0]:g}/{configs[k, 1]:g} MHz")
            tables.append(out)
        return configs, tables

    def _common_pairs(self, configs: np.ndarray, config_of: np.ndarray, rows: list[np.ndarray],
                      lacking: list[tuple[str, np.ndarray]]) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
        """``table``'s pairs, pair of each row and rows, cut to the pairs every workload has; warns which went."""
        gone = np.unique(np.concatenate([m for _, m in lacking]))
        keep = np.setdiff1d(np.arange(len(configs)), gone)
        worst, missing = max(lacking, key=lambda x: len(x[1]))
        c, m = configs[missing[0]]
        why = (f"{len(lacking)} workload(s) lack some; {worst!r} has no row at {c:g}/{m:g} MHz and "
               f"{len(missing) - 1} other pair(s)")
        if len(keep) < 2:
            raise InputError(f"{self.path}: fewer than 2 clock pairs were measured for every workload ({why}); "
                             "leave out the workloads that lack most")
        warnings.warn(GpudvfsWarning(
            f"{self.path}: {len(gone)} of {len(configs)} clock pairs are left out, since {why}; what follows "
            f"compares the {len(keep)} pairs measured for every workload"), stacklevel=3)
        new_index = np.full(len(configs), -1)
        new_index[keep] = np.arange(len(keep))
        config_of = new_index[config_of]
        return configs[keep], config_of, [r[config_of[r] >= 0] for r in rows]

    def describe(self) -> dict[str, Any]:
        """What the grid holds, for `gpudvfs data info`: columns, workloads, knob levels, metrics, ranges."""
        watts = self.watts
        mem = self.mem_mhz
        configs = self.core_mhz[:, None] if mem is None else np.column_stack([self.core_mhz, mem])
        work = self.workload
        return {
            "format": self.format,
            "path": self.path,
            "rows": len(self),
            "reference_mhz": None,
            "columns": list(self.columns),
            "workloads": len(np.unique(work)),
            "benchmark_names": list(dict.fromkeys(work.tolist())),
            "configurations": len(np.unique(configs, axis=0)),
            "knob": self.knob,
            ("power_limit_w_levels" if self.knob == "power-limit" else "core_mhz_levels"): _levels(self.core_mhz),
            "mem_mhz_levels": [] if mem is None else _levels(mem),
            "metrics": list(self.metrics),
            "ranges": {
                "time_ms": _range(self.time_ms),
                **({"watts": _range(watts)} if watts is not None else {}),
            },
            "skipped": [str(p) for p in self.skipped],
        }
