"""Chips of one simulated GPU model that differ as real chips of one SKU do.

Each chip's variation is drawn from its UUID, so a fleet of simulated GPUs is the same in
every run and on every node: a power scale around 1 (standard deviation 0.1, so chips
differ by about 8% on average, clipped to +-22%: the spread reported for same-SKU GPUs),
a few percent per component on top, and its own voltage curve (the floor voltage and the
break frequency) and memory voltages. The reference clocks keep voltage 1, as the power
model normalizes them.
"""

from __future__ import annotations

import hashlib
import uuid as uuidlib
from dataclasses import replace
from typing import Any

import numpy as np

from gpudvfs.errors import InputError
from gpudvfs.hardware.simulated import SimulatedDevice, SimulatedGpu

POWER_SPREAD = 0.10
POWER_SPREAD_MAX = 0.22
COMPONENT_SPREAD = 0.03


def _digest(text: str) -> bytes:
    return hashlib.sha256(text.encode()).digest()


def sim_uuid(index: int, fleet_seed: int = 0) -> str:
    """NVML's ``GPU-<uuid>`` of GPU ``index`` of a simulated fleet (other seeds: other chips); `InputError` if < 0."""
    if index < 0:
        raise InputError(f"a GPU index must be >= 0, got {index}")
    return f"GPU-{uuidlib.UUID(bytes=_digest(f'gpudvfs-sim|{fleet_seed}|{index}')[:16], version=4)}"


def chip_gpu(uuid: str, base: SimulatedGpu | None = None, aging: float = 0.0) -> SimulatedGpu:
    """A simulated GPU model (default: the default one) as the chip whose variation is drawn from this UUID.

    ``aging`` is the fraction by which the chip's static and idle power have grown since it was new
    (leakage), in (-0.5, 10). `InputError` where ``uuid`` is empty or ``aging`` out of its range.
    """
    if not uuid:
        raise InputError("a chip needs a non-empty UUID")
    if not -0.5 < aging < 10:
        raise InputError(f"aging must be a fraction of the chip's static power in (-0.5, 10), got {aging}")
    base = base or SimulatedGpu()
    rng = np.random.default_rng(int.from_bytes(_digest(f"gpudvfs-chip|{uuid}")[:8], "little"))
    scale = 1.0 + float(np.clip(POWER_SPREAD * rng.standard_normal(), -POWER_SPREAD_MAX, POWER_SPREAD_MAX))

    def vary(watts: tuple[float, ...], grown: float = 1.0) -> tuple[float, ...]:
        return tuple(float(w * scale * grown * (1.0 + COMPONENT_SPREAD * rng.standard_normal())) for w in watts)

    ref_mem = base.default_mhz[1]
    mem_volts = {m: v if m == ref_mem else float(v * (1.0 + 0.015 * rng.uniform(-1, 1)))
                 for m, v in base.mem_volts.items()}
    return replace(base, name=f"{base.name} {uuid}", uuid=uuid, static_w=vary(base.static_w, 1.0 + aging),
                   idle_w=vary(base.idle_w, 1.0 + aging), weights_w=vary(base.weights_w),
                   v_low=float(base.v_low + rng.uniform(-0.03, 0.03)),
                   v_break_mhz=float(base.v_break_mhz + rng.uniform(-60.0, 60.0)), mem_volts=mem_volts)


def chip_device(uuid: str, aging: float = 0.0, **options: Any) -> SimulatedDevice:
    """A `SimulatedDevice` of the chip with this UUID, its sensor noise seeded from the UUID too."""
    seed = int.from_bytes(_digest(f"gpudvfs-noise|{uuid}")[:4], "little")
    return SimulatedDevice(chip_gpu(uuid, aging=aging), seed=seed, **options)
