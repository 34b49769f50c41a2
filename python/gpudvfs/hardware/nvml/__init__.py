"""Real NVIDIA GPUs through NVML: `NvmlDevice`, the `Device` protocol on one GPU.

| module          | what                                                                    |
|-----------------|-------------------------------------------------------------------------|
| `bindings`      | nvidia-ml-py imported on first use; its errors and replies read alike   |
| `gpu`           | `NvmlGpu`: what NVML reports about a GPU, read without setting anything |
| `throttle`      | the clock event ("throttle") reasons, read and named                    |
| `clock_control` | setting clocks and the power limit, and undoing exactly that            |
| `clock_guard`   | undoing them at exit and on SIGINT/SIGTERM                              |
| `refresh`       | the power reading's refresh period, inferred from its changes           |
| `sampler`       | what the GPU reports while a measurement runs, polled in a thread       |
| `launchers`     | launching a workload on the GPU (CuPy)                                  |
| `device`        | `NvmlDevice`: the `Device` protocol, measuring time and power           |
| `visible`       | the GPUs ``CUDA_VISIBLE_DEVICES`` shows, as NVML's indices              |
"""

from gpudvfs.hardware.nvml.bindings import ClockControlError
from gpudvfs.hardware.nvml.device import POWER_SOURCES, NvmlDevice
from gpudvfs.hardware.nvml.refresh import refresh_period_from_changes
from gpudvfs.hardware.nvml.throttle import IGNORED_THROTTLE_REASONS, THROTTLE_REASONS

__all__ = [
    "IGNORED_THROTTLE_REASONS",
    "POWER_SOURCES",
    "THROTTLE_REASONS",
    "ClockControlError",
    "NvmlDevice",
    "refresh_period_from_changes",
]
