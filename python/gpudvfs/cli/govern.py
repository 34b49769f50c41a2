"""`gpudvfs govern ...`: the closed-loop frequency governor."""

from __future__ import annotations

import click

from ..govern import POLICIES
from ..govern.replay import cross_validate, replay, replay_table
from ..io import read_measured_grid
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
