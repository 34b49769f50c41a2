"""`gpudvfs predict`, `gpudvfs profile-command`, `gpudvfs devices`: from a profile to predictions, and the catalog.

From a profile of any GPU in the catalog to predictions, and what the catalog knows.
"""

from __future__ import annotations

import math
import shlex
from pathlib import Path

import click
import numpy as np
from rich.table import Table

from gpudvfs.catalog import DeviceSpec, catalog, lookup
from gpudvfs.catalog.clocks import SupportedClocks
from gpudvfs.cli import options
from gpudvfs.cli.options import check_clocks, optional_clock_pair
from gpudvfs.cli.output import console, output_file, print_json, refuse_overwrite, table, user_errors
from gpudvfs.data import read
from gpudvfs.data.jsonfile import write_json_atomic
from gpudvfs.data.profilers import CounterReport
from gpudvfs.errors import InputError
from gpudvfs.policy import POLICIES
from gpudvfs.power import PowerModel
from gpudvfs.predict.profile import (
    CLOCK_CONTROLS,
    LAUNCH_SCALE_MS,
    LaunchPrediction,
    NamePrediction,
    PredictionDetail,
    device_of,
    kernel_inputs,
    predict_detail,
    profile_command,
)

#: Past this many launches, the text output has a line per kernel name instead of per launch.
PER_LAUNCH_LINES = 20


@click.command()
@click.argument("profile", type=click.Path(dir_okay=False))
@click.option("--device", help="Catalog GPU (default: the one the profile names; a profile of another GPU is refused).")
@click.option("--power-model", "model_path", type=click.Path(dir_okay=False),
              help="Power model of this GPU: from `power fit` (profiler utilizations) or `power observe` (its "
                   "activities, mapped from the profile's metrics); default: the catalog prior of the GPU.")
@click.option("--policy", type=click.Choice(POLICIES), default="energy", show_default=True)
@click.option("--slowdown", default=0.1, show_default=True, type=options.Finite(min=0))
@options.eta
@click.option("--power-cap", type=options.Finite(min=0, min_open=True),
              help="power-cap: the cap in watts (the fastest pair predicted under it).")
@click.option("--reference", callback=optional_clock_pair,
              help="Clocks CORE,MEM the profile was taken at (default: each launch's SM clock as Nsight Compute "
                   "measured it, else the GPU's default clocks; the default memory clock).")
@options.clip_utilization
@click.option("--gpu", "gpu_index", type=click.IntRange(min=0),
              help="Take the supported clocks from this NVML GPU of the machine (default: the catalog's range and "
                   "step of the profile's GPU).")
@click.option("--display-cores", type=click.IntRange(min=2),
              help="Show this many core clocks per memory clock in the table (the choice among every supported "
                   "pair, shown too; default: every pair).")
@click.option("--uncalibrated", is_flag=True,
              help="Leave the profile's measured durations out: the model's own time (the calibrated time needs them).")
@click.option("--per-launch", is_flag=True,
              help=f"A line per launch even past {PER_LAUNCH_LINES} launches (then: a line per kernel name).")
@click.option("-o", "--out", type=click.Path(dir_okay=False), callback=output_file,
              help="Also write the prediction there as JSON (what --json prints).")
@click.option("--plot", type=click.Path(dir_okay=False), callback=output_file,
              help="Also draw time, power and energy over the clocks, with their intervals and the choice (PNG).")
