"""The device a training governor meters and sets: an NVML GPU, the simulated one, or an object.

Where NVML cannot be opened, the run goes on metering step times alone.
"""

from __future__ import annotations

from typing import Any

from gpudvfs.errors import InputError
from gpudvfs.govern.integrations.ranks import local_gpu_index, local_rank
from gpudvfs.hardware.device import missing_members
from gpudvfs.hardware.kinds import DEVICE_KINDS
from gpudvfs.hardware.nvml import NvmlDevice
from gpudvfs.hardware.nvml.bindings import import_pynvml
from gpudvfs.hardware.sim_training import SimulatedTraining
from gpudvfs.hardware.simulated import SimulatedDevice

#: The catalog GPU whose power prior shapes the simulated GPU's (it is modelled on one).
SIM_CATALOG_NAME = "gtx-titan-x"


def open_device(device: Any, *, dry_run: bool = True, index: int | None = None) -> tuple[Any, str, str | None]:
    """The device a training governor meters and sets.

    ``device``: ``"nvml"`` (an `NvmlDevice`, opened with ``leave_clocks=dry_run``), ``"sim"`` (a
    `SimulatedTraining` H200) or an object that implements the whole `Device` protocol; ``index``
    None: the local rank's GPU (`ranks.local_gpu_index`). Returns (device, kind, why not): where
    NVML cannot be opened (no driver, no GPU, no nvidia-ml-py), (None, ``"none"``, the reason).
    `InputError` for another name, an object that lacks a `Device` member (the message names them),
    or a GPU the machine (or ``CUDA_VISIBLE_DEVICES``) lacks.
    """
    if isinstance(device, str):
        if device == "sim":
            return SimulatedTraining(), "simulated", None
        if device == "nvml":
            try:
                gpu = local_gpu_index(import_pynvml) if index is None else index
                return NvmlDevice(gpu, leave_clocks=dry_run), "nvml", None
            except InputError as e:  # a GPU this machine lacks: the job's mistake, not a missing driver
                if index is None:
                    raise InputError(f"the local rank's GPU (LOCAL_RANK={local_rank()}): {e}") from None
                raise
            except Exception as e:  # ImportError, NVML init, no GPU: metered on what can be read
                first = str(e).splitlines()[0] if str(e) else ""
                which = "of the local rank" if index is None else str(index)
                return None, "none", f"no NVML GPU {which} ({type(e).__name__}: {first})"
        raise InputError(f"device must be one of {DEVICE_KINDS} or a device object, got {device!r}")
    missing = missing_members(device)
    if missing == missing_members(None):  # nothing of a device
        raise InputError(f"device must be one of {DEVICE_KINDS} or a device object, got {device!r}")
    if missing:
        raise InputError(f"device {type(device).__name__} lacks {', '.join(missing)} of the Device protocol "
                         "(gpudvfs.hardware.device.Device): implement them, or pass 'nvml' or 'sim'")
    kind = "simulated" if isinstance(device, SimulatedDevice) else type(device).__name__
    return device, kind, None
