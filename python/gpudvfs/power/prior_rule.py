"""Fitting the power prior's rule on measured GPUs, and scoring it on GPUs left out.

The rule (:mod:`gpudvfs.power.prior`) is one power model in units of each GPU's TDP and
default clocks. It is fitted by pooling the training GPUs' measurements, each in those
units (watts over its TDP, clocks over the clocks its utilizations were measured at), into
one `curve`-variant fit, each GPU given the same number of rows at most (every k-th
benchmark) so that no GPU's file outweighs the others by its size.

Scored by GPU: each GPU's prior made by the rule fitted without any of its files, against
every row measured on it. Two figures per file: ``mape`` (absolute power, from the file's
utilizations and the GPU's TDP alone) and ``reference_mape`` (each workload's power at the
reference clocks taken as measured, so the figure is the prior's frequency scaling alone:
the voltage curve and the static/dynamic split). Files whose utilizations are not the
profilers' components (DCGM activities, or none at all) score the shape only, or say how
their activities were mapped.
"""

from __future__ import annotations

import csv
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from gpudvfs import _core
from gpudvfs.catalog import lookup
from gpudvfs.data import read_measured_grid, read_power_dataset
from gpudvfs.data.counters import COMPONENTS, DOMAIN_SIZES
from gpudvfs.data.datasets import MeasurementGrid, PowerDataset
from gpudvfs.data.jsonfile import read_json
from gpudvfs.errors import InputError
from gpudvfs.power.model import PowerModel
from gpudvfs.power.prior import RULE_KIND, RULE_VERSION, prior_state

#: The gpmTOOL files: (file, catalog GPU, fitted on: microbenchmarks; applications are scored only).
GPMTOOL_FILES = (("titanx_micro.csv", "gtx-titan-x", True), ("titanx_hpca18_micro.csv", "gtx-titan-x", True),
                 ("titanx_real_dev.csv", "gtx-titan-x", False), ("titanxp_micro.csv", "titan-xp", True),
                 ("k40c_micro.csv", "k40c", True), ("gtx980_micro.csv", "gtx980", True))
#: The quantile of the held-out errors a prior's interval covers: its half-width is that quantile
#: of |ln(predicted / measured)|, so the interval is [P / e^q, P e^q].
INTERVAL_QUANTILE = 0.9


@dataclass(frozen=True)
class Setting:
    """How the rule is fitted: relative errors or squared watts, and the rows a GPU contributes at most (None: all)."""

    relative_error: bool
    rows_per_gpu: int | None

    @property
    def label(self) -> str:
        """The setting in words, for reports."""
        rows = "all rows" if self.rows_per_gpu is None else f"{self.rows_per_gpu} rows a GPU"
        return f"{'relative' if self.relative_error else 'watts'}, {rows}"


#: The settings the protocol chooses among (`choose_rule`).
SETTINGS = tuple(Setting(rel, rows) for rel in (True, False) for rows in (400, 800, 1600, None))


@dataclass(frozen=True)
class GpuFile:
    """One measured file of one catalog GPU.

    ``dataset`` has utilizations over :data:`COMPONENTS` (all zero where the file has none), its
    ``reference_mhz`` the clocks they were measured at. ``train``: fitted on (microbenchmarks
    with profiler utilizations), else scored only; ``absolute``: its utilizations allow an
    absolute figure; ``note``: how its activities were mapped onto the components.
    """

    gpu: str
    label: str
    dataset: PowerDataset
    train: bool
    absolute: bool = True
    note: str = ""


def _components(ds: PowerDataset, combine: dict[str, tuple[str, ...]]) -> PowerDataset:
    """``ds`` over :data:`COMPONENTS`: each a column of the file, or the sum of several, others dropped.

    The sums (``combine``) are clipped at 1: K40c's separate add, multiply and FMA pipes.
    """
    cols = []
    for c in COMPONENTS:
        names = combine.get(c, (c,))
        idx = [ds.components.index(n) for n in names if n in ds.components]
        if not idx:
            raise InputError(f"{ds.path}: no column for component {c} (looked for {names})")
        cols.append(np.minimum(1.0, ds.utilization[:, idx].sum(axis=1)))
    return replace(ds, components=COMPONENTS, domain_sizes=DOMAIN_SIZES, utilization=np.column_stack(cols))


