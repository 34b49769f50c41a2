"""`gpudvfs time ...`: the analytical kernel-time model (Wang & Chu)."""

from __future__ import annotations

from pathlib import Path

import click
import numpy as np

from gpudvfs.catalog.clocks import SupportedClocks
from gpudvfs.cli import options
from gpudvfs.cli.options import (
    DEVICE_HELP,
    REFERENCE_HELP,
    check_clocks,
    clock_pair,
    grid_reference,
    measured_grid,
    optional_clock_pair,
    resolve_device,
)
from gpudvfs.cli.output import (
    console,
    interval,
    output_file,
    paired_line,
    print_json,
    refuse_overwrite,
    table,
    user_errors,
)
from gpudvfs.cli.progress import progress_bars
from gpudvfs.data.datasets import MeasurementGrid
from gpudvfs.data.dcgm_fields import is_dcgm_grid
from gpudvfs.errors import InputError
from gpudvfs.evaluation.dcgm_time import cross_validate_dcgm_time as dcgm_cross_validate
from gpudvfs.evaluation.regret import MeanMax
from gpudvfs.evaluation.time_cv import HOLD_OUTS, cross_validate_time
from gpudvfs.evaluation.time_cv_report import ConstantVariant, TimeCVRegret, TimeCVReport
from gpudvfs.evaluation.time_errors import evaluate
from gpudvfs.time import MODES, TimeModel, profiles_from_grid
from gpudvfs.time.dcgm import PREDICTORS, DcgmTimeModel
from gpudvfs.time.fit_device import fit_device

#: What reads a grid here, for the error of a file of another format.
NEEDS = "the time model"


def _beyond_grid(grid: MeasurementGrid, measured_mem: np.ndarray, cores: list[float], mems: list[float]) -> list[str]:
    """Requested clocks outside the measured grid: the model extrapolates there, untested."""
    out = []
    for name, asked, measured in (("core", cores, grid.core_mhz), ("memory", mems, measured_mem)):
        lo, hi = float(measured.min()), float(measured.max())
        beyond = [c for c in asked if not lo <= c <= hi]
        if beyond:
            out.append(f"{name} clocks {', '.join(f'{c:g}' for c in beyond)} MHz lie outside the measured "
                       f"{lo:g}-{hi:g} MHz of {grid.path}: extrapolated, no measurement checks them")
    return out


@click.group("time")
def time_() -> None:
    """The analytical kernel-time model (Wang & Chu)."""


@time_.command("eval")
@click.argument("data", type=click.Path(dir_okay=False))
@click.option("--device", required=True, help=DEVICE_HELP)
@click.option("--reference", callback=optional_clock_pair, help=REFERENCE_HELP)
@click.option("--mode", type=click.Choice(MODES), default="default", show_default=True)
@click.option("--baselines", is_flag=True, help="Also the time-unchanged and two-term scaling baselines.")
@options.columns
@options.skip_invalid
@options.mem_clock_unit
@options.drop_spikes
@click.option("--json", "as_json", is_flag=True)
def eval_(data: str, device: str, reference: tuple[float, float] | None, mode: str, baselines: bool,
          columns: dict[str, str] | None, as_json: bool) -> None:
    """Errors predicting every clock pair of DATA from the reference pair's counters.

    Absolute (counters alone) and calibrated (one scale per kernel on its measured reference
    time). On a DCGM grid: the DCGM time model, leave-one-workload-out, against 1/f scaling.
    """
    with user_errors():
        time_device, spec = resolve_device(device)
        grid = measured_grid(data, NEEDS, columns, ("nvdvfs", "dcgm", "grid"), spec)
        reference = grid_reference(grid, spec, reference)
        model = TimeModel(time_device, mode)
        if is_dcgm_grid(grid):
            return _eval_dcgm(data, dcgm_cross_validate(grid, reference), as_json)
        r = evaluate(grid, model, reference, baselines=baselines)
        cal = evaluate(grid, model, reference, calibrate=True)
    r["calibrated"] = {k: cal[k] for k in ("mape", "mape_ge500", "per_kernel")}
    if as_json:
        print_json(r)
        return
    rows = [["model (absolute)", f"{r['mape']:.2f}", f"{r['mape_ge500']:.2f}"],
            ["model (calibrated)", f"{cal['mape']:.2f}", f"{cal['mape_ge500']:.2f}"]]
    for name, b in r.get("baselines", {}).items():
        rows.append([f"baseline: {name}", f"{b['mape']:.2f}", f"{b['mape_ge500']:.2f}"])
    console.print(table(f"time model ({mode}) on {data}, reference {reference[0]:g}/{reference[1]:g} MHz, "
                        f"{r['n']} rows", ["predictor", "MAPE %", "MAPE % (clocks >= 500)"], rows))
    console.print(table("per kernel", ["kernel", "absolute %", "calibrated %"],
                        [[k, f"{v:.2f}", f"{cal['per_kernel'][k]:.2f}"] for k, v in r["per_kernel"].items()]))


