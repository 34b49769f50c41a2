"""Frequency selection from nvprof profiles of a GTX 980: `fit_power_model` on a measured
grid, `choose` for workloads profiled once at the reference pair, and the validation on
measured time and power at every configuration (`gtx980_time_power_dev.csv`,
`evaluate_selection`): profile each application at the reference pair, predict its
time (time model, calibrated on its reference time) and power (power model fitted on the
*other* applications: leave-one-application-out, since no microbenchmark set exists for
this board) at every pair, choose, and score the choice by the measured energy.

Utilizations come from the nvprof counters of the reference run as achieved rate over a
nominal peak of the GTX 980 (GM204: 16 SMs; per SM and cycle 128 FP32 and 128 integer
thread instructions, 4 FP64, 32 special-function, 1 shared-memory transaction; 32 L2
transactions per cycle for the chip; DRAM 16 transactions of 32 B per memory-clock cycle).
A wrong peak scales a component's utilization by a constant, which that component's
fitted weight absorbs; the peaks only keep utilizations within [0, 1].

The power model is `per-domain`: 14 training applications constrain its 12 clock-level
voltages, not the 72 of `per-config`.
"""

from __future__ import annotations

import warnings

import numpy as np

from .datasets import MeasurementGrid, PowerDataset
from .errors import GpudvfsWarning, InputError
from .power_model import PowerModel
from .select import pareto_front, select
from .time_eval import profiles_from_grid
from .time_model import TimeDevice, TimeModel

COMPONENTS = ("SP", "INT", "DP", "SFU", "L2", "Shared", "DRAM")
DOMAIN_SIZES = (6, 1)
# component -> (nvprof events, peak events per cycle, clock domain)
GTX980_PEAKS = {
    "SP": (("inst_fp_32",), 128 * 16, "core"),
    "INT": (("inst_integer",), 128 * 16, "core"),
    "DP": (("inst_fp_64",), 4 * 16, "core"),
    "SFU": (("flop_count_sp_special",), 32 * 16, "core"),
    "L2": (("l2_read_transactions", "l2_write_transactions"), 32, "core"),
    "Shared": (("shared_load_transactions", "shared_store_transactions"), 1 * 16, "core"),
    "DRAM": (("dram_read_transactions", "dram_write_transactions"), 16, "memory"),
}


def rate_utilizations(counters: dict[str, float], time_ms: float, core_mhz: float, mem_mhz: float,
                      peaks=GTX980_PEAKS) -> np.ndarray:
    """Utilization per component: events / (time x clock x peak events per cycle)."""
    out = []
    for comp, (events, peak, domain) in peaks.items():
        missing = [e for e in events if e not in counters]
        if missing:
            raise InputError(f"utilization of {comp} needs nvprof counters {missing}")
        clock = core_mhz if domain == "core" else mem_mhz
        u = sum(counters[e] for e in events) / (time_ms * 1e-3 * clock * 1e6 * peak)
        if u > 1.0:
            raise InputError(f"utilization of {comp} is {u:.3f} > 1: the nominal peak is too low for this GPU")
        out.append(u)
    return np.array(out)


def reference_inputs(grid: MeasurementGrid, reference: tuple[float, float], device: TimeDevice | None = None):
    """(workload names, time-model profiles, utilizations [W x C]) from the counters and
    time of each workload's row at the reference pair: all a prediction needs."""
    profiles = profiles_from_grid(grid, reference, device or TimeDevice.gtx980())
    work = grid.workload
    at_ref = (grid.core_mhz == reference[0]) & (grid.mem_mhz == reference[1])
    util = np.empty((len(profiles), len(COMPONENTS)))
    for a, p in enumerate(profiles):
        i = int(np.flatnonzero(at_ref & (work == p.name))[0])
        util[a] = rate_utilizations({k: float(v[i]) for k, v in grid.metrics.items()}, grid.time_ms[i], *reference)
    return [p.name for p in profiles], profiles, util


def measured_table(grid: MeasurementGrid, reference: tuple[float, float]):
    """(workload names, configs [K x 2], time_ms and watts [W x K], utilizations [W x C],
    profiles) with every workload measured at every configuration."""
    if grid.watts is None or grid.mem_mhz is None:
        raise InputError(f"{grid.path}: selection is validated on measured time and power over core and memory clocks")
    names, profiles, util = reference_inputs(grid, reference)
    configs = np.unique(np.column_stack([grid.core_mhz, grid.mem_mhz]), axis=0)
    index = {(n, c, m): i for i, (n, c, m) in enumerate(zip(grid.workload.tolist(), grid.core_mhz, grid.mem_mhz))}
    t = np.empty((len(names), len(configs)))
    p = np.empty_like(t)
    for a, n in enumerate(names):
        for k, (c, m) in enumerate(configs):
            i = index.get((n, c, m))
            if i is None:
                raise InputError(f"{grid.path}: {n!r} was not measured at {c:g}/{m:g} MHz")
            t[a, k], p[a, k] = grid.time_ms[i], grid.watts[i]
    return names, configs, t, p, util, profiles


def _dataset(util, configs, watts, reference, names) -> PowerDataset:
    n, k = watts.shape
    return PowerDataset(path="<training applications>", reference_mhz=reference, domain_sizes=DOMAIN_SIZES,
                        components=COMPONENTS, watts=watts.reshape(-1), freqs_mhz=np.tile(configs, (n, 1)),
                        utilization=np.repeat(util, k, axis=0), row_names=None,
                        benchmark=np.repeat(np.arange(n), k), benchmarks=tuple(names))


