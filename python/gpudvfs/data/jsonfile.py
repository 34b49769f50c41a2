"""JSON files: reading with located errors, writing atomically, and version checks.

The versioned documents are those gpudvfs writes (models, sweep profiles).
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any, NoReturn

from gpudvfs.errors import InputError

# Model, device and workload files are small; anything larger is not one of them.
MAX_BYTES = 64 * 2**20


def _reject_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not a number JSON allows")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} is beyond the range of a float")
    return value


def read_json(path: str | Path) -> Any:
    """Read a JSON document, any problem with it an `InputError` naming the file.

    Refused: a missing, folder, unreadable or non-UTF-8 file, invalid JSON, NaN or Infinity, and
    anything over :data:`MAX_BYTES`.
    """
    path = Path(path)
    try:
        if path.is_dir():
            raise InputError(f"{path}: is a folder, not a JSON file")
        if path.stat().st_size > MAX_BYTES:
            raise InputError(f"{path}: {path.stat().st_size} bytes is too large for a gpudvfs JSON file")
        text = path.read_bytes().decode("utf-8-sig")
    except FileNotFoundError:
        raise InputError(f"{path}: file not found") from None
    except UnicodeDecodeError as e:
        raise InputError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start}), so not a JSON file") from None
    except OSError as e:
        raise InputError(f"{path}: cannot be read ({e.strerror})") from None
    try:
        return json.loads(text, parse_constant=_reject_constant, parse_float=_finite)
    except json.JSONDecodeError as e:
        raise InputError(f"{path}: not valid JSON (line {e.lineno}, column {e.colno}: {e.msg})") from None
    except ValueError as e:  # NaN, Infinity, 1e999
        raise InputError(f"{path}: not valid JSON ({e})") from None
    except RecursionError:
        raise InputError(f"{path}: JSON nested too deeply") from None


def read_versioned(path: str | Path, kind: str, version: int) -> dict[str, Any]:
    """Read a JSON object written by gpudvfs as ``{"kind": kind, "version": version, ...}``.

    Raises `InputError` if the file cannot be read as JSON, is not an object of this ``kind``
    (e.g. ``dcgm-time-model``), or is of another version than the one this gpudvfs reads.
    """
    doc = read_json(path)
    if not isinstance(doc, dict) or doc.get("kind") != kind:
        raise InputError(f"{path}: not a gpudvfs {kind} file")
    if doc.get("version") != version:
        raise InputError(f"{path}: unknown {kind} file version {doc.get('version')!r}; "
                         f"this gpudvfs reads version {version}")
    return doc


def write_json_atomic(path: str | Path, doc: Any) -> None:
    """Write a JSON document through a temporary file and a rename, so a crash never leaves half a file.

    NaN and infinities raise `ValueError`, as `read_json` refuses them: no file is written that
    cannot be read back.
    """
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=1, allow_nan=False))
    os.replace(tmp, path)


def json_default(x: Any) -> Any:
    """``json.dumps``'s ``default``: numpy scalars as Python numbers, sets as sorted lists."""
    if hasattr(x, "item"):
        return x.item()
    if isinstance(x, (set, frozenset)):
        return sorted(x)
    raise TypeError(f"{type(x).__name__} is not JSON serializable")


class JsonLines:
    """A JSON Lines file, appended to and flushed a line at a time so that a crash loses no line.

    The one writer of the package's logs (a governor's decisions, a training run's steps);
    `close` (or leaving a ``with`` block) closes the file. Raises `InputError` where its folder
    is missing or it cannot be opened.
    """

    def __init__(self, path: str | Path) -> None:
        p = Path(path)
        if not p.parent.is_dir():
            raise InputError(f"{path}: the folder {str(p.parent)!r} does not exist")
        try:
            self._file = open(p, "a", encoding="utf-8")  # noqa: SIM115 -- closed by close()
        except OSError as e:
            raise InputError(f"{path}: cannot be opened for writing: {e}") from None

    def write(self, entry: dict) -> None:
        """Append ``entry`` (numpy scalars and sets made plain) as one line."""
        self._file.write(json.dumps(entry, default=json_default) + "\n")
        self._file.flush()

    def close(self) -> None:
        """Close the file (again: nothing)."""
        self._file.close()

    def __enter__(self) -> JsonLines:
        """The writer itself."""
        return self

    def __exit__(self, *exc: object) -> None:
        """Close the file."""
        self.close()
