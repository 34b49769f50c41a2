"""`gpudvfs time ...`: the analytical kernel-time model (Wang & Chu)."""

from __future__ import annotations

from pathlib import Path

import click
import numpy as np

from gpudvfs.cli import options
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
from gpudvfs.data import read_measured_grid
from gpudvfs.data.dcgm_fields import is_dcgm_grid
from gpudvfs.data.grid_csv import SPECS
from gpudvfs.errors import InputError
from gpudvfs.evaluation.dcgm_time import cross_validate_dcgm_time as dcgm_cross_validate
from gpudvfs.evaluation.time_cv import HOLD_OUTS, constant_sensitivity, cross_validate
from gpudvfs.evaluation.time_errors import evaluate
from gpudvfs.time import MODES, TimeDevice, TimeModel, profiles_from_grid
from gpudvfs.time.dcgm import PREDICTORS, DcgmTimeModel
from gpudvfs.time.fit_device import fit_device


def _pair(ctx, param, value):
    a, b = options.clocks(value, "clocks", count=2)
    return (a, b)


def _optional_pair(ctx, param, value):
    return None if value is None else _pair(ctx, param, value)


def _resolve(name: str, grid=None):
    """(time device, catalog entry or None) of a catalog GPU or a device JSON file; with
    ``grid``, an error for its clocks the GPU does not run."""
    device, spec = TimeDevice.resolve(name)
    if grid is not None and spec is not None:
        mem = grid.mem_mhz
        check_clocks(spec, grid.path, grid.core_mhz, None if mem is None else mem * _mem_unit(grid),
                     " Give --device the GPU that measured it.")
    return device, spec


def check_clocks(spec, what: str, core_mhz, mem_mhz=None, hint: str = "") -> None:
    """Refuse clocks the catalog GPU does not run (memory clocks in NVML's unit), ``what`` (a
    file, an option) named: data measured there came from another GPU, and a prediction there
    answers nothing; ``hint`` ends the message."""
    beyond = spec.clock_warnings(core_mhz, mem_mhz)
    if beyond:
        raise InputError(f"{what}: {'; '.join(beyond)}{hint}")


def _mem_unit(grid) -> float:
    """NVML's memory clock per unit of the grid's."""
    return SPECS[grid.format].mem_clock_to_nvml if grid.format in SPECS else 1.0


#: --reference of the commands that profile each workload of a grid at one pair.
REFERENCE_HELP = ("The clock pair CORE,MEM (the grid's units) whose counters profile each workload. Default: the "
                  "grid's own (an NV-DVFS grid's 700,700), else the GPU's default clocks.")


def grid_reference(grid, spec, reference=None) -> tuple[float, float]:
    """--reference, else :func:`_default_reference`; checked to be a pair the GPU runs and the
    grid measured every workload at (else an error that suggests --reference)."""
    why = None
    if reference is None:
        reference, why = _default_reference(grid, spec)
    if spec is not None:
        check_clocks(spec, f"--reference {reference[0]:g},{reference[1]:g}", [reference[0]],
                     [reference[1] * _mem_unit(grid)])
    try:
        grid.reference_rows(reference)
    except InputError as e:
        raise InputError(f"{e}; " + (f"the reference defaults to {why}: " if why else "") + "give --reference "
                         f"CORE,MEM, a pair the grid measured every workload at ({_nearest_pairs(grid, reference)})"
                         ) from None
    return reference


def _default_reference(grid, spec) -> tuple[tuple[float, float], str]:
    """(the pair the grid's format profiles at, else the GPU's default clocks in the grid's
    memory unit; where it comes from, for an error to say)."""
    own = SPECS[grid.format].reference_mhz if grid.format in SPECS else None
    if own is not None:
        return own, f"the grid's own {own[0]:g},{own[1]:g}"
    if spec is None:
        raise InputError(f"{grid.path}: give --reference CORE,MEM: the grid records no reference pair, and the "
                         "device file names no catalog GPU whose default clocks it would be")
    pair = (spec.default_mhz[0], spec.default_mhz[1] / _mem_unit(grid))
    return pair, f"{spec.key}'s default clocks {pair[0]:g},{pair[1]:g}"


