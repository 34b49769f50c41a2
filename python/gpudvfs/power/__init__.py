"""The DVFS-aware power model of Guerreiro et al. (HPCA'18).

`model` (`PowerModel`), `equations` (the grid, in Rust and numpy), `gpmtool` (its model files).

Grouped cross-validation and the fit's setting chosen by it are in :mod:`gpudvfs.evaluation`.
"""

from gpudvfs.power.equations import power_grid, power_grid_numpy
from gpudvfs.power.model import VARIANTS, PowerModel

__all__ = ["VARIANTS", "PowerModel", "power_grid", "power_grid_numpy"]
