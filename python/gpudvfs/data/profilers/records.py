"""The uniform result of every profiler parser, and the line handling they share."""

from __future__ import annotations

import csv
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpudvfs.errors import DataFileError

# Tool messages: Nsight Compute's "==PROF==", "==ERROR==", "==WARNING==", "==INFO==" and
# nvprof's "==12345==" (process id) prefixes.
MESSAGE = re.compile(r"^==(PROF|ERROR|WARNING|INFO|\d+)==")
# Error lines of either tool: ncu's "==ERROR== ..." and nvprof's "==12345== Error: ...".
ERROR_LINE = re.compile(r"^==(ERROR==|\d+== Error)")


class ProfilerError(DataFileError):
    """The profiler itself reported an error and printed no counters; the message quotes it."""


@dataclass(frozen=True)
class Rule:
    """One Nsight Compute rule result (rows whose metric fields are empty).

    ``type`` is its result type (e.g. ``OPT``, ``WRN``); ``speedup_type`` how the estimated
    ``speedup`` is measured (``local``, ``global``), where given.
    """

    section: str
    name: str
    type: str
    description: str
    speedup_type: str = ""
    speedup: float | None = None


@dataclass
class KernelCounters:
    """The counters of one kernel launch (or, for nvprof's summary, of ``invocations`` launches).

    Parameters
    ----------
    id : int or None
        The launch's ID in the file (Nsight Compute), None where the tool gives none.
    invocation : int or None
        The launches of the same kernel name before this one in the file (0 for the first); None
        in nvprof's summary, which has no per-launch rows.
    tool : str
        ``ncu`` or ``nvprof``.
    metrics : dict of str to float
        Every numeric value converted to ``units[name]``, the base unit (see :mod:`.units`).
    text : dict of str to str
        The values that are not numbers (``n/a``, names, modes).
    lists : dict of str to tuple of float
        The ``"; "``-joined lists of the 2019 Nsight Compute raw page.
    extrema : dict of str to tuple of (float, float)
        nvprof's (min, max) beside the average kept in ``metrics``.
    info : dict of str to str
        The identification columns (process, context, stream, block and grid size, device, CC ...).
    line : int
        The 1-based line the launch starts on.
    """

    name: str
    id: int | None
    invocation: int | None
    invocations: int = 1
    tool: str = ""
    metrics: dict[str, float] = field(default_factory=dict)
    units: dict[str, str] = field(default_factory=dict)
    text: dict[str, str] = field(default_factory=dict)
    lists: dict[str, tuple[float, ...]] = field(default_factory=dict)
    extrema: dict[str, tuple[float, float]] = field(default_factory=dict)
    info: dict[str, str] = field(default_factory=dict)
    rules: list[Rule] = field(default_factory=list)
    line: int = 0

    def get(self, metric: str) -> float | None:
        """A metric's value in its base unit; None where the launch has no numeric value of it."""
        return self.metrics.get(metric)

    def __contains__(self, metric: str) -> bool:
        """Whether the launch has a numeric value of a metric."""
        return metric in self.metrics


@dataclass
class CounterReport:
    """A parsed profiler output: the kernels in file order plus everything else the file said.

    Parameters
    ----------
    tool : str
        ``ncu`` or ``nvprof``.
    form : str
        ``wide`` (one row per kernel: ncu ``--page raw``, nvprof ``--print-gpu-trace``) or ``long``
        (one row per kernel and metric: ncu ``--metrics``/details page, nvprof summary).
    messages : list of tuple of (int, str)
        The tool's own lines (``==PROF==``, ``==ERROR==``, ...) with their 1-based line numbers.
    other_lines : list of tuple of (int, str)
        The application's output, likewise.
    """

    path: str
    tool: str
    form: str
    kernels: list[KernelCounters]
    messages: list[tuple[int, str]] = field(default_factory=list)
    other_lines: list[tuple[int, str]] = field(default_factory=list)

    def __len__(self) -> int:
        """The number of launches."""
        return len(self.kernels)

    @property
    def format(self) -> str:
        """The format name `gpudvfs.read` knows it by: the tool."""
        return self.tool

    @property
    def errors(self) -> list[tuple[int, str]]:
        """The tool's error lines, with their 1-based line numbers."""
        return [(n, t) for n, t in self.messages if ERROR_LINE.match(t)]

    def describe(self) -> dict[str, Any]:
        """What the output holds, for `gpudvfs data info`: kernels, devices, metrics, rules, messages."""
        metrics = list(dict.fromkeys(m for k in self.kernels for m in k.metrics))
        devices = sorted({k.info.get("Device", "") for k in self.kernels} - {""})
        return {
            "format": self.tool, "path": self.path, "form": self.form, "rows": len(self.kernels),
            "kernels": len({k.name for k in self.kernels}), "launches": len(self.kernels),
            "kernel_names": list(dict.fromkeys(k.name for k in self.kernels)), "devices": devices,
            "metrics": metrics, "rules": sum(len(k.rules) for k in self.kernels),
            "messages": [t for _, t in self.messages], "errors": [t for _, t in self.errors],
        }

    def find(self, name_contains: str, invocation: int = 0) -> KernelCounters:
        """The ``invocation``-th launch (from 0) of the kernel whose name contains ``name_contains``.

        Raises `KeyError` if the text matches several kernels' names, or the kernel has no such launch.
        """
        hits = [k for k in self.kernels if name_contains in k.name]
        names = sorted({k.name for k in hits})
        if len(names) > 1:
            raise KeyError(f"{name_contains!r} matches several kernels: {names}")
        chosen = [k for k in hits if (k.invocation or 0) == invocation]
        if not chosen:
            raise KeyError(f"no launch {invocation} of a kernel matching {name_contains!r} in {self.path}")
        return chosen[0]


