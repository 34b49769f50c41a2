"""What a cluster's jobs would have taken and spent at the clocks a policy chooses.

From the DCGM exporter's telemetry: per sample (one GPU, one job, one scrape interval) its
power, its clocks and its DCGM activities.

Power: the sample's measured power, less its GPU's static and idle power at its clocks
(from the GPU's registry model), is its dynamic power; the DCGM activities split it
between the domains (SM activity x the mean core-component weight, DRAM activity x the
DRAM weight), and each part scales to another pair as that GPU's model scales it
(V^2 f of the domain, with the GPU's own fitted voltages). Time: the DCGM time model's
shares of core- and memory-bound time (`gpudvfs time fit-dcgm`) give the time at another
pair relative to the sample's. Where that model was fitted at one memory clock, the
policy keeps each sample's memory clock. A sample's clocks are taken at the nearest pair
its GPU was calibrated at (same memory clock first).

The work is partitioned over Ray Data: each block of rows yields per-job sums, which the
driver adds up, so a month of a large cluster's telemetry is one pass.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gpudvfs.data.dcgm_fields import FIELDS, PIPES
from gpudvfs.data.prometheus import read_range_export
from gpudvfs.errors import InputError
from gpudvfs.fleet.registry import Registry
from gpudvfs.fleet.tasks import ray_session
from gpudvfs.limits import is_finite_number
from gpudvfs.policy.policies import POLICIES
from gpudvfs.time.dcgm import DcgmTimeModel

#: The policies a what-if replays: those of `gpudvfs.policy.POLICIES` that rank a sample's pairs by
#: its own time and energy, less ED2P (not replayed); a power cap and Zeus's cost need a cap or a
#: price that the what-if is not given.
WHATIF_POLICIES = tuple(p for p in POLICIES if p not in ("ed2p", "power-cap", "cost"))
#: dcgm-exporter's default collection interval (its -c option, 30,000 ms).
DEFAULT_INTERVAL_S = 30.0
#: The exporter collects in whole milliseconds; shorter intervals would only push the sums
#: towards denormal joules, whose ratios overflow.
MIN_TELEMETRY_INTERVAL_S = 1e-3
UUID_COLUMNS = ("uuid", "gpu_uuid")
#: A Prometheus export's `job` label names the scrape job, not the workload: the labels the
#: DCGM exporter attaches for Slurm and Kubernetes come first.
JOB_COLUMNS = ("hpc_job", "exported_job", "pod", "job")
POWER_COLUMNS = ("DCGM_FI_DEV_POWER_USAGE", "power_usage")
SM_CLOCK_COLUMNS = ("DCGM_FI_DEV_SM_CLOCK", "sm_clock")
MEM_CLOCK_COLUMNS = ("DCGM_FI_DEV_MEM_CLOCK", "mem_clock")
#: Rows per batch: [rows x pairs] arrays of a few tens of MB.
BATCH_ROWS = 1 << 17
SUMS = ("samples", "time_s", "joules", "whatif_time_s", "whatif_joules")


@dataclass(frozen=True)
class GpuTable:
    """One GPU's power model over its K calibrated pairs.

    ``configs`` [K x 2] (core, memory) MHz; ``idle_w`` [K] static + idle W; ``core_w``, ``mem_w`` [K]
    each domain's dynamic W at full mean utilization (what scales a sample's dynamic power);
    ``default`` indexes the default clocks' pair.
    """

    configs: np.ndarray
    idle_w: np.ndarray
    core_w: np.ndarray
    mem_w: np.ndarray
    default: int


def gpu_table(registry: Registry, uuid: str) -> GpuTable:
    """A GPU's power model over its calibrated pairs, from its registry entry.

    `InputError` where the GPU is not in the registry, or its default clocks are not a calibrated pair.
    """
    pm = registry.power_model(uuid)  # first: a clear error for a GPU not in the registry
    entry = registry.entries[uuid]
    n_core = pm.domain_sizes_[0]
    n = len(pm.components_)
    unit = np.zeros((3, n))
    unit[1, :n_core] = 1.0 / n_core
    unit[2, n_core:] = 1.0 / (n - n_core)
    p = pm.predict_grid(unit)
    cfg = pm.configs_
    hit = np.flatnonzero((cfg == np.asarray(entry["reference_mhz"])).all(axis=1))
    if len(hit) != 1:
        raise InputError(f"GPU {uuid}: its default clocks {entry['reference_mhz']} are not a calibrated pair")
    return GpuTable(cfg, p[0], p[1] - p[0], p[2] - p[0], int(hit[0]))


def gpu_tables(registry: Registry) -> dict[str, GpuTable]:
    """Every GPU's power model over its calibrated pairs."""
    return {uuid: gpu_table(registry, uuid) for uuid in registry.entries}


