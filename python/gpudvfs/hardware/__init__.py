"""The measurement layer: GPUs to measure on, and what is measured on them.

The `Device` protocol, a simulated GPU, NVML on real GPUs, the CUDA microbenchmark suites and
crash-safe frequency sweeps.
"""

from gpudvfs.hardware.device import ClockPermissionError, Device, Measurement, Workload
from gpudvfs.hardware.simulated import SimulatedDevice, SimulatedGpu
from gpudvfs.hardware.sweep import SweepResult, grid, run_sweep, suite_workloads, to_power_dataset, to_time_device

__all__ = ["ClockPermissionError", "Device", "Measurement", "SimulatedDevice", "SimulatedGpu",
           "SweepResult", "Workload", "grid", "run_sweep", "suite_workloads", "to_power_dataset",
           "to_time_device"]