def _gpmtool(path: Path, on_invalid: str = "raise") -> PowerDataset:
    combine = {"SP": ("SP ADD", "SP MUL", "SP FMA", "SP"), "DP": ("DP ADD", "DP MUL", "DP FMA", "DP"),
               "SFU": ("SFU", "SF")}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _components(read_power_dataset(path, on_invalid), combine)


def _one_clock_dataset(path: str, names: list[str], watts: list[float], util: list[list[float]],
                       ref: tuple[float, float]) -> PowerDataset:
    n = len(names)
    return PowerDataset(path=path, reference_mhz=ref, domain_sizes=DOMAIN_SIZES, components=COMPONENTS,
                        watts=np.asarray(watts, dtype=np.float64), freqs_mhz=np.tile(np.asarray(ref, float), (n, 1)),
                        utilization=np.asarray(util, dtype=np.float64), row_names=tuple(names),
                        benchmark=np.arange(n), benchmarks=tuple(names))


def _h100_suite(folder: Path) -> PowerDataset:
    """The power suite measured on an H100 at the driver's clocks, with Nsight Compute's utilizations."""
    profiles = read_json(folder / "power-suite.csv.sweep.json")["profiles"]
    rows = list(csv.DictReader(open(folder / "power-suite.csv", encoding="utf-8")))
    ref = (float(rows[0]["core_mhz"]), float(rows[0]["mem_mhz"]))
    return _one_clock_dataset(str(folder / "power-suite.csv"), [r["workload"] for r in rows],
                              [float(r["watts"]) for r in rows],
                              [[profiles[r["workload"]][c] for c in COMPONENTS] for r in rows], ref)


def _v100_dcgm(path: Path) -> PowerDataset:
    """The V100 grid's DCGM activities at the default clock, mapped onto the components they measure.

    fp32 -> SP, fp64 -> DP, DRAM -> DRAM; the other components have no DCGM field and count 0,
    so the absolute figure is a lower bound on what the prior would say.
    """
    grid = read_measured_grid(path, "the power prior's V100 file", ("dcgm",))
    watts = _measured_power(grid)
    ref = _nearest(np.unique(grid.core_mhz), lookup("v100-pcie").default_mhz[0])
    names, rows = grid.reference_rows((ref, None))
    m = grid.metrics
    util = np.zeros((len(names), len(COMPONENTS)))
    for c, field in (("SP", "fp32_active"), ("DP", "fp64_active"), ("DRAM", "dram_active")):
        util[:, COMPONENTS.index(c)] = np.clip(m[field][rows], 0, 1)
    index = {n: a for a, n in enumerate(names)}
    work = grid.workload
    keep = np.isin(work, names)
    bench = np.array([index[w] for w in work[keep].tolist()], dtype=np.int64)
    mem = lookup("v100-pcie").default_mhz[1]
    return PowerDataset(path=str(path), reference_mhz=(ref, mem), domain_sizes=DOMAIN_SIZES, components=COMPONENTS,
                        watts=watts[keep], freqs_mhz=np.column_stack([grid.core_mhz[keep],
                                                                           np.full(keep.sum(), mem)]),
                        utilization=util[bench], row_names=tuple(work[keep].tolist()), benchmark=bench,
                        benchmarks=tuple(names))


def _a40_stages(path: Path) -> PowerDataset:
    """Perseus's A40 stage profiles: power (energy over time) of each stage's passes at each SM clock.

    Each stage's forward and backward pass; no utilizations (the shape is scored alone).
    """
    grid = read_measured_grid(path, "the power prior's A40 files", ("perseus",))
    keys = list(dict.fromkeys(grid.workload.tolist()))
    index = {k: i for i, k in enumerate(keys)}
    spec = lookup("a40")
    core = grid.core_mhz
    return PowerDataset(path=str(path), reference_mhz=(float(core.max()), spec.default_mhz[1]),
                        domain_sizes=DOMAIN_SIZES, components=COMPONENTS, watts=_measured_power(grid),
                        freqs_mhz=np.column_stack([core, np.full(len(grid), spec.default_mhz[1])]),
                        utilization=np.zeros((len(grid), len(COMPONENTS))), row_names=None,
                        benchmark=np.array([index[w] for w in grid.workload.tolist()], dtype=np.int64),
                        benchmarks=tuple(f"stage {k.replace('/', ' ')}" for k in keys))


