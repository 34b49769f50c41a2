"""Frequencies for workloads profiled once, from nvprof counters.

Utilizations are achieved rates over the catalog's peak rates (`DeviceSpec.peaks`: issue
rates per SM, L2 and shared-memory bytes per cycle, DRAM bytes per memory clock), from each
workload's reference row (`reference_inputs`). A wrong peak scales a component's utilization
by a constant, which its fitted weight absorbs; the peaks keep utilizations within [0, 1]
and comparable across GPUs. The power model (`fit_power_model`) is `per-domain`: 14
training applications constrain its 12 clock-level voltages, not the 72 of `per-config`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from gpudvfs.catalog import DeviceSpec
from gpudvfs.data.counters import COMPONENTS, DOMAIN_SIZES
from gpudvfs.data.datasets import MeasurementGrid, PowerDataset
from gpudvfs.data.utilization import bound_utilization
from gpudvfs.errors import InputError
from gpudvfs.policy.policies import highest_index, pareto_front, select
from gpudvfs.power.grid import grid_power_dataset
from gpudvfs.power.model import PowerModel
from gpudvfs.records import NULLABLE, Record
from gpudvfs.time.device import TimeDevice
from gpudvfs.time.from_grid import profiles_from_grid
from gpudvfs.time.model import TimeModel
from gpudvfs.time.profile import KernelProfile


@dataclass(frozen=True, eq=False)
class ReferenceInputs:
    """What a prediction needs of each workload, from the counters and time of its row at the reference pair.

    ``utilization`` is [W x C] rate utilizations over `gpudvfs.data.counters.COMPONENTS`.
    """

    names: list[str]
    profiles: list[KernelProfile]
    utilization: np.ndarray


@dataclass(frozen=True, eq=False)
class MeasuredTable:
    """Every workload of a grid measured at every configuration, with its reference inputs.

    ``configs`` is [K x 2] (core, memory MHz); ``time_ms`` and ``watts`` are measured [W x K];
    ``utilization`` [W x C] and ``profiles`` are taken at the reference pair.
    """

    names: list[str]
    configs: np.ndarray
    time_ms: np.ndarray
    watts: np.ndarray
    utilization: np.ndarray
    profiles: list[KernelProfile]


@dataclass(frozen=True)
class WorkloadChoice(Record):
    """One workload's chosen configuration, with its predicted time, power and energy.

    ``energy_error`` is the relative error of a predicted energy there
    (`PowerModel.energy_error_`; None where the model has none); ``pareto`` is the predicted
    (time, energy) front, by time.
    """

    core_mhz: float
    mem_mhz: float
    time_ms: float
    watts: float
    joules: float
    energy_error: float | None = field(metadata=NULLABLE)
    feasible: bool
    pareto: tuple[tuple[float, ...], ...]


@dataclass(frozen=True, eq=False)
class Choices(Record):
    """A policy's choice for each workload over the power model's configurations [K x 2]."""

    policy: str
    configs: np.ndarray
    workloads: dict[str, WorkloadChoice]


def rate_utilizations(counters: dict[str, float], time_ms: float, core_mhz: float, mem_mhz: float,
                      peaks: dict[str, tuple[tuple[str, ...], float, str]]) -> np.ndarray:
    """Utilization per component of ``peaks``: events / (time x clock x peak events per cycle).

    ``counters`` maps each nvprof counter to its value over the run; ``peaks`` gives per
    component its events, peak events per cycle and clock domain (`DeviceSpec.peaks`).

    Raises InputError where a counter a component needs is missing.
    """
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
    """Each workload's names and utilizations [W x C] from its counters and time at the reference pair.

    A utilization above 1 means a peak rate below what the GPU did: refused unless ``clip``,
    which clips into [0, 1] with a warning. ``reference`` is in the grid's units.

    Raises InputError where a utilization lies outside [0, 1] and ``clip`` is False, or a counter is
    missing.
    """
    peaks = spec.peaks(grid.mem_clock_to_nvml)
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
                     clip: bool = False) -> ReferenceInputs:
    """What a prediction needs of each workload (`ReferenceInputs`); ``clip`` as in `reference_utilizations`."""
    profiles = profiles_from_grid(grid, reference, device)
    names, util = reference_utilizations(grid, reference, spec, clip)
    return ReferenceInputs(names, profiles, util)


def counter_power_dataset(grid: MeasurementGrid, reference: tuple[float, float], spec: DeviceSpec,
                          clip: bool = False) -> PowerDataset:
    """Every row of a grid with counters and power, with its workload's utilizations at the reference pair.

    What `gpudvfs power fit GRID --device D --reference` fits.
    """
    names, util = reference_utilizations(grid, reference, spec, clip)
    return grid_power_dataset(grid, reference, names, util, COMPONENTS, DOMAIN_SIZES)


def measured_table(grid: MeasurementGrid, reference: tuple[float, float], device: TimeDevice, spec: DeviceSpec,
                   clip: bool = False) -> MeasuredTable:
    """Every workload measured at every configuration, with its reference inputs.

    Raises InputError where the grid has no power or no memory clock.
    """
    watts = grid.watts
    lacking = [what for what, v in (("power", watts), ("memory clock", grid.mem_mhz)) if v is None]
    if watts is None or lacking:
        raise InputError(f"{grid.path}: the grid has no {' and no '.join(lacking)} column; selection is validated "
                         "on measured time and power over core and memory clocks")
    inputs = reference_inputs(grid, reference, device, spec, clip)
    configs, (t, p) = grid.table(inputs.names, grid.time_ms, watts)
    return MeasuredTable(inputs.names, configs, t, p, inputs.utilization, inputs.profiles)


def training_dataset(util: np.ndarray, configs: np.ndarray, watts: np.ndarray, reference: tuple[float, float],
                     names: list[str]) -> PowerDataset:
    """The power model's training data: one row per application and configuration.

    ``util`` is [A x C] at the reference pair, ``configs`` [K x 2], ``watts`` [A x K].

    Raises InputError without applications.
    """
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
    """A `per-domain` power model of every workload of a measured grid: the model `choose` applies.

    It is fitted on the utilizations of the grid's reference rows, for newly profiled
    workloads. A component no workload of the grid uses gets weight 0, with a warning. Its
    ``energy_error_`` is left unset: `gpudvfs.evaluation.selection.fit_power_model_with_error`
    sets it (one more power fit per workload).
    """
    m = measured_table(grid, reference, device, spec, clip)
    model = PowerModel("per-domain").fit(training_dataset(m.utilization, m.configs, m.watts, reference, m.names),
                                         unused="zero")
    model.device_ = spec.key
    return model


def choose(grid: MeasurementGrid, reference: tuple[float, float], power_model: PowerModel, *,
           time_device: TimeDevice, spec: DeviceSpec, policy: str = "energy", slowdown: float = 0.1,
           power_cap_w: float | None = None, eta: float = 0.5, clip: bool = False) -> Choices:
    """Frequencies for the workloads of ``grid``, each profiled at the reference pair only.

    Its other rows, if any, are not read; the choice ranges over the power model's
    configurations. Under the cost policy, time is priced at the GPU's TDP. ``slowdown``,
    ``power_cap_w`` (W) and ``eta`` are the deadline, power-cap and cost policies' parameters.

    Raises InputError where the power model's components, GPU or reference pair are not the workloads'.
    """
    if power_model.components_ != COMPONENTS:
        raise InputError(f"the power model's components {list(power_model.components_)} are not the nvprof "
                         f"rate utilizations {list(COMPONENTS)}: fit it with `gpudvfs select fit-power`")
    power_model.check_gpu(spec.key)
    if tuple(power_model.reference_mhz_) != tuple(map(float, reference)):
        raise InputError(f"the power model's utilizations were taken at {power_model.reference_mhz_[0]:g}/"
                         f"{power_model.reference_mhz_[1]:g} MHz, the workloads' at {reference[0]:g}/{reference[1]:g}: "
                         "fit it on a grid profiled at the same reference (gpudvfs select fit-power --reference)")
    inputs = reference_inputs(grid, reference, time_device, spec, clip)
    configs = power_model.configs_
    t = TimeModel(time_device).predict(inputs.profiles, configs[:, 0], configs[:, 1], calibrate=True)
    p = power_model.predict_grid(inputs.utilization, configs)
    fastest = highest_index(configs)
    s = select(t, p, configs, policy, default_index=fastest, slowdown=slowdown, power_cap_w=power_cap_w, eta=eta,
               max_power_w=spec.tdp_w)
    err = power_model.energy_error_
    return Choices(policy, configs, {
        n: WorkloadChoice(float(s.core_mhz[a]), float(s.mem_mhz[a]), float(s.time_ms[a]), float(s.watts[a]),
                          float(s.joules[a]), None if err is None else float(err[s.index[a]]), bool(s.feasible[a]),
                          tuple(tuple(configs[k].tolist()) for k in pareto_front(t[a], t[a] * p[a] / 1e3)))
        for a, n in enumerate(inputs.names)})
