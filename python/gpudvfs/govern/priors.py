"""A phase's prior: its time and power over the settings governed, from its first measurement.

The measurement sets the level, a shape without a fit of the workload the rest. Clock pairs
(`step_prior`): the catalog's power prior (`gpudvfs.power.PowerModel.prior`) gives the shape of
power over the clocks, and a two-part time law (a compute share scaling with 1/f_core, a memory
share with 1/f_mem) the shape of time; the core clock alone takes the same at its pairs with the
memory clock the GPU runs. Power limits (`limit_curves`): the phase draws the limit where it is
below its own power. `CatalogPrior`, `CoreClockPrior` and `PowerLimitPrior` carry these to the daemon;
a prior from the fleet's fitted models is `gpudvfs.fleet.model_prior.ModelPrior`. Pure: the
device is read for its settings only.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import numpy as np
from numpy.typing import ArrayLike

from gpudvfs.data.counters import COMPONENTS
from gpudvfs.errors import GpudvfsWarning, InputError
from gpudvfs.govern.clock_grid import ClockGrid, clock_grid
from gpudvfs.govern.knob import POWER_LIMIT_LEVELS, CoreClock, PowerLimit
from gpudvfs.hardware.device import Device
from gpudvfs.limits import clock_array
from gpudvfs.power import PowerModel

#: A generic busy profile of a deep-learning step (component utilizations, in the power
#: model's components), for the SHAPE of power over the clocks only. Generic: not fitted on any
#: measurement; the governor learns the real shape from the steps it observes.
GENERIC_UTIL: Mapping[str, float] = {"SP": 0.5, "INT": 0.3, "DP": 0.0, "SFU": 0.0, "L2": 0.4, "Shared": 0.3,
                                     "DRAM": 0.4}
#: The share of a step's time that scales with the memory clock (the rest with the core clock),
#: where no activities say otherwise: the least mean |log time error| of `step_prior` over the
#: public clock grids, each alike (18.2%; 19.3% at 0.3). The GPUs disagree (the Titan X's grids
#: want 0-0.1, the others' 0.7-0.9): with each GPU left out, 28.6%. `gpudvfs govern prior-cv DATA`.
MEMORY_SHARE = 0.6
#: The relative error of `step_prior` (the governor's ``prior_sd`` for it and the catalog and
#: core-clock priors): the least sd whose 90% interval holds 90% of the clock files' held-out
#: errors, time's and power's, each file alike. Each GPU's files held out (their sd chosen on the
#: other GPUs'), the interval holds 90.0% of a file's errors on average (73-100%).
#: `gpudvfs govern prior-cv DATA`. The fitted models' prior has the narrower
#: `gpudvfs.govern.governor.MODEL_PRIOR_SD`.
STEP_PRIOR_SD = 0.27
#: The relative error of `limit_prior` (``prior_sd`` of `PowerLimitPrior`), chosen as
#: `STEP_PRIOR_SD` on Zeus's two power-limit traces: each held out with the other's sd (0.09,
#: 0.11), its interval holds 87% and 93% of its errors. It also sets how much the governor
#: explores: there its regret (cost, eta 0.5, seeds 0-2) is 0.27% / 0.75% (V100 / RTX 6000), and
#: 0.34% / 1.81% at the clock prior's 0.27 (`gpudvfs govern prior-cv DATA --replay`).
LIMIT_PRIOR_SD = 0.1

#: ``power(u, core[K], mem[K])``: power over the pairs, of utilizations ``u`` over `COMPONENTS`.
PowerShape = Callable[[np.ndarray, np.ndarray, np.ndarray], "np.ndarray | float"]


def catalog_power_shape(name: str, default_mhz: tuple[float, float]) -> tuple[PowerShape, str | None]:
    """The catalog power prior of a GPU as a power shape, referred to its default clocks.

    Beyond the catalog's clocks the curve extrapolates: a prior's shape, without a warning.

    ``default_mhz``, the GPU's default (core, memory) MHz, is the prior's reference. Returns the
    shape and the catalog key of the GPU whose prior it is; `InputError` where the catalog has no
    prior for the GPU.
    """
    model = PowerModel.prior(name, reference=default_mhz)

    def shape(u: np.ndarray, core: np.ndarray, mem: np.ndarray) -> np.ndarray:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", GpudvfsWarning)
            return model.predict(u, core, mem)
    return shape, model.device_


def shape_or_flat(name: str, default_mhz: tuple[float, float]) -> tuple[PowerShape | None, str, str | None]:
    """`catalog_power_shape` and its catalog key; else no shape (flat power), ``"none"`` and why."""
    try:
        shape, key = catalog_power_shape(name, default_mhz)
    except InputError as e:
        return None, "none", f"no catalog power prior for {name!r} ({str(e).split('. ')[0]}): flat power prior"
    return shape, str(key), None


def core_clock_pairs(rows: np.ndarray, mem_mhz: float) -> np.ndarray:
    """The core clock knob's rows [K x 2] (`knob.knob_rows`) as the (core, memory) MHz pairs they run at."""
    return np.column_stack([rows[:, 0], np.full(len(rows), float(mem_mhz))])


