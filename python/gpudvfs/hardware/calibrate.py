"""Calibrating one GPU: the power and latency suites swept over its clock grid (crash-safe,
resumable sweeps), the power model fitted to the first and the time model's device
parameters to the second. The demo and each task of a fleet calibration run this."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from gpudvfs.catalog import DeviceSpec, lookup
from gpudvfs.errors import GpudvfsWarning, InputError
from gpudvfs.hardware.device import Device
from gpudvfs.hardware.sweep import record_path, run_sweep, suite_workloads, to_power_dataset, to_time_device
from gpudvfs.power.model import PowerModel
from gpudvfs.time import TimeDevice

#: (stage, done, total)
Progress = Callable[[str, int, int], None]

POWER_CSV, TIME_CSV = "power-suite.csv", "time-suite.csv"


@dataclass(frozen=True)
class Calibration:
    power_model: PowerModel
    time_device: TimeDevice
    time_fit: dict
    catalog: DeviceSpec | None   # the catalog entry of the device's name, where there is one
    files: list[Path]


def catalog_entry(device: Device) -> DeviceSpec | None:
    try:
        return lookup(device.name)
    except InputError:
        return None


def base_time_device(device: Device, spec: DeviceSpec | None) -> TimeDevice:
    """What a latency-suite fit starts from: the catalog entry's time device, else the GTX 980
    preset with the device's SM count (no benchmark measures the issue rate and the overlap
    exponent); the suite then fits the latencies and delays."""
    return TimeDevice.from_spec(spec) if spec else replace(TimeDevice.gtx980(), sm_count=float(device.sm_count()))


def stage(progress: Progress | None, name: str):
    def update(done: int, total: int, label: str) -> None:
        if progress:
            progress(name, done, total)
    return update


def calibrate(device: Device, workdir: str | Path, *, resume: bool = False, power_variant: str = "per-domain",
              min_seconds: float = 1.0, progress: Progress | None = None) -> Calibration:
    """Sweep both suites into ``workdir`` (replacing earlier sweeps there unless ``resume``
    continues them) and fit both models; the time device starts from `base_time_device`."""
    work = Path(workdir)
    work.mkdir(parents=True, exist_ok=True)
    power_csv, time_csv = work / POWER_CSV, work / TIME_CSV
    if not resume:
        for f in (power_csv, time_csv):
            f.unlink(missing_ok=True)
            record_path(f).unlink(missing_ok=True)
    run_sweep(device, suite_workloads("power"), power_csv, resume=power_csv.exists(), min_seconds=min_seconds,
              progress=stage(progress, "power suite"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GpudvfsWarning)  # bound hits show in the model's notes
        power_model = PowerModel(power_variant).fit(to_power_dataset(power_csv))
    run_sweep(device, suite_workloads("time"), time_csv, resume=time_csv.exists(), min_seconds=min_seconds,
              progress=stage(progress, "time suite"))
    spec = catalog_entry(device)
    time_device, time_fit = to_time_device(time_csv, base_time_device(device, spec))
    return Calibration(power_model, time_device, time_fit, spec, [power_csv, time_csv])
