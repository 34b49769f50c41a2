"""nvprof ``--csv`` metric and event output (Kepler to Volta; nvprof does not profile SM >= 7.5).

Two forms:

- summary (``--metrics ... --csv``): ``"Device","Kernel","Invocations","Metric Name",
  "Metric Description","Min","Max","Avg"`` (``"Event Name"`` and ``"Total"`` for ``--events``),
  one row per (kernel, metric), values carrying their unit (``100.000000%``,
  ``126.024706GB/s``) or a utilization level (``Low (2)``, stored as 2 in unit
  ``"level (0-10)"``). One record per (device, kernel): ``Avg`` in ``metrics`` (``Total`` for
  events), ``(Min, Max)`` in ``extrema``, ``invocations`` from the file, ``id`` None;
- trace (``--print-gpu-trace``): ``"Device","Context","Stream","Kernel","Correlation_ID",`` then
  one column per metric, an unquoted units row (``%``, ``MB/s``...; first field empty) and one
  row per launch, ``id`` = correlation id.

Throughput units are binary (GB = 2^30 bytes); see :mod:`.units`.
"""

from __future__ import annotations

from pathlib import Path

from gpudvfs.data.profilers.records import CounterReport, KernelCounters, Text
from gpudvfs.data.profilers.units import normalize_unit, parse_number, split_value_unit
from gpudvfs.data.profilers.values import store

SUMMARY_START = ("Device", "Kernel", "Invocations")
TRACE_START = ("Device", "Context", "Stream", "Kernel")
TRACE_INFO = frozenset({"Device", "Context", "Stream", "Kernel", "Correlation_ID", "Start",
                        "Duration", "Grid X", "Grid Y", "Grid Z", "Block X", "Block Y", "Block Z",
                        "Registers Per Thread", "Static SMem", "Dynamic SMem", "Name", "Size",
                        "Throughput", "SrcMemType", "DstMemType", "Unified Memory", "Virtual Address"})


def read_nvprof_csv(path: str | Path) -> CounterReport:
    """Parse a file written by ``nvprof --csv`` (metrics or events): kernels (summary) or launches (trace)."""
    return _parse(Text.from_path(path))


def parse_nvprof_csv(text: str, source: str = "<nvprof output>") -> CounterReport:
    """Parse ``nvprof --csv`` output held in a string, ``source`` naming it in errors."""
    return _parse(Text(source, text.splitlines()))


def _rows(src: Text, h: int, width: int, messages: list[tuple[int, str]]) -> list[tuple[int, list[str]]]:
    rows = []
    for i, f in src.data_rows(h, messages):
        if len(f) != width:
            raise src.error(f"expected {width} fields, found {len(f)}", i + 1, min(len(f), width) + 1)
        rows.append((i + 1, f))
    if not rows:
        raise src.error("nvprof CSV header but no rows", h + 1)
    return rows


def _parse(src: Text) -> CounterReport:
    h = src.find_header((SUMMARY_START, TRACE_START), "nvprof")
    header = [c.strip() for c in src.fields(h)]
    messages, other = src.split_preamble(h)
    rows = _rows(src, h, len(header), messages)
    if tuple(header[:3]) == SUMMARY_START:
        kernels = _summary(src, header, rows)
        form = "long"
    else:
        kernels = _trace(src, header, rows)
        form = "wide"
    return CounterReport(src.source, "nvprof", form, kernels, messages, other)


def _value(src: Text, text: str, line: int, column: int, name: str) -> tuple[float, str] | None:
    """A summary cell as (value in base unit, base unit); None for a non-numeric text."""
    plain = parse_number(text)
    if plain is not None:
        return plain, ""
    vu = split_value_unit(text)
    if vu is None:
        return None
    factor, base = normalize_unit(vu[1])
    if factor == 1.0 and base == vu[1] and vu[1] not in ("%", "level (0-10)"):
        raise src.error(f"unknown unit {vu[1]!r} in {text!r}", line, column, name)
    return vu[0] * factor, base