def utilization_vector(util: Mapping[str, float] | None = None) -> np.ndarray:
    """Component utilizations as the power model's vector.

    ``util``: component name -> utilization in [0, 1], missing ones 0 (None: `GENERIC_UTIL`);
    returns them over `COMPONENTS`. `InputError` for an unknown component or a utilization outside
    [0, 1].
    """
    util = GENERIC_UTIL if util is None else util
    unknown = set(util) - set(COMPONENTS)
    if unknown:
        raise InputError(f"util: unknown components {sorted(unknown)}; expected some of {list(COMPONENTS)}")
    u = np.array([float(util.get(c, 0.0)) for c in COMPONENTS])
    if not (np.isfinite(u).all() and (u >= 0).all() and (u <= 1).all()):
        raise InputError(f"util: utilizations must be in [0, 1], got {dict(util)}")
    return u


def _positive(name: str, value: Any) -> float:
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise InputError(f"{name} must be a positive number, got {value!r}") from None
    if not (math.isfinite(x) and x > 0):
        raise InputError(f"{name} must be positive and finite, got {value!r}")
    return x


def step_prior(configs: ArrayLike, measured_mhz: Sequence[float], time_ms: float, watts: float,
               power: PowerShape | None = None, *, util: Mapping[str, float] | None = None,
               memory_share: float = MEMORY_SHARE) -> tuple[np.ndarray, np.ndarray]:
    """Time and power at every pair, of a step measured at one pair.

    * watts_k = watts * P(u, pair_k) / P(u, measured pair), P the power shape and u ``util``;
      without a shape, flat (watts_k = watts);
    * time_k = time_ms * ((1 - m) f_core / f_core_k + m f_mem / f_mem_k), m ``memory_share``.

    Both equal the measurement at the measured pair.

    ``configs``: [K x 2] (core, memory) MHz; ``power``: ``power(u, core[K], mem[K])``, e.g.
    ``PowerModel.prior(name, reference=...).predict``, None for a GPU without one. Returns [K] time
    (ms) and watts. `InputError` for pairs that are not [K x 2] positive clocks, a time or power
    that is not positive and finite, a share outside [0, 1], or a shape that is not one positive
    value per pair.
    """
    cfg = clock_array(configs, "configs")
    if cfg.ndim != 2 or cfg.shape[1] != 2 or len(cfg) == 0:
        raise InputError(f"configs must be [K x 2] (core, memory MHz), got shape {cfg.shape}")
    pair = np.asarray(measured_mhz)
    if pair.shape != (2,):
        raise InputError(f"measured_mhz must be (core, memory) MHz, got {measured_mhz!r}")
    fc, fm = (float(x) for x in clock_array(pair, "measured_mhz"))
    time_ms, watts = _positive("time_ms", time_ms), _positive("watts", watts)
    if not (isinstance(memory_share, (int, float)) and not isinstance(memory_share, bool) and 0 <= memory_share <= 1):
        raise InputError(f"memory_share must be a number in [0, 1], got {memory_share!r}")
    m = float(memory_share)
    t = time_ms * ((1 - m) * fc / cfg[:, 0] + m * fm / cfg[:, 1])
    if power is None:
        return t, np.full(len(cfg), watts)
    u = utilization_vector(util)
    shape = np.asarray(power(u, cfg[:, 0], cfg[:, 1]), dtype=np.float64)
    here = np.asarray(power(u, np.array([fc]), np.array([fm])), dtype=np.float64).reshape(-1)
    if shape.shape != (len(cfg),) or here.shape != (1,):
        raise InputError(f"power must return one value per pair: got shapes {shape.shape} and {here.shape}")
    if not (np.isfinite(shape).all() and (shape > 0).all() and np.isfinite(here[0]) and here[0] > 0):
        raise InputError("power must be positive and finite at every pair and at the measured one")
    return t, watts * shape / here[0]


def limit_curves(limits: ArrayLike, watts: float) -> tuple[np.ndarray, np.ndarray]:
    """A phase's log time and log power under each power limit (W), relative to its own unlimited ``watts``.

    Under a limit L below the power P a phase draws, the driver lowers the clock until the board
    draws L, so the phase draws L and its time grows as the clock falls, as the cube root of the
    power (dynamic power goes as the clock times the voltage squared, the voltage about with the
    clock); at or above P nothing changes. A cold start, not fitted: the governor corrects it by
    measuring.
    """
    log_p = np.minimum(np.log(np.asarray(limits, dtype=np.float64) / watts), 0.0)
    return -log_p / 3, log_p


