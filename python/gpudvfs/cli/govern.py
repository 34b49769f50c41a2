"""`gpudvfs govern ...`: the closed-loop frequency governor."""

from __future__ import annotations

import click

from ..govern import POLICIES
from ..govern.replay import cross_validate, replay, replay_table
from ..io import read_measured_grid
from ..measure.devices import DEVICE_KINDS, make_device
from . import options
from .output import console, print_json, table, user_errors
from .time import DEVICE_HELP, _gpu, _pair


@click.group()
def govern() -> None:
    """The closed-loop frequency governor: predict, measure, settle."""


def _grid(path, columns):
    return read_measured_grid(path, "the governor's replay", ("nvdvfs", "grid"), columns=columns)


@govern.command("replay")
@click.argument("data", type=click.Path(dir_okay=False))
@click.option("--train", type=click.Path(dir_okay=False),
              help="Grid the power model is fitted on (none of DATA's applications in it); default: each "
                   "application scored with a model of DATA's others.")
@click.option("--device", required=True, help=DEVICE_HELP)
@click.option("--reference", default="700,700", show_default=True, callback=_pair,
              help="The clock pair a new phase is profiled at.")
@click.option("--policy", type=click.Choice(POLICIES), default="energy", show_default=True)
@click.option("--slowdown", default=0.1, show_default=True, type=click.FloatRange(min=0),
              help="deadline: at most this slower than the default (highest) clocks.")
@click.option("--power-cap", type=click.FloatRange(min=0, min_open=True), help="power-cap: watts.")
@click.option("--steps", default=4000, show_default=True, type=click.IntRange(min=1))
@click.option("--phase-steps", default=200, show_default=True, type=click.IntRange(min=1),
              help="The application switches about this often.")
@click.option("--noise", default=0.01, show_default=True, type=click.FloatRange(0, 0.5, max_open=True),
              help="Relative noise of each observed time and power.")
@click.option("--seed", default=0, show_default=True, type=int)
@click.option("--cv", "run_cv", is_flag=True,
              help="Also choose the governor's constants by leave-one-application-out (slow: 25 replays per "
                   "application) and report that figure and every constant's.")
@options.columns
@options.clip_utilization
@click.option("--json", "as_json", is_flag=True)
def replay_(data, train, device, reference, policy, slowdown, power_cap, steps, phase_steps, noise, seed, run_cv,
            columns, clip_utilization, as_json) -> None:
    """Run the governor against DATA, a grid with every application measured at every pair,
    with the baselines on the same phases and noise (default clocks, the models' choice,
    exhaustive profiling, random search). JSON keys: regret_mean, violations, clock_changes,
    steps_to_settle, decision_us, wasted, baselines (and cv)."""
    if policy == "power-cap" and power_cap is None:
        raise click.UsageError("--policy power-cap needs --power-cap W")
    with user_errors():
        grid = _grid(data, columns)
        time_device, spec = _gpu(device, grid)
        tab = replay_table(grid, reference, time_device, spec, _grid(train, columns) if train else None,
                           clip_utilization)
        kw = {"policy": policy, "slowdown": slowdown, "power_cap_w": power_cap, "steps": steps,
              "phase_steps": phase_steps, "seed": seed, "noise": noise}
        r = replay(tab, **kw)
        if run_cv:
            r["cv"] = cross_validate(tab, **kw)
    r.pop("per_phase")
    for b in r["baselines"].values():
        b.pop("per_phase")
    if as_json:
        print_json(r)
        return
    cols = ["strategy", "regret % (mean)", "max", "wasted %", "clock changes", "steps to settle"]
    if policy == "deadline":
        cols.append("violations %")

    def row(name, v):
        out = [name, f"{100 * v['regret_mean']:.2f}", f"{100 * v['regret_max']:.2f}", f"{100 * v['wasted']:.2f}",
               str(v["clock_changes"]), f"{v['steps_to_settle']:.1f}"]
        return out + ([f"{100 * v['violations']:.2f}"] if policy == "deadline" else [])

    console.print(table(f"governor replay, {policy}: {r['phases']} phases of {r['apps']} applications over "
                        f"{r['pairs']} pairs; one decision {r['decision_us']:.0f} us",
                        cols, [row("governor", r), *[row(k, v) for k, v in r["baselines"].items()]]))
    if run_cv:
        console.print(f"leave-one-application-out: regret {100 * r['cv']['cv_regret_mean']:.2f}% "
                      f"(max {100 * r['cv']['cv_regret_max']:.2f}%)", highlight=False)


@govern.command()
@click.option("--device", "device_kind", type=click.Choice(DEVICE_KINDS), default="nvml", show_default=True)
@click.option("--index", default=0, show_default=True, type=click.IntRange(min=0), help="NVML device index.")
@click.option("--socket", "socket_path", required=True, type=click.Path(dir_okay=False),
              help="The Unix socket unprivileged governors connect to (e.g. /run/gpudvfs/gpu0.sock).")
@click.option("--mode", default="660", show_default=True, help="The socket's permissions (octal): who may connect.")
def clockd(device_kind, index, socket_path, mode) -> None:
    """The privileged clock service of one GPU (run as root): governors set clocks through it;
    when a client's connection drops, its clocks are reset. Runs until SIGINT or SIGTERM,
    then resets the clocks."""
    import signal
    import threading

    from ..govern.clockd import ClockService

    try:
        perms = int(mode, 8)
    except ValueError:
        raise click.BadParameter(f"expected octal permissions such as 660, got {mode!r}") from None
    stop = threading.Event()
    with user_errors():
        service = ClockService(make_device(device_kind, index=index), socket_path, perms).start()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        console.print(f"serving the clocks of {service.device.name} on {socket_path}", highlight=False)
        try:
            stop.wait()
        finally:
            service.stop()


@govern.command()
@click.option("--device", "device_kind", type=click.Choice(DEVICE_KINDS), default="nvml", show_default=True)
@click.option("--index", default=0, show_default=True, type=click.IntRange(min=0), help="NVML device index.")
def reset(device_kind, index) -> None:
    """Give a GPU's clocks back to the driver (what a governor killed by SIGKILL left locked)."""
    with user_errors():
        device = make_device(device_kind, index=index)
        device.reset_clocks()
    console.print(f"{device.name}: clocks reset to the driver's control", highlight=False)