@dataclass
class Text:
    """A file's lines with the helpers the parsers need; errors name the ``source`` and line."""

    source: str
    lines: list[str]

    @classmethod
    def from_path(cls, path: str | Path) -> Text:
        """Read a file's lines; `DataFileError` if it is missing, not a regular file, or not UTF-8 text."""
        p = Path(path)
        if not p.is_file():
            raise DataFileError.at(path, "file not found" if not p.exists() else "not a regular file")
        try:
            text = p.read_text(encoding="utf-8-sig")
        except UnicodeDecodeError as e:
            raise DataFileError.at(path, f"not UTF-8 text ({e.reason} at byte {e.start})") from None
        return cls(str(path), text.splitlines())

    def error(self, message: str, line: int | None = None, column: int | None = None,
              column_name: str | None = None) -> DataFileError:
        """The located `DataFileError` of a problem in this text (1-based line and column), to raise."""
        return DataFileError.at(self.source, message, line, column, column_name)

    def fields(self, index: int) -> list[str]:
        """The CSV fields of the line at 0-based ``index``; `DataFileError` if it is not CSV."""
        try:
            return next(csv.reader([self.lines[index]]))
        except csv.Error as e:  # a field over the csv module's limit (128 KB), a stray quote
            raise self.error(f"not a CSV line ({e})", index + 1) from None

    def find_header(self, starts: tuple[tuple[str, ...], ...], tool: str) -> int:
        """The 0-based index of the first line whose leading CSV fields are one of ``starts``.

        Raises `ProfilerError` quoting the tool's ``==ERROR==`` lines if there is no header and it
        printed some, else `DataFileError`.
        """
        for i, line in enumerate(self.lines):
            if MESSAGE.match(line) or not line.startswith('"'):
                continue
            head = self.fields(i)
            if any(tuple(head[:len(s)]) == s for s in starts):
                return i
        errs = [(i + 1, ln.strip()) for i, ln in enumerate(self.lines) if ERROR_LINE.match(ln)]
        if errs:
            quoted = "; ".join(repr(t) for _, t in errs)
            raise ProfilerError.at(self.source, f"{tool} reported an error and printed no counters: "
                                   f"{quoted}", errs[0][0])
        warns = [ln.strip() for ln in self.lines if ln.startswith("==WARNING==")]
        hint = f" (it warned: {'; '.join(repr(w) for w in warns)})" if warns else ""
        want = " or ".join(",".join(f'"{f}"' for f in s) for s in starts)
        raise self.error(f"no {tool} CSV header found: expected a line starting with {want}{hint}")

    def data_rows(self, header: int, messages: list[tuple[int, str]]) -> Iterator[tuple[int, list[str]]]:
        """Yield (0-based index, fields) of every data line after the header.

        The tool's ``==...`` messages among them go to ``messages`` as (1-based line, text).
        """
        for i in range(header + 1, len(self.lines)):
            line = self.lines[i]
            if not line.strip():
                continue
            if line.startswith("=="):
                messages.append((i + 1, line))
                continue
            yield i, self.fields(i)

    def split_preamble(self, header: int) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
        """The tool's messages and the application's output before the header line, each as (1-based line, text)."""
        messages: list[tuple[int, str]] = []
        other: list[tuple[int, str]] = []
        for i in range(header):
            line = self.lines[i]
            if not line.strip():
                continue
            (messages if MESSAGE.match(line) else other).append((i + 1, line))
        return messages, other