def _nearest_pairs(grid, reference, n: int = 4) -> str:
    """The ``n`` pairs nearest ``reference`` at which every workload of ``grid`` has a row."""
    mem = np.zeros(len(grid)) if grid.mem_mhz is None else grid.mem_mhz
    pairs, of = np.unique(np.column_stack([grid.core_mhz, mem]), axis=0, return_inverse=True)
    work = grid.workload
    full = [k for k in range(len(pairs)) if len(set(work[of.ravel() == k].tolist())) == len(set(work.tolist()))]
    if not full:
        return "it has none"
    near = sorted(full, key=lambda k: abs(pairs[k, 0] - reference[0]) + abs(pairs[k, 1] - reference[1]))[:n]
    # A grid at one memory clock matches the core clock alone: any MEM does.
    mem_of = (lambda k: reference[1]) if grid.mem_mhz is None else (lambda k: pairs[k, 1])
    return "nearest: " + "; ".join(f"{pairs[k, 0]:g},{mem_of(k):g}" for k in near)


def _gpu(name: str, grid=None):
    """(time device, catalog entry): for commands that also need the GPU's peak rates."""
    device, spec = _resolve(name, grid)
    if spec is None:
        raise InputError(f"{name}: the device file names no catalog GPU ({device.name!r}); the peak rates "
                         "come from the catalog: save the device under a catalog key")
    return device, spec


#: --device: no default, since a grid does not say which GPU measured it.
DEVICE_HELP = "The GPU the data was measured on: a catalog name (gpudvfs devices list) or a device JSON file."


def _grid(path, columns=None, formats=("nvdvfs", "grid")):
    return read_measured_grid(path, "the time model", formats, options.on_invalid(), columns,
                              options.spike_threshold())


def _beyond_grid(grid, cores: list[float], mems: list[float]) -> list[str]:
    """Requested clocks outside the measured grid: the model extrapolates there, untested."""
    out = []
    for name, asked, measured in (("core", cores, grid.core_mhz), ("memory", mems, grid.mem_mhz)):
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
@click.option("--reference", callback=_optional_pair, help=REFERENCE_HELP)
@click.option("--mode", type=click.Choice(MODES), default="default", show_default=True)
@click.option("--baselines", is_flag=True, help="Also the time-unchanged and two-term scaling baselines.")
@options.columns
@options.skip_invalid
@options.drop_spikes
@click.option("--json", "as_json", is_flag=True)
def eval_(data, device, reference, mode, baselines, columns, as_json) -> None:
    """Errors predicting every clock pair of DATA from the reference pair's counters:
    absolute (counters alone) and calibrated (one scale per kernel on its measured reference time).
    On a DCGM grid: the DCGM time model, leave-one-workload-out, against 1/f scaling."""
    with user_errors():
        grid = _grid(data, columns, ("nvdvfs", "dcgm", "grid"))
        time_device, spec = _resolve(device, grid)
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
@click.option("--reference", required=True, callback=_pair,
              help="Clock pair (core,memory MHz) whose DCGM activities are the model's input.")
@click.option("--predictor", type=click.Choice(PREDICTORS), default="auto", show_default=True)
@click.option("-o", "--out", required=True, type=click.Path(dir_okay=False), callback=output_file)
@options.force
@options.columns
@options.skip_invalid
@options.drop_spikes
@click.option("--json", "as_json", is_flag=True)
def fit_dcgm(grid_path, reference, predictor, out, force, columns, as_json) -> None:
    """Fit the DCGM time model (core- and memory-bound shares of time from DCGM activities) to
    a DCGM grid and save it: the time model of `gpudvfs fleet whatif`."""
    with user_errors():
        refuse_overwrite([out], [grid_path], force)
        grid = _grid(grid_path, columns, ("dcgm", "grid"))
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


