"""From a profile (Nsight Compute or nvprof CSV) to time, power and energy over the GPU's clock pairs, and the choice.

The device comes from ``--device`` or from the profile (nvprof's device name, Nsight
Compute's ``device__attribute_display_name`` or compute capability). Each launch's counters
and time belong to the SM clock it ran at, which Nsight Compute measures
(``smsp__cycles_elapsed.avg.per_second``); where the profile lacks it, the reference is the
catalog's base clock, which Nsight Compute locks by default (``--clock-control base``); the
memory clock is the catalog's. A kernel whose counters do not give the model's inputs is an error
that lists what is missing and the command that collects it: ``ncu`` from Volta on, ``nvprof``
before (Nsight Compute's Pascal metrics lack counts the time model needs).
"""

from __future__ import annotations

import math
import re
import shlex
import warnings
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from gpudvfs.catalog import DeviceSpec, lookup
from gpudvfs.catalog.clocks import SupportedClocks
from gpudvfs.data.activities import METRICS as ACTIVITY_METRICS
from gpudvfs.data.counters import (
    COMPONENTS,
    TIME_INPUTS,
    MissingCountersError,
    power_utilizations,
    recorded_compute_capability,
    required_metrics,
    scheme_of,
    time_model_inputs,
)
from gpudvfs.data.profilers import CounterReport, KernelCounters, normalize_unit
from gpudvfs.data.tensor_counters import TENSOR_METRICS, tensor_activity
from gpudvfs.errors import InputError
from gpudvfs.hardware.ncu import ncu_command, nvprof_command
from gpudvfs.policy.policies import Selection, highest_index, select
from gpudvfs.power.model import PowerModel
from gpudvfs.predict.inputs import power_inputs
from gpudvfs.predict.tensor import with_tensor
from gpudvfs.records import NULLABLE, Record
from gpudvfs.time.device import TimeDevice
from gpudvfs.time.interval import UNCALIBRATED_LEVEL, time_interval
from gpudvfs.time.model import TimeModel
from gpudvfs.time.profile import KernelProfile

#: Below this (ms) a kernel's launch and drain, a few microseconds the model leaves out, outweigh
#: what it models: an uncalibrated prediction under it is flagged as a lower bound.
LAUNCH_SCALE_MS = 0.005
#: Nsight Compute's clock control: ``base`` (its default) locks the driver's base clock while
#: profiling; ``none`` leaves the clocks to the driver, for a GPU whose settings are not yours to
#: change (a shared or lent machine). Either way the SM clock each launch ran at is measured.
CLOCK_CONTROLS = ("base", "none")


@dataclass(frozen=True)
class LaunchInputs:
    """What the models need of one kernel launch, from its counters.

    ``label`` is the kernel's name, numbered where it repeats (`launch_labels`); ``scheme`` the
    counter scheme (`gpudvfs.data.counters.scheme_of`); ``inputs`` the time model's (None for an
    optional one the profile lacks), ``utilization`` the power model's by component; ``time_ms``
    (measured) and ``tensor`` (the tensor pipe's activity in [0, 1]) are None where the profile
    lacks them.
    """

    label: str
    scheme: str
    inputs: dict[str, float | None]
    utilization: dict[str, float]
    time_ms: float | None
    tensor: float | None = None


@dataclass(frozen=True)
class ChosenPair(Record):
    """The pair a policy chose, with the time and power predicted there; ``feasible``: whether it meets the policy."""

    core_mhz: float
    mem_mhz: float
    time_ms: float
    watts: float
    feasible: bool


@dataclass(frozen=True, eq=False)
class Intervals(Record):
    """90% intervals as log half-widths: a value x lies in [x e^-q, x e^q].

    ``time`` [K] grows with each pair's distance from the reference (`gpudvfs.time.interval`);
    ``power`` is None where the power model has none; ``energy`` [K] is time's and power's together.
    """

    time: np.ndarray
    power: float | None = field(metadata=NULLABLE)
    energy: np.ndarray | None = field(metadata=NULLABLE)


@dataclass(frozen=True, eq=False)
class LaunchPrediction(Record):
    """One launch at each pair: time (ms), power (W) and energy (J), and the pair the policy chooses for it."""

    time_ms: np.ndarray
    watts: np.ndarray
    joules: np.ndarray
    chosen: ChosenPair