def _measured_power(grid: MeasurementGrid) -> np.ndarray:
    watts = grid.watts
    if watts is None:
        raise InputError(f"{grid.path}: the power prior is scored on measured power; the grid has none")
    return watts


def _nearest(values: np.ndarray, x: float) -> float:
    return float(values[np.argmin(np.abs(values - x))])


def gpu_files(data: Path, validation: Path | None = None) -> list[GpuFile]:
    """Every GPU file under ``data`` (``../shared/data``) and ``validation`` the rule is fitted or scored on.

    Raises `InputError` if none of the training files is there, or a file cannot be read.
    """
    g = data / "gpupowermodel"
    out = []
    for name, gpu, train in GPMTOOL_FILES:
        if (g / name).exists():
            out.append(GpuFile(gpu, name, _gpmtool(g / name, "skip" if gpu == "k40c" else "raise"), train))
    v100 = data / "nsfcac" / "v100_spec_dev.csv"
    if v100.exists():
        out.append(GpuFile("v100-pcie", v100.name, _v100_dcgm(v100), False,
                           note="DCGM fp32/fp64/DRAM activities as SP/DP/DRAM; the other components 0"))
    for name in ("bloom_a40_stages.csv", "gpt3-175b_a40_stages.csv"):
        if (data / "perseus" / name).exists():
            out.append(GpuFile("a40", name, _a40_stages(data / "perseus" / name), False, absolute=False,
                               note="no utilizations: the shape alone"))
    if validation is not None and (validation / "power-suite.csv").exists():
        out.append(GpuFile("h100-sxm", f"{validation.name}/power-suite.csv", _h100_suite(validation), True))
    if not any(f.train for f in out):
        raise InputError(f"{data}: none of the power prior's training files is there")
    return out


def _normalized(f: GpuFile) -> PowerDataset:
    """The file in the rule's units: watts over the GPU's TDP, clocks over the reference."""
    ds, tdp = f.dataset, lookup(f.gpu).tdp_w
    ref = np.asarray(ds.reference_mhz, dtype=np.float64)
    return replace(ds, watts=ds.watts / tdp, freqs_mhz=ds.freqs_mhz / ref, reference_mhz=(1.0, 1.0))


def _thinned(ds: PowerDataset, rows: int | None) -> PowerDataset:
    """Every k-th benchmark, k the least that keeps at most ``rows`` rows (None: all)."""
    k = 1 if rows is None else max(1, int(np.ceil(len(ds) / rows)))
    return ds if k == 1 else ds.subset(ds.benchmark % k == 0)


def _pooled(files: list[GpuFile], rows_per_gpu: int | None) -> PowerDataset:
    """The training files of each GPU, normalized and thinned to ``rows_per_gpu``, as one dataset."""
    parts: list[PowerDataset] = []
    for gpu in dict.fromkeys(f.gpu for f in files):
        mine = [_normalized(f) for f in files if f.gpu == gpu]
        share = None if rows_per_gpu is None else rows_per_gpu // len(mine)
        parts += [_thinned(ds, share) for ds in mine]
    offsets = np.cumsum([0] + [len(p.benchmarks) for p in parts])
    return PowerDataset(
        path="pooled", reference_mhz=(1.0, 1.0), domain_sizes=DOMAIN_SIZES, components=COMPONENTS,
        watts=np.concatenate([p.watts for p in parts]), freqs_mhz=np.concatenate([p.freqs_mhz for p in parts]),
        utilization=np.concatenate([p.utilization for p in parts]), row_names=None,
        benchmark=np.concatenate([p.benchmark + o for p, o in zip(parts, offsets)]),
        benchmarks=tuple(f"{p.path}:{b}" for p in parts for b in p.benchmarks))


