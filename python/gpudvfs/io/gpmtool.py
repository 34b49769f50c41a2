"""gpmTOOL CSV (hpc-ulisboa/gpupowermodel): the power model's measurement format.

```
2                       number of V-F domains
975,3505                reference frequency of each domain, MHz
7,1                     number of components in each domain
SP,INT,...,DRAM         component names, domain 0's first
[name,]P,fc,fm,U1..Un   one row per measurement (power variant)
name,U1..Un             one row per application (utilization-only variant)
```
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np

from .datasets import PowerDataset, UtilizationTable
from .source import Source, csv_line, format_number

HEADER_LINES = 4


def _header(src: Source) -> tuple[tuple[float, ...], tuple[int, ...], tuple[str, ...]]:
    if len(src.lines) < HEADER_LINES:
        raise src.error(
            f"truncated header: expected {HEADER_LINES} header lines (domains, reference MHz, "
            f"components per domain, component names), found {len(src.lines)}")
    rec = dict(src.records(0))
    for i in range(1, HEADER_LINES + 1):
        if i not in rec:
            raise src.error("blank header line", i)
    src.expect_fields(rec[1], 1, 1)
    n_dom = src.number(rec[1][0], 1, 1, "domains", minimum=1)
    if not n_dom.is_integer():
        raise src.error(f"expected a whole number of domains, found {rec[1][0]!r}", 1, 1)
    n_dom = int(n_dom)
    src.expect_fields(rec[2], 2, n_dom)
    ref = tuple(src.number(t, 2, j + 1, "reference MHz", minimum=0, exclusive=True)
                for j, t in enumerate(rec[2]))
    src.expect_fields(rec[3], 3, n_dom)
    sizes = []
    for j, t in enumerate(rec[3]):
        v = src.number(t, 3, j + 1, "components", minimum=0)
        if not v.is_integer():
            raise src.error(f"expected a whole number of components, found {t!r}", 3, j + 1)
        sizes.append(int(v))
    if sum(sizes) == 0:
        raise src.error("expected at least one component", 3, 1)
    src.expect_fields(rec[4], 4, sum(sizes))
    names = tuple(n.strip() for n in rec[4])
    for j, n in enumerate(names):
        if not n:
            raise src.error("empty component name", 4, j + 1)
        if names.index(n) != j:
            raise src.error(f"component name {n!r} repeated", 4, j + 1)
    return ref, tuple(sizes), names


def read_gpmtool(path: str | Path, on_invalid: str = "raise") -> PowerDataset | UtilizationTable:
    """Read a gpmTOOL CSV, power or utilization-only variant (told apart by the row width)."""
    src = Source(path, on_invalid)
    ref, sizes, comps = _header(src)
    n_dom, n_comp = len(sizes), len(comps)
    body = list(src.records(HEADER_LINES))
    if not body:
        raise src.error("no measurement rows after the header", HEADER_LINES + 1)
    widths = {"unnamed": 1 + n_dom + n_comp, "named": 2 + n_dom + n_comp, "utils": 1 + n_comp}
    # The variant is the row width most rows share, so one bad row cannot change it.
    counts = Counter(len(f) for _, f in body)
    variant = next((v for w, _ in counts.most_common() for v, vw in widths.items() if vw == w), None)
    if variant is None:
        first_line, first = body[0]
        raise src.error(
            f"expected {widths['unnamed']} fields (P, {n_dom} frequencies, {n_comp} utilizations), "
            f"{widths['named']} (with a leading name) or {widths['utils']} (name and utilizations), "
            f"found {len(first)}", first_line)
    if variant == "utils":
        return _read_utils(src, body, ref, sizes, comps)
    return _read_power(src, body, ref, sizes, comps, named=variant == "named")


def _utils(src: Source, fields: list[str], line: int, start: int, comps) -> tuple[float, ...]:
    return tuple(src.utilization(fields[start + j], line, start + j + 1, c) for j, c in enumerate(comps))


def _read_power(src, body, ref, sizes, comps, named: bool) -> PowerDataset:
    n_dom = len(sizes)
    off = 1 if named else 0
    width = off + 1 + n_dom + len(comps)

    def parse(line, f):
        src.expect_fields(f, line, width)
        name = f[0].strip() if named else ""
        if named and not name:
            raise src.error("empty benchmark name", line, 1, "name")
        watts = src.number(f[off], line, off + 1, "P", minimum=0)
        freqs = tuple(src.number(f[off + 1 + d], line, off + 2 + d, f"f{d}", minimum=0, exclusive=True)
                      for d in range(n_dom))
        return name, watts, freqs, _utils(src, f, line, off + 1 + n_dom, comps)

    parsed = src.parse_rows(body, parse)
    # A benchmark is its name plus utilization vector: names recur across sweeps.
    parsed = src.drop_duplicates(parsed, lambda r: (r[0], r[3], r[2]), "(benchmark, frequencies)")
    skipped = src.finish(parsed)
    rows = [r for _, r in parsed]
    ids: dict[tuple, int] = {}
    labels: list[str] = []
    per_name: dict[str, int] = {}
    bench = np.empty(len(rows), dtype=np.int64)
    for i, (name, _, _, u) in enumerate(rows):
        key = (name, u)
        if key not in ids:
            ids[key] = len(labels)
            k = per_name[name] = per_name.get(name, 0) + 1
            base = name if named else "bench"
            labels.append(base if named and k == 1 else f"{base}#{k}")
        bench[i] = ids[key]
    return PowerDataset(
        path=src.path,
        reference_mhz=ref,
        domain_sizes=sizes,
        components=comps,
        watts=np.array([r[1] for r in rows], dtype=np.float64),
        freqs_mhz=np.array([r[2] for r in rows], dtype=np.float64).reshape(len(rows), n_dom),
        utilization=np.array([r[3] for r in rows], dtype=np.float64).reshape(len(rows), len(comps)),
        row_names=tuple(r[0] for r in rows) if named else None,
        benchmark=bench,
        benchmarks=tuple(labels),
        skipped=skipped,
    )


def _read_utils(src, body, ref, sizes, comps) -> UtilizationTable:
    def parse(line, f):
        src.expect_fields(f, line, 1 + len(comps))
        name = f[0].strip()
        if not name:
            raise src.error("empty application name", line, 1, "name")
        return name, _utils(src, f, line, 1, comps)

    parsed = src.drop_duplicates(src.parse_rows(body, parse), lambda r: r[0], "application")
    skipped = src.finish(parsed)
    rows = [r for _, r in parsed]
    return UtilizationTable(
        path=src.path,
        reference_mhz=ref,
        domain_sizes=sizes,
        components=comps,
        names=tuple(r[0] for r in rows),
        utilization=np.array([r[1] for r in rows], dtype=np.float64).reshape(len(rows), len(comps)),
        skipped=skipped,
    )


def _header_lines(ds: PowerDataset | UtilizationTable) -> list[str]:
    return [
        str(len(ds.domain_sizes)),
        ",".join(format_number(f) for f in ds.reference_mhz),
        ",".join(str(n) for n in ds.domain_sizes),
        csv_line(ds.components),
    ]


def write_gpmtool(ds: PowerDataset | UtilizationTable, path: str | Path) -> None:
    """Write a dataset in the gpmTOOL format it was read from; floats round-trip exactly."""
    lines = _header_lines(ds)
    if isinstance(ds, UtilizationTable):
        for name, u in zip(ds.names, ds.utilization):
            lines.append(csv_line([name, *map(format_number, u)]))
    else:
        for i in range(len(ds)):
            vals = [ds.watts[i], *ds.freqs_mhz[i], *ds.utilization[i]]
            fields = ([ds.row_names[i]] if ds.row_names is not None else []) + [format_number(v) for v in vals]
            lines.append(csv_line(fields))
    Path(path).write_text("\n".join(lines) + "\n")
