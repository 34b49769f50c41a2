"""gpudvfs: what a GPU frequency change does to a workload's time, power and energy.

Core runtime dependency: numpy. The command line, plots and measurement come as extras.
"""

from . import _core
from .datasets import MeasurementGrid, PowerDataset, UtilizationTable
from .errors import DataFileError, GpudvfsError, GpudvfsWarning, InputError, Problem
from .online import OnlinePredictor, OnlinePredictorBank
from .power_equations import power_grid
from .power_model import PowerModel
from .time_model import KernelProfile, TimeDevice, TimeModel
from .readers import FORMATS, UTIL_TOLERANCE, detect_format, read, read_power_dataset, write

__version__ = _core.__version__

__all__ = [
    "FORMATS",
    "UTIL_TOLERANCE",
    "DataFileError",
    "GpudvfsError",
    "GpudvfsWarning",
    "InputError",
    "KernelProfile",
    "MeasurementGrid",
    "OnlinePredictor",
    "OnlinePredictorBank",
    "PowerDataset",
    "PowerModel",
    "Problem",
    "TimeDevice",
    "TimeModel",
    "UtilizationTable",
    "detect_format",
    "power_grid",
    "read",
    "read_power_dataset",
    "write",
]
