"""Choosing a device by name, as the command line does."""

from __future__ import annotations

from gpudvfs.errors import InputError
from gpudvfs.hardware.device import Device
from gpudvfs.hardware.nvml import NvmlDevice
from gpudvfs.hardware.simulated import SimulatedDevice

DEVICE_KINDS = ("sim", "nvml")


def make_device(kind: str, seed: int = 0, index: int = 0, leave_clocks: bool = False) -> Device:
    """A device of a kind the command line names.

    Parameters
    ----------
    kind : str
        One of `DEVICE_KINDS`: ``"sim"`` (the simulated GPU) or ``"nvml"`` (a real one).
    seed : int
        The simulated GPU's noise seed.
    index : int
        NVML's index of the GPU (the simulated GPU is index 0).
    leave_clocks : bool
        A device that refuses to set clocks (a simulated GPU as one without the permission).

    Returns
    -------
    Device
        The device.

    Raises
    ------
    InputError
        Where ``kind`` is unknown, or the simulated GPU is given another index.
    """
    if kind == "sim":
        if index != 0:
            raise InputError(f"the simulated GPU is the only one: index 0, not {index}")
        return SimulatedDevice(seed=seed, permission=not leave_clocks)
    if kind == "nvml":
        return NvmlDevice(index=index, leave_clocks=leave_clocks)
    raise InputError(f"unknown device {kind!r}; expected one of {DEVICE_KINDS}")
