"""Collecting counters with the Nsight Compute CLI.

The exact ``ncu`` command line for a set of metrics, and running it with the failures a user
meets (not installed, no permission, hung application) turned into errors that say what to do.
For GPUs before Volta, the exact ``nvprof`` command line (printed for the user, not run here).
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
from typing import Any

from gpudvfs.data.profilers.ncu import parse_ncu_csv
from gpudvfs.data.profilers.records import CounterReport, ProfilerError
from gpudvfs.errors import DataFileError, GpudvfsError, GpudvfsWarning, InputError
from gpudvfs.limits import is_count


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


def _names(names: Sequence[str], what: str, target_argv: Sequence[str]) -> list[str]:
    """A profiler command's checked ``names`` (metrics or events), each once, and a check of its target."""
    if isinstance(names, str):
        raise InputError(f"{what} must be a sequence of names, not one string")
    if not names:
        raise InputError(f"no {what} to collect")
    if isinstance(target_argv, str) or not target_argv:
        raise InputError("target_argv must be a non-empty sequence: the program and its arguments")
    return list(dict.fromkeys(map(_check_metric, names)))


def ncu_command(metrics: Sequence[str], target_argv: Sequence[str], *, ncu: str = "ncu",
                target_processes: str = "all", kernel_name: str | None = None,
                launch_skip: int | None = None, launch_count: int | None = None,
                log_file: str | Path | None = None, extra_args: Sequence[str] = ()) -> list[str]:
    """The exact ``ncu`` command line that collects metrics for every kernel a program launches, as CSV in base units.

    Base units: no auto-scaling, no rounding loss. ``target_processes`` is ``"all"`` (child
    processes too) or ``"application-only"``; ``kernel_name`` keeps kernels of this name
    (``regex:...`` allowed); ``log_file`` keeps the application's own stdout out of the CSV;
    ``extra_args`` go before the program. `InputError` where a metric name or an option is invalid.
    """
    names = _names(metrics, "metrics", target_argv)
    if target_processes not in ("all", "application-only"):
        raise InputError(f"target_processes must be 'all' or 'application-only', got {target_processes!r}")
    cmd = [ncu, "--csv", "--print-units", "base", "--metrics", ",".join(names),
           "--target-processes", target_processes]
    if kernel_name is not None:
        if not kernel_name:
            raise InputError("kernel_name must not be empty")
        cmd += ["--kernel-name", kernel_name]
    for flag, value, least in (("--launch-skip", launch_skip, 0), ("--launch-count", launch_count, 1)):
        if value is not None:
            if not is_count(value, least):
                raise InputError(f"{flag[2:].replace('-', '_')} must be a whole number >= {least}, "
                                 f"got {value!r}")
            cmd += [flag, str(value)]
    if log_file is not None:
        cmd += ["--log-file", str(log_file)]
    cmd += [str(a) for a in extra_args]
    cmd += [str(a) for a in target_argv]
    return cmd


def nvprof_command(metrics: Sequence[str], target_argv: Sequence[str], *, events: Sequence[str] = (),
                   nvprof: str = "nvprof", log_file: str | Path | None = None) -> list[str]:
    """The exact ``nvprof`` command line that collects metrics for every kernel a program launches, as CSV.

    Metrics alone give the summary form (one record per kernel, averaged over its launches); with
    events it is the GPU trace (one row per launch), where events and metrics share a row rather
    than two tables. ``log_file`` keeps the application's own stdout out of the CSV. `InputError`
    where a metric or event name is invalid.
    """
    names = _names(metrics, "metrics", target_argv)
    cmd = [nvprof, "--csv"] + (["--log-file", str(log_file)] if log_file is not None else [])
    if events:
        cmd += ["--print-gpu-trace", "--events", ",".join(_names(events, "events", target_argv))]
    return cmd + ["--metrics", ",".join(names), *map(str, target_argv)]


def _ncu_problem(text: str) -> str | None:
    return next((ln.strip() for ln in text.splitlines() if "ERR_NVGPUCTRPERM" in ln), None)


def run_ncu(metrics: Sequence[str], target_argv: Sequence[str], *, ncu: str = "ncu",
            timeout_s: float = 600.0, env: Mapping[str, str] | None = None,
            cwd: str | Path | None = None, keep: str | Path | None = None, **options: Any) -> CounterReport:
    """Run ``ncu_command(metrics, target_argv, **options)`` and parse the counters of every kernel profiled.

    ncu's output goes to a temporary ``--log-file`` so the application's stdout cannot mix with the
    CSV; ``keep`` receives it as written (the raw CSV). A non-zero exit with counters present
    returns them and warns. ncu and the application are stopped after ``timeout_s``.

    Raises
    ------
    NcuNotFoundError
        When ``ncu`` is not found.
    CounterPermissionError
        For ERR_NVGPUCTRPERM, saying which setting fixes it.
    NcuTimeoutError
        After ``timeout_s``.
    ProfilerError
        Quoting ncu's ``==ERROR==`` lines, when it produced no counters.
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
        if keep is not None:
            Path(keep).write_text(text, encoding="utf-8")
        try:
            report = parse_ncu_csv(text, source=f"ncu output of {' '.join(cmd)}")
        except ProfilerError:
            raise
        except DataFileError as e:  # the parser's: it names what is wrong in the output
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
