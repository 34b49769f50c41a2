"""Frequencies for workloads profiled once, from nvprof counters: utilizations and
time-model profiles from each workload's reference row (`reference_inputs`), a power model
fitted on a measured grid (`fit_power_model`), and the choice (`choose`).

Utilizations come from the nvprof counters of the reference run as achieved rate over the
device's peak rates from the catalog (`DeviceSpec.peaks`: issue rates per SM, L2 and
shared-memory bytes per cycle, DRAM bytes per memory clock). A wrong peak scales a
component's utilization by a constant, which that component's fitted weight absorbs; the
peaks keep utilizations within [0, 1] and comparable across GPUs.

The power model is `per-domain`: 14 training applications constrain its 12 clock-level
voltages, not the 72 of `per-config`.
"""

from __future__ import annotations

import numpy as np

from gpudvfs.catalog import DeviceSpec
from gpudvfs.data.counters import COMPONENTS, DOMAIN_SIZES
from gpudvfs.data.datasets import MeasurementGrid, PowerDataset
from gpudvfs.data.grid_csv import SPECS
from gpudvfs.data.utilization import bound_utilization
from gpudvfs.errors import InputError
from gpudvfs.policy.policies import highest_index, pareto_front, select
from gpudvfs.power.grid import grid_power_dataset
from gpudvfs.power.model import PowerModel
from gpudvfs.time.device import TimeDevice
from gpudvfs.time.from_grid import profiles_from_grid
from gpudvfs.time.model import TimeModel


def rate_utilizations(counters: dict[str, float], time_ms: float, core_mhz: float, mem_mhz: float,
                      peaks) -> np.ndarray:
    """Utilization per component: events / (time x clock x peak events per cycle)."""
    out = []
    for comp, (events, peak, domain) in peaks.items():
        missing = [e for e in events if e not in counters]
        if missing:
            raise InputError(f"utilization of {comp} needs nvprof counters {missing}")
        clock = core_mhz if domain == "core" else mem_mhz
        out.append(sum(counters[e] for e in events) / (time_ms * 1e-3 * clock * 1e6 * peak))
    return np.array(out)


def reference_utilizations(grid: MeasurementGrid, reference: tuple[float, float], spec: DeviceSpec,
                            clip: bool = False) -> tuple[list[str], np.ndarray]:
    """(workload names, utilizations [W x C]) from each workload's counters and time at the
    reference pair. A utilization above 1 means a peak rate below what the GPU did: refused
    unless ``clip``."""
    peaks = spec.peaks(SPECS[grid.format].mem_clock_to_nvml if grid.format in SPECS else 1.0)
    names, ref = grid.reference_rows(reference)
    util = np.empty((len(names), len(COMPONENTS)))
    for a, i in enumerate(ref):
        util[a] = rate_utilizations({k: float(v[i]) for k, v in grid.metrics.items()}, grid.time_ms[i], *reference,
                                    peaks)
    util = bound_utilization(util, COMPONENTS, f"{grid.path}: rate utilizations at {reference[0]:g}/{reference[1]:g} "
                             f"MHz on {spec.key}'s peaks", clip=clip,
                             hint="is --device the GPU the grid was measured on?")
    return names, util


def reference_inputs(grid: MeasurementGrid, reference: tuple[float, float], device: TimeDevice, spec: DeviceSpec,
                     clip: bool = False):
    """(workload names, time-model profiles, utilizations [W x C]) from the counters and
    time of each workload's row at the reference pair: all a prediction needs."""
    profiles = profiles_from_grid(grid, reference, device)
    names, util = reference_utilizations(grid, reference, spec, clip)
    return names, profiles, util


def counter_power_dataset(grid: MeasurementGrid, reference: tuple[float, float], spec: DeviceSpec,
                          clip: bool = False) -> PowerDataset:
    """Every row of a grid with profiler counters and power, with its workload's rate
    utilizations at the reference pair: `gpudvfs power fit GRID --device D --reference`."""
    names, util = reference_utilizations(grid, reference, spec, clip)
    return grid_power_dataset(grid, reference, names, util, COMPONENTS, DOMAIN_SIZES)


