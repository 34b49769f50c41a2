"""`gpudvfs select ...`: choosing frequencies from predicted time and power."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import click

from gpudvfs.cli import options
from gpudvfs.cli.options import (
    DEVICE_HELP,
    REFERENCE_HELP,
    grid_reference,
    measured_grid,
    optional_clock_pair,
    resolve_gpu,
)
from gpudvfs.cli.output import console, output_file, paired_line, print_json, refuse_overwrite, table, user_errors
from gpudvfs.data.dcgm_fields import is_dcgm_grid
from gpudvfs.evaluation.dcgm_selection import DcgmSelectionReport, evaluate_policies
from gpudvfs.evaluation.regret import MeanMax, SinglePair
from gpudvfs.evaluation.safe import SHARED_RULE, Z_GRID, rule_name
from gpudvfs.evaluation.safe_grids import CAPS, leave_one_gpu_out, shared_grids
from gpudvfs.evaluation.selection import SelectionReport, evaluate_selection, fit_power_model_with_error
from gpudvfs.policy import POLICIES
from gpudvfs.policy.choose import choose as choose_configs
from gpudvfs.power import PowerModel

#: What reads a grid here, for the error of a file of another format.
NEEDS = "frequency selection from nvprof profiles or DCGM fields"


@click.group("select")
def select_() -> None:
    """Choose core/memory frequencies from the time and power models."""


@select_.command("eval")
@click.argument("data", type=click.Path(dir_okay=False))
@click.option("--reference", callback=optional_clock_pair, help=REFERENCE_HELP)
@click.option("--slowdown", default=0.1, show_default=True, type=options.Finite(min=0),
              help="Deadline policy: at most this slower than at the highest clocks.")
@click.option("--device", required=True, help=DEVICE_HELP)
@options.columns
@options.skip_invalid
@options.mem_clock_unit
@options.drop_spikes
@options.clip_utilization
@click.option("--json", "as_json", is_flag=True)
def eval_(data: str, reference: tuple[float, float] | None, slowdown: float, device: str,
          columns: dict[str, str] | None, clip_utilization: bool, as_json: bool) -> None:
    """Energy regret of the chosen configurations on measured time and power.

    On an NV-DVFS nvprof CSV with power, or a DCGM grid; against the highest-clocks, reference
    and best-single-pair baselines.
    """
    with user_errors():
        time_device, spec = resolve_gpu(device)
        grid = measured_grid(data, NEEDS, columns, ("nvdvfs", "dcgm", "grid"), spec)
        reference = grid_reference(grid, spec, reference)
        if is_dcgm_grid(grid):
            return _eval_dcgm(data, evaluate_policies(grid, reference, slowdown=slowdown), as_json)
        r = evaluate_selection(grid, reference, slowdown=slowdown, time_device=time_device, spec=spec,
                               clip=clip_utilization)
    if as_json:
        print_json(r.to_dict())
        return
    _print_selection(data, r, slowdown)


def _print_selection(data: str, r: SelectionReport, slowdown: float) -> None:
    """`select eval`'s tables of an NV-DVFS grid."""
    b, d, safe, u = r.baselines, r.deadline, r.safe.cross_validated, r.uncertainty

    def cells(v: MeanMax) -> list[str]:
        return [f"{100 * v.mean:.2f}", f"{100 * v.max:.2f}"]

    rows = [["minimum energy (predicted)", f"{100 * r.regret_mean:.2f}", f"{100 * r.regret_max:.2f}"],
            ["minimum energy, safe (kept where its saving exceeds the spread; nested CV)" if r.safe.note is None
             else "minimum energy, safe: the reference (too few applications to choose the rule)", *cells(safe)],
            *([[f"minimum energy, safe under the rule chosen on the public grids ({rule_name(*SHARED_RULE)})",
                *cells(r.safe.shared_rule)]] if r.safe.shared_rule is not None else []),
            [f"min energy within {100 * slowdown:g}% slowdown ({d.deadline_met}/{d.apps} met)",
             f"{100 * d.mean:.2f}", f"{100 * d.max:.2f}"],
            ["baseline: highest clocks", *cells(b.highest_clocks)],
            ["baseline: reference pair", *cells(b.reference)],
            *_single_pair_rows([b.single_pair], cells),
            ["attribution: minimum energy with measured time", *cells(r.attribution.measured_time)],
            ["attribution: minimum energy with measured power", *cells(r.attribution.measured_power)],
            *[[f"with the energy error ({100 * u.energy_error_mean:.1f}% mean): {label}", *cells(v)]
              for label, v in (("worst case within it", u.worst_case), ("its expectation", u.expected),
                               ("nearest the highest clocks within it", u.near_ties_to_highest))]]
    ties = r.near_ties
    over = [v.mean for v in ties.over_tolerance.values()]
    tols = [100 * float(k) for k in ties.over_tolerance]
    rows.append([f"nearest the highest clocks within a tie tolerance chosen without the application "
                 f"({100 * min(over):.2f}-{100 * max(over):.2f}% over tolerances {min(tols):g}-{max(tols):g}%)",
                 *cells(ties.cross_validated)])
    console.print(table(f"energy regret on {data} (time MAPE {r.time_mape:.2f}%, power MAPE "
                        f"{r.power_mape:.2f}%, leave-one-application-out)", ["policy", "mean %", "max %"], rows))
    ci = r.intervals
    if r.safe.note is not None:
        console.print(f"safe choice: {r.safe.note}", highlight=False)
    console.print("95% intervals over the applications (bootstrap), %: minimum energy "
                  f"{_intervals(ci.minimum_energy)}; within the slowdown {_intervals(ci.deadline)}",
                  highlight=False)
    console.print(table("per application (pairs: core, memory MHz)", ["application", "chosen", "best", "regret %"],
                        [[k, list(v.chosen), list(v.best), f"{100 * v.regret:.2f}"] for k, v in r.per_app.items()]))


