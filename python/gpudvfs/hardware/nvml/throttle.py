"""Why a GPU's clocks are held down: NVML's clock event ("throttle") reasons, read and named."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

from gpudvfs.errors import GpudvfsWarning

# NVML's clock event ("throttle") reason bits; the nvmlClocksEventReason* and older
# nvmlClocksThrottleReason* constants share these values.
THROTTLE_REASONS: tuple[tuple[int, str], ...] = (
    (0x0001, "gpu_idle"),
    (0x0002, "applications_clocks_setting"),
    (0x0004, "sw_power_cap"),
    (0x0008, "hw_slowdown"),
    (0x0010, "sync_boost"),
    (0x0020, "sw_thermal_slowdown"),
    (0x0040, "hw_thermal_slowdown"),
    (0x0080, "hw_power_brake_slowdown"),
    (0x0100, "display_clock_setting"),
    (0x0200, "board_limit"),
    (0x0400, "reliability"),
)
# Not throttling: GpuIdle is reported whenever nothing runs (before, between and after
# launches), and ApplicationsClocksSetting means "held at the clocks that were set", which is
# the configuration being measured.
IGNORED_THROTTLE_REASONS = 0x0001 | 0x0002
_KNOWN = sum(bit for bit, _ in THROTTLE_REASONS)


def reason_names(mask: int) -> tuple[str, ...]:
    """The names of the bits set in NVML's reason mask, in `THROTTLE_REASONS` order; later bits as ``unknown_0x...``."""
    names = [name for bit, name in THROTTLE_REASONS if mask & bit]
    if mask & ~_KNOWN:
        names.append(f"unknown_0x{mask & ~_KNOWN:x}")
    return tuple(names)


class ThrottleReader:
    """Reads one GPU's raw reason bits through whichever NVML call its driver answers.

    The "event reasons" call replaced the "throttle reasons" one (same bits) in newer drivers;
    older bindings or drivers only have the latter. The call that answers is learnt on first
    use; where neither does, the GPU reports no reasons (one warning, naming ``name``, says so).
    """

    def __init__(self, nv: Any, handle: Any, name: str) -> None:
        self._nv, self._handle, self._name = nv, handle, name
        self._read: Callable[[Any], int] | None = None

    def mask(self) -> int:
        """The raw reason bits active now; 0 (after one warning) where the GPU cannot report them."""
        if self._read is not None:
            return int(self._read(self._handle))
        nv = self._nv
        candidates = [getattr(nv, n) for n in ("nvmlDeviceGetCurrentClocksEventReasons",
                                               "nvmlDeviceGetCurrentClocksThrottleReasons")
                      if hasattr(nv, n)]
        for fn in candidates:
            try:
                mask = int(fn(self._handle))
            except nv.NVMLError_FunctionNotFound:
                continue
            except nv.NVMLError_NotSupported:
                break
            self._read = fn
            return mask
        self._read = lambda handle: 0
        warnings.warn(f"{self._name} does not report clock throttle reasons; "
                      "measurements cannot be flagged as throttled",
                      GpudvfsWarning, stacklevel=4)
        return 0
