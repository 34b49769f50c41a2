"""Prometheus range-query exports as one wide table.

An export is the JSON of ``/api/v1/query_range`` (e.g. of the DCGM exporter's series); the
table has a row per series identity (its labels but the metric name) and timestamp, a column
per metric. Needs pandas (the `fleet` extra); the export is read whole, so split a long range
into several files.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from gpudvfs.data.jsonfile import read_json
from gpudvfs.errors import InputError

if TYPE_CHECKING:
    import pandas as pd


def read_range_export(path: str | Path) -> pd.DataFrame:
    """Read a Prometheus range-query export: ``timestamp``, the series' labels, and one column per metric.

    Raises `InputError` if the file is not a range-query export, holds no samples, or a series
    has two values at one timestamp.
    """
    import pandas as pd

    doc = read_json(path)
    data = doc.get("data") if isinstance(doc, dict) else None
    if not isinstance(data, dict) or data.get("resultType") != "matrix" or not isinstance(data.get("result"), list):
        raise InputError(f"{path}: not a Prometheus range-query export (expected data.resultType 'matrix' "
                         "and a list data.result)")
    rows = []
    for i, series in enumerate(data["result"]):
        metric, values = (series.get("metric"), series.get("values")) if isinstance(series, dict) else (None, None)
        if not isinstance(metric, dict) or not isinstance(metric.get("__name__"), str) or not isinstance(values, list):
            raise InputError(f"{path}: data.result[{i}] needs metric.__name__ and values")
        labels = {k: str(v) for k, v in metric.items() if k != "__name__"}
        for j, point in enumerate(values):
            try:
                ts, value = float(point[0]), float(point[1])
            except (TypeError, ValueError, IndexError):
                raise InputError(f"{path}: data.result[{i}].values[{j}] is not [timestamp, \"number\"]") from None
            rows.append({**labels, "timestamp": ts, "__name__": metric["__name__"], "value": value})
    if not rows:
        raise InputError(f"{path}: the export holds no samples")
    long = pd.DataFrame(rows)
    keys = [c for c in long.columns if c not in ("__name__", "value")]
    if long.duplicated(keys + ["__name__"]).any():
        raise InputError(f"{path}: a series has two values at one timestamp")
    # Series of one GPU and job share their labels: their metrics meet on a row.
    wide = long.pivot(index=keys, columns="__name__", values="value").reset_index()
    wide.columns.name = None
    return wide