def resolve_columns(names: Sequence[str], job_column: str | None = None) -> dict[str, Any]:
    """The telemetry's columns by role (case-insensitive; DCGM fields in any spelling).

    ``uuid``, ``job`` (``job_column``, else the first of `JOB_COLUMNS` there), ``power``,
    ``sm_clock``, ``mem_clock``, ``sm`` and ``dram``: a column each; ``pipes``: the pipe activities'
    columns. `InputError` where a role's column, or the SM or DRAM activity, is missing.
    """
    lower = {n.lower(): n for n in names}

    def one(role: str, candidates: Sequence[str], required: bool = True) -> str | None:
        for c in candidates:
            if c.lower() in lower:
                return lower[c.lower()]
        if required:
            shown = ", ".join(names[:12]) + (f" and {len(names) - 12} more" if len(names) > 12 else "")
            raise InputError(f"telemetry: no {role} column (looked for {', '.join(candidates)}); columns: {shown}")
        return None

    def field(name: str) -> str | None:
        return one(name, (FIELDS[name][1], name, FIELDS[name][0]), required=False)

    cols = {"uuid": one("GPU UUID", UUID_COLUMNS), "job": one("job", (job_column,) if job_column else JOB_COLUMNS),
            "power": one("power", POWER_COLUMNS), "sm_clock": one("SM clock", SM_CLOCK_COLUMNS),
            "mem_clock": one("memory clock", MEM_CLOCK_COLUMNS),
            "sm": field("sm_active") or field("gr_engine_active"), "dram": field("dram_active"),
            "pipes": [c for c in map(field, PIPES) if c]}
    if cols["sm"] is None or cols["dram"] is None:
        raise InputError("telemetry: the what-if needs SM (or graphics engine) activity and DRAM activity "
                         "(DCGM_FI_PROF_SM_ACTIVE, DCGM_FI_PROF_DRAM_ACTIVE)")
    return cols


def telemetry_columns(path: str) -> list[str]:
    """The columns of a telemetry CSV (its header) or Parquet file or folder (its schema).

    Read before Ray starts: an empty, truncated or foreign file is one line naming it, not a
    Ray traceback from inside a block.
    """
    p = Path(path)
    if not p.exists():
        raise InputError(f"{path}: no such file or folder")
    if path.endswith(".csv"):
        with open(p, newline="", encoding="utf-8", errors="replace") as f:
            header = next(csv.reader(f), [])
        if not any(h.strip() for h in header):
            raise InputError(f"{path}: empty; expected a CSV with a header row of DCGM exporter columns")
        return header
    import pyarrow.dataset as pads  # Ray Data's own dependency: the `fleet` extra has it

    try:
        return list(pads.dataset(path, format="parquet").schema.names)
    except (OSError, ValueError) as e:  # pyarrow's ArrowInvalid is a ValueError
        raise InputError(f"{path}: not a readable Parquet file or folder ({str(e).splitlines()[0]}); expected "
                         "DCGM exporter telemetry as Parquet, CSV or a Prometheus range-query export (.json)") from None


def _numbers(frame: Any, column: str, lo: float, hi: float) -> np.ndarray:
    x = np.asarray(frame[column], dtype=np.float64)
    bad = ~(np.isfinite(x) & (x >= lo) & (x <= hi))
    if bad.any():
        raise InputError(f"telemetry: column {column!r} has {int(bad.sum())} values outside [{lo:g}, {hi:g}] "
                         f"(first: {x[bad][0]!r})")
    return x


def _time_curve(model: DcgmTimeModel, shares: np.ndarray, configs: np.ndarray) -> np.ndarray:
    """1 + s_c (fc_ref/fc - 1) + s_m (fm_ref/fm - 1) [rows x K]: time up to the reference's."""
    ref_c, ref_m = model.reference_mhz_
    r = 1.0 + shares[:, :1] * (ref_c / configs[None, :, 0] - 1.0)
    if model.varies_mem_:
        r = r + shares[:, 1:] * (ref_m / configs[None, :, 1] - 1.0)
    return r


@dataclass(frozen=True)
class Samples:
    """Telemetry rows, checked.

    ``gpu_of`` and ``job_of`` [rows] index ``gpus`` and ``jobs``; ``activity`` [rows x 3] is (SM, pipe, DRAM).
    """

    gpu_of: np.ndarray
    gpus: list[str]
    job_of: np.ndarray
    jobs: list[str]
    watts: np.ndarray
    core_mhz: np.ndarray
    mem_mhz: np.ndarray
    activity: np.ndarray


