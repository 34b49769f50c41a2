"""Names that moved to another module keep working for one release, with a warning.

A model package (``gpudvfs.time``, ``gpudvfs.power``, ``gpudvfs.online``) used to re-export
its evaluation; evaluation now lives in :mod:`gpudvfs.evaluation`, which imports the models.
Importing it back eagerly would make a cycle, so the old names resolve on first use.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable
from typing import Any


def moved_names(package: str, names: dict[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package`` serving each of ``names`` (name -> the module
    that now defines it, ``"module:new_name"`` where it was renamed too) with a
    ``DeprecationWarning`` naming the new place."""

    def __getattr__(name: str) -> Any:
        module, _, new = names.get(name, "").partition(":")
        if not module:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        new = new or name
        warnings.warn(f"{package}.{name} moved to {module}.{new}; the old name goes in the next release",
                      DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(module), new)

    return __getattr__
