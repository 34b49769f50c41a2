"""STAND-INS shared by the catalog's and the validation command's tests: a profile record with
every metric the models read, and a power model fitted on synthetic utilizations."""

from __future__ import annotations

import numpy as np

from gpudvfs.catalog.clocks import SupportedClocks
from gpudvfs.data.counters import required_metrics
from gpudvfs.data.profilers.records import CounterReport, KernelCounters


def stand_in_record(cc: str) -> CounterReport:
    """A STAND-IN record: every metric the models read, with values of a memory-heavy kernel
    (no real profile in ../shared/data has them all)."""
    metrics = dict.fromkeys(required_metrics("time", "ncu") + required_metrics("power", "ncu"), 1e6)
    metrics |= {m: 50.0 for m in metrics if "pct" in m}
    metrics |= {"launch__grid_size": 4096.0, "launch__block_size": 256.0,
                "smsp__average_inst_executed_per_warp.ratio": 200.0, "gpu__time_duration.sum": 2e5,
                "smsp__cycles_elapsed.avg.per_second": 1.59e9}  # H100 SXM's base clock
    k = KernelCounters(name="stand_in_kernel", id=0, invocation=0, tool="ncu", metrics=metrics,
                       units={"gpu__time_duration.sum": "ns", "smsp__cycles_elapsed.avg.per_second": "cycle/second"},
                       info={"CC": cc})
    return CounterReport(path="<stand-in>", tool="ncu", form="wide", kernels=[k])


def synthetic_power_model(spec):
    """A STAND-IN power model of a catalog GPU over its clock grid, fitted on synthetic
    utilizations of 8 workloads (power rising with each clock)."""
    from gpudvfs.policy.choose import COMPONENTS, training_dataset
    from gpudvfs.power import PowerModel

    configs = SupportedClocks.of_spec(spec).pairs
    rng = np.random.default_rng(0)
    util = rng.uniform(0.05, 0.9, (8, len(COMPONENTS)))
    fc, fm = configs[:, 0] / configs[:, 0].max(), configs[:, 1] / configs[:, 1].max()
    watts = 80 + util[:, :6].sum(axis=1, keepdims=True) * 60 * fc ** 2.5 + util[:, 6:] * 90 * fm
    return PowerModel("per-domain").fit(training_dataset(util, configs, watts, tuple(configs[0]),
                                                         [f"w{i}" for i in range(8)]))