def fit_rule(files: list[GpuFile], setting: Setting, interval: float = 0.0) -> dict[str, Any]:
    """A `power-prior-rule` document fitted on the training files, with ``interval`` (90%, log half-width)."""
    train = [f for f in files if f.train]
    if not train:
        raise InputError("the power prior's rule needs at least one training file")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = PowerModel("curve", relative_error=setting.relative_error).fit(
            _pooled(train, setting.rows_per_gpu), unused="zero")
    curves = model._require_fit().state()["curves"]
    return {"kind": RULE_KIND, "version": RULE_VERSION, "components": list(COMPONENTS),
            "domain_sizes": list(DOMAIN_SIZES), "static_per_tdp": model.static_w_.tolist(),
            "idle_per_tdp": model.idle_w_.tolist(), "weights_per_tdp": [model.weights_[c] for c in COMPONENTS],
            "curves": [None if c[1] == 0 or not np.isfinite(c[0]) else [float(c[0]), float(c[1])] for c in curves],
            "interval": float(interval), "setting": {"relative_error": setting.relative_error,
                                                     "rows_per_gpu": setting.rows_per_gpu},
            "trained_on": sorted({f.gpu for f in train}), "files": [f.label for f in train]}


def prior_predictions(rule: dict[str, Any], f: GpuFile) -> np.ndarray:
    """Watts per row of the rule's prior of a file's GPU, placed at the file's reference clocks."""
    ds = f.dataset
    fit = _core.PowerFit.from_state(prior_state(lookup(f.gpu), rule, configs=np.unique(ds.freqs_mhz, axis=0),
                                                reference=ds.reference_mhz))
    return fit.predict(np.ascontiguousarray(ds.utilization), np.ascontiguousarray(ds.core_mhz),
                       np.ascontiguousarray(ds.mem_mhz))


def _reference_scaled(pred: np.ndarray, ds: PowerDataset) -> np.ndarray | None:
    """``pred`` scaled per workload so that it equals the measurement at the reference clocks.

    None where a workload has no row there.
    """
    at_ref = np.all(ds.freqs_mhz == np.asarray(ds.reference_mhz), axis=1)
    out = pred.copy()
    for b in np.unique(ds.benchmark):
        rows = ds.benchmark == b
        ref = rows & at_ref
        if not ref.any():
            return None
        out[rows] *= ds.watts[ref].mean() / pred[ref].mean()
    return out


def _ape(pred: np.ndarray, watts: np.ndarray) -> np.ndarray:
    return 100.0 * np.abs(pred - watts) / watts


def _scored(f: GpuFile) -> bool:
    """Whether ``f``'s absolute error counts in the protocol's score.

    It does where its utilizations are the profilers' components (not DCGM activities mapped
    onto them, nor none).
    """
    return f.absolute and not f.note


def score_file(rule: dict[str, Any], f: GpuFile) -> tuple[dict[str, Any], np.ndarray | None]:
    """A file's scores under a rule, and |ln(predicted / measured)| per row where the file is scored (else None).

    The scores: ``gpu``, ``rows``, ``trained_on``, ``note``; ``mape``, ``median_ape`` and ``bias``
    (%, absolute, where its utilizations allow); ``reference_mape`` (frequency scaling alone,
    where every workload has a row at the reference).
    """
    pred = prior_predictions(rule, f)
    r: dict[str, Any] = {"gpu": f.gpu, "rows": len(f.dataset), "trained_on": rule["trained_on"], "note": f.note}
    if f.absolute:
        ape = _ape(pred, f.dataset.watts)
        r |= {"mape": float(ape.mean()), "median_ape": float(np.median(ape)),
              "bias": float(100 * np.mean(pred / f.dataset.watts - 1))}
    scaled = _reference_scaled(pred, f.dataset)
    if scaled is not None:
        r["reference_mape"] = float(_ape(scaled, f.dataset.watts).mean())
    return r, (np.abs(np.log(pred / f.dataset.watts)) if _scored(f) else None)


def leave_one_gpu_out(files: list[GpuFile], setting: Setting) -> dict[str, dict[str, Any]]:
    """File label -> its scores (:func:`score_file`) under the rule fitted on the other GPUs' files."""
    out: dict[str, dict[str, Any]] = {}
    for gpu in dict.fromkeys(f.gpu for f in files):
        rule = fit_rule([f for f in files if f.gpu != gpu], setting)
        out |= {f.label: score_file(rule, f)[0] for f in files if f.gpu == gpu}
    return out


