"""Results as frozen dataclasses that callers read by attribute, each with the JSON the command line prints.

One conversion (`Record.to_dict`) for every report, so a report's fields and its JSON keys
cannot drift apart.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import numpy as np

#: Field metadata: a None value is printed as null (by default a None field is a part of the
#: report that does not apply, and is left out).
NULLABLE = {"nullable": True}


def renamed(key: str) -> dict[str, str]:
    """Metadata for `dataclasses.field` of a field whose JSON key is not a Python name (``with``)."""
    return {"key": key}


class Record:
    """Base of a frozen dataclass result: `to_dict` gives its JSON."""

    # Set by @dataclass on each record; declared so that type checkers see a dataclass.
    __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]

    def to_dict(self) -> dict:
        """The record as ``--json`` prints it: its fields in order, by name (or the key `renamed` gives).

        Nested records, dicts, lists and tuples are converted in turn, numpy arrays and
        numbers become lists and Python numbers, and a None field is left out unless its
        metadata is `NULLABLE`.
        """
        out = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value is not None or f.metadata.get("nullable"):
                out[f.metadata.get("key", f.name)] = as_json(value)
        return out


def as_json(value: Any) -> Any:
    """A value as JSON-ready Python: records, containers and numpy values converted."""
    if isinstance(value, Record):
        return value.to_dict()
    if isinstance(value, dict):
        return {k: as_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [as_json(v) for v in value]
    if isinstance(value, (np.ndarray, np.generic)):
        return value.tolist()
    return value