def evaluate_selection(grid: MeasurementGrid, reference: tuple[float, float], *, slowdown: float = 0.1,
                       time_device: TimeDevice | None = None) -> dict:
    """Energy regret (measured energy of the chosen pair over the measured minimum, minus 1)
    per application of the minimum-energy and the deadline policy (slowdown relative to the
    highest clocks), and of three baselines: the highest clocks, the reference pair and the
    single pair best for these applications in hindsight. ``attribution`` is the
    minimum-energy regret with measured time (or power) in place of the prediction: how
    much of the regret each model leaves."""
    names, configs, t, p, util, profiles = measured_table(grid, reference)
    e = t * p
    e_min = e.min(axis=1)
    hi = int(np.flatnonzero((configs == configs.max(axis=0)).all(axis=1))[0])
    ref = int(np.flatnonzero((configs == np.asarray(reference)).all(axis=1))[0])
    t_pred = TimeModel(time_device or TimeDevice.gtx980()).predict(profiles, configs[:, 0], configs[:, 1],
                                                                    calibrate=True)
    p_pred = np.empty_like(p)
    for a in range(len(names)):
        train = [i for i in range(len(names)) if i != a]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", GpudvfsWarning)
            model = PowerModel("per-domain").fit(_dataset(util[train], configs, p[train], reference,
                                                          [names[i] for i in train]))
        p_pred[a] = model.predict_grid(util[a:a + 1], configs)[0]
    energy = select(t_pred, p_pred, configs, "energy")
    deadline = select(t_pred, p_pred, configs, "deadline", default_index=hi, slowdown=slowdown)
    rows = np.arange(len(names))

    def regret(idx) -> np.ndarray:
        return e[rows, idx] / e_min - 1.0

    def summary(r: np.ndarray) -> dict:
        return {"mean": float(r.mean()), "max": float(r.max())}

    hindsight = int(np.argmin((e / e_min[:, None] - 1.0).mean(axis=0)))
    met = t[rows, deadline.index] <= (1 + slowdown) * t[:, hi]
    chosen, within = regret(energy.index), regret(deadline.index)
    # Which model the regret comes from: choose with one of them replaced by the measurement.
    attribution = {f"measured_{k}": summary(regret(select(tt, pp, configs, "energy").index))
                   for k, tt, pp in (("time", t, p_pred), ("power", t_pred, p))}
    return {
        "regret_mean": float(chosen.mean()), "regret_max": float(chosen.max()),
        "deadline": {"slowdown": slowdown, **summary(within),
                     "deadline_met": int(met.sum()), "apps": len(names)},
        "baselines": {
            "highest_clocks": summary(regret(np.full(len(names), hi))),
            "reference": summary(regret(np.full(len(names), ref))),
            "best_single_pair": {**summary(regret(np.full(len(names), hindsight))),
                                 "pair": configs[hindsight].tolist()},
        },
        "attribution": attribution,
        "time_mape": float(100 * np.mean(np.abs(t_pred - t) / t)),
        "power_mape": float(100 * np.mean(np.abs(p_pred - p) / p)),
        "per_app": {n: {"chosen": configs[energy.index[a]].tolist(), "best": configs[np.argmin(e[a])].tolist(),
                        "regret": float(chosen[a]),
                        "deadline_choice": configs[deadline.index[a]].tolist(),
                        "deadline_regret": float(within[a])}
                    for a, n in enumerate(names)},
    }


def fit_power_model(grid: MeasurementGrid, reference: tuple[float, float]) -> PowerModel:
    """A `per-domain` power model of every workload of a measured grid, on the utilizations
    of its reference rows: the model `choose` applies to newly profiled workloads."""
    names, configs, _, p, util, _ = measured_table(grid, reference)
    return PowerModel("per-domain").fit(_dataset(util, configs, p, reference, names))


def choose(grid: MeasurementGrid, reference: tuple[float, float], power_model: PowerModel, *,
           time_device: TimeDevice | None = None, policy: str = "energy", slowdown: float = 0.1,
           power_cap_w: float | None = None) -> dict:
    """Frequencies for the workloads of ``grid``, each profiled at the reference pair only
    (its other rows, if any, are not read), over the power model's configurations."""
    if power_model.components_ != COMPONENTS:
        raise InputError(f"the power model's components {list(power_model.components_)} are not the nvprof "
                         f"rate utilizations {list(COMPONENTS)}: fit it with `gpudvfs select fit-power`")
    names, profiles, util = reference_inputs(grid, reference, time_device)
    configs = power_model.configs_
    t = TimeModel(time_device or TimeDevice.gtx980()).predict(profiles, configs[:, 0], configs[:, 1],
                                                              calibrate=True)
    p = power_model.predict_grid(util, configs)
    fastest = int(np.flatnonzero((configs == configs.max(axis=0)).all(axis=1))[0])
    s = select(t, p, configs, policy, default_index=fastest, slowdown=slowdown, power_cap_w=power_cap_w)
    return {"policy": policy, "configs": configs.tolist(), "workloads": {
        n: {"core_mhz": float(s.core_mhz[a]), "mem_mhz": float(s.mem_mhz[a]), "time_ms": float(s.time_ms[a]),
            "watts": float(s.watts[a]), "joules": float(s.joules[a]), "feasible": bool(s.feasible[a]),
            "pareto": [configs[k].tolist() for k in pareto_front(t[a], t[a] * p[a] / 1e3)]}
        for a, n in enumerate(names)}}
