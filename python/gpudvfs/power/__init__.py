"""The DVFS-aware power model of Guerreiro et al. (HPCA'18).

| module      | what                                                              |
|-------------|-------------------------------------------------------------------|
| `model`     | `PowerModel`: fit, predict, voltages, breakdown, save and load    |
| `equations` | the model's equations over a grid (`power_grid`, Rust) and in numpy |
| `gpmtool`   | gpmTOOL model files, read and written                             |

Grouped cross-validation and the fit's setting chosen by it are in :mod:`gpudvfs.evaluation`.
"""

from gpudvfs.power.equations import power_grid, power_grid_numpy
from gpudvfs.power.model import VARIANTS, PowerModel

__all__ = ["VARIANTS", "PowerModel", "power_grid", "power_grid_numpy"]