@dataclass(frozen=True, eq=False)
class NamePrediction(Record):
    """The launches of one kernel name together: how many, and their summed time and energy at each pair."""

    launches: int
    time_ms: np.ndarray
    joules: np.ndarray


@dataclass(frozen=True, eq=False)
class ApplicationPrediction(Record):
    """All launches together at each pair: summed time and energy, mean power, and the one pair chosen for all.

    A clock change costs milliseconds, far more than most launches last, so a governor sets
    one pair per application or phase.
    """

    launches: int
    time_ms: np.ndarray
    joules: np.ndarray
    watts: np.ndarray
    chosen: ChosenPair


@dataclass(frozen=True, eq=False)
class PredictionDetail(Record):
    """Everything :func:`predict_detail` predicts of a profile: what `gpudvfs predict --json` prints.

    ``reference_mhz`` is the (core, memory) clocks the profile was taken at (the median over
    launches); ``configs`` [K x 2] MHz every pair the GPU supports (of those a power model of
    measured pairs knows), from ``clocks_source`` (`SupportedClocks.source`); ``power_source``
    is `PowerModel.source_`. ``under_launch_scale``: uncalibrated, the launches predicted under
    `LAUNCH_SCALE_MS`, lower bounds (None when calibrated).
    """

    device: str
    reference_mhz: tuple[float, ...]
    reference_from: str
    configs: np.ndarray
    clocks_source: str
    calibrated_on_measured_time: bool
    power_source: str
    intervals: Intervals
    rests_on: str
    kernels: dict[str, LaunchPrediction]
    under_launch_scale: tuple[str, ...] | None
    policy: str
    by_name: dict[str, NamePrediction]
    application: ApplicationPrediction


def profile_command(compute_capability: str, target: str | Sequence[str] = "./app", *, kernel_name: str | None = None,
                    launch_count: int | None = None, clock_control: str | None = None,
                    log_file: str | None = None) -> str:
    """The profiler command that collects every counter `gpudvfs predict` reads on a GPU of this compute capability.

    Nsight Compute from Volta on; nvprof before, since Nsight Compute's Pascal metric set has
    no L2, shared-memory or FLOP counts and it does not profile Maxwell.

    ``target`` is one string (split as a shell would) or its words. ``launch_count`` matters:
    Nsight Compute replays each launch once per counter pass, so a long application profiled
    whole takes long. ``clock_control`` is one of :data:`CLOCK_CONTROLS` (``base`` where not
    given). Raises `InputError` for an unreadable compute capability, an unknown clock control,
    or an option of Nsight Compute before Volta.
    """
    try:
        cc = float(compute_capability)
    except ValueError:
        raise InputError(f"unreadable compute capability {compute_capability!r}") from None
    if clock_control is not None and clock_control not in CLOCK_CONTROLS:
        raise InputError(f"clock_control must be one of {CLOCK_CONTROLS}, got {clock_control!r}")
    argv = shlex.split(target) if isinstance(target, str) else list(target)
    if cc >= 7:
        # The GPU's name too: a compute capability alone is shared (9.0: H100 SXM, H100 PCIe, H200).
        # And what maps it into the activities an observed power model reads, the tensor pipe's among them.
        metrics = list(dict.fromkeys(required_metrics("time", "ncu") + required_metrics("power", "ncu") + [
            *ACTIVITY_METRICS, TENSOR_METRICS[0], "gpu__time_duration.sum", "device__attribute_display_name"]))
        # Stated even where it is ncu's default, so a reader sees it; the SM clock is measured too.
        return shlex.join(ncu_command(metrics, argv, kernel_name=kernel_name, launch_count=launch_count,
                                      log_file=log_file, extra_args=["--clock-control", clock_control or "base"]))
    if kernel_name is not None or launch_count is not None:
        raise InputError("a kernel name or launch count limits Nsight Compute's profile (compute capability 7.0 "
                         f"and newer); on {compute_capability} the command is nvprof's, which profiles every launch")
    if clock_control is not None:
        raise InputError(f"clock control is Nsight Compute's (compute capability 7.0 and newer); on "
                         f"{compute_capability} the command is nvprof's, which leaves the clocks to the driver")
    metrics = required_metrics("time", "nvprof") + required_metrics("power", "nvprof")
    if cc >= 6:
        return shlex.join(nvprof_command(metrics, argv, log_file=log_file))
    # unique_warps_launched is a metric from Pascal on; before it the warps are an event.
    metrics.remove("unique_warps_launched")
    return shlex.join(nvprof_command(metrics, argv, events=["warps_launched"], log_file=log_file))


