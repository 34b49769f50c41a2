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

from gpudvfs.data.columns import Columns, Field, KeyPart, Strings
from gpudvfs.data.datasets import PowerDataset, UtilizationTable
from gpudvfs.data.source import Source, csv_line, format_number, repeated_at
from gpudvfs.data.utilization import bound_utilization
from gpudvfs.limits import MAX_MHZ, MAX_WATTS

HEADER_LINES = 4
#: The first data rows, whose most common width tells the variant (the file is not read whole for it).
VARIANT_ROWS = 64


def _header(src: Source) -> tuple[tuple[float, ...], tuple[int, ...], tuple[str, ...]]:
    rec = dict(src.head(HEADER_LINES))
    if src.lines_read < HEADER_LINES:
        raise src.error(
            f"truncated header: expected {HEADER_LINES} header lines (domains, reference MHz, "
            f"components per domain, component names), found {src.lines_read}")
    for i in range(1, HEADER_LINES + 1):
        if i not in rec:
            raise src.error("blank header line", i)
    src.expect_fields(rec[1], 1, 1)
    n_dom = src.number(rec[1][0], 1, 1, "domains", minimum=1)
    if not n_dom.is_integer():
        raise src.error(f"expected a whole number of domains, found {rec[1][0]!r}", 1, 1)
    n_dom = int(n_dom)
    src.expect_fields(rec[2], 2, n_dom)
    ref = tuple(src.number(t, 2, j + 1, "reference MHz", minimum=0, exclusive=True, maximum=MAX_MHZ)
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
    if "" in names:
        raise src.error("empty component name", 4, names.index("") + 1)
    if (at := repeated_at(names)) is not None:
        raise src.error(f"component name {names[at]!r} repeated", 4, at + 1)
    return ref, tuple(sizes), names


def read_gpmtool(path: str | Path, on_invalid: str = "raise", clip: bool = False) -> PowerDataset | UtilizationTable:
    """Read a gpmTOOL CSV, power or utilization-only variant (told apart by the row width).

    ``on_invalid`` ``raise`` stops at the first invalid row, ``skip`` leaves it out and records
    it; ``clip`` clips utilizations outside [0, 1] into it with a warning, rather than refuse
    them (`InputError`). Raises `DataFileError` if the header or (with ``raise``) a row cannot be
    read as the format.
    """
    with Source(path, on_invalid) as src:
        ref, sizes, comps = _header(src)
        n_dom, n_comp = len(sizes), len(comps)
        first = src.peek(VARIANT_ROWS)
        if not first:
            raise src.error("no measurement rows after the header", HEADER_LINES + 1)
        widths = {"unnamed": 1 + n_dom + n_comp, "named": 2 + n_dom + n_comp, "utils": 1 + n_comp}
        # The variant is the width most of the first rows share, so one bad row cannot change it.
        counts = Counter(len(f) for _, f in first)
        variant = next((v for w, _ in counts.most_common() for v, vw in widths.items() if vw == w), None)
        if variant is None:
            first_line, fields = first[0]
            raise src.error(
                f"expected {widths['unnamed']} fields (P, {n_dom} frequencies, {n_comp} utilizations), "
                f"{widths['named']} (with a leading name) or {widths['utils']} (name and utilizations), "
                f"found {len(fields)}", first_line)
        if variant == "utils":
            return _read_utils(src, ref, sizes, comps, clip)
        return _read_power(src, ref, sizes, comps, variant == "named", clip)


def _utilization_fields(comps: tuple[str, ...], clip: bool) -> list[Field]:
    """Checked against [0, 1] as read, or, to be clipped afterwards, only as numbers."""
    return [Field(c, utilization=not clip) for c in comps]


def _utilization(src: Source, columns: list[np.ndarray], comps: tuple[str, ...], clip: bool) -> np.ndarray:
    u = np.column_stack(columns)
    return bound_utilization(u, comps, src.path, clip=True) if clip else u


def _read_power(src: Source, ref: tuple[float, ...], sizes: tuple[int, ...], comps: tuple[str, ...], named: bool,
                clip: bool) -> PowerDataset:
    n_dom = len(sizes)
    off = 1 if named else 0
    fields = ([Field("name", text=True, empty="empty benchmark name")] if named else []) + [
        Field("P", minimum=0, exclusive=True, maximum=MAX_WATTS),
        *(Field(f"f{d}", minimum=0, exclusive=True, maximum=MAX_MHZ) for d in range(n_dom)),
        *_utilization_fields(comps, clip)]
    freq, util = slice(off + 1, off + 1 + n_dom), slice(off + 1 + n_dom, None)
    # A benchmark is its name plus utilization vector: names recur across sweeps.
    cols = Columns(src, fields, "(benchmark, frequencies)")
    unnamed = Strings()

    def name(values: list[np.ndarray]) -> tuple[np.ndarray, Strings]:
        return cols.text_part(values, 0) if named else (unnamed.encode([""] * len(values[0])), unnamed)

    def key(values: list[np.ndarray]) -> list[KeyPart]:
        return [name(values), np.column_stack(values[util]), np.column_stack(values[freq])]

    for chunk in src.chunks():
        cols.add(chunk, key)
    skipped = src.finish(len(cols))
    values = cols.arrays()
    names, strings = name(values)
    utilization = _utilization(src, values[util], comps, clip)
    bench, labels = _benchmarks(names, strings, utilization, named)
    return PowerDataset(
        path=src.path,
        reference_mhz=ref,
        domain_sizes=sizes,
        components=comps,
        watts=values[off],
        freqs_mhz=np.column_stack(values[freq]),
        utilization=utilization,
        row_names=tuple(strings.names(names)) if named else None,
        benchmark=bench,
        benchmarks=tuple(labels),
        skipped=skipped,
    )


def _benchmarks(names: np.ndarray, strings: Strings, utilization: np.ndarray, named: bool
                ) -> tuple[np.ndarray, list[str]]:
    """Each row's benchmark, numbered in order of first appearance, and the benchmarks' labels.

    A label is the name, with ``#k`` for the k-th benchmark sharing it (``bench#k`` for unnamed rows).
    """
    keys = np.column_stack([names, utilization]) + 0.0  # -0.0 and 0.0 are one utilization
    _, first, inverse = np.unique(keys, axis=0, return_index=True, return_inverse=True)
    order = np.argsort(first)
    number = np.empty_like(order)
    number[order] = np.arange(len(order))
    labels: list[str] = []
    per_name: dict[str, int] = {}
    for name in strings.names(names[first[order]]):
        k = per_name[name] = per_name.get(name, 0) + 1
        base = name if named else "bench"
        labels.append(base if named and k == 1 else f"{base}#{k}")
    return number[inverse.ravel()].astype(np.int64), labels


def _read_utils(src: Source, ref: tuple[float, ...], sizes: tuple[int, ...], comps: tuple[str, ...],
                clip: bool) -> UtilizationTable:
    cols = Columns(src, [Field("name", text=True, empty="empty application name"),
                         *_utilization_fields(comps, clip)], "application")

    def key(values: list[np.ndarray]) -> list[KeyPart]:
        return [cols.part(values, 0)]

    for chunk in src.chunks():
        cols.add(chunk, key)
    skipped = src.finish(len(cols))
    names, *utilization = cols.arrays()
    return UtilizationTable(
        path=src.path,
        reference_mhz=ref,
        domain_sizes=sizes,
        components=comps,
        names=tuple(names.tolist()),
        utilization=_utilization(src, utilization, comps, clip),
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
    """Write a dataset in the gpmTOOL variant it was read from; floats round-trip exactly."""
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
