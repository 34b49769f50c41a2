"""`gpudvfs fleet ...`: fleet scale.

Per-GPU calibration on Ray into a registry, drift checks, cluster power budgets, what-ifs over
DCGM telemetry.
"""

from __future__ import annotations

import contextlib
import sys

import click

from gpudvfs.cli import options
from gpudvfs.cli.output import console, output_dir, output_file, print_json, refuse_overwrite, table, user_errors
from gpudvfs.cli.progress import progress_bars
from gpudvfs.fleet.budget import bench
from gpudvfs.fleet.jobs import OBJECTIVES, plan_budget, read_jobs, simulated_jobs, write_jobs
from gpudvfs.fleet.registry import CV_FOLDS, Registry
from gpudvfs.fleet.whatif import DEFAULT_INTERVAL_S, MIN_TELEMETRY_INTERVAL_S, WHATIF_POLICIES
from gpudvfs.power.model import VARIANTS


@click.group()
def fleet() -> None:
    """Fleet scale: per-GPU calibration on Ray, drift checks, cluster power budgets, what-ifs over telemetry."""


def _ray_prints_to_stderr() -> contextlib.AbstractContextManager:
    """Ray's prints, while it runs, to stderr.

    Ray prints its raylet's warnings ("N worker processes have been started ...") to stdout
    from a thread of its own, whatever ``log_to_driver`` says; stdout is for the command's
    result (under --json, the JSON alone).
    """
    return contextlib.redirect_stdout(sys.stderr)


def _spread(s: dict, fmt: str) -> str:
    return f"{s['min']:{fmt}} / {s['median']:{fmt}} / {s['max']:{fmt}}"


def summary_rows(summary: dict) -> list[list[str]]:
    """The (what, min / median / max) rows of a fleet's `Registry.summary`.

    The power CV's folds that fell back or did not converge are rows only where there are some.
    """
    rows = [[f"static power, domain {d} (W)", _spread(s, ".2f")] for d, s in enumerate(summary["static_w"])]
    rows += [["core voltage at the lowest clock", _spread(summary["core_voltage_at_lowest_clock"], ".3f")],
             ["power CV MAPE (%)", _spread(summary["power_cv_mape"], ".2f")]]
    folds = [(summary.get(f"power_cv_{k}_folds", 0), label) for k, label in
             (("fallback", "fell back to per-domain voltages"), ("unconverged", "did not converge"))]
    rows += [[f"power CV folds that {label}", f"{n} ({CV_FOLDS} per GPU)"] for n, label in folds if n]
    if "voltage_error_max" in summary:
        rows.append(["worst voltage error against the simulated truth", f"{100 * summary['voltage_error_max']:.2f}%"])
    return rows


@fleet.command()
@options.device_kind(help="nvml: every task calibrates the GPU Ray gives it; sim: simulated chips, each with its own "
                   "variation drawn from its UUID.")
@click.option("--gpus", type=click.IntRange(min=1),
              help="GPUs to calibrate (default: every GPU of the Ray cluster; needed with --device sim and "
                   "--ray local, where they are logical GPUs).")
@click.option("--ray", "ray_address", default="local", show_default=True,
              help="'local' starts a Ray cluster on this machine; else a cluster address ('auto', "
                   "'ray://head:10001').")
@click.option("-o", "--out", required=True, type=click.Path(file_okay=False), callback=output_dir,
              help="Registry folder: one folder per GPU UUID (sweeps, models, gpu.json). On a multi-node "
                   "cluster, a folder every node writes to.")
@options.seed("Fleet seed of the simulated chips' UUIDs.")
@options.min_seconds()
@click.option("--variant", default="per-domain", show_default=True, type=click.Choice(VARIANTS),
              help="Power model variant fitted per GPU.")
