"""The cold-start prior's constants chosen leaving out whole GPUs: `MEMORY_SHARE`, `STEP_PRIOR_SD`, `LIMIT_PRIOR_SD`.

On every public file where a workload was measured at several settings (`PRIOR_FILES`), each
workload's prior is made from its one measurement at the file's default setting (its highest
clock pair, core clock or power limit, as the replays take it) and compared with its measured
time and power at every other setting: the error is log(prior / measured). Clocks: `step_prior`,
power by the catalog's shape; power limits: `limit_prior`.

The memory share is the one of `SHARES` with the least mean |time error| over the clock files.
A file's held-out errors are those at the share chosen without it. Each knob's prior has its own
sd, chosen on that knob's files alone: the least of `SDS` whose 90% interval (+-1.645 sd) holds
at least 90% of the held-out errors, time's and power's together, each file alike. A file is
scored with the share and sd chosen on the other GPUs' files (the sd on those of its knob): two
files of one GPU share its clock response and, for the GTX 980's and the Titan X's, workloads,
so leaving out one file would let its twin choose for it (``by="file"`` leaves out one file).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from gpudvfs.catalog import lookup
from gpudvfs.catalog.mem_unit import in_gpu_mem_unit
from gpudvfs.data import read_measured_grid
from gpudvfs.errors import InputError
from gpudvfs.evaluation.govern_replay import replay
from gpudvfs.evaluation.plain import plain_table
from gpudvfs.evaluation.regret import MeanMax
from gpudvfs.govern.advice import NORMAL_Z90
from gpudvfs.govern.priors import catalog_power_shape, limit_prior, step_prior
from gpudvfs.policy.policies import highest_index
from gpudvfs.records import Record

#: Every public file of workloads measured at several settings: (path under the data folder, GPU,
#: catalog key for the power shape; None: a power-limit trace, `limit_prior`).
PRIOR_FILES: tuple[tuple[str, str, str | None], ...] = (
    ("nv-dvfs-benchmark/gtx980_time_dev.csv", "GTX 980", "gtx980"),
    ("nv-dvfs-benchmark/gtx980_time_power_dev.csv", "GTX 980", "gtx980"),
    ("nsfcac/v100_spec_dev.csv", "V100", "v100-pcie"),
    ("gpuptxmodel/titanx_microbenchmarks.csv", "GTX Titan X", "gtx-titan-x"),
    ("gpuptxmodel/titanx_realbenchmarks.csv", "GTX Titan X", "gtx-titan-x"),
    ("perseus/bloom_a40_stages.csv", "A40", "a40"),
    ("perseus/gpt3-175b_a40_stages.csv", "A40", "a40"),
    ("zeus/power_limit_v100.csv", "V100", None),
    ("zeus/power_limit_rtx6000.csv", "RTX 6000", None),
)
#: The memory shares the choice is made among.
SHARES = tuple(round(0.1 * i, 1) for i in range(11))
#: The sds the calibration is made among.
SDS = tuple(round(0.05 + 0.01 * i, 2) for i in range(96))
#: The sds the report shows each file's coverage at.
SHOWN_SDS = (0.1, 0.2, 0.3, 0.4)
#: The share of errors the 90% interval should hold.
COVERAGE = 0.9
#: What a file is left out with: its GPU's files, or itself.
GROUPS = ("gpu", "file")


@dataclass(frozen=True, eq=False)
class FileErrors:
    """One file's prior errors, log(prior / measured), at every (workload, setting other than its default).

    ``time``: share (each of `SHARES`) -> [N] time errors (a power-limit file's do not depend
    on it); ``power``: [N]. ``workloads``: those measured at the default and another setting.
    """

    name: str
    gpu: str
    knob: str
    workloads: int
    time: dict[float, np.ndarray]
    power: np.ndarray | None

    def time_error(self, share: float) -> float:
        """The mean |time error| at memory share ``share``."""
        return float(np.abs(self.time[share]).mean())


def file_errors(data: Path, path: str, gpu: str, catalog: str | None) -> FileErrors:
    """The prior's errors on one file of `PRIOR_FILES` under ``data``, every row read (invalid ones left out)."""
    with warnings.catch_warnings():  # rows the reader flags are left out, as --skip-invalid leaves them
        warnings.simplefilter("ignore")
        grid = read_measured_grid(data / path, "the prior's cross-validation", on_invalid="skip", counters=False)
        if catalog is not None:
            spec = lookup(catalog)
            grid = in_gpu_mem_unit(grid, spec)
    limits = grid.knob == "power-limit"
    if limits != (catalog is None):
        raise InputError(f"{data / path}: expected {'a power-limit trace' if catalog is None else 'a clock grid'}, "
                         f"got settings of knob {grid.knob!r}")
    if catalog is None:
        shape, mem = None, np.ones(len(grid))
    else:
        shape, _ = catalog_power_shape(catalog, spec.default_mhz)
        mem = np.full(len(grid), spec.default_mhz[1]) if grid.mem_mhz is None else grid.mem_mhz
    settings = np.column_stack([grid.core_mhz, mem])
    levels = np.unique(settings, axis=0)
    default = levels[highest_index(levels)]
    watts = grid.watts
    time: dict[float, list[np.ndarray]] = {s: [] for s in SHARES}
    power: list[np.ndarray] = []
    workloads = 0
    for w in dict.fromkeys(grid.workload.tolist()):
        rows = np.flatnonzero(grid.workload == w)
        at = (settings[rows] == default).all(axis=1)
        if not at.any() or at.all():
            continue
        workloads += 1
        d, others = rows[np.argmax(at)], rows[~at]
        t, cfg = grid.time_ms[others], settings[others]
        p_d = 1.0 if watts is None else watts[d]  # a grid of time alone: the power prior is not read
        if limits:
            t_prior, p_prior = limit_prior(cfg[:, 0], grid.time_ms[d], p_d)
            for s in SHARES:
                time[s].append(np.log(t_prior / t))
        else:
            for s in SHARES:
                time[s].append(np.log(step_prior(cfg, default, grid.time_ms[d], p_d, memory_share=s)[0] / t))
            p_prior = step_prior(cfg, default, grid.time_ms[d], p_d, shape)[1]
        if watts is not None:
            power.append(np.log(p_prior / watts[others]))
    if not workloads:
        raise InputError(f"{data / path}: no workload was measured at the default setting "
                         f"{default[0]:g} and at another")
    return FileErrors(path, gpu, "power-limit" if limits else "clocks", workloads,
                      {s: np.concatenate(v) for s, v in time.items()},
                      np.concatenate(power) if power else None)


