"""Type stubs of the Rust extension module (rust/src/bindings/), checked against it by
`python -m mypy.stubtest gpudvfs._core`. The classes are PyO3 classes: built by __new__,
not subclassable."""

from collections.abc import Sequence
from typing import Any, TypeAlias, final

import numpy as np
import numpy.typing as npt

__all__ = [
    "GovernorCore",
    "GovernorSettings",
    "OnlinePredictor",
    "OnlinePredictorBank",
    "PowerFit",
    "__version__",
    "budget_solve",
    "csv_columns",
    "power_grid",
    "time_core_share",
    "time_device_gtx980",
    "time_fit_dm_del",
    "time_fit_dm_lat",
    "time_predict",
]

__version__: str

# Stub-only aliases (private, so not expected at run time). Array arguments typed _F64 must
# be C-contiguous float64 numpy arrays: the bindings read them in place and convert nothing.
_F64: TypeAlias = npt.NDArray[np.float64]
# One feature vector of n_features real numbers: a float64 1-D array (read in place), a list
# or tuple of numbers, or anything numpy converts to a 1-D float64 array. Another shape is a
# ValueError naming the shape expected and the shape given; complex numbers are a TypeError.
# (The bank's array arguments are checked the same way.) Sizes whose buffers cannot be
# allocated (a bank, a power or time grid) raise MemoryError.
_Features: TypeAlias = npt.ArrayLike

def budget_solve(
    cost: _F64, value: _F64, budget: float, exact: bool = False
) -> tuple[npt.NDArray[np.uintp], float, float, float]: ...
def csv_columns(
    text: str | bytes, numeric: Sequence[bool], limit: int
) -> tuple[list[npt.NDArray[np.float64]], list[npt.NDArray[np.uint32]]] | None: ...
def power_grid(
    util: _F64, domain_sizes: Sequence[int], static_coef: _F64, idle_coef: _F64, weights: _F64, freq: _F64, volt: _F64
) -> _F64: ...
@final
class PowerFit:
    # No constructor: instances come from fit() or from_state().
    @staticmethod
    def fit(
        watts: _F64,
        core_mhz: _F64,
        mem_mhz: _F64,
        util: _F64,
        domain_sizes: Sequence[int],
        ref_core_mhz: float,
        ref_mem_mhz: float,
        variant: str,  # "per-config", "per-domain" or "curve"
        max_iter: int,
        tol_voltage: float,
        tol_objective: float,
        v_min: float,
        v_max: float,
        relative_weighting: bool,
        ridge: float,
    ) -> PowerFit: ...
    @staticmethod
    def from_state(state: dict[str, Any]) -> PowerFit: ...
    def state(self) -> dict[str, Any]: ...
    def voltages(self, core_mhz: _F64, mem_mhz: _F64) -> _F64: ...
    def predict(self, util: _F64, core_mhz: _F64, mem_mhz: _F64) -> _F64: ...

def time_device_gtx980() -> dict[str, float]: ...
def time_predict(
    inputs: _F64, core_mhz: _F64, mem_mhz: _F64, device_params: dict[str, float], mode: str, threads: int = 0
) -> tuple[_F64, npt.NDArray[np.uint8]]: ...
def time_core_share(inputs: _F64, mem_mhz: float, device_params: dict[str, float]) -> _F64: ...
def time_fit_dm_lat(core_mhz: _F64, mem_mhz: _F64, cycles: _F64) -> tuple[float, float, float]: ...
def time_fit_dm_del(mem_mhz: _F64, cycles: _F64) -> tuple[float, float, float]: ...
@final
class GovernorSettings:
    """The governor's constants (gpudvfs.govern.Governor documents them), checked, read-only."""
    def __new__(
        cls,
        *,
        default_index: int,
        policy: str,  # "energy", "edp", "deadline", "power-cap" or "cost"
        slowdown: float,
        power_cap_w: float | None,  # the power-cap policy's; None: no cap
        prior_sd: float,
        noise_sd: float,
        explore: float,
        hysteresis: float,
        residual_sd: float,
        residual_scale: float,
        eta: float,  # cost: energy's weight, in [0, 1]
        max_power_w: float | None,  # cost (needs it): the watts that price a second
        default_runs: int,  # deadline: runs of the default clocks before any other pair
        bound_z: float,  # deadline: standard deviations of margin under the bound
        recheck_z: float,  # a measured mean's bound, in its standard deviations (0: none)
        recheck_runs: int,  # runs under which a measured pair's bound counts
    ) -> GovernorSettings: ...
    @property
    def default_index(self) -> int: ...
    @property
    def policy(self) -> str: ...
    @property
    def slowdown(self) -> float: ...
    @property
    def power_cap_w(self) -> float | None: ...
    @property
    def prior_sd(self) -> float: ...
    @property
    def noise_sd(self) -> float: ...
    @property
    def explore(self) -> float: ...
    @property
    def hysteresis(self) -> float: ...
    @property
    def residual_sd(self) -> float: ...
    @property
    def residual_scale(self) -> float: ...
    @property
    def eta(self) -> float: ...
    @property
    def max_power_w(self) -> float | None: ...
    @property
    def default_runs(self) -> int: ...
    @property
    def bound_z(self) -> float: ...
    @property
    def recheck_z(self) -> float: ...
    @property
    def recheck_runs(self) -> int: ...

