"""What the governor turns: the clock pair, the core clock alone, or the board's power limit.

A `Knob` reads, sets and restores one setting of a `Device`, directly (root) or through the
clock service (`clockd.ClockClient`, ``via``), and says which values the device takes. The
governor sees any knob's settings as rows [K x 2] (`knob_rows`): (core, memory) MHz pairs, or
(value, `FIXED`) for a knob of one value, whose constant second column its log-ratio features
read as nothing. `restore` puts back what the knob found when it was made: the driver's clocks
(``reset_clocks``, locked clocks undone), or the power limit enforced then. The daemon, the
training governor and its callbacks turn any of `KNOBS`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, ClassVar

import numpy as np
from numpy.typing import ArrayLike

from gpudvfs.catalog.clocks import thin
from gpudvfs.errors import InputError
from gpudvfs.hardware.device import Device
from gpudvfs.limits import clock_array, is_finite_number, watts_array

if TYPE_CHECKING:
    from gpudvfs.govern.clockd import ClockClient

#: The knobs, by the one name each goes by (API, command line, logs).
KNOBS = ("clocks", "core-clock", "power-limit")
#: The second column of a knob of one value.
FIXED = 1.0
#: Core clocks governed per memory clock at most (evenly over the supported ones, the highest, the
#: lowest and the default kept): a GPU lists a hundred or more.
MAX_CORE_CLOCKS = 40
#: Power limits governed: evenly over the board's range, its default besides.
POWER_LIMIT_LEVELS = 8


def check_knob(knob: object) -> str:
    """``knob`` where it is one of `KNOBS`; else `InputError`."""
    if knob not in KNOBS:
        raise InputError(f"knob must be one of {KNOBS}, got {knob!r}")
    return str(knob)


def knob_rows(values: ArrayLike, knob: str, name: str = "configs") -> np.ndarray:
    """A knob's settings as the governor's rows [K x 2], checked in the knob's unit.

    ``values``: [K x 2] pairs (MHz) for ``"clocks"``; for a knob of one value [K] values or
    [K x 2] rows whose second column is `FIXED`. `InputError` for values out of the unit's range.
    """
    knob = check_knob(knob)
    a = np.asarray(values)
    if knob != "clocks" and a.ndim == 2 and a.shape[1] == 2 and a.dtype.kind in "iuf":
        if not np.all(a[:, 1] == FIXED):
            raise InputError(f"{name}: a {knob} knob's rows are (value, {FIXED:g}), got a second column "
                             f"{a[:, 1].tolist()[:3]}")
        a = a[:, 0]
    if knob == "clocks":
        rows = clock_array(a, name)
        if rows.ndim != 2 or rows.shape[1] != 2:
            raise InputError(f"{name} must be [K x 2] (core, memory MHz), got shape {rows.shape}")
    else:
        v = clock_array(a, name) if knob == "core-clock" else watts_array(a, name)
        if v.ndim != 1:
            raise InputError(f"{name} must be [K] {UNITS[knob]} values of the {knob} knob, got shape {v.shape}")
        rows = np.column_stack([v, np.full(len(v), FIXED)])
    if not len(rows):
        raise InputError(f"{name}: no settings of the {knob} knob")
    return rows


#: The unit of each knob's values.
UNITS = {"clocks": "MHz", "core-clock": "MHz", "power-limit": "W"}


class Knob(ABC):
    """One setting of a device, read, set and restored; ``via`` sets it through the clock service."""

    name: ClassVar[str]

    def __init__(self, device: Device, via: ClockClient | None = None) -> None:
        self.device, self.via = device, via
        #: What `restore` puts back (`read` when made).
        self.original = self.read()

    @property
    def unit(self) -> str:
        """MHz or W."""
        return UNITS[self.name]

    @abstractmethod
    def read(self) -> float | tuple[float, float]:
        """The setting now."""

    @abstractmethod
    def check(self, value: float | tuple[float, float]) -> None:
        """`InputError` where the device does not take ``value``."""

    @abstractmethod
    def set(self, value: float | tuple[float, float]) -> None:
        """Set ``value`` (checked first: `InputError`); `ClockPermissionError` where the process may not."""

    @abstractmethod
    def restore(self) -> None:
        """Put back what the knob found."""

    def row(self) -> tuple[float, float]:
        """The setting now as a governor row."""
        v = self.read()
        return (float(v[0]), float(v[1])) if isinstance(v, tuple) else (float(v), FIXED)

    def set_row(self, a: float, b: float) -> None:
        """Set a governor row (``set``'s value: the pair, or the first column)."""
        self.set((float(a), float(b)) if self.name == "clocks" else float(a))

    def _reset_clocks(self) -> None:
        if self.via is not None:
            self.via.reset()
        else:
            self.device.reset_clocks()


class ClockPair(Knob):
    """Both clocks locked (MHz); restored to the driver's."""

    name = "clocks"

    def read(self) -> tuple[float, float]:
        """The (core, memory) MHz the GPU runs at."""
        core, mem = self.device.clocks
        return float(core), float(mem)

    def check(self, value: float | tuple[float, float]) -> None:
        """A pair the device lists."""
        if not isinstance(value, tuple) or len(value) != 2:
            raise InputError(f"a clocks value is (core_mhz, mem_mhz), got {value!r}")
        core, mem = value
        if mem not in self.device.memory_clocks() or core not in self.device.core_clocks(mem):
            raise InputError(f"{core:g}/{mem:g} MHz is not a pair {self.device.name} supports")

    def set(self, value: float | tuple[float, float]) -> None:
        """Lock the pair."""
        self.check(value)
        assert isinstance(value, tuple)  # checked
        (self.via.set if self.via is not None else self.device.lock_clocks)(*value)

    def restore(self) -> None:
        """The driver's clocks."""
        self._reset_clocks()


class CoreClock(Knob):
    """The core clock alone locked (MHz, as ``nvidia-smi -lgc``), the memory clock left to the driver.

    Its values are the core clocks the device lists at ``mem_mhz``, the memory clock the GPU runs
    when the knob is made (the default's where that one is not listed: an idle board's low memory
    state). `InputError` where the device lists fewer than two core clocks there.
    """

    name = "core-clock"

    def __init__(self, device: Device, via: ClockClient | None = None) -> None:
        mem = float(device.clocks[1])
        if mem not in device.memory_clocks():
            mem = float(device.default_clocks()[1])
        cores = device.core_clocks(mem)
        if len(cores) < 2:
            raise InputError(f"{device.name} lists {len(cores)} core clock(s) {list(cores)} at memory {mem:g} MHz: "
                             "it has no core clock to turn; use knob='power-limit'")
        self.mem_mhz = mem
        super().__init__(device, via)

    def read(self) -> float:
        """The core MHz the GPU runs at."""
        return float(self.device.clocks[0])

    def check(self, value: float | tuple[float, float]) -> None:
        """A core clock the device lists at ``mem_mhz``."""
        if value not in self.device.core_clocks(self.mem_mhz):
            raise InputError(f"{value!r} MHz is not a core clock {self.device.name} supports at memory "
                             f"{self.mem_mhz:g} MHz")

    def set(self, value: float | tuple[float, float]) -> None:
        """Lock the core clock."""
        self.check(value)
        (self.via.set_core if self.via is not None else self.device.lock_core_clock)(float(value))  # type: ignore[arg-type]

    def restore(self) -> None:
        """The driver's clocks."""
        self._reset_clocks()

    def settings(self, n: int | None = None) -> tuple[np.ndarray, int]:
        """The listed core clocks, thinned to ``n`` (`MAX_CORE_CLOCKS`) as the clock pairs are; the default's index."""
        core0 = float(self.device.default_clocks()[0])
        rows = knob_rows(thin(self.device.core_clocks(self.mem_mhz), core0, n or MAX_CORE_CLOCKS), self.name)
        return rows, int(np.argmin(np.abs(np.log(rows[:, 0] / core0))))


class PowerLimit(Knob):
    """The board's power limit (W), the clocks left to the driver; restored to the limit enforced when made.

    It takes any value in the board's range (NVML sets whole mW).
    """

    name = "power-limit"

    def __init__(self, device: Device, via: ClockClient | None = None) -> None:
        limits = device.power_limits()
        default = limits["default"] or limits["enforced"]
        if limits["min"] is None or limits["max"] is None or default is None or limits["enforced"] is None:
            raise InputError(f"{device.name} does not report its power limits: it has no power-limit knob here; "
                             "use knob='clocks'")
        self.min_w, self.max_w, self.default_w = float(limits["min"]), float(limits["max"]), float(default)
        super().__init__(device, via)

    def read(self) -> float:
        """The limit enforced now, W."""
        enforced = self.device.power_limits()["enforced"]
        if enforced is None:
            raise InputError(f"{self.device.name} stopped reporting its enforced power limit")
        return float(enforced)

    def check(self, value: float | tuple[float, float]) -> None:
        """A limit within the board's range."""
        if not (is_finite_number(value) and self.min_w <= float(value) <= self.max_w):  # type: ignore[arg-type]
            raise InputError(f"power limit {value!r} W is outside the {self.min_w:g}-{self.max_w:g} W "
                             f"{self.device.name} takes; choose one within it")

    def set(self, value: float | tuple[float, float]) -> None:
        """Set the limit."""
        self.check(value)
        (self.via.set_power_limit if self.via is not None else self.device.set_power_limit)(float(value))  # type: ignore[arg-type]

    def restore(self) -> None:
        """The limit enforced when the knob was made (the clock service: as it found it)."""
        if self.via is not None:
            self.via.reset()
        else:
            self.device.set_power_limit(float(self.original))  # type: ignore[arg-type]

    def settings(self, n: int | None = None) -> tuple[np.ndarray, int]:
        """``n`` limits (`POWER_LIMIT_LEVELS`) evenly over the range, whole W, and the default."""
        values = np.unique(np.append(np.round(np.linspace(self.min_w, self.max_w, n or POWER_LIMIT_LEVELS)),
                                     self.default_w))
        values = values[(values >= self.min_w) & (values <= self.max_w)]
        return knob_rows(values, self.name), int(np.flatnonzero(values == self.default_w)[0])


def make_knob(knob: str, device: Device, via: ClockClient | None = None) -> Knob:
    """The knob named ``knob`` (`KNOBS`) of ``device``; `InputError` where the device has no such knob."""
    kinds: dict[str, type[ClockPair | CoreClock | PowerLimit]] = {"clocks": ClockPair, "core-clock": CoreClock,
                                                                   "power-limit": PowerLimit}
    kind = kinds[check_knob(knob)]
    return kind(device, via)
