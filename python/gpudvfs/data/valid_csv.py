"""A valid file read in one pass: the readers' fast path, ahead of the locating one.

The data lines go to the Rust core a block at a time and each column is checked at once
(:meth:`Field.bad <gpudvfs.data.columns.Field.bad>`); rows measuring the same key are found by
a hash of the key. Anything else (a line the core leaves to the csv module, a bad cell, a key
seen twice or a hash collision, bytes not UTF-8) gives None, and the reader reads the file
again a chunk at a time (:class:`~gpudvfs.data.columns.Columns`), which names the line and
column of the first problem: a valid file costs one pass, an invalid one a second.
"""

from __future__ import annotations

import codecs
import csv
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from gpudvfs import _core
from gpudvfs.data.columns import Field, _unicode

#: Bytes read at a time, cut at the last line end: a file of up to 256 MB is read whole (its
#: columns made at once, not joined from blocks); the core splits a block over the cores.
BLOCK_BYTES = 1 << 28
#: Bytes checked first, so that a bad row near the start is sent to the locating pass without
#: reading the whole file (a 100 MB file read again 1% more for it).
PROBE_BYTES = 1 << 20

_MIX = np.uint64(0x9E3779B97F4A7C15)  # odd: multiplying by it loses no bit of the key


def read_valid(path: str | Path, fields: Sequence[Field], key_at: Sequence[int]) -> list[np.ndarray] | None:
    """Each column of a file whose line 1 is its header, or None where a row may be invalid.

    ``key_at`` are the columns of a row's key. The columns are those
    :meth:`Columns.arrays <gpudvfs.data.columns.Columns.arrays>` gives for the same file:
    float64 arrays, and str arrays as wide as their longest string.
    """
    blocks = []
    for text, keep in _blocks(path):
        block = None if text is None else _block(text, fields, key_at)
        if block is None or not _unique(block[1]):
            return None
        if keep:
            blocks.append(block)
    if not blocks or (len(blocks) > 1 and not _unique(np.concatenate([h for _, h in blocks]))):
        return None
    return [c[0] if len(c) == 1 else np.concatenate(c) for c in zip(*(v for v, _ in blocks))]


def _block(text: bytes, fields: Sequence[Field], key_at: Sequence[int]) -> tuple[list[np.ndarray], np.ndarray] | None:
    """A block's columns and the hash of each row's key; None where a row may be invalid."""
    read = _core.csv_columns(text, [not f.text for f in fields], csv.field_size_limit())
    if read is None:
        return None
    numbers, chars = iter(read[0]), iter(read[1])
    raw = [next(chars) if f.text else next(numbers) for f in fields]
    values = [_unicode(r) if f.text else r for f, r in zip(fields, raw)]
    if any(f.bad(v).any() for f, v in zip(fields, values)):
        return None
    return values, _key_hashes(len(values[0]), [raw[j] for j in key_at])


def _unique(hashes: np.ndarray) -> bool:
    keys = np.sort(hashes)
    return not (keys[1:] == keys[:-1]).any()


def _blocks(path: str | Path) -> Iterator[tuple[bytes | None, bool]]:
    """The lines after the first, a block at a time, each block its lines whole, and whether to keep it.

    A first block of :data:`PROBE_BYTES` is only checked, then read again with the rest. None
    where the first line holds a line break other than its end (``str.splitlines`` would make it
    two) or is not UTF-8.
    """
    with open(path, "rb") as f:
        try:
            head = f.readline().removeprefix(codecs.BOM_UTF8).decode("utf-8")
        except UnicodeDecodeError:
            head = ""
        if len(head.splitlines()) != 1:
            yield None, False
            return
        start = f.tell()
        probe = f.read(PROBE_BYTES)
        if len(probe) == PROBE_BYTES and (end := probe.rfind(b"\n") + 1):
            yield probe[:end], False
        f.seek(start)
        tail = b""
        while len(data := f.read(BLOCK_BYTES)) == BLOCK_BYTES:
            end = data.rfind(b"\n") + 1
            if end:
                yield tail + data[:end], True
                tail = data[end:]
            else:
                tail += data
        if tail or data:
            yield tail + data, True


def _key_hashes(rows: int, parts: list[np.ndarray]) -> np.ndarray:
    """A 64-bit hash of each row's key: equal keys (text the same, numbers equal) hash alike.

    ``parts`` are float64 columns, or text columns as code points [rows x width], zero-padded
    (a text holds no NUL, so the padding leaves the hash of a text the same at any width).
    """
    h = np.zeros(rows, np.uint64)
    for p in parts:
        if p.ndim == 2:  # the sum over the characters of c_k * _MIX ** (k + 1), a column at a time
            part = np.zeros(rows, np.uint64)
            for c, power in zip(p.T, np.cumprod(np.full(p.shape[1], _MIX, np.uint64))):
                part += c * power
        else:
            part = (p + 0.0).view(np.uint64)  # -0.0 and 0.0 are one value
        h = h * _MIX + part
    return h
