"""The analytical kernel-time model of Wang & Chu under core and memory frequency scaling.

| module      | what                                                                  |
|-------------|-----------------------------------------------------------------------|
| `device`    | `TimeDevice`: a GPU's microbenchmarked parameters, presets, fitting   |
| `profile`   | `KernelProfile`: a kernel's inputs from counters at a reference pair   |
| `from_grid` | profiles from a measured grid's reference rows                        |
| `model`     | `TimeModel`: time at any (fc, fm), batched in the Rust core           |
| `interval`  | how far a prediction may be off, growing with the distance from the reference |
| `dcgm`      | the time model of DCGM activity fields                                |

Errors against measured grids and the cross-validation protocol are in
:mod:`gpudvfs.evaluation`.
"""

from gpudvfs.time.device import TimeDevice
from gpudvfs.time.from_grid import profiles_from_grid
from gpudvfs.time.model import CASES, MODES, TimeModel
from gpudvfs.time.profile import INPUT_KEYS, KernelProfile

__all__ = ["CASES", "INPUT_KEYS", "MODES", "KernelProfile", "TimeDevice", "TimeModel", "profiles_from_grid"]