@time_.command("fit-dcgm")
@click.argument("grid_path", metavar="GRID", type=click.Path(dir_okay=False))
@click.option("--reference", required=True, callback=clock_pair,
              help="Clock pair (core,memory MHz) whose DCGM activities are the model's input.")
@click.option("--predictor", type=click.Choice(PREDICTORS), default="auto", show_default=True)
@click.option("-o", "--out", required=True, type=click.Path(dir_okay=False), callback=output_file)
@options.force
@options.columns
@options.skip_invalid
@options.drop_spikes
@click.option("--json", "as_json", is_flag=True)
def fit_dcgm(grid_path: str, reference: tuple[float, float], predictor: str, out: str, force: bool,
             columns: dict[str, str] | None, as_json: bool) -> None:
    """Fit the DCGM time model to a DCGM grid and save it: the time model of `gpudvfs fleet whatif`.

    The model gives the core- and memory-bound shares of time from DCGM activities.
    """
    with user_errors():
        refuse_overwrite([out], [grid_path], force)
        grid = measured_grid(grid_path, NEEDS, columns, ("dcgm", "grid"))
        if not is_dcgm_grid(grid):
            raise InputError(f"{grid_path}: no DCGM activity fields: the DCGM time model needs them")
        model = DcgmTimeModel(predictor).fit(grid, reference)
        model.save(out)
    r = {"out": out, "predictor": model.chosen_, "fields": model.fields_, "memory_clock_varies": model.varies_mem_,
         "mean_share": model.mean_share_.tolist()}
    if as_json:
        print_json(r)
    else:
        console.print(f"wrote {out}: predictor {model.chosen_}, fields {', '.join(model.fields_)}; mean core share "
                      f"{model.mean_share_[0]:.3f}, memory share {model.mean_share_[1]:.3f}", highlight=False)


def _eval_dcgm(data: str, r: dict, as_json: bool) -> None:
    if as_json:
        print_json(r)
        return
    rows = [["DCGM model (cross-validated)", f"{r['cv_mape']:.2f}"],
            *[[f"predictor forced: {k}", f"{v:.2f}"] for k, v in r["predictors"].items()],
            *[[f"baseline: {k.replace('_', ' ')}", f"{v:.2f}"] for k, v in r["baselines"].items()],
            ["each workload's own fit (a floor)", f"{r['own_fit_mape']:.2f}"]]
    console.print(table(f"DCGM time model on {data}, reference {r['reference_mhz'][0]:g} MHz, leave-one-workload-out "
                        f"over {r['workloads']} workloads ({r['distinct_time_curves']} distinct measured curves)",
                        ["predictor", "MAPE %"], rows))
    console.print(table("per workload", ["workload", "CV %", "1/f %", "measured core share", "predictor"],
                        [[k, f"{v['cv']:.2f}", f"{v['inverse_f']:.2f}", f"{v['measured_core_share']:.3f}",
                          v["chosen"]] for k, v in r["per_workload"].items()]))