def recorded_device(report: CounterReport) -> tuple[str | None, str | None]:
    """The GPU name and compute capability the profile records, each None where it has none."""
    name = cc = None
    for k in report.kernels:
        label = k.text.get("device__attribute_display_name") or k.info.get("Device", "")
        label = re.sub(r"\s*\(\d+\)$", "", label).strip()
        if label and not label.isdigit() and name is None:
            name = label
        if cc is None:
            cc = recorded_compute_capability(k)
    return name, cc


def device_of(report: CounterReport, name: str | None) -> DeviceSpec:
    """The catalog entry of ``name`` (``--device``), else of the device the profile names.

    A profile taken on another GPU than ``name`` (by its recorded name or compute capability)
    is refused with `InputError`: its counters and time belong to the GPU that ran it; so is one
    that does not say its GPU, without ``name``.
    """
    recorded, cc = recorded_device(report)
    if name:
        spec = lookup(name)
        if recorded is not None:
            try:
                other = lookup(recorded)
            except InputError:
                other = None  # a GPU the catalog lacks: its compute capability still tells
            if other is not None and other.key != spec.key:
                raise InputError(f"{report.path}: the profile was taken on {recorded} ({other.key}), not on "
                                 f"{spec.key}: predict it with --device {other.key}, or profile on {spec.key}")
        if cc is not None and cc != spec.compute_capability:
            raise InputError(f"{report.path}: the profile was taken on a GPU of compute capability {cc}, not on "
                             f"{spec.key} ({spec.compute_capability}): profile the workload on {spec.key}")
        return spec
    if recorded is not None:
        return lookup(recorded)
    if cc is not None:
        try:
            return lookup(cc)
        except InputError as e:  # a compute capability several GPUs share
            raise InputError(f"{report.path}: {e}: give --device NAME") from None
    raise InputError(f"{report.path}: the profile does not name its GPU; give --device NAME")


def kernel_inputs(report: CounterReport, clip: bool = False) -> list[LaunchInputs]:
    """What the models need of each kernel launch, from its counters, in the profile's order.

    Every missing counter of every kernel is gathered into one error with the command that
    collects them, and counters the profile's tool cannot give at all (Nsight Compute on
    Pascal) into an error naming the tool that can. A kernel launched more than once keeps
    each launch, numbered (`launch_labels`). ``clip`` clips utilizations outside [0, 1], with
    a warning. Raises `InputError` for a report without kernels, a counter that is not a number or a
    duration not in a unit of time; `MissingCountersError` (an `InputError`) for counters the
    kernels lack.
    """
    if not isinstance(report, CounterReport) or not report.kernels:
        raise InputError("predict needs Nsight Compute or nvprof output with at least one kernel")
    out, missing, lacking = [], {}, {}
    for label, k in zip(launch_labels(report.kernels), report.kernels):
        scheme = scheme_of(k)
        try:
            inputs = time_model_inputs(k)
            util = power_utilizations(k, clip=clip)
        except MissingCountersError as e:
            needed = [n for need in e.missing.values() for n in need]
            printed = [n for n in needed if n in k.text]  # there, but not a number
            if printed:
                raise InputError(f"{report.path}, line {k.line}: kernel {k.name!r}: counter {printed[0]!r} is "
                                 f"{k.text[printed[0]]!r}, not a number") from None
            missing.update(dict.fromkeys(needed))
            continue
        # Inputs the tool has no counter for come back None without raising.
        present = {c: u for c in COMPONENTS if (u := util[c]) is not None}
        gaps = [t for t in TIME_INPUTS if inputs[t] is None] + [c for c in COMPONENTS if c not in present]
        if gaps:
            lacking.update(dict.fromkeys(gaps))
            continue
        ms = k.metrics.get("gpu__time_duration.sum")
        factor, base = normalize_unit(k.units.get("gpu__time_duration.sum", "ns"))
        if ms is not None and base != "ns":
            raise InputError(f"{report.path}, line {k.line}: kernel {k.name!r}: gpu__time_duration.sum is in "
                             f"{k.units['gpu__time_duration.sum']!r}, not a unit of time")
        out.append(LaunchInputs(label, scheme, inputs, present, None if ms is None else ms * factor * 1e-6,
                                tensor_activity(k) if scheme == "ncu" else None))
    if missing or lacking:
        cc = _compute_capability(report)
        command = profile_command(cc)
        bad = len(report.kernels) - len(out)
        if lacking:
            raise MissingCountersError(
                f"{report.path}: {bad} of {len(report.kernels)} kernels were profiled with {report.tool} on a GPU of "
                f"compute capability {cc}, where it has no counter for {', '.join(lacking)}. Collect them "
                f"with:\n  {command}", {"counters": tuple(lacking)})
        raise MissingCountersError(
            f"{report.path}: {bad} of {len(report.kernels)} kernels lack counters the "
            f"models need: {', '.join(missing)}. Collect them with:\n  {command}",
            {"counters": tuple(missing)})
    return out