@options.force
@click.option("--json", "as_json", is_flag=True)
def predict(profile: str, device: str | None, model_path: str | None, policy: str, slowdown: float, eta: float,
            power_cap: float | None, reference: tuple[float, float] | None, clip_utilization: bool,
            gpu_index: int | None, display_cores: int | None, uncalibrated: bool, per_launch: bool, out: str | None,
            plot: str | None, force: bool, as_json: bool) -> None:
    """Time, power and energy of PROFILE (ncu or nvprof CSV) at every clock pair the GPU supports.

    Each with its 90% interval, per kernel and for all launches together, and the pair the
    policy chooses for the whole (a clock change costs milliseconds).
    """
    options.policy_options(policy, power_cap)
    with user_errors():
        refuse_overwrite([out, plot], [profile, model_path], force)
        report = read(profile)
        if not isinstance(report, CounterReport):
            raise InputError(f"{profile}: expected Nsight Compute or nvprof output, got format {report.format!r}")
        # Missing counters first: they are the answer whatever the GPU.
        kernels = kernel_inputs(report, clip_utilization)
        spec = device_of(report, device)
        clocks = SupportedClocks.of_spec(spec) if gpu_index is None else gpu_clocks(gpu_index, spec)
        if reference is not None:
            what = f"--reference {reference[0]:g},{reference[1]:g}"
            check_clocks(spec, what, [reference[0]], [reference[1]])
            clocks.check(what, [reference[0]], [reference[1]])
        model = PowerModel.load(model_path) if model_path else None
        r = predict_detail(report, spec, power_model=model, reference=reference, policy=policy, slowdown=slowdown,
                            eta=eta, power_cap_w=power_cap, kernels=kernels, calibrate=not uncalibrated,
                            clocks=clocks)
        if out:
            write_json_atomic(out, r.to_dict())
        if plot:
            from gpudvfs.predict.plot import plot_prediction  # matplotlib: only with --plot

            plot_prediction(r, plot)
    if as_json:
        print_json(r.to_dict())
        return
    ref = r.reference_mhz
    console.print(f"{r.device}: profiled at {ref[0]:.0f}/{ref[1]:.0f} MHz ({r.reference_from})", highlight=False)
    console.print(r.rests_on, highlight=False, soft_wrap=True)
    if not clocks.exact:
        console.print(f"the catalog gives no clock step for {spec.key}: {len(r.configs)} pairs evenly spaced over its "
                      "range, not necessarily clocks it takes (--gpu reads them from the GPU)", highlight=False)
    n_pairs = len(r.configs)
    if per_launch or len(r.kernels) <= PER_LAUNCH_LINES:
        for name, k in r.kernels.items():
            console.print(_line(name[:60], k, n_pairs, policy), highlight=False, soft_wrap=True)
    else:
        total = r.application.time_ms
        shown = sorted(r.by_name.items(), key=lambda kv: -sum(kv[1].time_ms))
        for name, by_name in shown[:PER_LAUNCH_LINES]:
            share = 100 * sum(by_name.time_ms) / sum(total)
            console.print(f"{_line(name[:60], by_name, n_pairs, policy)} ({by_name.launches} launches, "
                          f"{share:.0f}% of the time)", highlight=False, soft_wrap=True)
        if len(shown) > PER_LAUNCH_LINES:
            console.print(f"... {len(shown) - PER_LAUNCH_LINES} more kernel names (--json has them all)",
                          highlight=False)
    coarse = None if display_cores is None else clocks.display(display_cores, [(r.application.chosen.core_mhz,
                                                                                   r.application.chosen.mem_mhz)])
    console.print(_pair_table(r, coarse), width=min(console.width, 100))
    if r.under_launch_scale:
        n = len(r.under_launch_scale)
        console.print(f"{n} kernel(s) predicted under {LAUNCH_SCALE_MS * 1e3:g} us without a measured time to "
                      "calibrate on: a launch's own few microseconds, which the model leaves out, outweigh it "
                      "there; read those times as lower bounds", highlight=False)


def _pair_table(r: PredictionDetail, shown: np.ndarray | None) -> Table:
    """Every clock pair (or those ``shown``) for all launches together, with 90% intervals, the choice marked."""
    app, q = r.application, r.intervals
    keep = None if shown is None else {(float(c), float(m)) for c, m in shown}
    chosen = (app.chosen.core_mhz, app.chosen.mem_mhz)

    def span(x: float, h: float | None) -> str:
        return f"{x:.4g}" if h is None else f"{x:.4g} ({x * math.exp(-h):.3g}-{x * math.exp(h):.3g})"

    rows = [[f"{c:g}/{m:g}" + (" *" if (c, m) == chosen else ""), span(app.time_ms[k], q.time[k]),
             span(app.watts[k], q.power), span(app.joules[k], None if q.energy is None else q.energy[k])]
            for k, (c, m) in enumerate(r.configs.tolist()) if keep is None or (c, m) in keep]
    some = "" if keep is None else f", {len(rows)} of the {len(r.configs)} pairs"
    return table(f"all {app.launches} launches at each pair (90% intervals; * {r.policy}'s choice{some})",
                 ["core/mem MHz", "time ms", "power W", "energy J"], rows)


