"""Calibrating a fleet on Ray: one task per GPU.

A task (``num_gpus=1``) sweeps the power and latency suites on its GPU, fits its models and
writes its registry entry (`registry.write_entry`).

Every row is appended to the GPU's own sweep file as it is measured, so a worker killed
mid-sweep loses at most its row in flight; Ray retries a task whose worker died
(``max_retries``), and the retry, like any later rerun, resumes the GPU's sweeps where they
stopped. The registry folder must be one every node writes to (a shared file system) when
the cluster has more than one node.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from gpudvfs.errors import GpudvfsWarning, InputError
from gpudvfs.fleet.registry import Registry, device_uuid, gpu_dir, write_entry
from gpudvfs.fleet.tasks import Progress, per_gpu
from gpudvfs.hardware.calibrate import calibrate
from gpudvfs.hardware.chips import chip_device, sim_uuid
from gpudvfs.hardware.device import Device
from gpudvfs.hardware.nvml import NvmlDevice
from gpudvfs.hardware.simulated import SimulatedDevice


@dataclass(frozen=True)
class SimFleet:
    """Simulated GPUs: slot i is the chip `sim_uuid(i, fleet_seed)`, whose variation is drawn from its UUID.

    Ray needs logical GPUs for them: a local cluster is started with as many as there are slots.
    ``device_options`` go to each `SimulatedDevice`; ``aging`` grows the chips' static and idle
    power by this fraction since calibration (for `fleet check`).
    """

    fleet_seed: int = 0
    device_options: dict = field(default_factory=dict)
    #: Static and idle power grown by this fraction since calibration (for `fleet check`).
    aging: float = 0.0
    logical_gpus = True

    def __call__(self, slot: int) -> SimulatedDevice:
        """Chip `sim_uuid(slot, fleet_seed)`."""
        return chip_device(sim_uuid(slot, self.fleet_seed), aging=self.aging, **self.device_options)


@dataclass(frozen=True)
class NvmlFleet:
    """Real GPUs: a task opens the GPU Ray gave it (Ray numbers a node's GPUs in NVML order)."""

    logical_gpus = False

    def __call__(self, slot: int) -> NvmlDevice:
        """The GPU Ray gave the calling task (``slot`` unused); `InputError` where Ray gave other than one GPU."""
        import ray

        ids = ray.get_gpu_ids()
        if len(ids) != 1:
            raise InputError(f"a calibration task needs exactly one GPU from Ray, got {ids}")
        return NvmlDevice(index=int(ids[0]))


def fleet_devices(device_kind: str, seed: int = 0, aging: float = 0.0) -> SimFleet | NvmlFleet:
    """The GPUs a fleet command runs on: simulated chips of a fleet (``"sim"``), or Ray's real GPUs (``"nvml"``)."""
    return SimFleet(seed, aging=aging) if device_kind == "sim" else NvmlFleet()


def calibrate_gpu(devices: Callable[[int], Device], slot: int, root: str, min_seconds: float,
                  power_variant: str) -> dict:
    """Calibrate one GPU into the registry and return its entry: the body of a Ray task, which runs without Ray too."""
    device = devices(slot)
    folder = gpu_dir(root, device_uuid(device))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GpudvfsWarning)  # fit notes and errors go into the entry
        cal = calibrate(device, folder, resume=True, power_variant=power_variant, min_seconds=min_seconds)
        return write_entry(folder, device, cal)


def calibrate_fleet(devices: Callable[[int], Device], root: str | Path, *, gpus: int | None = None,
                    ray_address: str = "local", min_seconds: float = 1.0, power_variant: str = "per-domain",
                    max_retries: int = 3, progress: Progress | None = None) -> Registry:
    """Calibrate the GPUs of a Ray cluster into a registry, one Ray task each (`per_gpu`).

    ``root`` must be a folder every node writes to on a cluster of several nodes. `InputError` where
    the cluster lacks the GPUs, or calibrations failed (a rerun resumes them).
    """
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    per_gpu(calibrate_gpu, devices, (str(root), min_seconds, power_variant), gpus=gpus, ray_address=ray_address,
            max_retries=max_retries, progress=progress, what="calibrations", resumable=True)
    return Registry.load(root)
