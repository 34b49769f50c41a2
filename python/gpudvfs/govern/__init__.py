"""The closed-loop frequency governor, its priors, its daemon and its training integrations.

It starts from the offline models' predictions and lets measurements settle the choice
(`Governor`).
"""

from __future__ import annotations

from gpudvfs.govern.governor import GOVERNOR_POLICIES, Governor

__all__ = ["GOVERNOR_POLICIES", "Governor"]