def measured_table(grid: MeasurementGrid, reference: tuple[float, float], device: TimeDevice, spec: DeviceSpec,
                   clip: bool = False):
    """(workload names, configs [K x 2], time_ms and watts [W x K], utilizations [W x C],
    profiles) with every workload measured at every configuration."""
    lacking = [what for what, v in (("power", grid.watts), ("memory clock", grid.mem_mhz)) if v is None]
    if lacking:
        raise InputError(f"{grid.path}: the grid has no {' and no '.join(lacking)} column; selection is validated "
                         "on measured time and power over core and memory clocks")
    names, profiles, util = reference_inputs(grid, reference, device, spec, clip)
    configs, (t, p) = grid.table(names, grid.time_ms, grid.watts)
    return names, configs, t, p, util, profiles


def training_dataset(util, configs, watts, reference, names) -> PowerDataset:
    n, k = watts.shape
    if n == 0:
        raise InputError("no training applications: a power model fitted without the application it scores needs a "
                         "grid of at least 2 applications")
    return PowerDataset(path="<training applications>", reference_mhz=reference, domain_sizes=DOMAIN_SIZES,
                        components=COMPONENTS, watts=watts.reshape(-1), freqs_mhz=np.tile(configs, (n, 1)),
                        utilization=np.repeat(util, k, axis=0), row_names=None,
                        benchmark=np.repeat(np.arange(n), k), benchmarks=tuple(names))


def fit_power_model(grid: MeasurementGrid, reference: tuple[float, float], device: TimeDevice,
                    spec: DeviceSpec, clip: bool = False) -> PowerModel:
    """A `per-domain` power model of every workload of a measured grid, on the utilizations
    of its reference rows: the model `choose` applies to newly profiled workloads. A
    component no workload of the grid uses gets weight 0, with a warning. Its
    ``energy_error_`` is left unset: `gpudvfs.evaluation.selection.with_energy_error` sets it
    (one more power fit per workload)."""
    names, configs, _, p, util, _ = measured_table(grid, reference, device, spec, clip)
    model = PowerModel("per-domain").fit(training_dataset(util, configs, p, reference, names), unused="zero")
    model.device_ = spec.key
    return model


def choose(grid: MeasurementGrid, reference: tuple[float, float], power_model: PowerModel, *,
           time_device: TimeDevice, spec: DeviceSpec, policy: str = "energy", slowdown: float = 0.1,
           power_cap_w: float | None = None, eta: float = 0.5, clip: bool = False) -> dict:
    """Frequencies for the workloads of ``grid``, each profiled at the reference pair only
    (its other rows, if any, are not read), over the power model's configurations; under the
    cost policy, time priced at the GPU's TDP."""
    if power_model.components_ != COMPONENTS:
        raise InputError(f"the power model's components {list(power_model.components_)} are not the nvprof "
                         f"rate utilizations {list(COMPONENTS)}: fit it with `gpudvfs select fit-power`")
    power_model.check_gpu(spec.key)
    if tuple(power_model.reference_mhz_) != tuple(map(float, reference)):
        raise InputError(f"the power model's utilizations were taken at {power_model.reference_mhz_[0]:g}/"
                         f"{power_model.reference_mhz_[1]:g} MHz, the workloads' at {reference[0]:g}/{reference[1]:g}: "
                         "fit it on a grid profiled at the same reference (gpudvfs select fit-power --reference)")
    names, profiles, util = reference_inputs(grid, reference, time_device, spec, clip)
    configs = power_model.configs_
    t = TimeModel(time_device).predict(profiles, configs[:, 0], configs[:, 1], calibrate=True)
    p = power_model.predict_grid(util, configs)
    fastest = highest_index(configs)
    s = select(t, p, configs, policy, default_index=fastest, slowdown=slowdown, power_cap_w=power_cap_w, eta=eta,
               max_power_w=spec.tdp_w)
    err = power_model.energy_error_
    return {"policy": policy, "configs": configs.tolist(), "workloads": {
        n: {"core_mhz": float(s.core_mhz[a]), "mem_mhz": float(s.mem_mhz[a]), "time_ms": float(s.time_ms[a]),
            "watts": float(s.watts[a]), "joules": float(s.joules[a]),
            "energy_error": None if err is None else float(err[s.index[a]]), "feasible": bool(s.feasible[a]),
            "pareto": [configs[k].tolist() for k in pareto_front(t[a], t[a] * p[a] / 1e3)]}
        for a, n in enumerate(names)}}