@click.option("--json", "as_json", is_flag=True)
def calibrate(device_kind: str, gpus: int | None, ray_address: str, out: str, seed: int, min_seconds: float,
              variant: str, as_json: bool) -> None:
    """Calibrate every GPU of a Ray cluster; print the fleet's spread.

    One task per GPU sweeps the power and latency suites on it (rows streamed to its own files:
    a killed worker loses at most its row in flight, and a rerun resumes), fits its models and
    writes its registry entry.
    """
    from gpudvfs.fleet.calibrate import calibrate_fleet, fleet_devices  # Ray's modules: not at start-up

    with user_errors(), _ray_prints_to_stderr(), progress_bars(disable=as_json) as update:
        registry = calibrate_fleet(fleet_devices(device_kind, seed), out, gpus=gpus, ray_address=ray_address,
                                   min_seconds=min_seconds, power_variant=variant,
                                   progress=lambda done, total, label: update("GPUs calibrated", done, total, label))
        summary = registry.summary()
    if as_json:
        print_json(summary | {"registry": str(out),
                              "per_gpu": {u: {"power": e["power"], "truth": e.get("truth")}
                                          for u, e in registry.entries.items()}})
        return
    console.print(table(f"{summary['gpus']} GPUs in {out} (min / median / max)", ["", ""], summary_rows(summary)))


@fleet.command()
@click.option("--registry", required=True, type=click.Path(file_okay=False), help="The registry to check against.")
@options.device_kind()
@click.option("--gpus", type=click.IntRange(min=1), help="GPUs to check (default: every GPU of the Ray cluster).")
@click.option("--ray", "ray_address", default="local", show_default=True, help="As for `fleet calibrate`.")
@options.seed("Fleet seed of the simulated chips' UUIDs.")
@click.option("--sim-aging", default=0.0, show_default=True, type=options.Finite(-0.5, 10, min_open=True),
              help="Simulated chips only: their static and idle power grown by this fraction since calibration.")
@click.option("--pairs", default=4, show_default=True, type=click.IntRange(min=1), help="Clock pairs per GPU.")
@click.option("--benchmarks", default=3, show_default=True, type=click.IntRange(min=1),
              help="Power-suite benchmarks re-measured at each pair.")
@options.min_seconds()
@click.option("--json", "as_json", is_flag=True)
def check(registry: str, device_kind: str, gpus: int | None, ray_address: str, seed: int, sim_aging: float,
          pairs: int, benchmarks: int, min_seconds: float, as_json: bool) -> None:
    """Re-measure a few pairs on every GPU and flag those whose power has left their model's error band.

    Aging and cooling move it. Exit status 3 when any GPU is flagged.
    """
    from gpudvfs.fleet.calibrate import fleet_devices  # Ray's modules: not at start-up
    from gpudvfs.fleet.check import check_fleet

    if sim_aging and device_kind != "sim":
        raise click.UsageError("--sim-aging is for --device sim")
    with user_errors(), _ray_prints_to_stderr(), progress_bars(disable=as_json) as update:
        r = check_fleet(fleet_devices(device_kind, seed, sim_aging), registry, gpus=gpus, ray_address=ray_address,
                        pairs=pairs, benchmarks=benchmarks, min_seconds=min_seconds,
                        progress=lambda done, total, label: update("GPUs checked", done, total, label))
    if as_json:
        print_json(r)
    else:
        rows = [[g["uuid"], f"{g['drift_pct']:+.2f}%", f"{g['band_pct']:.2f}%", "DRIFTED" if g["flagged"] else "ok"]
                for g in r["per_gpu"]]
        console.print(table(f"{r['gpus']} GPUs checked, {len(r['flagged'])} flagged",
                            ["GPU", "power vs model", "band", ""], rows))
    if r["flagged"]:
        raise SystemExit(3)


@fleet.command()
@click.argument("jobs", required=False, type=click.Path(dir_okay=False))
@click.option("--registry", type=click.Path(file_okay=False), help="The registry `fleet calibrate` wrote.")
@click.option("--budget-w", type=options.Finite(min=0), help="The cluster's power budget (W).")
@click.option("--objective", type=click.Choice(OBJECTIVES), default="time", show_default=True,
              help="time: the sum of the jobs' slowdowns; energy: the energy of one default-clock second of "
                   "every job's work.")