def _eval_dcgm(data, r, as_json) -> None:
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
@click.option("--reference", callback=_optional_pair, help=REFERENCE_HELP)
@click.option("--core-mhz", callback=options.clock_list, help="Core clocks (comma-separated; default: DATA's).")
@click.option("--mem-mhz", callback=options.clock_list, help="Memory clocks (comma-separated; default: DATA's).")
@click.option("--mode", type=click.Choice(MODES), default="default", show_default=True)
@click.option("--calibrate", is_flag=True, help="Scale each kernel to its measured reference time.")
@options.columns
@options.skip_invalid
@options.drop_spikes
@click.option("--json", "as_json", is_flag=True)
def predict(data, kernels, device, reference, core_mhz, mem_mhz, mode, calibrate, columns, as_json) -> None:
    """Predicted time (ms) of kernels profiled at the reference pair over a grid of clocks."""
    with user_errors():
        grid = _grid(data, columns)
        time_device, spec = _resolve(device, grid)
        reference = grid_reference(grid, spec, reference)
        model = TimeModel(time_device, mode)
        profiles = profiles_from_grid(grid, reference, model.device)
        if kernels:
            unknown = set(kernels) - {p.name for p in profiles}
            if unknown:
                raise InputError(f"{data}: no workload named {sorted(unknown)}")
            profiles = [p for p in profiles if p.name in kernels]
        cores = core_mhz or np.unique(grid.core_mhz).tolist()
        mems = mem_mhz or np.unique(grid.mem_mhz).tolist()
        if spec is not None:
            check_clocks(spec, "--core-mhz/--mem-mhz", cores, np.asarray(mems) * _mem_unit(grid))
        outside = _beyond_grid(grid, cores, mems)
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
@click.option("--reference", callback=_optional_pair, help=REFERENCE_HELP)
@options.columns
@options.skip_invalid
@options.drop_spikes
@click.option("--sensitivity", is_flag=True,
              help="Also re-run the whole protocol with each device constant (latencies, L2 service time, "
                   "FP64 issue) scaled by 0.5-1.5: how the cross-validated figures move with it (about a minute).")
@click.option("--hold-out", type=click.Choice(HOLD_OUTS), default="application", show_default=True,
              help="What is held out together: an application's kernels in every DATA (names compared without "
                   "case and punctuation, one beginning another), or each kernel alone.")
