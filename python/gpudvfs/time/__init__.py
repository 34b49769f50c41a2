"""The analytical kernel-time model of Wang & Chu under core and memory frequency scaling.

| module     | what                                                                  |
|------------|-----------------------------------------------------------------------|
| `device`   | `TimeDevice`: a GPU's microbenchmarked parameters, presets, fitting   |
| `profile`  | `KernelProfile`: a kernel's inputs from counters at a reference pair   |
| `model`    | `TimeModel`: time at any (fc, fm), batched in the Rust core           |
| `evaluate` | profiles from measured grids, errors against them and baselines      |
| `crossval` | the protocol: settings chosen by nested leave-one-application-out     |
"""

from .device import TimeDevice
from .evaluate import evaluate, profiles_from_grid
from .model import CASES, MODES, TimeModel
from .profile import INPUT_KEYS, KernelProfile

__all__ = ["CASES", "INPUT_KEYS", "MODES", "KernelProfile", "TimeDevice", "TimeModel", "evaluate",
           "profiles_from_grid"]
