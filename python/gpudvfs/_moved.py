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
    """A module ``__getattr__`` that serves names moved out of a module, with a warning.

    Each old name resolves, on first use, to its new place, with a ``DeprecationWarning``
    naming that place.

    Parameters
    ----------
    package : str
        The dotted name of the module the names moved out of.
    names : dict of str to str
        Old name -> the module that now defines it, as ``"module"`` where the name stayed or
        ``"module:new_name"`` where it was renamed too.

    Returns
    -------
    callable
        The module's ``__getattr__``: it raises ``AttributeError`` for any other name.
    """

    def __getattr__(name: str) -> Any:
        place = names.get(name)
        if place is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, _, new_name = place.partition(":")
        new_name = new_name or name
        warnings.warn(f"{package}.{name} moved to {module}.{new_name}; the old name goes in the next release",
                      DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(module), new_name)

    return __getattr__
