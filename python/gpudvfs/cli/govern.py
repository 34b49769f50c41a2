"""`gpudvfs govern ...`: the closed-loop frequency governor."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import click
import numpy as np

from gpudvfs.cli import options
from gpudvfs.cli.options import (
    DEVICE_HELP,
    REFERENCE_HELP,
    clock_pair,
    grid_reference,
    optional_clock_pair,
    resolve_gpu,
)
from gpudvfs.cli.output import console, interval, output_file, paired_line, print_json, table, user_errors
from gpudvfs.cli.progress import progress_bars
from gpudvfs.data.datasets import MeasurementGrid
from gpudvfs.data.dcgm_fields import is_dcgm_grid
from gpudvfs.evaluation.deadline_cv import ReplayFile, deadline_cv
from gpudvfs.evaluation.govern_replay import StrategyScores, replay
from gpudvfs.evaluation.governor_cv import (
    CONSTANTS,
    DEFAULT_SEEDS,
    RECHECKS,
    GovernorCV,
    choose_defaults,
    constant_sets,
    cross_validate_governor,
)
from gpudvfs.evaluation.plain import plain_table
from gpudvfs.evaluation.prior_cv import GROUPS, SHARES, SHOWN_SDS, leave_out, limit_replays, prior_files
from gpudvfs.evaluation.replay_table import ReplayTable, dcgm_replay_table, replay_table
from gpudvfs.evaluation.train_replay import replay_run
from gpudvfs.govern.daemon import MIN_DAEMON_INTERVAL_S, Daemon, advice_report
from gpudvfs.govern.governor import GOVERNOR_POLICIES, RECHECK_RUNS
from gpudvfs.govern.knob import KNOBS
from gpudvfs.hardware.kinds import make_device
from gpudvfs.hardware.nvml import NvmlDevice

#: Steps replayed and steps of a phase; a trace replays each job once for TRACE_STEPS steps.
STEPS, PHASE_STEPS, TRACE_STEPS = 4000, 200, 2000
#: The formats replayed without counters, whatever the options.
TRACES = ("zeus", "perseus")
#: What `govern deadline-cv` replays from time and power alone: traces and grids without counters.
PLAIN = (*TRACES, "ptx", "tidy")

NOISE_HELP = ("Relative noise of each observed time and power: Gaussian of this standard deviation, truncated "
              "to (-1, 1) (a draw outside is drawn again) so that every observation stays positive.")


def _apply(f: Callable[..., Any], decorators: Sequence[Callable]) -> Callable[..., Any]:
    """``f`` under ``decorators``, the first outermost (as if stacked in that order)."""
    for option in reversed(decorators):
        f = option(f)
    return f


#: The deadline's bound, the phases and the noise: options of every replay command.
_PHASES = [
    click.option("--slowdown", default=0.1, show_default=True, type=options.Finite(min=0),
                 help="deadline: at most this slower than the default (highest) clocks."),
    click.option("--steps", type=click.IntRange(min=1), help=f"Steps replayed [default: {STEPS}]."),
    click.option("--phase-steps", type=click.IntRange(min=1),
                 help=f"The application switches about this often [default: {PHASE_STEPS}; a trace's job runs "
                      f"{TRACE_STEPS}]."),
    click.option("--noise", default=0.01, show_default=True, type=options.Finite(0, 0.5, max_open=True),
                 help=NOISE_HELP),
]


def _phase_settings(f: Callable[..., Any]) -> Callable[..., Any]:
    """The deadline's bound, the phases and the noise (`govern defaults`)."""
    return _apply(f, _PHASES)


def _replay_settings(f: Callable[..., Any]) -> Callable[..., Any]:
    """The options of a replay (`govern replay`, `govern cv`).

    The policy and its bound, the phases, the noise and the seed.
    """
    return _apply(f, [click.option("--policy", type=click.Choice(GOVERNOR_POLICIES), default="energy",
                                   show_default=True),
                      click.option("--power-cap", type=options.Finite(min=0, min_open=True), help="power-cap: watts."),
                      options.eta,
                      *_PHASES, options.seed()])


@click.group()
def govern() -> None:
    """The closed-loop frequency governor: predict, measure, settle."""


def _grid(path: str, columns: dict[str, str] | None, plain: bool = False) -> MeasurementGrid:
    """A grid the replay reads: --plain reads the tidy and PTX tables too, and counters as text."""
    formats = ("nvdvfs", "dcgm", "grid", *TRACES) + (("tidy", "ptx") if plain else ())
    return options.measured_grid(path, "the governor's replay", columns, formats, counters=not plain)


def _table(data: str, device: str | None, reference: tuple[float, float] | None, train: str | None = None,
           columns: dict[str, str] | None = None, clip_utilization: bool = False, plain: bool = False) -> ReplayTable:
    return _table_of(_grid(data, columns, plain), device, reference, train, columns, clip_utilization, plain)