def gpu_clocks(index: int, spec: DeviceSpec) -> SupportedClocks:
    """The supported clocks NVML lists for GPU ``index``, which must be the catalog GPU ``spec``."""
    from gpudvfs.hardware.nvml.gpu import NvmlGpu  # needs nvidia-ml-py: only with --gpu

    with NvmlGpu(index) as gpu:
        if lookup(gpu.name).key != spec.key:
            raise InputError(f"--gpu {index}: the GPU is a {gpu.name}, the profile's is {spec.name}")
        return SupportedClocks.of_device(gpu)


def _line(label: str, k: LaunchPrediction | NamePrediction, n_pairs: int, policy: str) -> str:
    line = f"{label}: {min(k.time_ms):.4g}-{max(k.time_ms):.4g} ms over {n_pairs} pairs"
    if isinstance(k, LaunchPrediction):
        c = k.chosen
        line += f"; {policy}: {c.core_mhz:g}/{c.mem_mhz:g} MHz, {c.time_ms:.4g} ms, {c.watts:.1f} W"
    return line


#: Launches profiled unless --launch-count or --all-launches says otherwise: Nsight Compute
#: replays each launch once per counter pass, so a whole training run would take hours.
DEFAULT_LAUNCHES = 100


@click.command("profile-command")
@click.option("--device", required=True, help="Catalog GPU.")
@click.option("-o", "--out", help="The CSV the profiler writes (default: the program's name + .ncu.csv, or "
                                  ".nvprof.csv before Volta): what `gpudvfs predict` then reads.")
@click.option("--kernel-name", help="Profile only kernels of this name (ncu's regex:... allowed).")
@click.option("--launch-count", type=click.IntRange(min=1),
              help=f"Profile at most this many launches [default: {DEFAULT_LAUNCHES}; nvprof profiles every one].")
@click.option("--all-launches", is_flag=True, help="Profile every launch (Nsight Compute: slow on a long run).")
@click.option("--clock-control", type=click.Choice(CLOCK_CONTROLS),
              help="Nsight Compute's clock control: base (its default) locks the base clock; none leaves the "
                   "clocks to the driver, for a GPU whose settings are not yours to change.")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def profile_command_(device: str, out: str | None, kernel_name: str | None, launch_count: int | None,
                     all_launches: bool, clock_control: str | None, command: tuple[str, ...]) -> None:
    """The profiler command that collects what `gpudvfs predict` reads (Nsight Compute from Volta on, nvprof before).

    For COMMAND given after `--` (`-- ./app --size 3`) or as one quoted string.
    """
    with user_errors():
        cc = lookup(device).compute_capability
        if all_launches and launch_count is not None:
            raise click.UsageError("--all-launches or --launch-count, not both")
        ncu = float(cc) >= 7
        if ncu and not all_launches and launch_count is None:
            launch_count = DEFAULT_LAUNCHES
        target = command[0] if len(command) == 1 else list(command)
        out = out or f"{Path(shlex.split(command[0])[0]).name}.{'ncu' if ncu else 'nvprof'}.csv"
        click.echo(profile_command(cc, target, kernel_name=kernel_name, launch_count=launch_count,
                                   clock_control=clock_control, log_file=out))


@click.group()
def devices() -> None:
    """The device catalog (GPUDVFS_CATALOG adds or overrides entries)."""


@devices.command("list")
@click.option("--json", "as_json", is_flag=True)
def list_(as_json: bool) -> None:
    """Every GPU of the catalog."""
    with user_errors():
        found = catalog()
    if as_json:
        print_json({k: d.name for k, d in found.items()})
        return
    # The aliases too: every name --device takes is on the list.
    console.print(table("device catalog", ["key", "name", "also", "CC", "SMs", "boost MHz", "memory MHz", "TDP W"],
                        [[k, d.name, ", ".join(d.aliases), d.compute_capability, d.sm_count,
                          f"{d.core_mhz['boost']:g}", ", ".join(f"{m:g}" for m in d.mem_mhz), f"{d.tdp_w:g}"]
                         for k, d in found.items()]))


@devices.command()
@click.argument("name")
@click.option("--json", "as_json", is_flag=True)
def show(name: str, as_json: bool) -> None:
    """One GPU's entry, with the source of each figure."""
    with user_errors():
        d = lookup(name)
    if as_json:
        print_json({"version": 1, "devices": {d.key: d.to_dict()}})
        return
    rows = [[k, str(v), d.sources.get(k, "")] for k, v in d.to_dict().items() if k not in ("sources", "notes")]
    console.print(table(f"{d.key}: {d.name}", ["field", "value", "source"], rows))
    if d.notes:
        console.print(d.notes, highlight=False)
