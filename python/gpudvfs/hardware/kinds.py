"""Choosing a device by name, as the command line does."""

from __future__ import annotations

from typing import Any

from gpudvfs.errors import InputError
from gpudvfs.hardware.device import Device
from gpudvfs.hardware.nvml import NvmlDevice
from gpudvfs.hardware.nvml.bindings import import_pynvml
from gpudvfs.hardware.simulated import SimulatedDevice

DEVICE_KINDS = ("sim", "nvml")
#: What the commands that run on a device take: ``auto`` is a GPU where NVML finds one, else the simulator.
DEVICE_CHOICES = ("auto", *DEVICE_KINDS)


def why_not_nvml(pynvml: Any = None) -> str | None:
    """None where NVML initialises and counts a GPU; else why not, in a few words."""
    try:
        nv = pynvml if pynvml is not None else import_pynvml()
    except ImportError:
        return "nvidia-ml-py is not installed"
    try:
        nv.nvmlInit()
    except nv.NVMLError as e:
        return f"NVML could not be initialised: {e}"
    try:
        count = nv.nvmlDeviceGetCount()
    except nv.NVMLError as e:
        return f"NVML could not count its GPUs: {e}"
    finally:
        nv.nvmlShutdown()
    return None if count > 0 else "NVML finds no GPU"


def resolve_kind(kind: str, pynvml: Any = None) -> tuple[str, str | None]:
    """(``"sim"`` or ``"nvml"``, why ``auto`` did not take NVML, or None)."""
    if kind != "auto":
        return kind, None
    reason = why_not_nvml(pynvml)
    return ("sim", reason) if reason else ("nvml", None)


def make_device(kind: str, seed: int = 0, index: int = 0, leave_clocks: bool = False) -> Device:
    """A device of one of `DEVICE_KINDS`: ``"sim"`` (the simulated GPU, index 0, noise ``seed``) or ``"nvml"``.

    ``leave_clocks`` makes one that refuses to set clocks (a simulated GPU as one without the
    permission). `InputError` where ``kind`` is unknown, or the simulated GPU is given another index.
    """
    if kind == "sim":
        if index != 0:
            raise InputError(f"the simulated GPU is the only one: index 0, not {index}")
        return SimulatedDevice(seed=seed, permission=not leave_clocks)
    if kind == "nvml":
        return NvmlDevice(index=index, leave_clocks=leave_clocks)
    raise InputError(f"unknown device {kind!r}; expected one of {DEVICE_KINDS}")