def _table_of(grid: MeasurementGrid, device: str | None, reference: tuple[float, float] | None,
              train: str | None = None, columns: dict[str, str] | None = None, clip_utilization: bool = False,
              plain: bool = False) -> ReplayTable:
    """The replay table of ``grid`` (read by `_grid`): without counters for --plain and the traces."""
    data = grid.path
    if plain or grid.format in TRACES:
        return plain_table(grid, _grid(train, columns, plain=True) if train else None)
    if device is None:
        raise click.UsageError(f"--device: the GPU that measured {data}, whose counters model each application; "
                               "or --plain, to replay its time and power alone")
    time_device, spec = resolve_gpu(device)
    grid = options.on_gpu(grid, spec)
    reference = grid_reference(grid, spec, reference)
    if is_dcgm_grid(grid):
        if train:
            raise click.UsageError("--train: on a DCGM grid each application is scored with models of the "
                                   "grid's others; leave --train out")
        return dcgm_replay_table(grid, reference)
    train_grid = options.on_gpu(_grid(train, columns), spec) if train else None
    return replay_table(grid, reference, time_device, spec, train_grid, clip_utilization)


@govern.command("replay")
@click.argument("data", type=click.Path(dir_okay=False))
@click.option("--train", type=click.Path(dir_okay=False),
              help="Grid the power model is fitted on (none of DATA's applications in it); default: each "
                   "application scored with a model of DATA's others.")
@click.option("--device", help=DEVICE_HELP + " Not needed with --plain, nor for Zeus's and Perseus's traces.")
@click.option("--reference", callback=optional_clock_pair, help=REFERENCE_HELP)
@click.option("--plain", is_flag=True,
              help="Replay the time and power alone, counters ignored: a new application is predicted from how "
                   "the others (or TRAIN's) moved. Zeus's and Perseus's traces are always replayed so.")
@click.option("--learn", is_flag=True,
              help="A new phase starts from what the phases before it taught the governor, not from the models.")
@_replay_settings
@click.option("--cv", "run_cv", is_flag=True,
              help="Also choose the governor's constants by leave-one-application-out (slow: 63 replays per "
                   "application, over every core) and report that figure and every constant's.")
@options.columns
@options.skip_invalid
@options.mem_clock_unit
@options.drop_spikes
@options.clip_utilization
@click.option("--json", "as_json", is_flag=True)
def replay_(data: str, train: str | None, device: str | None, reference: tuple[float, float] | None, plain: bool,
            learn: bool, policy: str, slowdown: float, power_cap: float | None, eta: float, steps: int | None,
            phase_steps: int | None, noise: float, seed: int, run_cv: bool, columns: dict[str, str] | None,
            clip_utilization: bool, as_json: bool) -> None:
    """Run the governor against DATA, with the baselines on the same phases and noise.

    DATA: a grid with every application measured at every pair (NV-DVFS nvprof CSV with
    power, a DCGM grid, or with --plain any time-and-power grid), or a trace of Zeus (training
    jobs at each power limit) or Perseus (pipeline stages at each SM clock). The baselines:
    default clocks, the models' choice, one pair for all chosen on the other applications,
    exhaustive profiling, random search, and Zeus's just-in-time profiling: 10 warm-up and 40
    measured steps per setting, from the highest down. A trace replays each job once, in a
    random order, for --phase-steps steps; a grid replays --steps steps of applications
    switching about every --phase-steps.
    JSON keys: regret_mean, violations, clock_changes, steps_to_settle, decision_us, wasted,
    baselines, intervals (95%, over the applications: the governor's regret and its paired
    difference from each baseline's) (and cv).

    \b
    regret: energy over a phase (exploration included) over that at its
      best pair, minus 1; the best pair is the policy's choice on the
      measured grid. edp: of the phase's energy x its time. power-cap
      minimizes time: its regret is of time, against the fastest pair under
      the cap (the lowest-power one where none is).
    violations: deadline: the fraction of steps whose pair's measured time
      exceeds (1 + slowdown) x the default clocks'; power-cap: the fraction
      whose measured power exceeds the cap; absent for energy and edp.
    """
    options.policy_options(policy, power_cap)
    with user_errors():
        grid = _grid(data, columns, plain)
        tab = _table_of(grid, device, reference, train, columns, clip_utilization, plain)
        trace = tab.knob != "clocks" or plain
        if trace and run_cv:
            raise click.UsageError("--cv chooses the governor's constants on counter-modelled grids; a trace or "
                                   "--plain replay runs with the constants chosen on those")
        each_once = grid.format in TRACES
        if each_once and steps is not None:
            raise click.UsageError("--steps: a trace replays each job once, for --phase-steps steps")
        kw: dict[str, Any] = {
            "policy": policy, "slowdown": slowdown, "power_cap_w": power_cap, "eta": eta, "steps": steps or STEPS,
            "phase_steps": phase_steps or (TRACE_STEPS if each_once else PHASE_STEPS), "seed": seed, "noise": noise}
        r = replay(tab, **kw, each_once=each_once, learn=learn)
        cv: GovernorCV | None = None
        if run_cv:
            with progress_bars(disable=as_json) as update:
                [cv] = cross_validate_governor([tab], **kw, progress=lambda done, total, label: update(
                    "replays", done, total, label))
    if as_json:
        print_json(r.to_dict() | ({"cv": cv.to_dict()} if cv else {}))
        return
    cols = ["strategy", "regret % (mean)", "max", "wasted %", "changes", "steps to settle"]
    if r.governor.violations is not None:
        cols.append("violations %")

    def row(name: str, v: StrategyScores) -> list[str]:
        out = [name, f"{100 * v.regret_mean:.2f}", f"{100 * v.regret_max:.2f}", f"{100 * v.wasted:.2f}",
               str(v.clock_changes), f"{v.steps_to_settle:.1f}"]
        return out + ([f"{100 * v.violations:.2f}"] if v.violations is not None else [])

    knob = {"clocks": "clock pairs", "core-clock": "core clocks", "power-limit": "power limits"}[r.knob]
    console.print(table(f"governor replay, {policy}: {r.phases} phases of {r.apps} applications over "
                        f"{r.pairs} {knob}; one decision {r.governor.decision_us:.0f} us",
                        cols, [row("governor", r.governor), *[row(k, v) for k, v in r.baselines.items()]]))
    console.print("95% intervals over the applications (a phase with its application), %: governor "
                  + paired_line(r.intervals, {}, 100), highlight=False)
    if cv is not None:
        console.print(f"leave-one-application-out: regret {100 * cv.cv_regret_mean:.2f}% "
                      f"(95% interval over the applications {interval(cv.interval, 100)}, "
                      f"max {100 * cv.cv_regret_max:.2f}%)", highlight=False)


