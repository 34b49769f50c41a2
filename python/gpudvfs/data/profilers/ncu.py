"""Nsight Compute CLI (``ncu``) ``--csv`` output.

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

from pathlib import Path

from gpudvfs.data.profilers.records import CounterReport, KernelCounters, Rule, Text
from gpudvfs.data.profilers.units import parse_number
from gpudvfs.data.profilers.values import store
from gpudvfs.data.source import repeated_at

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
    """Parse a file written by ``ncu --csv`` (stdout redirect or ``--log-file``): its launches, in file order."""
    return _parse(Text.from_path(path))


def parse_ncu_csv(text: str, source: str = "<ncu output>") -> CounterReport:
    """Parse ``ncu --csv`` output held in a string, ``source`` naming it in errors."""
    return _parse(Text(source, text.splitlines()))


def _parse(src: Text) -> CounterReport:
    h = src.find_header((HEADER_START,), "Nsight Compute")
    header = [c.strip() for c in src.fields(h)]
    if (at := repeated_at(header)) is not None:
        raise src.error(f"column name {header[at]!r} repeated", h + 1, at + 1)
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
        def get(c: str, f: list[str] = f) -> str:
            return f[col[c]] if c in col else ""

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
