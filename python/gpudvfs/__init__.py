"""gpudvfs: what a GPU frequency change does to a workload's time, power and energy.

Core runtime dependency: numpy. The command line, plots and measurement come as extras.
Public names load on first use, so ``import gpudvfs`` (and the command line's start-up)
costs nothing until a model or reader is touched.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# name -> module that defines it
_EXPORTS = {
    "FORMATS": "data",
    "UTIL_TOLERANCE": "data",
    "detect_format": "data",
    "read": "data",
    "read_power_dataset": "data",
    "write": "data",
    "MeasurementGrid": "data.datasets",
    "PowerDataset": "data.datasets",
    "UtilizationTable": "data.datasets",
    "DataFileError": "errors",
    "GpudvfsError": "errors",
    "GpudvfsWarning": "errors",
    "InputError": "errors",
    "Problem": "errors",
    "OnlinePredictor": "_core",
    "OnlinePredictorBank": "_core",
    "PowerModel": "power.model",
    "power_grid": "power.equations",
    "KernelProfile": "time.profile",
    "TimeDevice": "time.device",
    "TimeModel": "time.model",
    "predict_profile": "predict.prediction",
    "ProfilePrediction": "predict.prediction",
}

__all__ = [
    "FORMATS", "UTIL_TOLERANCE", "DataFileError", "GpudvfsError", "GpudvfsWarning", "InputError",
    "KernelProfile", "MeasurementGrid", "OnlinePredictor", "OnlinePredictorBank", "PowerDataset",
    "PowerModel", "Problem", "ProfilePrediction", "TimeDevice", "TimeModel", "UtilizationTable", "detect_format",
    "power_grid", "predict_profile", "read", "read_power_dataset", "write",
]

if TYPE_CHECKING:
    from gpudvfs._core import OnlinePredictor, OnlinePredictorBank
    from gpudvfs.data import FORMATS, UTIL_TOLERANCE, detect_format, read, read_power_dataset, write
    from gpudvfs.data.datasets import MeasurementGrid, PowerDataset, UtilizationTable
    from gpudvfs.errors import DataFileError, GpudvfsError, GpudvfsWarning, InputError, Problem
    from gpudvfs.power.equations import power_grid
    from gpudvfs.power.model import PowerModel
    from gpudvfs.predict.prediction import ProfilePrediction, predict_profile
    from gpudvfs.time.device import TimeDevice
    from gpudvfs.time.model import TimeModel
    from gpudvfs.time.profile import KernelProfile

    __version__: str


def __getattr__(name: str) -> Any:
    """A public name of ``__all__`` (or ``__version__``), imported from its module on first use.

    Raises AttributeError if the package has no such name.
    """
    if name == "__version__":
        return importlib.import_module(f"{__name__}._core").__version__
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The package's names, those not imported yet included."""
    return sorted(set(globals()) | set(__all__) | {"__version__"})