def launch_labels(kernels: Sequence[KernelCounters]) -> list[str]:
    """Each kernel's name, numbered ``name #2`` ... where a name repeats.

    A kernel launched again, perhaps on other input: no launch's prediction hides another's.
    """
    total = Counter(k.name for k in kernels)
    seen: Counter[str] = Counter()
    labels = []
    for k in kernels:
        seen[k.name] += 1
        labels.append(k.name if total[k.name] == 1 else f"{k.name} #{seen[k.name]}")
    return labels


def _compute_capability(report: CounterReport) -> str:
    """The compute capability the profile records, else its GPU's, else the oldest its tool serves predict on.

    The oldest: nvprof's Pascal, Nsight Compute's Volta.
    """
    for k in report.kernels:
        cc = recorded_compute_capability(k)
        if cc is not None:
            return cc
    try:
        return device_of(report, None).compute_capability
    except InputError:
        return "6.0" if report.tool == "nvprof" else "7.0"


def predict_detail(report: CounterReport, device: DeviceSpec, *, power_model: PowerModel | None = None,
                    reference: tuple[float, float] | None = None, policy: str = "energy",
                    slowdown: float = 0.1, eta: float = 0.5, power_cap_w: float | None = None, clip: bool = False,
                    kernels: list[LaunchInputs] | None = None, calibrate: bool = True,
                    clocks: SupportedClocks | None = None) -> PredictionDetail:
    """Per kernel launch, what `gpudvfs.predict_profile` gives for the whole: the detail behind it.

    Unlike the public function, it takes a read report and its catalog entry, and optionally the
    :func:`kernel_inputs` already read (``kernels``). Without a power model, the catalog prior of
    ``device`` (`PowerModel.prior`) serves; a model observed on activities gets them through
    `power_inputs`. The time is calibrated on each launch's measured duration where every launch
    has one, unless ``calibrate`` is False. Under the cost policy, energy weighs ``eta`` against
    time priced at the GPU's TDP (Zeus's MAXPOWER); under the power-cap policy, the fastest pair
    whose predicted power is under ``power_cap_w`` (W). ``reference`` defaults to `_references`.
    Raises `InputError` where the power model is on other inputs or not of this GPU, a launch's
    clock cannot be the GPU's, or ``reference`` is not a pair it supports.
    """
    if power_model is None:
        power_model = PowerModel.prior(device)
    power_model.check_gpu(device.key)
    beyond = device.clock_warnings(power_model.configs_[:, 0], power_model.configs_[:, 1])
    if beyond:
        raise InputError(f"the power model's clock pairs are not {device.key}'s: {beyond[0]}")
    if kernels is None:
        kernels = kernel_inputs(report, clip)
    inputs = power_inputs(report, [k.utilization for k in kernels], power_model, device)
    refs, reference_from, assumed = _references(kernels, device, reference)
    tdev = TimeDevice.from_spec(device)
    profiles = [KernelProfile.from_counters(k.label, {n: v for n, v in k.inputs.items() if v is not None},
                                            tool="nvprof", device=tdev, reference_mhz=tuple(ref),
                                            reference_time_ms=k.time_ms)
                for k, ref in zip(kernels, refs)]
    supported = SupportedClocks.of_spec(device) if clocks is None else clocks
    if reference is not None:  # clocks it ran at: ones the GPU takes
        supported.check(f"reference {reference[0]:g},{reference[1]:g}", [reference[0]], [reference[1]])
    configs = _grid(power_model, supported)
    calibrated = calibrate and all(k.time_ms is not None for k in kernels)
    t = TimeModel(tdev).predict(profiles, configs[:, 0], configs[:, 1], calibrate=calibrated)
    median = np.median(refs, axis=0)
    q_time = time_interval(configs, median, calibrated)
    q_assumed = assumed_reference_spread(device) if assumed else 0.0
    q_time = np.hypot(q_time, q_assumed)  # independent errors, as the uncalibrated level's
    q_mapped = inputs.interval(power_model, configs)
    p, q_power, tensor_note = with_tensor(device, power_model, [k.tensor for k in kernels], configs,
                                          power_model.predict_grid(inputs.values, configs), q_mapped)

    def choose(time_ms: np.ndarray, watts: np.ndarray) -> Selection:
        return select(time_ms, watts, configs, policy, default_index=highest_index(configs), slowdown=slowdown,
                      eta=eta, max_power_w=device.tdp_w, power_cap_w=power_cap_w)

    s = choose(t, p)
    names = [k.name for k in report.kernels]  # kernel_inputs keeps every launch, in order, or raises
    by_name, application = _application(names, t, p, choose)
    return PredictionDetail(
        device=device.key, reference_mhz=tuple(median.tolist()), reference_from=reference_from,
        configs=configs.copy(), clocks_source=supported.source,
        calibrated_on_measured_time=calibrated, power_source=power_model.source_,
        intervals=Intervals(q_time, q_power, None if q_power is None else q_time + q_power),
        rests_on=_rests_on(calibrated, power_model, q_assumed, inputs.gaps, q_mapped, tensor_note),
        kernels={k.label: LaunchPrediction(t[i], p[i], t[i] * p[i] / 1e3, _chosen(s, i))
                 for i, k in enumerate(kernels)},
        under_launch_scale=None if calibrated else tuple(k.label for i, k in enumerate(kernels)
                                                         if t[i].min() < LAUNCH_SCALE_MS),
        policy=policy, by_name=by_name, application=application)