def _grids(f: Callable[..., Any]) -> Callable[..., Any]:
    """DATA... with a --device (and a --reference) for each: `govern cv`, `govern defaults`."""
    return _apply(f, [
        click.argument("data", nargs=-1, required=True, type=click.Path(dir_okay=False)),
        click.option("--device", "devices", multiple=True, required=True,
                     help="The GPU of each DATA, in the same order (a catalog name or a device JSON file)."),
        click.option("--reference", "references", multiple=True,
                     help="The reference pair of each DATA, in order (CORE,MEM; default: each grid's own, else "
                          "its GPU's default clocks)."),
    ])


_recheck = click.option("--recheck", is_flag=True,
                        help="Also choose the recheck (recheck_z, recheck_runs) among off and z 1, 2, 3 x 2, 5 runs: "
                             "7 times the sets and replays.")


def _tables(data: Sequence[str], devices: Sequence[str], references: Sequence[str]) -> list[ReplayTable]:
    """The replay table of each DATA (inside `user_errors`)."""
    if len(devices) != len(data) or len(references) not in (0, len(data)):
        raise click.UsageError(f"give one --device (and, if any, one --reference) per DATA: {len(data)} DATA, "
                               f"{len(devices)} --device, {len(references)} --reference")
    try:
        refs: list[tuple[float, float] | None] = [clock_pair(None, None, r) for r in references] or [None] * len(data)
    except click.BadParameter as e:
        e.param_hint = "'--reference'"
        raise
    return [_table(d, dev, ref) for d, dev, ref in zip(data, devices, refs)]


@govern.command("cv")
@_grids
@_replay_settings
@_recheck
@options.workers()
@options.skip_invalid
@options.mem_clock_unit
@options.drop_spikes
@click.option("--json", "as_json", is_flag=True)
def cv(data: tuple[str, ...], devices: tuple[str, ...], references: tuple[str, ...], policy: str, slowdown: float,
       power_cap: float | None, eta: float, steps: int | None, phase_steps: int | None, noise: float, seed: int,
       recheck: bool, workers: int | None, as_json: bool) -> None:
    """Choose the governor's constants by leave-one-application-out over every DATA.

    Each application of every DATA held out, the constants are those with the least regret on the
    others of its grid and on the other grids; reports each grid's held-out regret with every set
    of constants' in-sample regret.
    """
    options.policy_options(policy, power_cap)
    with user_errors():
        tables = _tables(data, devices, references)
        with progress_bars(disable=as_json) as update:
            grids = cross_validate_governor(
                tables, policy=policy, slowdown=slowdown, power_cap_w=power_cap, eta=eta, steps=steps or STEPS,
                phase_steps=phase_steps or PHASE_STEPS, seed=seed, noise=noise,
                rechecks=RECHECKS if recheck else (), workers=workers,
                progress=lambda done, total, label: update("replays", done, total, label))
    out = [{"data": d} | r.to_dict() for d, r in zip(data, grids)]
    if as_json:
        print_json(out)
        return
    for r in out:
        spread = [s["regret_mean"] for s in r["sensitivity"]]
        console.print(f"{r['data']}: held-out regret {100 * r['cv_regret_mean']:.2f}% (95% interval over the "
                      f"applications {interval(r['interval'], 100)}, max {100 * r['cv_regret_max']:.2f}%) "
                      f"over {r['phases']} phases; in-sample over the "
                      f"{len(spread)} sets of constants {100 * min(spread):.2f}-{100 * max(spread):.2f}%",
                      highlight=False)


