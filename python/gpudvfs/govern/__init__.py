"""The closed-loop frequency governor and its replay against measured grids.

It starts from the offline models' predictions and lets measurements settle the choice
(`Governor`).
"""

from __future__ import annotations

import warnings

from gpudvfs.govern.governor import GOVERNOR_POLICIES, Governor

__all__ = ["GOVERNOR_POLICIES", "Governor"]


def __getattr__(name: str) -> tuple[str, ...]:
    """``POLICIES``, renamed `GOVERNOR_POLICIES`, for one release, with a warning."""
    if name != "POLICIES":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn("gpudvfs.govern.POLICIES is now gpudvfs.govern.GOVERNOR_POLICIES (every policy: "
                  "gpudvfs.policy.POLICIES); the old name goes in the next release", DeprecationWarning, stacklevel=2)
    return GOVERNOR_POLICIES
