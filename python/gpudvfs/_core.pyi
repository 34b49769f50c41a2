"""Type stubs of the Rust extension module (rust/src/bindings.rs)."""

import numpy as np
import numpy.typing as npt

__version__: str

def power_grid(
    util: npt.NDArray[np.float64],
    domain_sizes: list[int],
    static_coef: npt.NDArray[np.float64],
    idle_coef: npt.NDArray[np.float64],
    weights: npt.NDArray[np.float64],
    freq: npt.NDArray[np.float64],
    volt: npt.NDArray[np.float64],
) -> npt.NDArray[np.float64]: ...