def _grid(model: PowerModel, supported: SupportedClocks) -> np.ndarray:
    """The pairs to predict at: every supported one where the model's curve gives any clock, else its supported ones."""
    try:
        with warnings.catch_warnings():  # a curve beyond its fitted clocks: predict_grid says so once
            warnings.simplefilter("ignore")
            model.voltage(supported.pairs[:, 0], supported.pairs[:, 1])
        return supported.pairs
    except InputError:  # a per-config or per-domain model knows its measured clocks alone
        pass
    known = model.configs_
    if supported.exact:
        known = known[[supported.supports(c, m) for c, m in known]]
    if not len(known):
        raise InputError(f"the power model ({model.variant}) knows none of the clock pairs {supported.device} "
                         "supports: fit it with the curve variant, which gives any clock")
    return known


def _rests_on(calibrated: bool, model: PowerModel, q_assumed: float, gaps: tuple[str, ...] = (),
              q_mapped: float | None = None, tensor: str = "") -> str:
    """One line: what the time and the power rest on, with their 90% intervals."""
    time = ("time calibrated on the profile's measured duration" if calibrated else
            f"time uncalibrated: within x/{math.exp(UNCALIBRATED_LEVEL):.2f} at the reference")
    if q_assumed > 0:
        time += (f", its clocks assumed (the profile lacks the SM clock; collect "
                 f"smsp__cycles_elapsed.avg.per_second): widened by x/{math.exp(q_assumed):.2f}")
    power = {"prior": "power from the catalog prior (no measurement of this GPU)",
             "observed": "power from the prior refined by observing this GPU",
             "fitted": "power from a model fitted on this GPU's measurements"}[model.source_]
    interval = "" if model.interval_ is None else f": within x/{math.exp(model.interval_):.2f}"
    mapped = f", its activities mapped from the profile ({'; '.join(gaps)})" if gaps else ""
    if q_mapped is not None and model.interval_ is not None and q_mapped > model.interval_:
        mapped += f", widened to x/{math.exp(q_mapped):.2f} for what it could not tell"
    return f"{time}; {power}{interval}{mapped}{f', {tensor}' if tensor else ''} (90% intervals)"