@govern.command("deadline-cv")
@click.argument("data", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--device", "devices", multiple=True,
              help="The GPU of each grid with counters among DATA, in order (traces and PTX or tidy grids need "
                   "none).")
@click.option("--reference", "references", multiple=True, help="The reference pair of each grid, in order.")
@click.option("--slowdown", default=0.05, show_default=True, type=options.Finite(min=0),
              help="At most this slower than the default (highest) setting.")
@click.option("--seeds", default=3, show_default=True, type=click.IntRange(min=1), help="Replay seeds 0..N-1.")
@options.workers()
@options.skip_invalid
@click.option("--json", "as_json", is_flag=True)
def deadline_cv_(data: tuple[str, ...], devices: tuple[str, ...], references: tuple[str, ...], slowdown: float,
                 seeds: int, workers: int | None, as_json: bool) -> None:
    """Choose the deadline's confirmation (a pair already run needs a margin) with each DATA held out.

    Each DATA (a trace, or a grid with its --device) held out, the set of the least mean regret
    on the others among those keeping every job of theirs within 5% of its steps over the
    bound; DATA is then replayed under it with every baseline. Prints per DATA the set it got
    and each strategy's regret and steps over the bound, mean over the seeds.
    """
    with user_errors():
        # Traces and grids without counters (PTX, tidy) are replayed from their time and power alone.
        grids = [g if g.format in PLAIN else _grid(d, None) for d, g in ((d, _grid(d, None, plain=True)) for d in data)]
        n_grids = sum(g.format not in PLAIN for g in grids)
        if len(devices) != n_grids or len(references) not in (0, n_grids):
            raise click.UsageError(f"give one --device (and, if any, one --reference) per grid among DATA: "
                                   f"{n_grids} grids, {len(devices)} --device, {len(references)} --reference")
        given: list[tuple[float, float] | None] = [clock_pair(None, None, r) for r in references]
        refs = iter(given or [None] * n_grids)
        devs = iter(devices)
        files = [ReplayFile(d, plain_table(g), True, TRACE_STEPS) if g.format in TRACES else
                 ReplayFile(d, plain_table(g), False, PHASE_STEPS, STEPS) if g.format in PLAIN else
                 ReplayFile(d, _table_of(g, next(devs), next(refs)), False, PHASE_STEPS, STEPS)
                 for d, g in zip(data, grids)]
        with progress_bars(disable=as_json) as update:
            chosen, folds, sensitivity = deadline_cv(files, slowdown=slowdown, seeds=range(seeds), workers=workers,
                                        progress=lambda done, total, label: update("replays", done, total, label))
    if as_json:
        print_json({"chosen": chosen, "folds": [f.to_dict() for f in folds], "sets": sensitivity})
        return
    console.print(f"chosen on every DATA: {chosen}", highlight=False)
    for f in (fold.to_dict() for fold in folds):
        rows = [[k, f"{100 * np.mean(v['regret']):.2f}", f"{100 * np.mean(v['violations']):.2f}"]
                for k, v in f["strategies"].items()]
        console.print(table(f"{f['name']} held out: {f['chosen']}", ["strategy", "regret %", "over %"], rows))


@govern.command("defaults")
@_grids
@click.option("--seeds", default=len(DEFAULT_SEEDS), show_default=True, type=click.IntRange(min=1),
              help="Replay seeds 0..N-1 of every grid and policy.")
@_phase_settings
@click.option("--cv", "run_cv", is_flag=True,
              help="Also the choice cross-validated: each application held out, the same choice made on the "
                   "other applications' phases of the same replays, and its phases scored with the set it got.")