@click.option("--slowdown", type=options.Finite(min=0),
              help="Forbid clock pairs more than this fraction slower than the default clocks.")
@click.option("--bench", "run_bench", is_flag=True,
              help="Instead: time the solver on random instances and measure its gap to the exact optimum.")
@click.option("--gpus", default=10_000, show_default=True, type=click.IntRange(min=1), help="--bench: GPUs.")
@click.option("--pairs", default=1_000, show_default=True, type=click.IntRange(min=1), help="--bench: clock pairs.")
@click.option("--small", default=50, show_default=True, type=click.IntRange(min=1),
              help="--bench: small random instances scored against the exact solver.")
@options.seed("--bench: seed of the random instances.")
@click.option("--json", "as_json", is_flag=True)
def budget(jobs: str | None, registry: str | None, budget_w: float | None, objective: str, slowdown: float | None,
           run_bench: bool, gpus: int, pairs: int, small: int, seed: int, as_json: bool) -> None:
    """One clock pair per GPU: the jobs' predicted power within the cluster's budget, the objective least.

    A multiple-choice knapsack in the Rust core. JOBS: a JSON file of the job on each GPU with
    its profile at the default clocks (see gpudvfs.fleet.jobs). --bench: milliseconds for GPUS x
    PAIRS (key `ms`) and the worst optimality gap on small instances (key `gap_max`).
    """
    if run_bench:
        if jobs or registry or budget_w is not None:
            raise click.UsageError("--bench takes no JOBS, --registry or --budget-w")
        _bench(gpus, pairs, small, seed, as_json)
        return
    if not (jobs and registry and budget_w is not None):
        raise click.UsageError("give JOBS, --registry and --budget-w (or --bench)")
    with user_errors():
        plan = plan_budget(Registry.load(registry), read_jobs(jobs), budget_w, objective, slowdown)
    if as_json:
        print_json(plan)
        return
    rows = [[j["gpu"], j["job"][:30], f"{j['core_mhz']:g}/{j['mem_mhz']:g}", f"{j['watts']:.1f}",
             f"{j['relative_time']:.3f}"] for j in plan["jobs"]]
    console.print(table(f"{plan['gpus']} GPUs: {plan['watts']:.0f} W of {budget_w:g} W "
                        f"({plan['default_watts']:.0f} W at default clocks); {objective} "
                        f"{plan['objective_value']:.4g}, within {100 * plan['gap_bound']:.2g}% of optimal",
                        ["GPU", "job", "clocks (MHz)", "watts", "time vs default"], rows))


@fleet.command("sample-jobs")
@click.option("--registry", required=True, type=click.Path(file_okay=False))
@click.option("-o", "--out", required=True, type=click.Path(dir_okay=False), callback=output_file)
@options.force
def sample_jobs(registry: str, out: str, force: bool) -> None:
    """Write a jobs file for a registry of simulated GPUs.

    The demo's real workloads dealt over the GPUs, each profiled and timed on its own chip at
    the default clocks.
    """
    with user_errors():
        refuse_overwrite([out], force=force)
        jobs = simulated_jobs(Registry.load(registry))
        write_jobs(jobs, out)
    console.print(f"wrote {len(jobs)} jobs to {out}")


@fleet.command()
@click.argument("telemetry", type=click.Path(exists=True))
@click.option("--registry", required=True, type=click.Path(file_okay=False))
@click.option("--time-model", "time_model", required=True, type=click.Path(dir_okay=False),
              help="A DCGM time model (`gpudvfs time fit-dcgm`).")
@click.option("--policy", type=click.Choice(WHATIF_POLICIES), default="energy", show_default=True)
@click.option("--slowdown", default=0.1, show_default=True, type=options.Finite(min=0),
              help="deadline: the most a job may slow down against the default clocks.")
@click.option("--interval-s", default=DEFAULT_INTERVAL_S, show_default=True,
              type=options.Finite(min=MIN_TELEMETRY_INTERVAL_S),
              help="Seconds each sample stands for (the exporter's collection interval).")
