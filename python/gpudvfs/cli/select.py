"""`gpudvfs select ...`: choosing frequencies from predicted time and power."""

from __future__ import annotations

import click

from gpudvfs.cli import options
from gpudvfs.cli.output import console, output_file, paired_line, print_json, refuse_overwrite, table, user_errors
from gpudvfs.cli.time import DEVICE_HELP, REFERENCE_HELP, _gpu, _optional_pair, grid_reference
from gpudvfs.data import read_measured_grid
from gpudvfs.data.dcgm_fields import is_dcgm_grid
from gpudvfs.evaluation.dcgm_selection import evaluate_selection as evaluate_dcgm
from gpudvfs.evaluation.selection import evaluate_selection, with_energy_error
from gpudvfs.policy import POLICIES
from gpudvfs.policy.choose import choose as choose_configs
from gpudvfs.policy.choose import fit_power_model
from gpudvfs.power import PowerModel


def _grid(path: str, columns=None, formats=("nvdvfs", "grid")):
    return read_measured_grid(path, "frequency selection from nvprof profiles or DCGM fields", formats,
                              options.on_invalid(), columns, options.spike_threshold())


@click.group("select")
def select_() -> None:
    """Choose core/memory frequencies from the time and power models."""


@select_.command("eval")
@click.argument("data", type=click.Path(dir_okay=False))
@click.option("--reference", callback=_optional_pair, help=REFERENCE_HELP)
@click.option("--slowdown", default=0.1, show_default=True, type=options.Finite(min=0),
              help="Deadline policy: at most this slower than at the highest clocks.")
@click.option("--device", required=True, help=DEVICE_HELP)
@options.columns
@options.skip_invalid
@options.drop_spikes
@options.clip_utilization
@click.option("--json", "as_json", is_flag=True)
def eval_(data, reference, slowdown, device, columns, clip_utilization, as_json) -> None:
    """Energy regret of the chosen configurations on measured time and power (NV-DVFS
    nvprof CSV with power, or a DCGM grid), against the highest-clocks, reference and
    best-single-pair baselines."""
    with user_errors():
        grid = _grid(data, columns, ("nvdvfs", "dcgm", "grid"))
        time_device, spec = _gpu(device, grid)
        reference = grid_reference(grid, spec, reference)
        if is_dcgm_grid(grid):
            return _eval_dcgm(data, {p: evaluate_dcgm(grid, reference, policy=p, slowdown=slowdown)
                                     for p in ("energy", "edp", "deadline")}, as_json)
        r = evaluate_selection(grid, reference, slowdown=slowdown, time_device=time_device, spec=spec,
                               clip=clip_utilization)
    if as_json:
        print_json(r)
        return
    b = r["baselines"]
    d = r["deadline"]
    safe = r["safe"]["cross_validated"]
    rows = [["minimum energy (predicted)", f"{100 * r['regret_mean']:.2f}", f"{100 * r['regret_max']:.2f}"],
            ["minimum energy, safe (kept where its saving exceeds the spread; nested CV)",
             f"{100 * safe['mean']:.2f}", f"{100 * safe['max']:.2f}"],
            [f"min energy within {100 * slowdown:g}% slowdown ({d['deadline_met']}/{d['apps']} met)",
             f"{100 * d['mean']:.2f}", f"{100 * d['max']:.2f}"],
            *[[f"baseline: {label}", f"{100 * b[key]['mean']:.2f}", f"{100 * b[key]['max']:.2f}"]
              for label, key in (("highest clocks", "highest_clocks"), ("reference pair", "reference"))],
            *_single_pair_rows(b["single_pair"], lambda v: [f"{100 * v['mean']:.2f}", f"{100 * v['max']:.2f}"])]
    rows += [[f"attribution: minimum energy with measured {k.removeprefix('measured_')}",
              f"{100 * v['mean']:.2f}", f"{100 * v['max']:.2f}"] for k, v in r["attribution"].items()]
    u = r["uncertainty"]
    rows += [[f"with the energy error ({100 * u['energy_error_mean']:.1f}% mean): {label}",
              f"{100 * u[k]['mean']:.2f}", f"{100 * u[k]['max']:.2f}"]
             for label, k in (("worst case within it", "worst_case"), ("its expectation", "expected"),
                              ("nearest the highest clocks within it", "near_ties_to_highest"))]
    ties = r["near_ties"]
    over = [v["mean"] for v in ties["over_tolerance"].values()]
    tols = [100 * float(k) for k in ties["over_tolerance"]]
    rows.append([f"nearest the highest clocks within a tie tolerance chosen without the application "
                 f"({100 * min(over):.2f}-{100 * max(over):.2f}% over tolerances {min(tols):g}-{max(tols):g}%)",
                 f"{100 * ties['cross_validated']['mean']:.2f}", f"{100 * ties['cross_validated']['max']:.2f}"])
    console.print(table(f"energy regret on {data} (time MAPE {r['time_mape']:.2f}%, power MAPE "
                        f"{r['power_mape']:.2f}%, leave-one-application-out)", ["policy", "mean %", "max %"], rows))
    ci = r["intervals"]
    console.print("95% intervals over the applications (bootstrap), %: minimum energy "
                  f"{_intervals(ci['minimum_energy'])}; within the slowdown {_intervals(ci['deadline'])}",
                  highlight=False)
    console.print(table("per application (pairs: core, memory MHz)", ["application", "chosen", "best", "regret %"],
                        [[k, v["chosen"], v["best"], f"{100 * v['regret']:.2f}"] for k, v in r["per_app"].items()]))


#: How a paired interval's baseline reads.
BASELINES = {"highest_clocks": "the highest clocks", "single_pair": "one pair for all",
             "inverse_f_time": "1/f time"}


