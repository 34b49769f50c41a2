"""A fleet registry: one folder per GPU, named by its UUID.

A GPU's folder holds its sweeps, its fitted models and ``gpu.json`` (what the chip is, its
catalog entry and the fits' errors).

```
DIR/GPU-<uuid>/power-suite.csv, time-suite.csv   the sweeps (and their .sweep.json records)
DIR/GPU-<uuid>/power-model.json, time-device.json the fitted models
DIR/GPU-<uuid>/gpu.json                           the entry, written last
```
An entry is written (atomically) only after both models, so a folder without ``gpu.json``
is a calibration still running or interrupted: rerunning it resumes the sweeps.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gpudvfs.data.jsonfile import read_versioned, write_json_atomic
from gpudvfs.errors import InputError
from gpudvfs.evaluation.power_errors import held_out_predictions
from gpudvfs.hardware.calibrate import POWER_CSV, Calibration
from gpudvfs.hardware.device import Device
from gpudvfs.hardware.simulated import SimulatedDevice
from gpudvfs.hardware.sweep import to_power_dataset
from gpudvfs.power.model import PowerModel
from gpudvfs.time import TimeDevice

ENTRY_KIND, ENTRY_VERSION = "fleet-gpu", 1
ENTRY_FILE, POWER_FILE, TIME_FILE = "gpu.json", "power-model.json", "time-device.json"
#: Folds of the per-GPU power cross-validation (benchmarks dealt to folds), whose held-out
#: errors make the GPU's error band.
CV_FOLDS = 6
_UUID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def gpu_dir(root: str | Path, uuid: str) -> Path:
    """``root / uuid``; `InputError` for a UUID that is not a plain file name."""
    if not isinstance(uuid, str) or not _UUID.fullmatch(uuid):
        raise InputError(f"GPU UUID {uuid!r} cannot name a registry folder (letters, digits, '.', '_', '-')")
    return Path(root) / uuid


def device_uuid(device: Device) -> str:
    """The UUID a GPU is registered by (its ``identity()``'s); `InputError` where it reports none."""
    uuid = device.identity().get("uuid")
    if not uuid:
        raise InputError(f"{device.name}: the device reports no UUID, so it cannot join a fleet registry")
    return str(uuid)


def power_errors(cal: Calibration, power_csv: Path) -> dict:
    """The power model's in-sample MAPE and its grouped cross-validated errors.

    ``variant``, ``train_mape``; ``cv_mape`` and ``cv_ape_p95``, the mean and the 95th percentile of
    the held-out absolute percentage errors (the error band `check` holds re-measurements to);
    ``cv_folds``, ``converged``, ``fallback``, and how many folds' fits fell back or did not converge.
    """
    ds = to_power_dataset(power_csv)
    pm = cal.power_model
    preds, fits = held_out_predictions(ds, CV_FOLDS, variant=pm.variant)
    ape = 100.0 * np.abs(preds["model"] / ds.watts - 1.0)
    return {"variant": pm.variant, "train_mape": float(pm.train_mape_), "cv_mape": float(ape.mean()),
            "cv_ape_p95": float(np.percentile(ape, 95)), "cv_folds": CV_FOLDS, "converged": bool(pm.converged_),
            "fallback": pm.fallback_, "cv_fallback_folds": fits["fell_back"],
            "cv_unconverged_folds": fits["not_converged"]}


def sim_truth(device: SimulatedDevice, model: PowerModel) -> dict:
    """How far (relative) the fitted voltages are from the simulated chip's own: at most, and per domain."""
    cfg = model.configs_
    true = np.array([device.gpu.volts(c, m) for c, m in cfg])
    err = np.abs(model.voltage(cfg[:, 0], cfg[:, 1]) / true - 1.0)
    return {"voltage_error_max": float(err.max()), "core_voltage_error_max": float(err[:, 0].max()),
            "memory_voltage_error_max": float(err[:, 1].max())}


def write_entry(folder: Path, device: Device, cal: Calibration) -> dict:
    """Save a GPU's models and its entry in its folder (`gpu_dir`), the entry last (atomically)."""
    uuid = folder.name
    cal.power_model.save(folder / POWER_FILE)
    cal.time_device.save(folder / TIME_FILE)
    entry = {"kind": ENTRY_KIND, "version": ENTRY_VERSION, "uuid": uuid, "name": device.name,
             "catalog": cal.catalog.key if cal.catalog else None, "identity": device.identity(),
             "reference_mhz": list(device.default_clocks()),
             "power": power_errors(cal, folder / POWER_CSV) | {"static_w": cal.power_model.static_w_.tolist(),
                                                         "idle_w": cal.power_model.idle_w_.tolist()},
             "time": cal.time_fit}
    if isinstance(device, SimulatedDevice):
        entry["truth"] = sim_truth(device, cal.power_model)
    write_json_atomic(folder / ENTRY_FILE, entry)
    return entry


def read_entry(folder: Path) -> dict:
    """Read a GPU's entry; `InputError` where it is not a registry entry of this version, or names another GPU."""
    f = folder / ENTRY_FILE
    e = read_versioned(f, ENTRY_KIND, ENTRY_VERSION)
    if e.get("uuid") != folder.name:
        raise InputError(f"{f}: its uuid {e.get('uuid')!r} is not its folder's name")
    return e


@dataclass(frozen=True)
class Registry:
    """The calibrated GPUs of a registry folder: each entry by UUID."""

    root: Path
    entries: dict[str, dict]

    @classmethod
    def load(cls, root: str | Path) -> Registry:
        """Read the entries of every calibrated GPU of a folder; `InputError` where it is missing or holds none."""
        root = Path(root)
        if not root.is_dir():
            raise InputError(f"{root}: no such registry folder")
        entries = {f.parent.name: read_entry(f.parent) for f in sorted(root.glob(f"*/{ENTRY_FILE}"))}
        if not entries:
            raise InputError(f"{root}: no calibrated GPU (no */{ENTRY_FILE}); run `gpudvfs fleet calibrate -o {root}`")
        return cls(root, entries)

    def _entry(self, uuid: str) -> dict:
        if uuid not in self.entries:
            raise InputError(f"GPU {uuid!r} is not in the registry {self.root} ({len(self.entries)} GPUs)")
        return self.entries[uuid]

    def power_model(self, uuid: str) -> PowerModel:
        """A GPU's power model; `InputError` where the GPU is not in the registry."""
        self._entry(uuid)
        return PowerModel.load(self.root / uuid / POWER_FILE)

    def time_device(self, uuid: str) -> TimeDevice:
        """A GPU's time-model device; `InputError` where the GPU is not in the registry."""
        self._entry(uuid)
        return TimeDevice.load(self.root / uuid / TIME_FILE)

    def summary(self) -> dict:
        """The fleet's spread: static power per domain, fitted core voltages, per-GPU errors.

        ``gpus``; the min, median and max (``static_w`` per domain, ``core_voltage_at_lowest_clock``,
        ``power_cv_mape``); the power CV's folds that fell back or did not converge, where the entries
        say; ``voltage_error_max`` on simulated chips.
        """
        uuids = list(self.entries)
        static = np.array([self.entries[u]["power"]["static_w"] for u in uuids])
        cv = np.array([self.entries[u]["power"]["cv_mape"] for u in uuids])
        volts = [self.power_model(u) for u in uuids]
        low = np.array([m.voltages_[np.argmin(m.configs_[:, 0]), 0] for m in volts])

        def spread(x: np.ndarray) -> dict[str, float]:
            return {"min": float(np.min(x)), "median": float(np.median(x)), "max": float(np.max(x))}

        out = {"gpus": len(uuids), "static_w": [spread(static[:, d]) for d in range(static.shape[1])],
               "core_voltage_at_lowest_clock": spread(low), "power_cv_mape": spread(cv)}
        # Entries written before the fold counts were recorded say nothing of them.
        for key in ("cv_fallback_folds", "cv_unconverged_folds"):
            counts = [self.entries[u]["power"][key] for u in uuids if key in self.entries[u]["power"]]
            if counts:
                out[f"power_{key}"] = int(sum(counts))
        truth = [self.entries[u]["truth"]["voltage_error_max"] for u in uuids if "truth" in self.entries[u]]
        if truth:
            out["voltage_error_max"] = float(max(truth))
        return out
