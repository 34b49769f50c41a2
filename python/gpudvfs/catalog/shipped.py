"""The JSON documents shipped in this folder (the GPU catalog and the power priors)."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any


def shipped_json(name: str) -> tuple[Any, str]:
    """(the parsed ``gpudvfs/catalog/<name>``, that path for error messages), wheel or source tree alike."""
    text = resources.files(__package__).joinpath(name).read_text(encoding="utf-8")
    return json.loads(text), f"gpudvfs/catalog/{name}"