@time_.command()
@click.argument("data", type=click.Path(dir_okay=False))
@click.option("--kernel", "kernels", multiple=True, help="Only these workloads (default: all).")
@click.option("--device", required=True, help=DEVICE_HELP)
@click.option("--reference", callback=optional_clock_pair, help=REFERENCE_HELP)
@click.option("--core-mhz", callback=options.clock_list, help="Core clocks (comma-separated; default: DATA's).")
@click.option("--mem-mhz", callback=options.clock_list, help="Memory clocks (comma-separated; default: DATA's).")
@click.option("--mode", type=click.Choice(MODES), default="default", show_default=True)
@click.option("--calibrate", is_flag=True, help="Scale each kernel to its measured reference time.")
@options.columns
@options.skip_invalid
@options.mem_clock_unit
@options.drop_spikes
@click.option("--json", "as_json", is_flag=True)
def predict(data: str, kernels: tuple[str, ...], device: str, reference: tuple[float, float] | None,
            core_mhz: list[float] | None, mem_mhz: list[float] | None, mode: str, calibrate: bool,
            columns: dict[str, str] | None, as_json: bool) -> None:
    """Predicted time (ms) of kernels profiled at the reference pair over a grid of clocks."""
    with user_errors():
        time_device, spec = resolve_device(device)
        grid = measured_grid(data, NEEDS, columns, spec=spec)
        reference = grid_reference(grid, spec, reference)
        model = TimeModel(time_device, mode)
        profiles = profiles_from_grid(grid, reference, model.device)
        measured_mem = grid.mem_mhz
        assert measured_mem is not None  # profiles_from_grid refuses a grid without memory clocks
        if kernels:
            unknown = set(kernels) - {p.name for p in profiles}
            if unknown:
                raise InputError(f"{data}: no workload named {sorted(unknown)}")
            profiles = [p for p in profiles if p.name in kernels]
        cores = core_mhz or np.unique(grid.core_mhz).tolist()
        mems = mem_mhz or np.unique(measured_mem).tolist()
        if spec is not None:
            unit = grid.mem_clock_to_nvml
            check_clocks(spec, "--core-mhz/--mem-mhz", cores, np.asarray(mems) * unit)
            if core_mhz or mem_mhz:  # asked for: the GPU must take them
                pairs = [(c, m * unit) for c in cores for m in mems]
                SupportedClocks.of_spec(spec).check("--core-mhz/--mem-mhz", *zip(*pairs))
        outside = _beyond_grid(grid, measured_mem, cores, mems)
        fc, fm = np.meshgrid(cores, mems, indexing="ij")
        t, cases = model.predict(profiles, fc, fm, calibrate=calibrate, return_cases=True)
    for line in outside:
        click.echo(f"gpudvfs: warning: {line}", err=True)
    if as_json:
        print_json({"core_mhz": cores, "mem_mhz": mems, "extrapolated": outside,
                    "time_ms": {p.name: t[i].tolist() for i, p in enumerate(profiles)},
                    "case": {p.name: cases[i].tolist() for i, p in enumerate(profiles)}})
        return
    for i, p in enumerate(profiles):
        console.print(table(f"{p.name}: time (ms) and bound (case); rows core MHz, columns memory MHz",
                            ["core \\ mem", *[f"{m:g}" for m in mems]],
                            [[f"{c:g}", *[f"{t[i, a, b]:.4g} ({cases[i, a, b]})" for b in range(len(mems))]]
                             for a, c in enumerate(cores)]))