@click.option("--json", "as_json", is_flag=True)
def cv(data, device, reference, columns, sensitivity, hold_out, as_json) -> None:
    """Nested leave-one-application-out cross-validation over the kernels of every DATA grid:
    each kernel scored with the settings (soft-max exponent, dependent latency, calibration)
    chosen on the kernels of the other applications (an application's kernels in every file
    held out together); for grids with power, the energy regret scored the same way, beside
    its baselines. 95% intervals (cluster bootstrap over the held-out groups) say how far each
    figure could move with other kernels of these kinds."""
    with user_errors():
        grids = [_grid(path, columns) for path in data]
        for g in grids[1:]:
            _resolve(device, g)
        time_device, spec = _resolve(device, grids[0])
        reference = grid_reference(grids[0], spec, reference)  # one for all grids: each is checked
        for g in grids[1:]:
            grid_reference(g, spec, reference)
        r = cross_validate(grids, reference, time_device, spec, hold_out=hold_out)
        if sensitivity:
            with progress_bars(disable=as_json) as update:
                r["over_device_constants"] = constant_sensitivity(
                    grids, reference, time_device, spec, hold_out=hold_out,
                    progress=lambda done, total, label: update("device constants", done, total, label))
    if as_json:
        print_json(r)
        return
    console.print(table(f"time model, nested leave-one-{hold_out}-out over {r['kernels']} kernels "
                        f"({r['candidates']} candidate settings)",
                        ["file", "kernels", "CV MAPE %", "95% interval", "in-sample %", "two-term %",
                         "CV - two-term, 95%", "CV beats two-term", "CV - mean alone, 95%"],
                        [[Path(f).name, v["kernels"], f"{v['cv_mape']:.2f}", interval(v["intervals"]["mean"]),
                          f"{v['in_sample_mape']:.2f}", f"{v['two_term_mape']:.2f}",
                          interval(v["intervals"]["minus_two_term"]), f"{v['cv_beats_two_term']}/{v['kernels']}",
                          interval(v["intervals"]["minus_mean"])]
                         for f, v in r["files"].items()]))
    console.print("95% intervals: cluster bootstrap over the held-out groups, what another set of as many "
                  "kernels of these kinds could give", highlight=False)
    if r["applications"]:
        console.print("held out together, as one application: " + "; ".join(
            f"{name} ({len(kernels)} kernels)" for name, kernels in r["applications"].items()), highlight=False)
    shifted = [[Path(f).name, f"{v['other_files']['mape']:.2f}", f"{v['other_files']['beats_two_term']}/{v['kernels']}",
                v["other_files"]["chosen"]] for f, v in r["files"].items() if "other_files" in v]
    if shifted:
        console.print(table("each file under the settings chosen on the other files alone",
                            ["file", "MAPE %", "beats two-term", "chosen on the others"], shifted))
    console.print(f"chosen on all kernels (the default): {r['chosen_on_all']}; per held-out kernel: "
                  + "; ".join(f"{k} x{n}" for k, n in r["chosen_per_kernel"].items()), highlight=False)
    console.print(f"errors over the training kernels aggregated by the {r['aggregate_on_all']} on all kernels; per "
                  "held-out kernel: " + "; ".join(f"{a} x{n}" for a, n in r["aggregate_per_kernel"].items()),
                  highlight=False)
    regret_files = list(r.get("selection", {}))
    console.print(table("each aggregate alone: CV MAPE %" + (" and CV regret % (max)" if regret_files else ""),
                        ["aggregate", *[Path(f).name for f in r["files"]],
                         *[f"regret {Path(f).name}" for f in regret_files]],
                        [[a, *[f"{v[f]:.2f}" for f in r["files"]],
                          *[f"{100 * r['selection'][f]['over_aggregates'][a]['mean']:.2f} "
                            f"({100 * r['selection'][f]['over_aggregates'][a]['max']:.1f})" for f in regret_files]]
                         for a, v in r["over_aggregates"].items()]))
    console.print(table("each extension under the protocol: CV MAPE % with it / without it",
                        ["extension", *[Path(f).name for f in r["files"]]],
                        [[name, *[f"{v['with'][f]:.2f} / {v['without'][f]:.2f}" for f in r["files"]]]
                         for name, v in r["extensions"].items()]))
    console.print(table("learned correction (ridge fit of the other kernels' log residuals): CV MAPE %",
                        ["ridge", *[Path(f).name for f in r["files"]]],
                        [[lam, *[f"{v[f]:.2f}" for f in r["files"]]] for lam, v in r["learned_correction"].items()]))
    for f, s in r.get("selection", {}).items():
        console.print(table(f"minimum-energy regret on {Path(f).name} (%)", ["", "mean", "max"],
                            [["cross-validated", f"{100 * s['cv_regret_mean']:.2f}", f"{100 * s['cv_regret_max']:.2f}"],
                             ["in-sample", f"{100 * s['in_sample_regret_mean']:.2f}",
                              f"{100 * s['in_sample_regret_max']:.2f}"],
                             ["settings chosen by the regret on the other applications",
                              *[f"{100 * s['chosen_by_regret'][k]:.2f}" for k in ("mean", "max")]],
                             [f"criterion (time error or regret) chosen on the other applications (regret "
                              f"{s['criterion_chosen']['regret_chosen']} times)",
                              *[f"{100 * s['criterion_chosen'][k]:.2f}" for k in ("mean", "max")]],
                             ["near-ties rule, its tolerance chosen on the other applications",
                              *[f"{100 * s['near_ties'][k]:.2f}" for k in ("mean", "max")]],
                             *([["settings chosen on the other files", f"{100 * s['other_files_regret_mean']:.2f}",
                                 f"{100 * s['other_files_regret_max']:.2f}"]] if "other_files_regret_max" in s
                               else []),
                             *[[f"in hindsight, {label}", *[f"{100 * v[k]:.2f}" for k in ("mean", "max")]]
                               for label, v in (("each application's best settings", s["hindsight"]["per_application"]),
                                                ("the best settings for all", s["hindsight"]["one_candidate"]))],
                             *[[f"soft-max exponent {p}", f"{100 * v['regret_mean']:.2f}",
                                f"{100 * v['regret_max']:.2f}"] for p, v in s["over_overlap_p"].items()],
                             *[[f"baseline: {label}", *[f"{100 * s['baselines'][key][k]:.2f}" for k in ("mean", "max")]]
                               for key, label in (("two_term", "two-term times"),
                                                  ("single_pair", "one pair for all, chosen on the other applications"),
                                                  ("highest_clocks", "highest clocks"))]]))
        ci = s["intervals"]
        console.print("95% intervals over the applications (cluster bootstrap), %: cross-validated mean "
                      + paired_line(ci, {"two_term": "two-term", "single_pair": "one pair for all",
                                         "mean": "the mean as the only aggregate"}, 100, sep="; "), highlight=False)
    console.print(table("per kernel (calibrated MAPE %)", ["kernel", "CV", "two-term", "chosen settings"],
                        [[k, f"{v['cv_mape']:.2f}", f"{v['two_term_mape']:.2f}", v["chosen"]]
                         for k, v in r["per_kernel"].items()]))
    if "over_device_constants" in r:
        _print_sensitivity(r)