def prior_files(data: Path) -> list[FileErrors]:
    """The prior's errors on every file of `PRIOR_FILES` found under ``data``.

    `InputError` where ``data`` is not a folder, or holds the clock files of fewer than two GPUs.
    """
    if not data.is_dir():
        raise InputError(f"{data}: not a folder; expected the public data folder holding "
                         f"{', '.join(p for p, *_ in PRIOR_FILES)}")
    out = [file_errors(data, *f) for f in PRIOR_FILES if (data / f[0]).exists()]
    if len({f.gpu for f in out if f.knob == "clocks"}) < 2:
        raise InputError(f"{data}: the prior's constants are chosen leaving out one GPU's clock files, so the "
                         f"clock files of at least two GPUs are needed ({', '.join(p for p, *_ in PRIOR_FILES[:7])})")
    return out


def choose_share(files: list[FileErrors]) -> float:
    """The share of `SHARES` with the least mean over ``files``' clock files of their mean |time error|."""
    clocks = [f for f in files if f.knob == "clocks"]
    return SHARES[int(np.argmin([np.mean([f.time_error(s) for f in clocks]) for s in SHARES]))]


def coverage(errors: np.ndarray, sd: float) -> float:
    """The share of log errors within +-1.645 ``sd``."""
    return float(np.mean(np.abs(errors) <= NORMAL_Z90 * sd))


def choose_sd(errors: list[np.ndarray]) -> float:
    """The least sd of `SDS` whose interval holds `COVERAGE` of the errors, each array alike (the largest if none)."""
    cover = np.array([np.mean([coverage(e, sd) for e in errors]) for sd in SDS])
    ok = np.flatnonzero(cover >= COVERAGE)
    return SDS[int(ok[0])] if len(ok) else SDS[-1]


@dataclass(frozen=True)
class LeftOutFile(Record):
    """One file scored with the share and sd chosen without it (`PriorCV`).

    ``time_error``: mean |log time error| at ``share`` (and its max over the points);
    ``coverage``: the share of its time and power errors in the interval of ``sd``;
    ``time_coverage`` and ``power_coverage`` each alone (None: the file has no power).
    """

    gpu: str
    knob: str
    workloads: int
    share: float
    sd: float
    time_error: MeanMax
    coverage: float
    time_coverage: float
    power_coverage: float | None