@time_.command("cv")
@click.argument("data", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--device", required=True, help=DEVICE_HELP)
@click.option("--reference", callback=optional_clock_pair, help=REFERENCE_HELP)
@options.columns
@options.skip_invalid
@options.mem_clock_unit
@options.drop_spikes
@click.option("--sensitivity", is_flag=True,
              help="Also re-run the whole protocol with each device constant (latencies, L2 service time, "
                   "FP64 issue) scaled by 0.5-1.5: how the cross-validated figures move with it (about a minute).")
@click.option("--hold-out", type=click.Choice(HOLD_OUTS), default="application", show_default=True,
              help="What is held out together: an application's kernels in every DATA (names compared without "
                   "case and punctuation, one beginning another), or each kernel alone.")
@click.option("--json", "as_json", is_flag=True)
def cv(data: tuple[str, ...], device: str, reference: tuple[float, float] | None, columns: dict[str, str] | None,
       sensitivity: bool, hold_out: str, as_json: bool) -> None:
    """Nested leave-one-application-out cross-validation over the kernels of every DATA grid.

    Each kernel is scored with the settings (soft-max exponent, dependent latency,
    calibration) chosen on the kernels of the other applications (an application's kernels in
    every file held out together); for grids with power, the energy regret is scored the same
    way, beside its baselines. 95% intervals (cluster bootstrap over the held-out groups) say
    how far each figure could move with other kernels of these kinds.
    """
    with user_errors():
        time_device, spec = resolve_device(device)
        grids = [measured_grid(path, NEEDS, columns, spec=spec) for path in data]
        reference = grid_reference(grids[0], spec, reference)  # one for all grids: each is checked
        for g in grids[1:]:
            grid_reference(g, spec, reference)
        with progress_bars(disable=as_json) as update:
            r = cross_validate_time(grids, reference, time_device, spec, hold_out=hold_out, sensitivity=sensitivity,
                                    progress=lambda done, total, label: update("device constants", done, total,
                                                                               label))
    if as_json:
        print_json(r.to_dict())
        return
    console.print(table(f"time model, nested leave-one-{hold_out}-out over {r.kernels} kernels "
                        f"({r.candidates} candidate settings)",
                        ["file", "kernels", "CV MAPE %", "95% interval", "in-sample %", "two-term %",
                         "CV - two-term, 95%", "CV beats two-term", "CV - mean alone, 95%"],
                        [[Path(f).name, v.kernels, f"{v.cv_mape:.2f}", interval(v.intervals["mean"]),
                          f"{v.in_sample_mape:.2f}", f"{v.two_term_mape:.2f}",
                          interval(v.intervals["minus_two_term"]), f"{v.cv_beats_two_term}/{v.kernels}",
                          interval(v.intervals["minus_mean"])]
                         for f, v in r.files.items()]))
    console.print("95% intervals: cluster bootstrap over the held-out groups, what another set of as many "
                  "kernels of these kinds could give", highlight=False)
    if r.applications:
        console.print("held out together, as one application: " + "; ".join(
            f"{name} ({len(kernels)} kernels)" for name, kernels in r.applications.items()), highlight=False)
    shifted = [[Path(f).name, f"{v.other_files.mape:.2f}", f"{v.other_files.beats_two_term}/{v.kernels}",
                v.other_files.chosen] for f, v in r.files.items() if v.other_files is not None]
    if shifted:
        console.print(table("each file under the settings chosen on the other files alone",
                            ["file", "MAPE %", "beats two-term", "chosen on the others"], shifted))
    console.print(f"chosen on all kernels (the default): {r.chosen_on_all}; per held-out kernel: "
                  + "; ".join(f"{k} x{n}" for k, n in r.chosen_per_kernel.items()), highlight=False)
    console.print(f"errors over the training kernels aggregated by the {r.aggregate_on_all} on all kernels; per "
                  "held-out kernel: " + "; ".join(f"{a} x{n}" for a, n in r.aggregate_per_kernel.items()),
                  highlight=False)
    selection = r.selection or {}
    console.print(table("each aggregate alone: CV MAPE %" + (" and CV regret % (max)" if selection else ""),
                        ["aggregate", *[Path(f).name for f in r.files],
                         *[f"regret {Path(f).name}" for f in selection]],
                        [[a, *[f"{v[f]:.2f}" for f in r.files],
                          *[_mean_max(s.over_aggregates[a]) for s in selection.values()]]
                         for a, v in r.over_aggregates.items()]))
    console.print(table("each extension under the protocol: CV MAPE % with it / without it",
                        ["extension", *[Path(f).name for f in r.files]],
                        [[name, *[f"{v.with_it[f]:.2f} / {v.without[f]:.2f}" for f in r.files]]
                         for name, v in r.extensions.items()]))
    console.print(table("learned correction (ridge fit of the other kernels' log residuals): CV MAPE %",
                        ["ridge", *[Path(f).name for f in r.files]],
                        [[lam, *[f"{v[f]:.2f}" for f in r.files]] for lam, v in r.learned_correction.items()]))
    for f, s in selection.items():
        _print_regret(f, s)
    console.print(table("per kernel (calibrated MAPE %)", ["kernel", "CV", "two-term", "chosen settings"],
                        [[k, f"{v.cv_mape:.2f}", f"{v.two_term_mape:.2f}", v.chosen]
                         for k, v in r.per_kernel.items()]))
    if r.over_device_constants is not None:
        _print_sensitivity(r, r.over_device_constants)


def _mean_max(v: MeanMax) -> str:
    """A regret's mean and max in %: ``mean (max)``."""
    return f"{100 * v.mean:.2f} ({100 * v.max:.1f})"


def _print_regret(path: str, s: TimeCVRegret) -> None:
    """The protocol's minimum-energy regret on one grid with power, beside its variants and baselines."""

    def row(label: str, v: MeanMax) -> list[str]:
        return [label, f"{100 * v.mean:.2f}", f"{100 * v.max:.2f}"]

    other = ([["settings chosen on the other files", f"{100 * s.other_files_regret_mean:.2f}",
               f"{100 * s.other_files_regret_max:.2f}"]]
             if s.other_files_regret_mean is not None and s.other_files_regret_max is not None else [])
    b = s.baselines
    console.print(table(f"minimum-energy regret on {Path(path).name} (%)", ["", "mean", "max"],
                        [["cross-validated", f"{100 * s.cv_regret_mean:.2f}", f"{100 * s.cv_regret_max:.2f}"],
                         ["in-sample", f"{100 * s.in_sample_regret_mean:.2f}", f"{100 * s.in_sample_regret_max:.2f}"],
                         row("settings chosen by the regret on the other applications", s.chosen_by_regret),
                         row(f"criterion (time error or regret) chosen on the other applications (regret "
                             f"{s.criterion_chosen.regret_chosen} times)", s.criterion_chosen),
                         row("near-ties rule, its tolerance chosen on the other applications", s.near_ties),
                         *other,
                         row("in hindsight, each application's best settings", s.hindsight.per_application),
                         row("in hindsight, the best settings for all", s.hindsight.one_candidate),
                         *[[f"soft-max exponent {p}", f"{100 * v.regret_mean:.2f}", f"{100 * v.regret_max:.2f}"]
                           for p, v in s.over_overlap_p.items()],
                         row("baseline: two-term times", b.two_term),
                         row("baseline: one pair for all, chosen on the other applications", b.single_pair),
                         row("baseline: highest clocks", b.highest_clocks)]))
    console.print("95% intervals over the applications (cluster bootstrap), %: cross-validated mean "
                  + paired_line(s.intervals, {"two_term": "two-term", "single_pair": "one pair for all",
                                              "mean": "the mean as the only aggregate"}, 100, sep="; "),
                  highlight=False)


def _print_sensitivity(r: TimeCVReport, constants: dict[str, dict[str, ConstantVariant]]) -> None:
    """The protocol's figures with each device constant scaled, beside those as preset."""
    files = list(r.files)
    selection = r.selection or {}
    rows = [["as preset", "x1", *[f"{r.files[f].cv_mape:.2f}" for f in files],
             *[f"{100 * s.cv_regret_mean:.2f} ({100 * s.cv_regret_max:.1f})" for s in selection.values()]]]
    for name, by_scale in constants.items():
        for x, v in by_scale.items():
            regret = v.cv_regret or {}
            rows.append([name, f"x{x}", *[f"{v.cv_mape[f]:.2f}" for f in files],
                         *[_mean_max(regret[f]) for f in selection]])
    console.print(table("the protocol with one device constant scaled: CV MAPE % and CV regret % (max)",
                        ["constant", "scale", *[f"MAPE {Path(f).name}" for f in files],
                         *[f"regret {Path(f).name}" for f in selection]], rows))


@time_.command("fit-device")
@click.argument("data", type=click.Path(dir_okay=False))
@click.option("--device", "base", required=True,
              help="The device to start from: a catalog GPU, the gtx980 preset or a device JSON file.")
@click.option("--reference", callback=optional_clock_pair, help=REFERENCE_HELP)
@click.option("-o", "--out", required=True, type=click.Path(dir_okay=False), callback=output_file,
              help="Device JSON to write (for --device of the other time commands).")
@options.force
@options.columns
@options.skip_invalid
@options.mem_clock_unit
@options.drop_spikes
@click.option("--json", "as_json", is_flag=True)
def fit_device_(data: str, base: str, reference: tuple[float, float] | None, out: str, force: bool,
                columns: dict[str, str] | None, as_json: bool) -> None:
    """Fit the DRAM latency and service-time parameters of a device to a measured grid of its kernels.

    The fit minimizes the absolute error over every kernel, and is scored by leave-one-kernel-out.
    """
    with user_errors():
        refuse_overwrite([out], [data, base], force)
        time_device, spec = resolve_device(base)
        grid = measured_grid(data, NEEDS, columns, spec=spec)
        device, r = fit_device(grid, grid_reference(grid, spec, reference), time_device)
        device.save(out)
    r["device"] = out
    if as_json:
        print_json(r)
        return
    console.print(table(f"device fitted to {data} ({r['kernels']} kernels, {r['rows']} rows)", ["", "absolute MAPE %"],
                        [["before", f"{r['mape_before']:.2f}"], ["fitted, in-sample", f"{r['mape_in_sample']:.2f}"],
                         ["fitted, leave-one-kernel-out", f"{r['mape_leave_one_kernel_out']:.2f}"]]))
    console.print("factors: " + ", ".join(f"{k} x{v:.3g}" for k, v in r["factors"].items()) + f"; wrote {out}",
                  highlight=False)