def _print_sensitivity(r: dict) -> None:
    files = list(r["files"])
    regret_files = list(r.get("selection", {}))
    rows = [["as preset", "x1", *[f"{r['files'][f]['cv_mape']:.2f}" for f in files],
             *[f"{100 * r['selection'][f]['cv_regret_mean']:.2f} ({100 * r['selection'][f]['cv_regret_max']:.1f})"
               for f in regret_files]]]
    for name, by_scale in r["over_device_constants"].items():
        for x, v in by_scale.items():
            rows.append([name, f"x{x}", *[f"{v['cv_mape'][f]:.2f}" for f in files],
                         *[f"{100 * v['cv_regret'][f]['mean']:.2f} ({100 * v['cv_regret'][f]['max']:.1f})"
                           for f in regret_files]])
    console.print(table("the protocol with one device constant scaled: CV MAPE % and CV regret % (max)",
                        ["constant", "scale", *[f"MAPE {Path(f).name}" for f in files],
                         *[f"regret {Path(f).name}" for f in regret_files]], rows))


@time_.command("fit-device")
@click.argument("data", type=click.Path(dir_okay=False))
@click.option("--device", "base", required=True,
              help="The device to start from: a catalog GPU, the gtx980 preset or a device JSON file.")
@click.option("--reference", callback=_optional_pair, help=REFERENCE_HELP)
@click.option("-o", "--out", required=True, type=click.Path(dir_okay=False), callback=output_file,
              help="Device JSON to write (for --device of the other time commands).")
@options.force
@options.columns
@options.skip_invalid
@options.drop_spikes
@click.option("--json", "as_json", is_flag=True)
def fit_device_(data, base, reference, out, force, columns, as_json) -> None:
    """Fit the DRAM latency and service-time parameters of a device to a measured grid of its
    kernels (absolute error, every kernel), scored by leave-one-kernel-out."""
    with user_errors():
        refuse_overwrite([out], [data, base], force)
        grid = _grid(data, columns)
        time_device, spec = _resolve(base, grid)
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