def parse_samples(frame: Any, cols: Mapping) -> Samples:
    """Check and code a frame of telemetry (``cols`` from `resolve_columns`).

    The pipe activity is the busiest pipe's (0 without pipe columns). `InputError` for a sample
    without a GPU or a job, or a value out of its range.
    """
    import pandas as pd

    gpu_of, gpus = pd.factorize(frame[cols["uuid"]])
    job_of, jobs = pd.factorize(frame[cols["job"]])
    if (gpu_of < 0).any() or (job_of < 0).any():
        raise InputError("telemetry: a sample without a GPU UUID or a job")
    pipe = (np.max([_numbers(frame, c, 0.0, 1.0) for c in cols["pipes"]], axis=0) if cols["pipes"]
            else np.zeros(len(frame)))
    act = np.column_stack([_numbers(frame, cols["sm"], 0.0, 1.0), pipe, _numbers(frame, cols["dram"], 0.0, 1.0)])
    return Samples(gpu_of, [str(g) for g in gpus], job_of, [str(j) for j in jobs],
                   _numbers(frame, cols["power"], 0.0, 1e5), _numbers(frame, cols["sm_clock"], 1.0, 1e5),
                   _numbers(frame, cols["mem_clock"], 1.0, 1e5), act)


@dataclass(frozen=True)
class Predicted:
    """One GPU's samples at each of its K calibrated pairs.

    ``at`` is each sample's pair; ``ratio`` and ``curve`` [rows x K] the time relative to the sample's
    own and to the time model's reference.
    """

    rows: np.ndarray
    table: GpuTable
    at: np.ndarray
    watts: np.ndarray
    ratio: np.ndarray
    curve: np.ndarray


def predict_samples(s: Samples, tables: Mapping[str, GpuTable], model: DcgmTimeModel) -> list[Predicted]:
    """Each sample carried to every calibrated pair of its GPU (module notes); one per GPU, in ``s.gpus``' order.

    `InputError` where a GPU is not in ``tables`` (by UUID).
    """
    shares = model.shares(s.activity)
    out = []
    for g, gpu in enumerate(s.gpus):
        if gpu not in tables:
            raise InputError(f"telemetry: GPU {gpu} is not in the registry")
        t, rows = tables[gpu], np.flatnonzero(s.gpu_of == g)
        cfg = t.configs
        # The nearest calibrated pair: the memory clock first, then the core clock.
        dist = np.abs(s.mem_mhz[rows, None] - cfg[None, :, 1]) * 1e6 + np.abs(s.core_mhz[rows, None] - cfg[None, :, 0])
        k0 = dist.argmin(axis=1)
        dyn = np.maximum(s.watts[rows] - t.idle_w[k0], 0.0)
        a_c, a_m = s.activity[rows, 0] * t.core_w[k0], s.activity[rows, 2] * t.mem_w[k0]
        mem_part = np.where(a_c + a_m > 0, a_m / np.maximum(a_c + a_m, 1e-300), 0.0)
        watts = (t.idle_w[None, :] + (dyn * (1 - mem_part) / t.core_w[k0])[:, None] * t.core_w[None, :]
                 + (dyn * mem_part / t.mem_w[k0])[:, None] * t.mem_w[None, :])
        curve = _time_curve(model, shares[rows], cfg)
        out.append(Predicted(rows, t, k0, watts, curve / curve[np.arange(len(rows)), k0][:, None], curve))
    return out


def choose(p: Predicted, model: DcgmTimeModel, policy: str, slowdown: float) -> np.ndarray:
    """The pair (index) the policy picks for each sample; a model fitted at one memory clock keeps the sample's.

    ``slowdown`` (deadline) is the most a sample may slow down against the default clocks.
    """
    cfg = p.table.configs
    allowed = np.ones_like(p.ratio, dtype=bool)
    if not model.varies_mem_:
        allowed &= cfg[None, :, 1] == cfg[p.at, 1][:, None]
    if policy == "deadline":
        allowed &= p.curve <= (1.0 + slowdown) * p.curve[:, [p.table.default]] + 1e-12
    score = p.watts * p.ratio * (p.ratio if policy == "edp" else 1.0)
    return np.where(allowed, score, np.inf).argmin(axis=1)


def whatif_frame(frame: Any, tables: Mapping[str, GpuTable], model: DcgmTimeModel, cols: Mapping,
                 policy: str = "energy", slowdown: float = 0.1, interval_s: float = DEFAULT_INTERVAL_S) -> Any:
    """Per-job sums (`SUMS`, a row per job) over a frame: samples, time and joules as run and at the policy's clocks.

    ``interval_s`` is the seconds each sample stands for. `InputError` for an unknown policy, or
    samples that `parse_samples` refuses.
    """
    import pandas as pd

    if policy not in WHATIF_POLICIES:
        raise InputError(f"unknown policy {policy!r}; expected one of {WHATIF_POLICIES}")
    s = parse_samples(frame, cols)
    time, joules = np.empty(len(frame)), np.empty(len(frame))
    for p in predict_samples(s, tables, model):
        k = choose(p, model, policy, slowdown)
        pick = np.arange(len(p.rows))
        time[p.rows] = interval_s * p.ratio[pick, k]
        joules[p.rows] = p.watts[pick, k] * time[p.rows]
    n = len(s.jobs)
    return pd.DataFrame({"job": s.jobs, "samples": np.bincount(s.job_of, minlength=n),
                         "time_s": interval_s * np.bincount(s.job_of, minlength=n),
                         "joules": interval_s * np.bincount(s.job_of, s.watts, minlength=n),
                         "whatif_time_s": np.bincount(s.job_of, time, minlength=n),
                         "whatif_joules": np.bincount(s.job_of, joules, minlength=n)})


