"""The readers' fast path before the Rust core took it over (`gpudvfs.data.source._fast_columns`):
numpy's C reader (`np.loadtxt`) splits the chunk's lines and converts the numbers, one call for
the numeric fields and one for the text fields. Kept as the baseline of `bench_read.py`."""

from __future__ import annotations

import operator
from functools import partial
from itertools import repeat

import numpy as np


def fast_columns(texts: list[str], fields) -> tuple[list[np.ndarray], np.ndarray] | None:
    """The columns of a chunk, or None where a line has a quote or the wrong width, or a
    number does not parse (the reader then uses the csv module)."""
    n = len(texts)
    if not n or any(map(operator.contains, texts, repeat('"'))):
        return None
    if np.any(np.fromiter(map(str.count, texts, repeat(",")), np.int64, n) != len(fields) - 1):
        return None
    numeric = [j for j, f in enumerate(fields) if not f.text]
    text = [j for j, f in enumerate(fields) if f.text]
    read = partial(np.loadtxt, texts, delimiter=",", comments=None, quotechar=None, ndmin=2)
    try:
        numbers = iter(read(dtype=np.float64, usecols=numeric).T if numeric else ())
    except ValueError:
        return None
    strings = iter(np.char.strip(read(dtype=str, usecols=text).T) if text else ())
    return [next(strings) if f.text else next(numbers) for f in fields], np.zeros(n, bool)