def _summary(src: Text, header: list[str], rows: list[tuple[int, list[str]]]) -> list[KernelCounters]:
    col = {c: j for j, c in enumerate(header)}
    name_col = col.get("Metric Name", col.get("Event Name"))
    if name_col is None:
        raise src.error("expected a 'Metric Name' or 'Event Name' column", 1)
    value_col = "Total" if "Event Name" in col and "Total" in col else "Avg"
    for need in ("Min", "Max", value_col):
        if need not in col:
            raise src.error(f"no {need!r} column in the nvprof header")
    records: dict[tuple[str, str], KernelCounters] = {}
    for line, f in rows:
        key = (f[col["Device"]], f[col["Kernel"]])
        inv = parse_number(f[col["Invocations"]])
        if inv is None or not inv.is_integer() or inv < 1:
            raise src.error(f"expected a whole number of invocations, found {f[col['Invocations']]!r}",
                            line, col["Invocations"] + 1, "Invocations")
        rec = records.get(key)
        if rec is None:
            rec = records[key] = KernelCounters(name=key[1], id=None, invocation=None, tool="nvprof",
                                                invocations=int(inv), line=line,
                                                info={"Device": key[0]})
        elif rec.invocations != int(inv):
            raise src.error(f"kernel {key[1]!r} has {rec.invocations} invocations on line {rec.line} "
                            f"but {int(inv)} here", line, col["Invocations"] + 1, "Invocations")
        metric = f[name_col].strip()
        if metric in rec.metrics or metric in rec.text:
            raise src.error(f"metric {metric!r} appears twice for kernel {key[1]!r}", line, name_col + 1)
        cells = {c: _value(src, f[col[c]], line, col[c] + 1, metric) for c in ("Min", "Max", value_col)}
        main = cells[value_col]
        if main is None:
            if any(cells[c] is not None for c in ("Min", "Max")):
                raise src.error(f"{value_col} is not a number but Min/Max are: {f[col[value_col]]!r}",
                                line, col[value_col] + 1, value_col)
            rec.text[metric] = f[col[value_col]].strip()
            continue
        low, high = cells["Min"], cells["Max"]
        units = {cell[1] for cell in cells.values() if cell is not None}
        if low is None or high is None or len(units) != 1:
            raise src.error(f"Min, Max and {value_col} must be numbers of one kind, found "
                            f"{[f[col[c]] for c in ('Min', 'Max', value_col)]}", line, col["Min"] + 1)
        rec.metrics[metric] = main[0]
        rec.units[metric] = main[1]
        rec.extrema[metric] = (low[0], high[0])
    return list(records.values())


def _trace(src: Text, header: list[str], rows: list[tuple[int, list[str]]]) -> list[KernelCounters]:
    units = [""] * len(header)
    if rows[0][1][0].strip() == "":
        units = rows[0][1]
        rows = rows[1:]
    kernel_col = header.index("Kernel")
    kernels = []
    seen: dict[str, int] = {}
    for line, f in rows:
        cid = None
        if "Correlation_ID" in header:
            v = parse_number(f[header.index("Correlation_ID")])
            if v is None or not v.is_integer():
                raise src.error(f"expected a correlation id, found {f[header.index('Correlation_ID')]!r}",
                                line, header.index("Correlation_ID") + 1, "Correlation_ID")
            cid = int(v)
        name = f[kernel_col]
        invocation = seen.get(name, 0)
        rec = KernelCounters(name=name, id=cid, invocation=invocation, tool="nvprof", line=line)
        seen[name] = invocation + 1
        for j, c in enumerate(header):
            if c in TRACE_INFO:
                if c != "Kernel":
                    rec.info[c] = f[j]
                continue
            level = split_value_unit(f[j])
            if level is not None and level[1] == "level (0-10)" and not units[j]:
                rec.metrics[c] = level[0]
                rec.units[c] = level[1]
                continue
            store(rec, c, f[j], units[j], src, line, j + 1)
        kernels.append(rec)
    return kernels