def _chosen(s: Selection, i: int) -> ChosenPair:
    return ChosenPair(float(s.core_mhz[i]), float(s.mem_mhz[i]), float(s.time_ms[i]), float(s.watts[i]),
                      bool(s.feasible[i]))


def _references(kernels: list[LaunchInputs], device: DeviceSpec, reference: tuple[float, float] | None
                ) -> tuple[np.ndarray, str, bool]:
    """Per launch, the (core, memory) clocks its counters and time belong to [n x 2], their source, and if assumed.

    ``reference`` where given; else each launch's SM clock as Nsight Compute measured it (its
    clock control may lock the driver's base clock, which can differ from the catalog's, or
    leave the GPU boosting) with the catalog's default memory clock; else, assumed, the
    catalog's default clocks (the GPU's own, never another GPU's).
    """
    n = len(kernels)
    if reference is not None:
        return np.tile(np.asarray(reference, dtype=np.float64), (n, 1)), "given", False
    for k in kernels:
        c = k.inputs.get("sm_clock_mhz")
        if c is None:
            continue
        beyond = device.clock_warnings([c]) if c >= 1 else ["no GPU runs below 1 MHz"]
        if beyond:
            raise InputError(f"launch {k.label!r}: its SM clock rate (sm_clock_mhz) {c:g} MHz cannot be "
                             f"{device.key}'s: {beyond[0]}; give --reference CORE,MEM")
    sm = [c for k in kernels if (c := k.inputs.get("sm_clock_mhz")) is not None]
    if len(sm) == n:
        return (np.column_stack([sm, np.full(n, float(device.default_mhz[1]))]),
                "the profile's SM clock, the catalog's default memory clock", False)
    return (np.tile(np.asarray(device.default_mhz, dtype=np.float64), (n, 1)),
            "the catalog's default clocks, assumed: the profile lacks the SM clock its launches ran at", True)


def assumed_reference_spread(device: DeviceSpec) -> float:
    """How far off an assumed reference clock can put the time: a log half-width.

    A profile without the SM clock may have run anywhere from the GPU's base clock (Nsight
    Compute's lock) to its boost clock (the driver's own choice). A compute-bound kernel's time
    scales with that clock, so a time placed at the catalog's default clock can be off by the
    larger log ratio between that clock and either end: ``max(ln(default / base), ln(boost /
    default))``, the base the rated one where published, else the default clock itself.
    """
    default = float(device.default_mhz[0])
    lo = min(device.core_mhz.get("base", default), default)
    hi = max(device.core_mhz["boost"], default)
    return max(math.log(default / lo), math.log(hi / default))


def _application(names: list[str], t: np.ndarray, p: np.ndarray, choose: Callable[[np.ndarray, np.ndarray], Selection]
                 ) -> tuple[dict[str, NamePrediction], ApplicationPrediction]:
    """The profiled launches together: per kernel name, and for the whole with the one pair chosen for all.

    Per kernel name, its launches and their summed time and energy at each pair; for the
    whole, the summed time, energy and mean power, and the one pair chosen for all of them.
    """
    index = {n: i for i, n in enumerate(dict.fromkeys(names))}
    of = np.array([index[n] for n in names], dtype=np.int64)

    def per_name(x: np.ndarray) -> np.ndarray:
        out = np.zeros((len(index), x.shape[1]))
        np.add.at(out, of, x)
        return out

    e = t * p / 1e3
    launches, t_sum, e_sum = np.bincount(of, minlength=len(index)), per_name(t), per_name(e)
    by_name = {n: NamePrediction(int(launches[i]), t_sum[i], e_sum[i]) for n, i in index.items()}
    total, joules = t.sum(axis=0), e.sum(axis=0)
    watts = joules * 1e3 / total
    chosen = _chosen(choose(total[None], watts[None]), 0)
    return by_name, ApplicationPrediction(len(names), total, joules, watts, chosen)
