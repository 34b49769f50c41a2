"""The closed-loop frequency governor: starts from the offline models' predictions, lets
measurements settle the choice (`Governor`), and its replay against measured grids."""

from gpudvfs.govern.governor import POLICIES, Governor

__all__ = ["POLICIES", "Governor"]