#: How a paired interval's baseline reads.
BASELINES = {"highest_clocks": "the highest clocks", "single_pair": "one pair for all",
             "inverse_f_time": "1/f time"}


def _intervals(ci: dict) -> str:
    """The mean's interval, then its paired difference from each baseline (in %)."""
    return paired_line(ci, BASELINES, 100)


def _single_pair_rows(single: list[SinglePair], cells: Callable[[MeanMax], list[str]]) -> list[list[str]]:
    """The one-pair-for-all baseline's rows, a cell per report: chosen on the other applications, then in hindsight."""
    return [["baseline: one pair for all, chosen without the application",
             *[c for s in single for c in cells(s.cross_validated)]],
            ["baseline: one pair for all, in hindsight", *[c for s in single for c in cells(s.hindsight)]]]


def _eval_dcgm(data: str, r: dict[str, DcgmSelectionReport], as_json: bool) -> None:
    """`select eval`'s table of a DCGM grid: each policy's regrets side by side."""
    if as_json:
        print_json({p: v.to_dict() for p, v in r.items()})
        return

    def mean(v: MeanMax) -> list[str]:
        return [f"{100 * v.mean:.2f}"]

    reports = list(r.values())
    rows = [["DCGM time x calibrated power (cross-validated)", *[c for v in reports for c in mean(v.model)]],
            ["safe: kept where its gain exceeds the spread (nested CV)",
             *[f"{100 * v.safe.cross_validated.mean:.2f}" if v.safe is not None else "-" for v in reports]],
            [f"safe: the rule chosen on the public grids ({rule_name(*SHARED_RULE)})",
             *[f"{100 * v.safe.shared_rule.mean:.2f}" if v.safe is not None and v.safe.shared_rule is not None
               else "-" for v in reports]],
            ["baseline: highest clocks", *[c for v in reports for c in mean(v.baselines.highest_clocks)]],
            ["baseline: reference clocks", *[c for v in reports for c in mean(v.baselines.reference)]],
            ["baseline: 1/f time x calibrated power", *[c for v in reports for c in mean(v.baselines.inverse_f_time)]],
            *_single_pair_rows([v.baselines.single_pair for v in reports], mean)]
    deadline = r["deadline"]
    met, fixed = deadline.deadline_met, deadline.baselines.single_pair.cross_validated.met
    console.print(table(f"mean regret % on {data}, leave-one-workload-out over {r['energy'].workloads} workloads "
                        f"(deadline met by the models' choice for {met}, by one pair for all for {fixed})",
                        ["predictor", *r], rows))
    console.print("95% intervals over the workloads (bootstrap), %: " + "; ".join(
        f"{policy} {_intervals(v.intervals)}" for policy, v in r.items()), highlight=False)
    note = next((v.safe.note for v in reports if v.safe is not None and v.safe.note), None)
    if note:
        console.print(f"safe choice: {note}", highlight=False)


@select_.command("safe-cv")
@click.argument("data", type=click.Path(file_okay=False, exists=True))
@click.option("--json", "as_json", is_flag=True)
def safe_cv(data: str, as_json: bool) -> None:
    """Score the safe choice on each GPU's grids under DATA, its rule chosen on the other GPUs' grids.

    DATA: the public data folder (a second or so).
    """
    with user_errors():
        r = leave_one_gpu_out(shared_grids(Path(data)))
    if as_json:
        print_json(r.to_dict())
        return

    def cells(v: MeanMax) -> list[str]:
        return [f"{100 * v.mean:.2f} / {100 * v.max:.1f}"]

    console.print(table(
        f"energy regret %, mean / max, each GPU left out: the rule chosen on the other GPUs' grids (slack {r.slack:g})",
        ["grid", "GPU", "workloads", "rule", "safe", "one pair for all", "plain", "reference",
         "least max of one pair", "target met"],
        [[name, g.gpu, g.workloads, g.rule, *cells(g.safe), *cells(g.single_pair), *cells(g.plain),
          *cells(g.reference), f"{100 * g.least_fixed_max:.1f}", "yes" if g.meets_target else "no"]
         for name, g in r.left_out.items()]))
    anchor, cap, z = r.rule_on_all.split()
    name = next(iter(r.over_rules))
    # Rules that exist (the anchor always takes no cap), each once.
    moves = [m for m in dict.fromkeys([*[f"{anchor} {cap} z={v:g}" for v in Z_GRID],
                                      *[f"{anchor} cap={v:g} {z}" for v in CAPS]]) if m in r.over_rules[name]]
    short = [Path(name).stem for name in r.left_out]
    console.print(table(f"chosen on every grid: {r.rule_on_all}; each grid's regret as one constant moves",
                        ["rule", *short], [[m, *[c for g in r.over_rules.values() for c in cells(g[m])]]
                                                for m in moves]))
    console.print(table("left out, as the slack moves", ["slack", *short],
                        [[s, *[c for v in by.values() for c in cells(v)]] for s, by in r.over_slack.items()]))


