"""Choosing a device by name, as the command line does."""

from __future__ import annotations

from gpudvfs.errors import InputError
from gpudvfs.hardware.device import Device

DEVICE_KINDS = ("sim", "nvml")


def make_device(kind: str, seed: int = 0, index: int = 0, leave_clocks: bool = False) -> Device:
    """A device of ``kind``; ``leave_clocks``: one that refuses to set clocks (a simulated GPU
    as one without the permission)."""
    if kind == "sim":
        if index != 0:
            raise InputError(f"the simulated GPU is the only one: index 0, not {index}")
        from gpudvfs.hardware.simulated import SimulatedDevice

        return SimulatedDevice(seed=seed, permission=not leave_clocks)
    if kind == "nvml":
        from gpudvfs.hardware.nvml import NvmlDevice

        return NvmlDevice(index=index, leave_clocks=leave_clocks)
    raise InputError(f"unknown device {kind!r}; expected one of {DEVICE_KINDS}")
