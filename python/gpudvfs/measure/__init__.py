"""The measurement layer: the `Device` protocol, a simulated GPU, NVML on real GPUs, the
CUDA microbenchmark suites and crash-safe frequency sweeps."""

from .device import ClockPermissionError, Device, Measurement, Workload
from .simulated import SimulatedDevice, SimulatedGpu
from .sweep import SweepResult, grid, run_sweep, suite_workloads, to_power_dataset, to_time_device

__all__ = ["ClockPermissionError", "Device", "Measurement", "SimulatedDevice", "SimulatedGpu",
           "SweepResult", "Workload", "grid", "run_sweep", "suite_workloads", "to_power_dataset",
           "to_time_device"]