def mean_over_gpus(per_file: dict[str, dict[str, Any]]) -> float:
    """Mean over GPUs of each GPU's mean absolute MAPE (%) over its scored files.

    Files without an absolute figure or with a note are left out.
    """
    by_gpu: dict[str, list[float]] = {}
    for r in per_file.values():
        if "mape" in r and not r["note"]:
            by_gpu.setdefault(r["gpu"], []).append(r["mape"])
    return float(np.mean([np.mean(v) for v in by_gpu.values()]))


def _weighted_quantile(groups: list[tuple[str, np.ndarray]], q: float) -> float:
    """The q-quantile of the values of all groups, each GPU's values weighing the same in all."""
    gpus = {g for g, _ in groups}
    per_gpu = {g: sum(len(a) for h, a in groups if h == g) for g in gpus}
    values = np.concatenate([a for _, a in groups])
    weights = np.concatenate([np.full(len(a), 1.0 / per_gpu[g]) for g, a in groups])
    order = np.argsort(values)
    cum = np.cumsum(weights[order]) / weights.sum()
    return float(values[order][np.searchsorted(cum, q)])


def choose_rule(files: list[GpuFile], settings: Sequence[Setting] = SETTINGS,
                progress: Callable[[int, int, str], None] | None = None) -> dict[str, Any]:
    """The protocol, nested by GPU: the rule's setting chosen without the GPU it is scored on.

    For each GPU whose files are scored, the setting with the least mean leave-one-GPU-out
    MAPE over the *other* GPUs is chosen, fitted on the other GPUs' files and scored on its
    own. The files that are not scored (mapped or no utilizations) get the setting chosen on
    all GPUs, fitted without them. ``progress`` is called with (steps done, steps in all, what
    runs now).

    Returns ``chosen`` (the setting on all GPUs and per GPU); ``cv`` (per file its scores and
    chosen setting, their ``mean_mape`` and the ``interval``, the :data:`INTERVAL_QUANTILE` of the
    held-out |ln(predicted / measured)|, each GPU weighing the same); ``settings`` (each
    setting's plain leave-one-GPU-out figures, for how the figures move with it); ``rule``
    (fitted on every training file with the setting chosen on all GPUs, carrying the nested
    interval).
    """
    scored = list(dict.fromkeys(f.gpu for f in files if _scored(f)))
    loo = {}
    for i, s in enumerate(settings):
        if progress:
            progress(i, len(settings) + len(scored), f"leave-one-GPU-out, {s.label}")
        loo[s] = leave_one_gpu_out(files, s)
    on_all = min(settings, key=lambda s: mean_over_gpus(loo[s]))
    per_file, errors, chosen = {}, [], {}
    for j, gpu in enumerate(scored):
        if progress:
            progress(len(settings) + j, len(settings) + len(scored), f"nested, {gpu} held out")
        others = [f for f in files if f.gpu != gpu]
        inner = {s: mean_over_gpus(leave_one_gpu_out(others, s)) for s in settings}
        best = min(settings, key=inner.__getitem__)
        chosen[gpu] = best.label
        rule = fit_rule(others, best)
        for f in (f for f in files if f.gpu == gpu):
            per_file[f.label], ape = score_file(rule, f)
            per_file[f.label]["setting"] = best.label
            if ape is not None:
                errors.append((gpu, ape))
    for f in (f for f in files if f.gpu not in scored):
        per_file[f.label] = loo[on_all][f.label] | {"setting": on_all.label}
    interval = _weighted_quantile(errors, INTERVAL_QUANTILE)
    return {"chosen": {"on_all": on_all.label, "per_gpu": chosen},
            "cv": {"files": per_file, "mean_mape": mean_over_gpus(per_file), "interval": interval},
            "settings": {s.label: {"mean_mape": mean_over_gpus(loo[s]),
                                   "files": {k: v.get("mape") for k, v in loo[s].items()}} for s in settings},
            "rule": fit_rule(files, on_all, interval)}
