"""The measurement layer: GPUs to measure on, and what is measured on them.

The `Device` protocol, a simulated GPU, NVML on real GPUs, the CUDA microbenchmark suites,
crash-safe frequency sweeps and named energy windows (`EnergyMonitor`).
"""

from gpudvfs.hardware.device import ClockPermissionError, Device, Measurement, Workload
from gpudvfs.hardware.simulated import SimulatedDevice, SimulatedGpu
from gpudvfs.hardware.sweep import SweepResult, grid, run_sweep, suite_workloads, to_power_dataset, to_time_device
from gpudvfs.hardware.windows import EnergyMonitor, WindowMeasurement

__all__ = ["ClockPermissionError", "Device", "EnergyMonitor", "Measurement", "SimulatedDevice", "SimulatedGpu",
           "SweepResult", "WindowMeasurement", "Workload", "grid", "run_sweep", "suite_workloads", "to_power_dataset",
           "to_time_device"]
