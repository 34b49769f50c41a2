"""Calibrating one GPU: both microbenchmark suites swept, both models fitted.

The power and latency suites are swept over the GPU's clock grid (crash-safe, resumable
sweeps), the power model is fitted to the first and the time model's device parameters to the
second. The demo and each task of a fleet calibration run this.
"""

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
    """What calibrating one GPU gives: the power model and the time model's device parameters, fitted to the two suites.

    ``time_fit`` is that fit's report (`TimeDevice.fit`); ``catalog`` the catalog entry of the
    device's name, where there is one.
    """

    power_model: PowerModel
    time_device: TimeDevice
    time_fit: dict
    catalog: DeviceSpec | None
    files: list[Path]


def catalog_entry(device: Device) -> DeviceSpec | None:
    """The catalog entry of a device's name; None where the catalog does not know it."""
    try:
        return lookup(device.name)
    except InputError:
        return None


def base_time_device(device: Device, spec: DeviceSpec | None) -> TimeDevice:
    """What a latency-suite fit starts from: the catalog entry's time device, else the GTX 980 preset with the SM count.

    No benchmark measures the issue rate and the overlap exponent: they come from here, and the
    suite then fits the latencies and delays.
    """
    return TimeDevice.from_spec(spec) if spec else replace(TimeDevice.gtx980(), sm_count=float(device.sm_count()))


def stage(progress: Progress | None, name: str) -> Callable[[int, int, str], None]:
    """A sweep's progress callback (done, total, label) that reports ``(name, done, total)`` to ``progress``."""
    def update(done: int, total: int, label: str) -> None:
        if progress:
            progress(name, done, total)
    return update


def calibrate(device: Device, workdir: str | Path, *, resume: bool = False, power_variant: str = "per-domain",
              min_seconds: float = 1.0, progress: Progress | None = None) -> Calibration:
    """Sweep both suites into ``workdir`` and fit both models (the time device from `base_time_device`).

    Earlier sweeps there are replaced unless ``resume``; ``progress`` takes (stage, done, total).
    """
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
