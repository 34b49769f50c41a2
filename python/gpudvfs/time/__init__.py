"""Kernel time under core and memory frequency scaling: Wang & Chu's analytical model, and DCGM's.

`TimeModel` predicts a `KernelProfile` on a `TimeDevice`; `interval` says how far it may be
off; `dcgm` is the time model of DCGM activity fields. Scoring is in :mod:`gpudvfs.evaluation`.
"""

from gpudvfs.time.device import TimeDevice
from gpudvfs.time.from_grid import profiles_from_grid
from gpudvfs.time.model import CASES, MODES, TimeModel
from gpudvfs.time.profile import INPUT_KEYS, KernelProfile

__all__ = ["CASES", "INPUT_KEYS", "MODES", "KernelProfile", "TimeDevice", "TimeModel", "profiles_from_grid"]