@_recheck
@options.workers()
@options.skip_invalid
@options.mem_clock_unit
@options.drop_spikes
@click.option("--json", "as_json", is_flag=True)
def defaults(data: tuple[str, ...], devices: tuple[str, ...], references: tuple[str, ...], seeds: int,
             slowdown: float, steps: int | None, phase_steps: int | None, noise: float, run_cv: bool,
             recheck: bool, workers: int | None, as_json: bool) -> None:
    """Choose the governor's default constants over DATA.

    The set with the least mean regret over the grids, the energy, EDP and deadline policies and
    the seeds, among those whose deadline replays keep the steps over the bound at or under 5% on
    every grid. (The built-in defaults are this command's choice on the two development grids.)
    """
    with user_errors():
        tables = _tables(data, devices, references)
        with progress_bars(disable=as_json) as update:
            r = choose_defaults(tables, seeds=tuple(range(seeds)), slowdown=slowdown, steps=steps or STEPS,
                                phase_steps=phase_steps or PHASE_STEPS, noise=noise,
                                sets=constant_sets(rechecks=RECHECKS if recheck else ()), workers=workers,
                                cv=run_cv,
                                progress=lambda done, total, label: update("replays", done, total, label)).to_dict()
    if as_json:
        print_json(r)
        return
    named = [k for k in CONSTANTS if k in r["chosen"]]  # the recheck's only where it is chosen
    rows = [[f"{s[k]:g}" for k in named] + [f"{100 * s['regret_mean']:.3f}",
             f"{100 * s['violations_max']:.2f}" + ("" if s["feasible"] else " (over)")]
            for s in sorted(r["sets"], key=lambda s: s["regret_mean"])]
    console.print(table(f"the governor's constants over {len(tables)} grid(s), {', '.join(r['policies'])}, "
                        f"seeds 0-{seeds - 1}; chosen: " + ", ".join(f"{k} {v:g}" for k, v in r["chosen"].items()),
                        [*named, "mean regret %", "deadline steps over %"], rows))
    if run_cv:
        _print_defaults_cv(data, r, seeds)


def _print_defaults_cv(data: Sequence[str], r: dict, seeds: int) -> None:
    """`govern defaults --cv`: per grid and policy, the held-out figures beside the in-sample ones."""
    cv, rows = r["cv"], []
    for path, g in zip(data, cv["grids"]):
        for policy, v in g["policies"].items():
            over = (f"{100 * v['violations']:.2f} / {100 * v['in_sample_violations']:.2f}" if "violations" in v
                    else "")
            rows.append([path, policy, f"{100 * v['regret_mean']:.2f}", interval(v["interval"], 100),
                         f"{100 * v['regret_max']:.2f}", f"{100 * v['in_sample']:.2f}", over])
    console.print(table(f"the choice held out (leave-one-application-out), seeds 0-{seeds - 1}: mean regret "
                        f"{100 * cv['regret_mean']:.3f}% (95% interval over the applications "
                        f"{interval(cv['interval'], 100)}; in-sample {100 * cv['in_sample_regret_mean']:.3f}%)",
                        ["data", "policy", "held-out regret %", "95% interval", "max %", "in-sample %",
                         "steps over % (held out / in-sample)"], rows))
    for path, g in zip(data, cv["grids"]):
        console.print(f"{path}: {g['same_as_chosen_on_all']} of the {len(g['chosen'])} applications held out got "
                      "the set chosen on all", highlight=False)



@govern.command("prior-cv")
@click.argument("data", type=click.Path(file_okay=False))
@click.option("--by", type=click.Choice(GROUPS), default="gpu", show_default=True,
              help="What a file is held out with: its GPU's files, or itself alone.")
@click.option("--replay", "replays", is_flag=True,
              help="Also the governor's regret on Zeus's traces from the power-limit prior at each sd (minutes).")
@click.option("--json", "as_json", is_flag=True)
def prior_cv(data: str, by: str, replays: bool, as_json: bool) -> None:
    """The cold-start prior's memory share and each knob's sd, each file of DATA (the public data folder) held out.

    JSON keys: those of `PriorCV` (and replays: file -> sd -> regret per seed 0-2).
    """
    with user_errors():
        r = leave_out(prior_files(Path(data)), by)
        # The power-limit prior's sd against a few others: those shown, each trace's held out, the clock prior's.
        sds = {*SHOWN_SDS, *(v.sd for v in r.left_out.values() if v.knob == "power-limit"), *r.sd.values()}
        regret = limit_replays(Path(data), sorted(sds), TRACE_STEPS) if replays else None
    if as_json:
        print_json(r.to_dict() | ({"replays": regret} if regret else {}))
        return
    rows = [[n, v.gpu, str(v.workloads), f"{v.share:g}",
             f"{100 * v.time_error.mean:.1f} ({100 * v.time_error.max:.0f})", f"{v.sd:g}",
             f"{100 * v.coverage:.1f}", f"{100 * v.time_coverage:.1f}",
             "" if v.power_coverage is None else f"{100 * v.power_coverage:.1f}",
             " / ".join(f"{100 * c:.0f}" for c in r.over_sds[n].values())] for n, v in r.left_out.items()]
    console.print(table(f"held out by {by}: mean |log time error| {100 * r.mean_time_error:.1f}% (clock files), "
                        "coverage " + ", ".join(f"{100 * c:.1f}% ({k})" for k, c in r.mean_coverage.items())
                        + f"; chosen on every file: memory share {r.share:g}, sd "
                        + ", ".join(f"{v:g} ({k})" for k, v in r.sd.items()),
                        ["file", "GPU", "workloads", "share", "|time error| % (max)", "sd (its knob's)",
                         "in 90% %", "time", "power", "at sd " + " / ".join(map(str, SHOWN_SDS))], rows))
    mean = np.mean([list(v.values()) for v in r.over_shares.values()], axis=0)
    console.print(table("mean |log time error| % by memory share (in-sample)", ["file", *map(str, SHARES)],
                        [[n, *(f"{100 * e:.1f}" for e in v.values())] for n, v in r.over_shares.items()]
                        + [["mean", *(f"{100 * e:.2f}" for e in mean)]]))
    if regret:
        console.print(table("regret % (cost, eta 0.5), seeds 0-2, by prior sd", ["trace", *next(iter(regret.values()))],
                            [[n, *(" / ".join(f"{100 * x:.2f}" for x in v) for v in by_sd.values())]
                             for n, by_sd in regret.items()]))

