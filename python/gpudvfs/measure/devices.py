"""Choosing a device by name, as the command line does."""

from __future__ import annotations

from ..errors import InputError
from .device import Device

DEVICE_KINDS = ("sim", "nvml")


def make_device(kind: str, seed: int = 0, index: int = 0) -> Device:
    if kind == "sim":
        from .simulated import SimulatedDevice

        return SimulatedDevice(seed=seed)
    if kind == "nvml":
        from .nvml import NvmlDevice

        return NvmlDevice(index=index)
    raise InputError(f"unknown device {kind!r}; expected one of {DEVICE_KINDS}")
