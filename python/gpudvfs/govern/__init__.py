"""The closed-loop frequency governor and its replay against measured grids.

It starts from the offline models' predictions and lets measurements settle the choice
(`Governor`).
"""

from __future__ import annotations

from gpudvfs.govern.governor import GOVERNOR_POLICIES, Governor

__all__ = ["GOVERNOR_POLICIES", "Governor"]