def _intervals(ci: dict) -> str:
    """The mean's interval, then its paired difference from each baseline (in %)."""
    return paired_line(ci, BASELINES, 100)


def _single_pair_rows(single, cells) -> list[list[str]]:
    """The one-pair-for-all baseline's rows: chosen on the other applications, then in hindsight."""
    return [["baseline: one pair for all, chosen without the application", *cells(single["cross_validated"])],
            ["baseline: one pair for all, in hindsight", *cells(single["hindsight"])]]


def _eval_dcgm(data, r, as_json) -> None:
    if as_json:
        print_json(r)
        return
    labels = {"model": "DCGM time x calibrated power (cross-validated)", "highest_clocks": "baseline: highest clocks",
              "reference": "baseline: reference clocks", "inverse_f_time": "baseline: 1/f time x calibrated power"}
    rows = [[labels[k], *[f"{100 * r[p][k]['mean'] if k == 'model' else 100 * r[p]['baselines'][k]['mean']:.2f}"
                          for p in r]]
            for k in labels]
    rows.insert(1, ["safe: kept where its gain exceeds the spread (nested CV)",
                    *[f"{100 * r[p]['safe']['cross_validated']['mean']:.2f}" if "safe" in r[p] else "-" for p in r]])
    rows += _single_pair_rows({k: [r[p]["baselines"]["single_pair"][k] for p in r]
                               for k in ("cross_validated", "hindsight")},
                              lambda per_policy: [f"{100 * v['mean']:.2f}" for v in per_policy])
    met, fixed = r["deadline"]["deadline_met"], r["deadline"]["baselines"]["single_pair"]["cross_validated"]["met"]
    console.print(table(f"mean regret % on {data}, leave-one-workload-out over {r['energy']['workloads']} workloads "
                        f"(deadline met by the models' choice for {met}, by one pair for all for {fixed})",
                        ["predictor", *r], rows))
    console.print("95% intervals over the workloads (bootstrap), %: " + "; ".join(
        f"{policy} {_intervals(v['intervals'])}" for policy, v in r.items()), highlight=False)


@select_.command("fit-power")
@click.argument("data", type=click.Path(dir_okay=False))
@click.option("--reference", callback=_optional_pair, help=REFERENCE_HELP)
@click.option("--device", required=True, help=DEVICE_HELP)
@click.option("-o", "--out", required=True, type=click.Path(dir_okay=False), callback=output_file,
              help="Power model JSON to write.")
@options.force
@options.columns
@options.skip_invalid
@options.drop_spikes
@options.clip_utilization
def fit_power(data, reference, device, out, force, columns, clip_utilization) -> None:
    """Fit the power model `select choose` uses on a measured grid (NV-DVFS nvprof CSV with
    power): utilizations from each workload's reference-row counters."""
    with user_errors():
        refuse_overwrite([out], [data], force)
        grid = _grid(data, columns)
        time_device, spec = _gpu(device, grid)
        ref = grid_reference(grid, spec, reference)
        model = with_energy_error(fit_power_model(grid, ref, time_device, spec, clip=clip_utilization), grid, ref,
                                  time_device, spec, clip=clip_utilization)
        model.save(out)
    console.print(f"power model (per-domain) on {len(model.configs_)} configurations: training MAPE "
                  f"{model.train_mape_:.2f}%; error of a predicted energy (workloads held out) "
                  f"{100 * model.energy_error_.min():.1f}-{100 * model.energy_error_.max():.1f}% over the "
                  f"configurations; wrote {out}")


@select_.command()
@click.argument("data", type=click.Path(dir_okay=False))
@click.option("--power-model", "model_path", required=True, type=click.Path(dir_okay=False),
              help="From `gpudvfs select fit-power`.")
@click.option("--reference", callback=_optional_pair, help=REFERENCE_HELP)
@click.option("--device", required=True, help=DEVICE_HELP)
@click.option("--policy", type=click.Choice(POLICIES), default="energy", show_default=True)
@click.option("--slowdown", default=0.1, show_default=True, type=options.Finite(min=0),
              help="Deadline policy: at most this slower than at the highest clocks.")
@click.option("--power-cap", type=options.Finite(min=0, min_open=True), help="Power-cap policy: watts.")
@options.eta
@options.columns
@options.skip_invalid
@options.drop_spikes
@options.clip_utilization
@click.option("--json", "as_json", is_flag=True)
def choose(data, model_path, reference, device, policy, slowdown, power_cap, eta, columns, clip_utilization,
           as_json) -> None:
    """Choose frequencies for workloads profiled once at the reference pair."""
    options.policy_options(policy, power_cap)
    with user_errors():
        grid = _grid(data, columns)
        time_device, spec = _gpu(device, grid)
        reference = grid_reference(grid, spec, reference)
        r = choose_configs(grid, reference, PowerModel.load(model_path), time_device=time_device,
                           spec=spec, policy=policy, slowdown=slowdown, power_cap_w=power_cap, eta=eta,
                           clip=clip_utilization)
    if as_json:
        print_json(r)
        return
    rows = [[n, f"{w['core_mhz']:g}/{w['mem_mhz']:g}" + ("" if w["feasible"] else " (infeasible)"),
             f"{w['time_ms']:.4g}", f"{w['watts']:.1f}", f"{1e3 * w['joules']:.4g}",
             "-" if w["energy_error"] is None else f"{100 * w['energy_error']:.0f}%", len(w["pareto"])]
            for n, w in r["workloads"].items()]
    columns = ["workload", "core/memory MHz", "time (ms)", "power (W)", "energy (mJ)", "energy error",
               "Pareto points"]
    console.print(table(f"{policy}: predicted at the chosen configuration", columns, rows))