@govern.command()
@options.device_kind()
@options.gpu_index()
@click.option("--socket", "socket_path", required=True, type=click.Path(dir_okay=False),
              help="The Unix socket unprivileged governors connect to (e.g. /run/gpudvfs/gpu0.sock).")
@click.option("--mode", default="660", show_default=True, help="The socket's permissions (octal): who may connect.")
def clockd(device_kind: str, index: int, socket_path: str, mode: str) -> None:
    """The privileged clock service of one GPU (run as root): governors set clocks through it.

    When a client's connection drops, its clocks are reset. Runs until SIGINT or SIGTERM, then
    resets the clocks.
    """
    from gpudvfs.govern.clockd import serve_clocks  # the service's imports: not at start-up

    try:
        perms = int(mode, 8)
    except ValueError:
        raise click.BadParameter(f"expected octal permissions such as 660, got {mode!r}") from None
    with user_errors():
        serve_clocks(make_device(device_kind, index=index), socket_path, perms, started=lambda service: console.print(
            f"serving the clocks of {service.device.name} on {socket_path}", highlight=False))


@govern.command()
@options.device_kind()
@options.gpu_index()
def reset(device_kind: str, index: int) -> None:
    """Give a GPU's clocks back to the driver (what a governor killed by SIGKILL left locked)."""
    with user_errors():
        device = make_device(device_kind, index=index)
        device.reset_clocks()
    console.print(f"{device.name}: clocks reset to the driver's control", highlight=False)


@govern.command("replay-steps")
@click.argument("log", type=click.Path(dir_okay=False))
@click.option("--warmup-steps", type=click.IntRange(min=0), default=2, show_default=True,
              help="Steps of each phase neither observed nor used for the prior (the recorded run's).")
def replay_steps(log: str, warmup_steps: int) -> None:
    """Replay a training run's step log (and its summary beside it) through the step meter and the governor."""
    with user_errors():
        replayed, recorded = replay_run(log, warmup_steps=warmup_steps)
    for name, s in (("recorded", recorded), ("replayed", replayed)):
        e = s["energy_j"]
        console.print(f"{name}: steps {s['steps']}; energy: steps' sum {e['step_sum']:.6g} J, counter "
                      f"{e['counter_total']:.6g} J; decisions {s['decisions']}, observations {s['observations']}",
                      highlight=False)


def _knobs_line(device: NvmlDevice) -> str:
    k = device.knobs()
    pl = "no power limit reported" if k["power_limit_w"] is None else "power limit {:g}-{:g} W".format(
        *k["power_limit_w"])
    may = [name for name in KNOBS if k[name]]
    return f"knobs: locked clocks, {pl}; this process may set: {', '.join(may) or 'none (dry run only)'}"


def _started(daemon: Daemon) -> None:
    """Print the line that opens a run: what is governed, from which prior; on NVML, what this process may set."""
    dry_run, knob = daemon.dry_run, daemon.prior.knob
    where = {"models": "the models", "catalog": "the catalog's prior", "power-limit": "a power-limit prior"}
    what = {"clocks": "pairs", "core-clock": "core clocks", "power-limit": "power limits"}[knob]
    console.print(f"{'dry run on' if dry_run else 'governing'} {daemon.device.name} ({daemon.governor.policy}) "
                  f"every {daemon.interval_s:g} s; {len(daemon.governor.configs)} {what} from "
                  f"{where[daemon.prior.name]}; "
                  f"activities: {daemon.monitor.source}", highlight=False)
    if isinstance(daemon.device, NvmlDevice):
        console.print(_knobs_line(daemon.device), highlight=False)