@final
class GovernorCore:
    """The governor's estimates and decisions (gpudvfs.govern.Governor checks the arguments)."""
    def __new__(cls, configs: _F64, settings: GovernorSettings) -> GovernorCore: ...  # configs: [K x 2] MHz
    def add_phase(self, time_ms: _F64, watts: _F64) -> int: ...
    def estimates(self, id: int) -> tuple[_F64, _F64, _F64, _F64]: ...
    def decide(self, id: int, current: int) -> tuple[int, bool, float, float]: ...
    def exclude(self, id: int, index: int) -> None: ...
    def observe(self, id: int, index: int, log_time: float | None, log_watts: float) -> None: ...

@final
class OnlinePredictor:
    def __new__(
        cls,
        n_features: int,
        forgetting: float = 1.0,
        initial_covariance: float = 100.0,
        *,
        forgetting_mode: str = "directional",  # or "exponential"
        trace_max: float | None = None,  # None: n_features * initial_covariance
        min_excitation: float = 1e-10,
    ) -> OnlinePredictor: ...
    def predict(self, features: _Features) -> float: ...
    def update(self, features: _Features, observed: float) -> None: ...
    def reset(self) -> None: ...
    @property
    def coef(self) -> _F64: ...
    @property
    def covariance(self) -> _F64: ...
    @property
    def n_features(self) -> int: ...
    @property
    def forgetting(self) -> float: ...
    @property
    def initial_covariance(self) -> float: ...
    @property
    def forgetting_mode(self) -> str: ...
    @property
    def trace_max(self) -> float | None: ...
    @property
    def updates(self) -> int: ...
    @property
    def skipped(self) -> int: ...
    def state(self) -> dict[str, Any]: ...
    @staticmethod
    def from_state(state: dict[str, Any]) -> OnlinePredictor: ...
    def __reduce__(self) -> tuple[Any, tuple[dict[str, Any]]]: ...

@final
class OnlinePredictorBank:
    def __new__(
        cls,
        n_streams: int,
        n_features: int,
        forgetting: float = 1.0,
        initial_covariance: float = 100.0,
        *,
        forgetting_mode: str = "directional",
        trace_max: float | None = None,
        min_excitation: float = 1e-10,
        threads: int = 0,  # 0: one per core
    ) -> OnlinePredictorBank: ...
    def predict(self, features: npt.ArrayLike) -> _F64: ...
    def update(
        self, features: npt.ArrayLike, observed: npt.ArrayLike, mask: npt.ArrayLike | None = None
    ) -> dict[str, int]: ...  # applied, skipped, masked, rejected
    def covariance(self, stream: int) -> _F64: ...
    def reset_stream(self, stream: int) -> None: ...
    @property
    def coef(self) -> _F64: ...
    @property
    def updates(self) -> npt.NDArray[np.uint64]: ...
    @property
    def n_streams(self) -> int: ...
    @property
    def n_features(self) -> int: ...
    @property
    def forgetting(self) -> float: ...
    @property
    def initial_covariance(self) -> float: ...
    @property
    def forgetting_mode(self) -> str: ...
    @property
    def trace_max(self) -> float | None: ...
    @property
    def threads(self) -> int: ...  # 0: one per core
    @threads.setter
    def threads(self, threads: int) -> None: ...
    def state(self) -> dict[str, Any]: ...
    @staticmethod
    def from_state(state: dict[str, Any]) -> OnlinePredictorBank: ...
    def __reduce__(self) -> tuple[Any, tuple[dict[str, Any]]]: ...