def limit_prior(limits: ArrayLike, time_ms: float, watts: float) -> tuple[np.ndarray, np.ndarray]:
    """A phase's time (ms per unit) and power (W) at each limit, from one measurement at its own: `limit_curves`."""
    log_t, log_p = limit_curves(limits, watts)
    return time_ms * np.exp(log_t), watts * np.exp(log_p)


class Prior(Protocol):
    """What a daemon's phases start from: the settings governed and a phase's curves over them.

    ``knob``: one of `knob.KNOBS`; ``configs`` [K x 2], its rows (`knob.knob_rows`);
    ``prior_sd``: the governor's ``prior_sd`` for it.
    """

    name: str
    knob: str
    prior_sd: float
    configs: np.ndarray
    default_index: int

    def __call__(self, watts: float, activity: np.ndarray, time_ms: float,
                 clocks: tuple[float, float]) -> tuple[np.ndarray, np.ndarray]:
        """Time per unit of work (ms) and watts at every setting, of an interval's.

        The interval drew ``watts`` at ``clocks`` (core, memory MHz), with (SM, pipe, DRAM)
        ``activity``, taking ``time_ms`` per unit of work.
        """


class CatalogPrior:
    """A phase's prior from nothing fitted.

    The pairs the GPU lists (else its catalog entry's), power by the shape of the catalog's power
    prior (None: flat) and time by `step_prior`'s law.
    """

    name, knob = "catalog", "clocks"
    prior_sd = STEP_PRIOR_SD

    @classmethod
    def of(cls, device: Device, catalog_name: str | None = None) -> CatalogPrior:
        """The prior of a device under its catalog entry (None: its own name).

        A catalog without the GPU leaves the power flat, with a warning.
        """
        grid = clock_grid(device, catalog_name)
        shape, _, why = shape_or_flat(catalog_name or device.name, grid.default_mhz)
        if why is not None:
            warnings.warn(GpudvfsWarning(f"{why}, learnt as the daemon measures"), stacklevel=2)
        return cls(grid, shape)

    def __init__(self, grid: ClockGrid, shape: PowerShape | None) -> None:
        self.shape = shape
        self.configs, self.default_index = grid.configs, grid.default_index

    def __call__(self, watts: float, activity: np.ndarray, time_ms: float,
                 clocks: tuple[float, float]) -> tuple[np.ndarray, np.ndarray]:
        """As `Prior`; the activities are not read."""
        return step_prior(self.configs, tuple(float(c) for c in clocks), time_ms, watts, self.shape)


class CoreClockPrior:
    """The core clock alone as the knob (`knob.CoreClock`), the memory clock left to the driver.

    Its core clocks at the memory clock the GPU runs (`CoreClock.settings`); a phase's curves by
    `step_prior` at those pairs, power by the catalog's power prior's shape under ``catalog_name``
    (None: the device's name; a catalog without the GPU: flat, with a warning).
    """

    name, knob = "catalog", "core-clock"
    prior_sd = STEP_PRIOR_SD

    def __init__(self, device: Device, catalog_name: str | None = None) -> None:
        knob = CoreClock(device)
        self.configs, self.default_index = knob.settings()
        self.pairs = core_clock_pairs(self.configs, knob.mem_mhz)
        core0, mem0 = device.default_clocks()
        self.shape, _, why = shape_or_flat(catalog_name or device.name, (float(core0), float(mem0)))
        if why is not None:
            warnings.warn(GpudvfsWarning(f"{why}, learnt as the daemon measures"), stacklevel=2)

    def __call__(self, watts: float, activity: np.ndarray, time_ms: float,
                 clocks: tuple[float, float]) -> tuple[np.ndarray, np.ndarray]:
        """As `Prior`, at the core clocks' pairs; the activities are not read."""
        return step_prior(self.pairs, tuple(float(c) for c in clocks), time_ms, watts, self.shape)


class PowerLimitPrior:
    """The board's power limit as the knob, the clocks left to the driver.

    ``levels`` limits evenly over the range the GPU takes, and its default (`knob.PowerLimit`); a
    phase's curves by `limit_prior`. `InputError` where the GPU does not report its power limits.
    """

    name = knob = "power-limit"
    prior_sd = LIMIT_PRIOR_SD

    def __init__(self, device: Device, levels: int = POWER_LIMIT_LEVELS) -> None:
        self.configs, self.default_index = PowerLimit(device).settings(levels)

    def __call__(self, watts: float, activity: np.ndarray, time_ms: float,
                 clocks: tuple[float, float]) -> tuple[np.ndarray, np.ndarray]:
        """As `Prior`, over the power limits; the activities and clocks are not read."""
        return limit_prior(self.configs[:, 0], time_ms, watts)
