"""What a training governor chooses among, and what shapes a phase's prior over it.

Clocks: the device's pairs (`clock_grid`), a phase's prior by `step_prior` with the catalog's
power shape. The core clock alone: its core clocks (`knob.CoreClock`), the same prior at their
pairs with the memory clock the GPU runs. Power limits: the board's (`knob.PowerLimit`), a
phase's prior by `priors.limit_prior`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from gpudvfs.errors import InputError
from gpudvfs.govern.clock_grid import ClockGrid, clock_grid
from gpudvfs.govern.integrations.devices import SIM_CATALOG_NAME
from gpudvfs.govern.integrations.meter import is_simulated
from gpudvfs.govern.knob import CoreClock, PowerLimit
from gpudvfs.govern.priors import (
    LIMIT_PRIOR_SD,
    STEP_PRIOR_SD,
    PowerShape,
    core_clock_pairs,
    limit_prior,
    shape_or_flat,
    step_prior,
)
from gpudvfs.hardware.device import Device


@dataclass(frozen=True)
class Governed:
    """The governor's rows of one knob (`knob.knob_rows`) and a phase's prior over them.

    ``grid``: where clock pairs came from (None for the other knobs); ``mem_mhz``: the memory clock
    the core clock knob's rows run at; ``power_prior``: the catalog entry shaping the power,
    ``"power-limit"``, or ``"none"`` (flat; None: the catalog's own said none).
    """

    knob: str
    configs: np.ndarray
    default_index: int
    grid: ClockGrid | None
    power_shape: PowerShape | None
    power_prior: str | None
    mem_mhz: float | None = None

    @property
    def prior_sd(self) -> float:
        """The governor's ``prior_sd`` for `prior`: its prior function's calibrated error."""
        return LIMIT_PRIOR_SD if self.knob == "power-limit" else STEP_PRIOR_SD

    def prior(self, at: tuple[float, float], time_ms: float, watts: float, **step: Any
              ) -> tuple[np.ndarray, np.ndarray]:
        """A phase's time (ms per unit) and power at every row, from one window at row ``at``.

        ``step``: `step_prior`'s ``util`` and ``memory_share`` (clocks, core clock).
        """
        if self.knob == "power-limit":
            return limit_prior(self.configs[:, 0], time_ms, watts)
        if self.mem_mhz is not None:
            return step_prior(core_clock_pairs(self.configs, self.mem_mhz), (at[0], self.mem_mhz), time_ms, watts,
                              self.power_shape, **step)
        return step_prior(self.configs, at, time_ms, watts, self.power_shape, **step)

    def summary(self) -> dict:
        """The rows, for the run's summary."""
        if self.knob == "power-limit":
            return {"limits_w": self.configs[:, 0].tolist(), "default_w": float(self.configs[self.default_index, 0]),
                    "source": "device"}
        if self.grid is None:
            return {"core_mhz": self.configs[:, 0].tolist(), "mem_mhz": self.mem_mhz,
                    "default_core_mhz": float(self.configs[self.default_index, 0]), "source": "device"}
        g = self.grid
        return {"pairs": len(g.configs), "source": g.source, "default_mhz": list(g.default_mhz),
                "default_source": g.default_source}


def governed(knob: str, device: Device, catalog_name: str | None, max_core_clocks: int
             ) -> tuple[Governed | None, list[tuple[str, str]], list[str]]:
    """The settings of ``knob`` on ``device``; with the (kind, message) warnings and the notes.

    None where the device gives no clock grid (a warning: metered only). `InputError` for a knob
    the device cannot turn (no power limits reported; fewer than two core clocks).
    """
    if knob == "power-limit":
        configs, k = PowerLimit(device).settings()
        return Governed(knob, configs, k, None, None, "power-limit"), [], []
    name = catalog_name or (SIM_CATALOG_NAME if is_simulated(device) else device.name)
    if knob == "core-clock":
        core = CoreClock(device)
        configs, k = core.settings(max_core_clocks)
        c0, m0 = device.default_clocks()
        shape, source, why = shape_or_flat(name, (float(c0), float(m0))) if name else (None, "none", None)
        return Governed(knob, configs, k, None, shape, source, core.mem_mhz), \
            [("prior", f"gpudvfs: {why}")] if why else [], []
    warns: list[tuple[str, str]] = []
    try:
        grid = clock_grid(device, catalog_name, max_core_clocks)
    except InputError as e:
        return None, [("grid", f"gpudvfs: no clock grid for {device.name} ({e}): metering only, no governor")], []
    shape, source = None, "none"
    if not name:
        warns.append(("prior", "gpudvfs: the device has no name for the catalog: flat power prior"))
    else:
        shape, source, why = shape_or_flat(name, grid.default_mhz)
        if why:
            warns.append(("prior", f"gpudvfs: {why}"))
    return Governed(knob, grid.configs, grid.default_index, grid, shape, source), warns, list(grid.notes)