@govern.command("run")
@options.device_kind(help="sim: a simulated GPU running a process of --sim-phases phases, on a virtual clock.")
@options.gpu_index()
@click.option("--registry", type=click.Path(file_okay=False),
              help="The fleet registry with this GPU (gpudvfs fleet calibrate), with --time-model: each phase "
                   "starts from these models. Without both, nvml starts from the catalog's prior (the clocks "
                   "the GPU lists, the catalog power prior's shape).")
@click.option("--time-model", type=click.Path(dir_okay=False),
              help="DCGM time model (gpudvfs time fit-dcgm), with --registry.")
@click.option("--catalog-prior", is_flag=True,
              help="sim, --knob clocks: start from the catalog's prior, as nvml does without --registry, not the "
                   "simulated GPU's calibration.")
@click.option("--dry-run/--apply", "dry_run", default=True, show_default=True,
              help="--dry-run: set nothing, measure at the driver's clocks and log what the governor would set (no "
                   "privilege needed). --apply: set the knob (root, or the clock service).")
@click.option("--knob", type=click.Choice(KNOBS), default="clocks", show_default=True,
              help="What the governor sets: both clocks locked; the core clock alone locked, the memory clock left "
                   "to the driver (nvidia-smi -lgc); or the board's power limit, the clocks left to the driver. Each "
                   "needs root; the run says what this process may set.")
@click.option("--policy", type=click.Choice(GOVERNOR_POLICIES), default="energy", show_default=True)
@click.option("--slowdown", default=0.1, show_default=True, type=options.Finite(min=0),
              help="deadline: at most this slower than the default clocks.")
@click.option("--power-cap", type=options.Finite(min=0, min_open=True), help="power-cap: watts.")
@click.option("--interval", default=1.0, show_default=True, type=options.Finite(min=MIN_DAEMON_INTERVAL_S),
              help=f"Seconds per observation, at least {MIN_DAEMON_INTERVAL_S:g} (longer than the power sensor's "
                   "refresh period).")
@click.option("--duration", type=options.Finite(min=0, min_open=True),
              help="Seconds to run (default: nvml until SIGINT or SIGTERM; sim 1200, virtual).")
@click.option("--progress", "progress_file", type=click.Path(dir_okay=False),
              help="nvml: a file in which the application keeps the number of work units (steps) done; without "
                   "it the power is learnt and the time is the model's.")
@click.option("--threshold", default=0.1, show_default=True, type=click.FloatRange(0, 1, min_open=True, max_open=True),
              help="Activity change (largest over the fields) that starts a new phase.")
@click.option("--log", "log_path", type=click.Path(dir_okay=False), callback=output_file,
              help="Append every decision as a JSON line.")
@click.option("--metrics-port", type=click.IntRange(1, 65535), help="Serve Prometheus metrics on this port.")
@click.option("--sim-phases", default=4, show_default=True, type=click.IntRange(1, 4),
              help="sim: the process cycles through this many of the demo's workloads ...")
@click.option("--sim-phase-s", default=60.0, show_default=True, type=options.Finite(min=0, min_open=True),
              help="sim: ... each for about this many seconds at the default clocks (at least --interval).")
@click.option("--workdir", type=click.Path(file_okay=False),
              help="sim: where the simulated GPU's calibration is kept (default: a temporary folder).")
