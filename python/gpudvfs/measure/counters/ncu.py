"""Nsight Compute CLI (``ncu``): reading its ``--csv`` output, building and running its command.

Two CSV forms, told apart by the header:

- wide (``--page raw``): ``"ID","Process ID",...,"Kernel Name",...`` then one column per metric,
  a units row (``""``, ``"%"``, ``"ns"``...; its ID field is empty) and one row per kernel launch;
- long (``--metrics ...`` or ``--page details``): one row per (launch, metric) with
  ``"Section Name","Metric Name","Metric Unit","Metric Value"`` and, in newer versions,
  ``"Rule Name","Rule Type","Rule Description","Estimated Speedup Type","Estimated Speedup"``.
  Metric rows may be shorter than the header (a trailing comma instead of the five rule
  fields); rule rows have empty metric fields and become :class:`Rule` entries. Metrics of the
  ``--metrics`` section ("Command line profiler metrics") keep their name; metrics of other
  sections, which carry display names that repeat across sections ("Memory Throughput" is a
  percentage in one and a rate in another), are stored as ``"<section>: <name>"``.

Either form may be preceded by application output and ``==PROF==``/``==ERROR==``/``==WARNING==``
lines (kept in the report). A file with ``==ERROR==`` lines and no CSV raises
:class:`ProfilerError` quoting them.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path

from ...errors import GpudvfsError, GpudvfsWarning, InputError
from ._records import CounterReport, KernelCounters, ProfilerError, Rule, Text
from ._units import parse_number
from ._values import store

HEADER_START = ("ID", "Process ID")
METRICS_SECTION = "Command line profiler metrics"
# Identification columns of both forms (everything else in a wide header is a metric).
INFO_COLUMNS = frozenset({
    "ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Kernel Time", "Context",
    "Stream", "Block Size", "Grid Size", "Device", "CC", "Function Name", "Demangled Name",
    "Mangled Name", "Launch Name",
})
LONG_COLUMNS = ("Section Name", "Metric Name", "Metric Unit", "Metric Value")
RULE_COLUMNS = ("Rule Name", "Rule Type", "Rule Description", "Estimated Speedup Type",
                "Estimated Speedup")


def read_ncu_csv(path: str | Path) -> CounterReport:
    """Parse a file written by ``ncu --csv`` (stdout redirect or ``--log-file``)."""
    return _parse(Text.from_path(path))


def parse_ncu_csv(text: str, source: str = "<ncu output>") -> CounterReport:
    """Parse ``ncu --csv`` output held in a string; errors name ``source``."""
    return _parse(Text(source, text.splitlines()))


def _parse(src: Text) -> CounterReport:
    h = src.find_header((HEADER_START,), "Nsight Compute")
    header = [c.strip() for c in src.fields(h)]
    for j, name in enumerate(header):
        if header.index(name) != j:
            raise src.error(f"column name {name!r} repeated", h + 1, j + 1)
    messages, other = src.split_preamble(h)
    long = all(c in header for c in LONG_COLUMNS)
    rows = []
    for i, fields in src.data_rows(h, messages):
        # Ragged rows: trailing fields may be missing, or present and empty.
        if len(fields) > len(header):
            extra = next((k for k in range(len(header), len(fields)) if fields[k].strip()), None)
            if extra is not None:
                raise src.error(f"expected {len(header)} fields, found {len(fields)}", i + 1, extra + 1)
            fields = fields[:len(header)]
        # Long-form metric rows may end early, but not before the metric value.
        least = len(header) if not long else header.index("Metric Value") + 1
        if len(fields) < least:
            raise src.error(f"expected {least} fields, found {len(fields)}", i + 1, len(fields) + 1)
        rows.append((i + 1, fields + [""] * (len(header) - len(fields))))
    if not rows:
        raise src.error("Nsight Compute CSV header but no kernel rows", h + 1)
    kernels = _long(src, header, rows) if long else _wide(src, header, rows)
    _number_invocations(kernels)
    return CounterReport(src.source, "ncu", "long" if long else "wide", kernels, messages, other)


def _kernel_id(src: Text, text: str, line: int) -> int:
    value = parse_number(text)
    if value is None or not value.is_integer() or value < 0:
        raise src.error(f"expected a kernel ID (a whole number), found {text!r}", line, 1, "ID")
    return int(value)


def _wide(src: Text, header: list[str], rows: list[tuple[int, list[str]]]) -> list[KernelCounters]:
    units = [""] * len(header)
    if rows[0][1][0].strip() == "":  # the units row has no ID
        units_line, units = rows[0]
        rows = rows[1:]
        if not rows:
            raise src.error("Nsight Compute CSV has a units row but no kernel rows", units_line)
    name_col = header.index("Kernel Name") if "Kernel Name" in header else None
    if name_col is None:
        raise src.error("no 'Kernel Name' column in the Nsight Compute header")
    kernels = []
    for line, f in rows:
        rec = KernelCounters(name=f[name_col], id=_kernel_id(src, f[0], line), invocation=None,
                             tool="ncu", line=line)
        for j, col in enumerate(header):
            if col in INFO_COLUMNS:
                if col not in ("ID", "Kernel Name"):
                    rec.info[col] = f[j]
            else:
                store(rec, col, f[j], units[j], src, line, j + 1)
        kernels.append(rec)
    return kernels


def _long(src: Text, header: list[str], rows: list[tuple[int, list[str]]]) -> list[KernelCounters]:
    col = {c: header.index(c) for c in header}
    for need in ("ID", "Kernel Name"):
        if need not in col:
            raise src.error(f"no {need!r} column in the Nsight Compute header")
    by_id: dict[int, KernelCounters] = {}
    for line, f in rows:
        kid = _kernel_id(src, f[0], line)
        name = f[col["Kernel Name"]]
        rec = by_id.get(kid)
        if rec is None:
            rec = by_id[kid] = KernelCounters(name=name, id=kid, invocation=None, tool="ncu", line=line)
            rec.info = {c: f[j] for c, j in col.items()
                        if c in INFO_COLUMNS and c not in ("ID", "Kernel Name")}
        elif rec.name != name:
            raise src.error(f"kernel ID {kid} is {rec.name!r} on line {rec.line} but {name!r} here",
                            line, col["Kernel Name"] + 1, "Kernel Name")
        section = f[col["Section Name"]]
        metric = f[col["Metric Name"]].strip()
        if metric:
            key = metric if section in ("", METRICS_SECTION) else f"{section}: {metric}"
            store(rec, key, f[col["Metric Value"]], f[col["Metric Unit"]], src, line,
                  col["Metric Value"] + 1)
            continue
        rule = f[col["Rule Name"]].strip() if "Rule Name" in col else ""
        if not rule:
            raise src.error("row has neither a metric nor a rule name", line, col["Metric Name"] + 1,
                            "Metric Name")
        get = lambda c: f[col[c]] if c in col else ""  # noqa: E731
        speedup = get("Estimated Speedup").strip()
        value = parse_number(speedup) if speedup else None
        if speedup and value is None:
            raise src.error(f"expected a number, found {speedup!r}", line, col["Estimated Speedup"] + 1,
                            "Estimated Speedup")
        rec.rules.append(Rule(section, rule, get("Rule Type"), get("Rule Description"),
                              get("Estimated Speedup Type"), value))
    return list(by_id.values())


def _number_invocations(kernels: list[KernelCounters]) -> None:
    seen: dict[str, int] = {}
    for k in kernels:
        k.invocation = seen.get(k.name, 0)
        seen[k.name] = k.invocation + 1


# --------------------------------------------------------------------------- collection

class NcuNotFoundError(GpudvfsError, FileNotFoundError):
    """The Nsight Compute CLI is not installed or not on PATH."""


class CounterPermissionError(GpudvfsError, PermissionError):
    """The GPU performance counters need a privilege the process lacks (ERR_NVGPUCTRPERM)."""


class NcuTimeoutError(GpudvfsError, TimeoutError):
    """ncu (and the profiled application) did not finish in time and were stopped."""


PERMISSION_FIX = (
    "GPU performance counters are restricted to administrators (ERR_NVGPUCTRPERM). Either run "
    "the profiler as root (sudo), or allow all users: load the NVIDIA kernel module with "
    "NVreg_RestrictProfilingToAdminUsers=0 (e.g. 'options nvidia "
    "NVreg_RestrictProfilingToAdminUsers=0' in a file under /etc/modprobe.d/, then rebuild the "
    "initramfs and reboot; 'grep RmProfilingAdminOnly /proc/driver/nvidia/params' shows 0 when it "
    "took effect). On Windows: NVIDIA Control Panel > Developer > Manage GPU Performance Counters "
    "> allow access to all users. In a container, also add the SYS_ADMIN capability. See "
    "https://developer.nvidia.com/ERR_NVGPUCTRPERM")


def _check_metric(name: str) -> str:
    if not isinstance(name, str) or not name.strip():
        raise InputError(f"metric names must be non-empty strings, got {name!r}")
    if "," in name or any(ch.isspace() for ch in name):
        raise InputError(f"metric name {name!r} contains a comma or whitespace; pass one name per item")
    return name


def ncu_command(metrics: Sequence[str], target_argv: Sequence[str], *, ncu: str = "ncu",
                target_processes: str = "all", kernel_name: str | None = None,
                launch_skip: int | None = None, launch_count: int | None = None,
                log_file: str | Path | None = None, extra_args: Sequence[str] = ()) -> list[str]:
    """The exact ``ncu`` command line that collects ``metrics`` for every kernel that
    ``target_argv`` launches, as CSV in base units (no auto-scaling, no rounding loss).

    ``kernel_name`` filters kernels (``regex:...`` allowed, as ncu takes it); ``launch_skip`` /
    ``launch_count`` select launches; ``log_file`` sends ncu's output to a file, keeping the
    application's own stdout out of the CSV.
    """
    if isinstance(metrics, str):
        raise InputError("metrics must be a sequence of names, not one string")
    names = [_check_metric(m) for m in metrics]
    if not names:
        raise InputError("no metrics to collect")
    if isinstance(target_argv, str) or not target_argv:
        raise InputError("target_argv must be a non-empty sequence: the program and its arguments")
    if target_processes not in ("all", "application-only"):
        raise InputError(f"target_processes must be 'all' or 'application-only', got {target_processes!r}")
    cmd = [ncu, "--csv", "--print-units", "base", "--metrics", ",".join(dict.fromkeys(names)),
           "--target-processes", target_processes]
    if kernel_name is not None:
        if not kernel_name:
            raise InputError("kernel_name must not be empty")
        cmd += ["--kernel-name", kernel_name]
    for flag, value, least in (("--launch-skip", launch_skip, 0), ("--launch-count", launch_count, 1)):
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise InputError(f"{flag[2:].replace('-', '_')} must be a whole number >= {least}, "
                                 f"got {value!r}")
            cmd += [flag, str(value)]
    if log_file is not None:
        cmd += ["--log-file", str(log_file)]
    cmd += [str(a) for a in extra_args]
    cmd += [str(a) for a in target_argv]
    return cmd


def _ncu_problem(text: str) -> str | None:
    return next((ln.strip() for ln in text.splitlines() if "ERR_NVGPUCTRPERM" in ln), None)


def run_ncu(metrics: Sequence[str], target_argv: Sequence[str], *, ncu: str = "ncu",
            timeout_s: float = 600.0, env: Mapping[str, str] | None = None,
            cwd: str | Path | None = None, **options) -> CounterReport:
    """Run ``ncu_command(metrics, target_argv, **options)`` and parse what it wrote.

    ncu's output goes to a temporary ``--log-file`` so the application's stdout cannot mix
    with the CSV. Raises :class:`NcuNotFoundError` when ``ncu`` is not found,
    :class:`CounterPermissionError` (saying which setting fixes it) for ERR_NVGPUCTRPERM,
    :class:`NcuTimeoutError` after ``timeout_s`` (ncu and the application are stopped),
    :class:`ProfilerError` quoting ncu's ``==ERROR==`` lines when it produced no counters.
    A non-zero exit with counters present returns them and warns.
    """
    if not timeout_s > 0:
        raise InputError(f"timeout_s must be > 0, got {timeout_s!r}")
    exe = shutil.which(ncu, path=(env or os.environ).get("PATH"))
    if exe is None:
        raise NcuNotFoundError(
            f"Nsight Compute CLI {ncu!r} not found on PATH: install Nsight Compute (it ships with "
            "the CUDA toolkit, e.g. /usr/local/cuda/bin/ncu) or pass ncu='/path/to/ncu'")
    with tempfile.TemporaryDirectory(prefix="gpudvfs-ncu-") as tmp:
        log = Path(tmp) / "ncu.csv"
        cmd = ncu_command(metrics, target_argv, ncu=exe, log_file=log, **options)
        # A new session, so a timeout can stop ncu and the application it launched together.
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=dict(env) if env is not None else None, cwd=cwd,
                                start_new_session=True)
        try:
            out, err = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.communicate()
            raise NcuTimeoutError(f"ncu did not finish within {timeout_s:g} s and was stopped "
                                  f"together with the application: {' '.join(cmd)}") from None
        written = log.read_text(encoding="utf-8", errors="replace") if log.exists() else ""
        perm = _ncu_problem(written) or _ncu_problem(err) or _ncu_problem(out)
        if perm is not None:
            raise CounterPermissionError(f"{perm}\n{PERMISSION_FIX}")
        # Without a log file (an older ncu ignoring it) the CSV is on stdout.
        text = written if written.strip() else out
        try:
            report = parse_ncu_csv(text, source=f"ncu output of {' '.join(cmd)}")
        except ProfilerError:
            raise
        except GpudvfsError as e:
            tail = (err.strip().splitlines() or [""])[-1]
            raise ProfilerError.at(f"ncu output of {' '.join(cmd)}",
                                   f"ncu exited with code {proc.returncode} and printed no usable "
                                   f"counters ({e.problem.message}); last stderr line: {tail!r}") from None
        if proc.returncode != 0:
            said = [t for _, t in report.messages if t.startswith(("==ERROR==", "==WARNING=="))]
            warnings.warn(GpudvfsWarning(
                f"ncu exited with code {proc.returncode}; counters of {len(report.kernels)} "
                f"kernel(s) were read. Its errors and warnings: {said}"), stacklevel=2)
        return report
