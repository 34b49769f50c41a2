"""Hardware counters at the reference configuration: mapping the profilers' counters onto the
time and power models' inputs (:mod:`.mapping`), and collecting them with Nsight Compute
(:mod:`.collect`). Reading the tools' CSV output is :mod:`gpudvfs.io.profilers`.

DCGM has no file parser (no real `dcgmi dmon` log was available to test one); its field
values map through :func:`power_utilizations`/:func:`time_model_inputs` with
``scheme="dcgm"`` from any mapping of field name to value.
"""

from .collect import CounterPermissionError, NcuNotFoundError, NcuTimeoutError, ncu_command, nvprof_command, run_ncu
from .mapping import (
                      COMPONENTS,
                      DOMAIN_SIZES,
                      SCHEMES,
                      TIME_EXTRAS,
                      TIME_INPUTS,
                      Mapped,
                      MissingCountersError,
                      explain,
                      power_utilizations,
                      recorded_compute_capability,
                      required_metrics,
                      scheme_of,
                      time_model_extras,
                      time_model_inputs,
)

__all__ = [
    "COMPONENTS", "DOMAIN_SIZES", "SCHEMES", "TIME_EXTRAS", "TIME_INPUTS", "CounterPermissionError",
    "Mapped", "MissingCountersError", "NcuNotFoundError", "NcuTimeoutError", "explain", "ncu_command",
    "nvprof_command", "power_utilizations", "recorded_compute_capability", "required_metrics", "run_ncu",
    "scheme_of", "time_model_extras", "time_model_inputs",
]
