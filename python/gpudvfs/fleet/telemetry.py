"""Simulated DCGM data for a registry of simulated chips, so `gpudvfs fleet whatif` runs without a GPU.

Exporter-style telemetry of jobs running at the default clocks, and a DCGM grid of the power
suite (the training data of the DCGM time model, `gpudvfs time fit-dcgm`). A simulated
workload's DCGM activities come from its utilizations: SM activity is its busiest core-domain
unit, the FP32 and FP64 pipes its SP and DP, DRAM activity its DRAM.
"""
from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from gpudvfs.data.counters import COMPONENTS, DOMAIN_SIZES
from gpudvfs.data.source import format_number
from gpudvfs.errors import InputError
from gpudvfs.fleet.registry import Registry
from gpudvfs.hardware.apps import APPS
from gpudvfs.hardware.chips import chip_device
from gpudvfs.hardware.simulated import SimulatedDevice, profile_of
from gpudvfs.hardware.sweep import grid, suite_workloads

ACTIVITIES = ("DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_PROF_PIPE_FP32_ACTIVE", "DCGM_FI_PROF_PIPE_FP64_ACTIVE",
              "DCGM_FI_PROF_DRAM_ACTIVE")
#: Rows generated and written at a time (bounds the memory of a large sample).
CHUNK = 1 << 20


def activities(util: np.ndarray) -> np.ndarray:
    """(SM, FP32, FP64, DRAM) activity of a simulated workload's utilizations over `COMPONENTS`."""
    u = dict(zip(COMPONENTS, util))
    return np.array([max(util[:DOMAIN_SIZES[0]]), u["SP"], u["DP"], u["DRAM"]])


def sample_telemetry(registry: Registry, rows: int, path: str | Path, *, seed: int = 0,
                     interval_s: float = 30.0, noise: float = 0.01) -> dict:
    """Write ``rows`` exporter-style samples as Parquet, dealt over the registry's GPUs in turn.

    GPU i runs the demo's workload i % 4 (the job) at its default clocks, sampled every
    ``interval_s``; power is the chip's true power with relative noise ``noise``. Returns ``rows``,
    ``gpus`` and ``path``; `InputError` for ``rows`` below 1, or a GPU that is not simulated.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    if rows < 1:
        raise InputError(f"rows must be at least 1, got {rows}")
    uuids = list(registry.entries)
    gpus = []
    for i, uuid in enumerate(uuids):
        if registry.entries[uuid]["identity"].get("kind") != "simulated":
            raise InputError(f"GPU {uuid} is not simulated")
        dev, w = chip_device(uuid), APPS[i % len(APPS)]
        fc, fm = dev.default_clocks()
        gpus.append((uuid, w.name, fc, fm, dev.true_power_w(w, fc, fm), activities(profile_of(w, dev.gpu).util)))
    rng = np.random.default_rng(seed)
    schema = pa.schema([("timestamp", pa.float64()), ("UUID", pa.string()), ("job", pa.string()),
                        ("DCGM_FI_DEV_POWER_USAGE", pa.float32()), ("DCGM_FI_DEV_SM_CLOCK", pa.float32()),
                        ("DCGM_FI_DEV_MEM_CLOCK", pa.float32()), *[(a, pa.float32()) for a in ACTIVITIES]])
    with pq.ParquetWriter(str(path), schema) as out:
        for start in range(0, rows, CHUNK):
            idx = np.arange(start, min(rows, start + CHUNK))
            g = idx % len(gpus)
            table = {"timestamp": (idx // len(gpus)) * interval_s,
                     "UUID": np.array([gpus[k][0] for k in range(len(gpus))])[g],
                     "job": np.array([gpus[k][1] for k in range(len(gpus))])[g]}
            fields = np.array([[*x[2:5], *x[5]] for x in gpus])[g]
            fields[:, 2] *= 1.0 + noise * rng.standard_normal(len(idx))
            for j, name in enumerate(("DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_MEM_CLOCK", "DCGM_FI_DEV_POWER_USAGE",
                                      *ACTIVITIES)):
                table[name] = fields[:, j].astype(np.float32)
            out.write_table(pa.table(table, schema=schema))
    return {"rows": rows, "gpus": len(gpus), "path": str(path)}


def sample_dcgm_grid(path: str | Path, device: SimulatedDevice | None = None) -> dict:
    """Write the power suite on a simulated GPU as a DCGM grid (CSV): every benchmark at every pair.

    Each row has the true time and power and the DCGM activities. Returns ``rows``, ``path`` and
    ``reference_mhz`` (the GPU's default clocks).
    """
    dev = device or SimulatedDevice()
    pairs = grid(dev)
    with open(path, "w", newline="", encoding="utf-8") as f:
        out = csv.writer(f)
        out.writerow(["application", "sm_app_clock", "mem_clock", "time_ms", "power_usage",
                      "sm_active", "fp32_active", "fp64_active", "dram_active"])
        for w in suite_workloads("power"):
            act = activities(profile_of(w, dev.gpu).util)
            for fc, fm in pairs:
                out.writerow([w.name, *map(format_number, (fc, fm, dev.true_time_ms(w, fc, fm),
                                                           dev.true_power_w(w, fc, fm), *act))])
    return {"rows": len(pairs) * len(suite_workloads("power")), "path": str(path),
            "reference_mhz": list(dev.default_clocks())}
