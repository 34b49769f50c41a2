"""JSON files: reading with located errors, writing atomically, and version checks for
the versioned documents gpudvfs writes (models, sweep profiles)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..errors import InputError


def read_json(path: str | Path):
    path = Path(path)
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise InputError(f"{path}: file not found") from None
    except json.JSONDecodeError as e:
        raise InputError(f"{path}: not valid JSON (line {e.lineno}, column {e.colno}: {e.msg})") from None


def read_versioned(path: str | Path, kind: str, version: int) -> dict:
    """A JSON object written by gpudvfs as ``{"kind": kind, "version": version, ...}``."""
    doc = read_json(path)
    if not isinstance(doc, dict) or doc.get("kind") != kind:
        raise InputError(f"{path}: not a gpudvfs {kind} file")
    if doc.get("version") != version:
        raise InputError(f"{path}: unknown {kind} file version {doc.get('version')!r}; "
                         f"this gpudvfs reads version {version}")
    return doc


def write_json_atomic(path: str | Path, doc) -> None:
    """Write through a temporary file and a rename, so a crash never leaves half a file."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=1))
    os.replace(tmp, path)
