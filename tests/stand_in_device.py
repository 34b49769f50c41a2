"""`StandIn`: a whole `Device` whose sensors a test overrides (a stand-in, not a GPU, not NVML).

What a subclass does not override answers as an idle GPU held at 1000/800 MHz that reports no
power limits and runs nothing.
"""

from __future__ import annotations

from gpudvfs.errors import InputError
from gpudvfs.hardware.device import Measurement, Workload


class StandIn:
    name = "stand-in"
    clocks = (1000.0, 800.0)

    def memory_clocks(self) -> list[float]:
        return [800.0]

    def core_clocks(self, mem_mhz: float) -> list[float]:
        return [1000.0]

    def default_clocks(self) -> tuple[float, float]:
        return (1000.0, 800.0)

    def sm_count(self) -> int:
        return 1

    def identity(self) -> dict[str, str | float | bool | None]:
        return {"kind": "stand-in"}

    def check(self, workload: Workload) -> None:
        raise InputError("the stand-in runs nothing")

    def lock_clocks(self, core_mhz: float, mem_mhz: float) -> None:
        pass

    def lock_core_clock(self, core_mhz: float) -> None:
        pass

    def reset_clocks(self) -> None:
        pass

    def power_limits(self) -> dict[str, float | None]:
        return {"enforced": None, "default": None, "min": None, "max": None}

    def set_power_limit(self, watts: float) -> None:
        raise InputError("the stand-in takes no power limit")

    def power_watts(self) -> float:
        return 50.0

    def energy_joules(self) -> float | None:
        return None

    def throttle_reasons(self) -> tuple[str, ...]:
        return ()

    def temperature_c(self) -> float:
        return 40.0

    def profile(self, workload: Workload) -> dict[str, float]:
        raise InputError("the stand-in runs nothing")

    def measure(self, workload: Workload, min_seconds: float = 1.0, repetitions: int | None = None) -> Measurement:
        raise InputError("the stand-in runs nothing")

    def close(self) -> None:
        pass
