"""The DVFS-aware power model of Guerreiro et al. (HPCA'18).

| module      | what                                                              |
|-------------|-------------------------------------------------------------------|
| `model`     | `PowerModel`: fit, predict, voltages, breakdown, save and load    |
| `equations` | the model's equations over a grid (`power_grid`, Rust) and in numpy |
| `gpmtool`   | gpmTOOL model files, read and written                             |
| `evaluate`  | grouped cross-validation                                          |
| `crossval`  | the fit's setting chosen by grouped CV across GPUs' microbenchmarks |
"""

from .equations import power_grid, power_grid_numpy
from .evaluate import cross_validate
from .model import VARIANTS, PowerModel

__all__ = ["VARIANTS", "PowerModel", "cross_validate", "power_grid", "power_grid_numpy"]