@select_.command("fit-power")
@click.argument("data", type=click.Path(dir_okay=False))
@click.option("--reference", callback=optional_clock_pair, help=REFERENCE_HELP)
@click.option("--device", required=True, help=DEVICE_HELP)
@click.option("-o", "--out", required=True, type=click.Path(dir_okay=False), callback=output_file,
              help="Power model JSON to write.")
@options.force
@options.columns
@options.skip_invalid
@options.mem_clock_unit
@options.drop_spikes
@options.clip_utilization
def fit_power(data: str, reference: tuple[float, float] | None, device: str, out: str, force: bool,
              columns: dict[str, str] | None, clip_utilization: bool) -> None:
    """Fit the power model `select choose` uses on a measured grid (NV-DVFS nvprof CSV with power).

    Utilizations come from each workload's reference-row counters.
    """
    with user_errors():
        refuse_overwrite([out], [data], force)
        time_device, spec = resolve_gpu(device)
        grid = measured_grid(data, NEEDS, columns, spec=spec)
        model = fit_power_model_with_error(grid, grid_reference(grid, spec, reference), time_device, spec,
                                           clip=clip_utilization)
        model.save(out)
    error = model.energy_error_
    assert error is not None  # fit_power_model_with_error sets it
    console.print(f"power model (per-domain) on {len(model.configs_)} configurations: training MAPE "
                  f"{model.train_mape_:.2f}%; error of a predicted energy (workloads held out) "
                  f"{100 * error.min():.1f}-{100 * error.max():.1f}% over the "
                  f"configurations; wrote {out}")


@select_.command()
@click.argument("data", type=click.Path(dir_okay=False))
@click.option("--power-model", "model_path", required=True, type=click.Path(dir_okay=False),
              help="From `gpudvfs select fit-power`.")
@click.option("--reference", callback=optional_clock_pair, help=REFERENCE_HELP)
@click.option("--device", required=True, help=DEVICE_HELP)
@click.option("--policy", type=click.Choice(POLICIES), default="energy", show_default=True)
@click.option("--slowdown", default=0.1, show_default=True, type=options.Finite(min=0),
              help="Deadline policy: at most this slower than at the highest clocks.")
@click.option("--power-cap", type=options.Finite(min=0, min_open=True), help="Power-cap policy: watts.")
@options.eta
@options.columns
@options.skip_invalid
@options.mem_clock_unit
@options.drop_spikes
@options.clip_utilization
@click.option("--json", "as_json", is_flag=True)
def choose(data: str, model_path: str, reference: tuple[float, float] | None, device: str, policy: str,
           slowdown: float, power_cap: float | None, eta: float, columns: dict[str, str] | None,
           clip_utilization: bool, as_json: bool) -> None:
    """Choose frequencies for workloads profiled once at the reference pair."""
    options.policy_options(policy, power_cap)
    with user_errors():
        time_device, spec = resolve_gpu(device)
        grid = measured_grid(data, NEEDS, columns, spec=spec)
        r = choose_configs(grid, grid_reference(grid, spec, reference), PowerModel.load(model_path),
                           time_device=time_device, spec=spec, policy=policy, slowdown=slowdown,
                           power_cap_w=power_cap, eta=eta, clip=clip_utilization)
    if as_json:
        print_json(r.to_dict())
        return
    rows = [[n, f"{w.core_mhz:g}/{w.mem_mhz:g}" + ("" if w.feasible else " (infeasible)"),
             f"{w.time_ms:.4g}", f"{w.watts:.1f}", f"{1e3 * w.joules:.4g}",
             "-" if w.energy_error is None else f"{100 * w.energy_error:.0f}%", len(w.pareto)]
            for n, w in r.workloads.items()]
    header = ["workload", "core/memory MHz", "time (ms)", "power (W)", "energy (mJ)", "energy error", "Pareto points"]
    console.print(table(f"{policy}: predicted at the chosen configuration", header, rows))