@dataclass(frozen=True)
class PriorCV(Record):
    """The prior's constants chosen on every file, and each file's figures with them chosen without it.

    ``by``: what a file was left out with (`GROUPS`); ``sd``: knob -> the sd chosen on its files;
    ``mean_time_error`` over the clock files and ``mean_coverage`` (knob -> over its files), held
    out, each file alike; ``over_shares``: file -> share -> mean |time error| (clock files,
    in-sample); ``over_sds``: file -> sd of `SHOWN_SDS` -> coverage of its held-out errors.
    """

    by: str
    share: float
    sd: dict[str, float]
    left_out: dict[str, LeftOutFile]
    mean_time_error: float
    mean_coverage: dict[str, float]
    over_shares: dict[str, dict[str, float]]
    over_sds: dict[str, dict[str, float]]


def leave_out(files: list[FileErrors], by: str = "gpu") -> PriorCV:
    """Each file scored with the share and its knob's sd chosen on the files outside its group (`GROUPS`).

    `InputError` for an unknown ``by``, or where some file's others hold no clock file or no file
    of its knob.
    """
    if by not in GROUPS:
        raise InputError(f"by: expected one of {GROUPS}, got {by!r}")

    def others(f: FileErrors) -> list[FileErrors]:
        out = [g for g in files if (g.gpu != f.gpu if by == "gpu" else g is not f)]
        for knob, what in (("clocks", "its memory share"), (f.knob, "its sd")):
            if not any(g.knob == knob for g in out):
                raise InputError(f"{f.name}: no {knob} file of another {by} is left to choose {what} on")
        return out

    share = {f.name: choose_share(others(f)) for f in files}
    held = {f.name: (f.time[share[f.name]], f.power) for f in files}
    errors = {n: np.concatenate([t] + ([] if p is None else [p])) for n, (t, p) in held.items()}
    left_out = {}
    for f in files:
        sd = choose_sd([errors[g.name] for g in others(f) if g.knob == f.knob])
        t, p = held[f.name]
        left_out[f.name] = LeftOutFile(f.gpu, f.knob, f.workloads, share[f.name], sd, MeanMax.of(np.abs(t)),
                                       coverage(errors[f.name], sd), coverage(t, sd),
                                       None if p is None else coverage(p, sd))
    knobs = dict.fromkeys(f.knob for f in files)
    return PriorCV(by, choose_share(files),
                   {k: choose_sd([errors[f.name] for f in files if f.knob == k]) for k in knobs}, left_out,
                   float(np.mean([v.time_error.mean for v in left_out.values() if v.knob == "clocks"])),
                   {k: float(np.mean([v.coverage for v in left_out.values() if v.knob == k])) for k in knobs},
                   {f.name: {f"{s:g}": f.time_error(s) for s in SHARES} for f in files if f.knob == "clocks"},
                   {n: {f"{sd:g}": coverage(e, sd) for sd in SHOWN_SDS} for n, e in errors.items()})


def limit_replays(data: Path, sds: Sequence[float], phase_steps: int, seeds: Sequence[int] = (0, 1, 2),
                  eta: float = 0.5) -> dict[str, dict[str, list[float]]]:
    """The governor's regret on each power-limit trace under Zeus's cost (``eta``), each job's cold start `limit_prior`.

    File -> prior sd (each of ``sds``) -> mean regret per seed; each job once for ``phase_steps``
    steps, 1% noise, as `gpudvfs govern replay` replays a trace, the table's predictions
    replaced by the prior from the job's measurement at the highest limit. `InputError` where
    ``data`` holds no power-limit trace of `PRIOR_FILES`.
    """
    out = {}
    for path, _, catalog in PRIOR_FILES:
        if catalog is not None or not (data / path).exists():
            continue
        tab = plain_table(read_measured_grid(data / path, "the prior's replays", counters=False))
        d = tab.default_index
        t, p = zip(*(limit_prior(tab.configs[:, 0], tab.time_ms[a, d], tab.watts[a, d]) for a in range(len(tab.names))))
        tab = replace(tab, time_pred=np.array(t), watts_pred=np.array(p))
        out[path] = {f"{sd:g}": [replay(tab, policy="cost", eta=eta, phase_steps=phase_steps, seed=s, each_once=True,
                                        prior_sd=sd).governor.regret_mean for s in seeds] for sd in sds}
    if not out:
        traces = ", ".join(p for p, _, c in PRIOR_FILES if c is None)
        raise InputError(f"{data}: none of the power-limit traces is there ({traces})")
    return out