def _change(new: float, old: float) -> float | None:
    """``new / old - 1``, or None where it has no meaning.

    Nothing measured, or so little (denormal watts) that the ratio overflows.
    """
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        ratio = np.float64(new) / np.float64(old)
    return float(ratio - 1.0) if old > 0 and np.isfinite(ratio) else None


def summarize(sums: Any) -> dict:
    """Per-job and cluster totals from (partial) per-job sums, several rows per job where partial.

    ``jobs`` (per job) and ``cluster``: `SUMS`, and the ``energy_change`` and ``time_change`` of the
    what-if (None where they have no meaning).
    """
    total = sums.groupby("job").sum()
    jobs = {str(j): _totals({k: r[k] for k in SUMS}) for j, r in total.iterrows()}
    return {"jobs": jobs, "cluster": _totals({k: total[k].sum() for k in SUMS})}


def _totals(sums: dict[str, Any]) -> dict[str, int | float | None]:
    """One job's (or the cluster's) `SUMS` as plain numbers, with the what-if's changes."""
    out: dict[str, int | float | None] = {k: int(v) if k == "samples" else float(v) for k, v in sums.items()}
    out["energy_change"] = _change(float(sums["whatif_joules"]), float(sums["joules"]))
    out["time_change"] = _change(float(sums["whatif_time_s"]), float(sums["time_s"]))
    return out


def whatif(telemetry: str | Path, registry: Registry, model: DcgmTimeModel, *, policy: str = "energy",
           slowdown: float = 0.1, interval_s: float = DEFAULT_INTERVAL_S, job_column: str | None = None,
           ray_address: str = "local") -> dict:
    """What the jobs of a telemetry file would have taken and spent at the policy's clocks, over Ray Data.

    ``telemetry`` is a Parquet file or folder, a CSV, or a Prometheus range-query export
    (``.json``, `gpudvfs.data.prometheus`); ``slowdown`` (deadline) the most a job may slow down
    against the default clocks; ``interval_s`` the exporter's collection interval; ``ray_address``
    as `tasks.ray_session` takes it (no GPUs are needed). Returns `summarize`'s ``jobs`` and
    ``cluster``, with ``policy``, ``slowdown`` (deadline only) and ``interval_s``. `InputError` for an
    interval below `MIN_TELEMETRY_INTERVAL_S`, an unknown policy, or telemetry that cannot be read or
    is refused.
    """
    if not is_finite_number(interval_s, MIN_TELEMETRY_INTERVAL_S):
        raise InputError(f"interval must be a finite number of seconds >= {MIN_TELEMETRY_INTERVAL_S:g} (the exporter "
                         f"collects in whole milliseconds), got {interval_s}")
    if policy not in WHATIF_POLICIES:
        raise InputError(f"unknown policy {policy!r}; expected one of {WHATIF_POLICIES}")
    tables = gpu_tables(registry)
    path = str(telemetry)
    export = read_range_export(path) if path.endswith(".json") else None
    names = list(export.columns) if export is not None else telemetry_columns(path)
    try:
        cols = resolve_columns(names, job_column)
    except InputError as e:
        raise InputError(f"{path}: {e}") from None
    with ray_session(ray_address) as ray:
        ray.data.DataContext.get_current().enable_progress_bars = False
        try:
            if export is not None:
                ds = ray.data.from_pandas(export)
            else:
                ds = ray.data.read_csv(path) if path.endswith(".csv") else ray.data.read_parquet(path)
            parts = ds.map_batches(whatif_frame, batch_format="pandas", batch_size=BATCH_ROWS, fn_kwargs={
                "tables": tables, "model": model, "cols": cols, "policy": policy, "slowdown": slowdown,
                "interval_s": interval_s}).to_pandas()
        except Exception as e:  # noqa: BLE001 -- Ray Data wraps a block's InputError in its own: show its message
            found = re.findall(r"InputError: (.+)", str(e))
            if found:
                raise InputError(found[-1]) from None
            raise
    return summarize(parts) | {"policy": policy, "slowdown": slowdown if policy == "deadline" else None,
                               "interval_s": interval_s}