@click.option("--job-column", help="The column naming each sample's job (default: hpc_job, exported_job, pod, job).")
@click.option("--ray", "ray_address", default="local", show_default=True, help="As for `fleet calibrate`.")
@click.option("--json", "as_json", is_flag=True)
def whatif(telemetry: str, registry: str, time_model: str, policy: str, slowdown: float, interval_s: float,
           job_column: str | None, ray_address: str, as_json: bool) -> None:
    """Per job and for the cluster: time and energy as run, and at the clocks the policy would have chosen.

    From DCGM exporter telemetry (Parquet file or folder, CSV, or a Prometheus range-query
    export .json: per sample its GPU UUID, job, power, SM and memory clocks and DCGM
    activities), partitioned over Ray Data.
    """
    from gpudvfs.fleet.whatif import whatif as run_whatif
    from gpudvfs.time.dcgm import DcgmTimeModel

    with user_errors(), _ray_prints_to_stderr():
        r = run_whatif(telemetry, Registry.load(registry), DcgmTimeModel.load(time_model), policy=policy,
                       slowdown=slowdown, interval_s=interval_s, job_column=job_column, ray_address=ray_address)
    if as_json:
        print_json(r)
        return
    def change(x: float | None) -> str:
        return "n/a" if x is None else f"{100 * x:+.1f}%"

    rows = [[j, str(v["samples"]), f"{v['joules'] / 3.6e6:.4g}", change(v["energy_change"]), change(v["time_change"])]
            for j, v in [*r["jobs"].items(), ("cluster", r["cluster"])]]
    console.print(table(f"what if the {policy} policy had chosen the clocks", ["job", "samples", "kWh as run",
                                                                              "energy", "time"], rows))


@fleet.command("sample-telemetry")
@click.option("--registry", required=True, type=click.Path(file_okay=False), help="A registry of simulated GPUs.")
@click.option("--rows", default=1_000_000, show_default=True, type=click.IntRange(min=1))
@options.seed()
@click.option("-o", "--out", required=True, type=click.Path(dir_okay=False), callback=output_file,
              help="Telemetry (Parquet).")
@click.option("--grid", "grid_out", type=click.Path(dir_okay=False), callback=output_file,
              help="Also the power suite on the simulated GPU as a DCGM grid (for `gpudvfs time fit-dcgm`).")
@options.force
def sample_telemetry(registry: str, rows: int, seed: int, out: str, grid_out: str | None, force: bool) -> None:
    """Write exporter-style telemetry of jobs on a registry of simulated GPUs, so `fleet whatif` runs without a GPU.

    With --grid, also a DCGM grid to fit the time model on.
    """
    from gpudvfs.fleet.telemetry import sample_dcgm_grid
    from gpudvfs.fleet.telemetry import sample_telemetry as write_telemetry

    with user_errors():
        refuse_overwrite([out, grid_out], force=force)
        r = write_telemetry(Registry.load(registry), rows, out, seed=seed)
        console.print(f"wrote {r['rows']} samples of {r['gpus']} GPUs to {out}")
        if grid_out:
            g = sample_dcgm_grid(grid_out)
            console.print(f"wrote {g['rows']} rows to {grid_out} (reference clocks {g['reference_mhz'][0]:g},"
                          f"{g['reference_mhz'][1]:g})")


def _bench(gpus: int, pairs: int, small: int, seed: int, as_json: bool) -> None:
    with user_errors():
        r = bench(gpus, pairs, small, seed)
    if as_json:
        print_json(r)
        return
    console.print(table(f"budget solver, {gpus} GPUs x {pairs} pairs", ["", ""],
                        [["time (best of 3)", f"{r['ms']:.1f} ms"],
                         ["gap to the LP bound (certificate)", f"{100 * r['bound_gap']:.2g}%"],
                         [f"worst gap to the exact optimum ({small} small instances)", f"{100 * r['gap_max']:.3g}%"],
                         ["mean gap", f"{100 * r['gap_mean']:.3g}%"]]))