@click.option("--json", "as_json", is_flag=True)
def run(device_kind: str, index: int, registry: str | None, time_model: str | None, catalog_prior: bool,
        dry_run: bool, knob: str, policy: str, slowdown: float, power_cap: float | None, interval: float,
        duration: float | None, progress_file: str | None, threshold: float, log_path: str | None,
        metrics_port: int | None, sim_phases: int, sim_phase_s: float, workdir: str | None, as_json: bool) -> None:
    """Govern a GPU's clocks or power limit while processes run on it.

    Each interval observe its energy, activities and (with --progress) work done, detect the
    phase, and set what the governor chooses (--knob). The clocks and the power limit go back to
    the driver when no process runs and on every exit (SIGINT, SIGTERM, errors); after a SIGKILL,
    run `gpudvfs govern reset`. The report's clocks_restored: the (core, memory) MHz the GPU runs at after that last
    reset, which is not counted among the clock changes.
    """
    from gpudvfs.fleet.govern_service import ServiceSettings, serve  # the daemon's imports: not at start-up

    options.policy_options(policy, power_cap)
    with user_errors():
        settings = ServiceSettings(
            device_kind=device_kind, index=index, policy=policy, slowdown=slowdown, power_cap_w=power_cap,
            interval_s=interval, duration_s=duration, threshold=threshold, dry_run=dry_run, knob=knob,
            registry=registry, time_model=time_model, progress_file=progress_file, catalog_prior=catalog_prior,
            sim_phases=sim_phases, sim_phase_s=sim_phase_s, workdir=workdir, log_path=log_path,
            metrics_port=metrics_port)
        changes = "power-limit changes" if knob == "power-limit" else "clock changes"
        with progress_bars(disable=as_json) as update:
            out = serve(settings, started=None if as_json else _started,
                        progress=lambda s, total: update("govern", s.intervals, total,
                                                         f"{len(s.phases)} phases, {s.clock_changes} {changes}"))
    if as_json:
        print_json(out)
        return
    rows = [["intervals (governed / observed)", f"{out['intervals']} ({out['governed']} / {out['observed']})"],
            ["phases detected", ", ".join(f"{k}: {v}" for k, v in out["phases"].items()) or "none"],
            [changes + (" (dry run: would make)" if dry_run else ""),
             str(out["would_change"] if dry_run else out["clock_changes"])], ["energy", f"{out['joules']:.1f} J"]]
    if out["clocks_restored"] is not None:  # None: reset, but the clocks could not be read back
        rows.append(["clocks restored to the driver", "{:g}/{:g} MHz".format(*out["clocks_restored"])])
    if "sim_truth" in out:
        t = out["sim_truth"]
        what = {"clocks": ("pairs", "clocks"), "core-clock": ("core clocks", "core clock"),
                "power-limit": ("power limits", "power limit")}[out["knob"]]
        rows += [[f"energy over the least-energy {what[0]} (true)", f"{100 * t['energy_over_least']:.2f}%"],
                 [f"energy saving against the default {what[1]}", f"{100 * t['energy_saving']:.2f}%"],
                 [f"time against the default {what[1]}", f"{100 * t['time_change']:+.2f}%"]]
    console.print(table("governor daemon", ["", ""], rows))
    click.echo(advice_report(out))



@govern.command("second-run")
@click.argument("data", type=click.Path(dir_okay=False))
@click.option("--policy", type=click.Choice(GOVERNOR_POLICIES), default="cost", show_default=True)
@click.option("--power-cap", type=options.Finite(min=0, min_open=True), help="power-cap: watts.")
@options.eta
@click.option("--slowdown", default=0.1, show_default=True, type=options.Finite(min=0),
              help="deadline: at most this slower than the default (highest) setting.")
@click.option("--steps", default=TRACE_STEPS, show_default=True, type=click.IntRange(min=1), help="Steps per run.")
@click.option("--noise", default=0.01, show_default=True, type=options.Finite(0, 0.5, max_open=True), help=NOISE_HELP)
@click.option("--seeds", default=3, show_default=True, type=click.IntRange(min=1), help="Seeds 0..N-1.")
@click.option("--recheck-z", type=options.Finite(min=0),
              help="A pair run fewer than --recheck-runs times is run again where its mean less this many of its "
                   "standard deviations beats the best (0: never). Default: the policy's (energy 1, others 0).")
@click.option("--recheck-runs", default=RECHECK_RUNS, show_default=True, type=click.IntRange(1, 1000))
@click.option("--json", "as_json", is_flag=True)
def second_run(data: str, policy: str, power_cap: float | None, eta: float, slowdown: float, steps: int,
               noise: float, seeds: int, recheck_z: float | None, recheck_runs: int, as_json: bool) -> None:
    """Each job of a trace (or any time-and-power grid) twice: the second run from the profile the first saved.

    JSON keys per seed: first and second (regret_mean, regret_max, explored_steps; the second's
    jobs_within_0.2%), explored_ratio (the second run's explored steps over the first's).
    """
    from pathlib import Path

    from gpudvfs.evaluation.profile_replay import profile_replay

    options.policy_options(policy, power_cap)
    with user_errors():
        tab = plain_table(_grid(data, None, plain=True))
        out = [profile_replay(tab, Path(data).stem, policy=policy, eta=eta, slowdown=slowdown, power_cap_w=power_cap,
                              steps=steps, seed=s, noise=noise, recheck_z=recheck_z,
                              recheck_runs=recheck_runs).to_dict() for s in range(seeds)]
    if as_json:
        print_json(out)
        return
    rows = [[str(r["seed"]), *(f"{100 * r[run]['regret_mean']:.3f} / {100 * r[run]['regret_max']:.2f}"
                               for run in ("first", "second")),
             f"{100 * r['second']['jobs_within_0.2%']:.0f}",
             f"{r['first']['explored_steps']} / {r['second']['explored_steps']}"] for r in out]
    console.print(table(f"{data}: {out[0]['jobs']} jobs, {policy}, {steps} steps per run",
                        ["seed", "first run regret % mean / max", "second run", "jobs within 0.2 % (second)",
                         "explored steps first / second"], rows))
