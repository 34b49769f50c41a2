"""`gpudvfs power ...`: fit, evaluate, apply and plot the DVFS-aware power model."""

from __future__ import annotations

import warnings

import click

from gpudvfs.catalog import DeviceSpec, lookup
from gpudvfs.cli import options
from gpudvfs.cli.observe import observe_
from gpudvfs.cli.options import check_clocks, grid_reference, optional_clock_pair, resolve_gpu
from gpudvfs.cli.output import (
    console,
    figure_file,
    interval,
    output_file,
    print_json,
    refuse_overwrite,
    table,
    user_errors,
)
from gpudvfs.cli.prior import prior, prior_curve, prior_cv, prior_pipes
from gpudvfs.cli.progress import progress_bars
from gpudvfs.data import DESCRIPTIONS, detect_format, read, read_measured_grid, read_power_dataset
from gpudvfs.data.datasets import PowerDataset, UtilizationTable
from gpudvfs.data.dcgm_fields import is_dcgm_grid
from gpudvfs.errors import GpudvfsWarning, InputError
from gpudvfs.evaluation.power_cv import choose_settings
from gpudvfs.evaluation.power_errors import cross_validate_power, power_errors
from gpudvfs.hardware.sweep import load_record, to_power_dataset
from gpudvfs.policy.choose import counter_power_dataset
from gpudvfs.power import VARIANTS, PowerModel
from gpudvfs.power.dcgm import dcgm_power_dataset

_REFERENCE = click.option("--reference", callback=optional_clock_pair,
                          help="Measured grids: the clock pair CORE,MEM whose DCGM activities or counters are the "
                               "utilizations (the memory clock of a grid measured at one).")
_DEVICE = click.option("--device", help="The catalog GPU that measured the data: its peak rates turn a grid's "
                                        "profiler counters into utilizations, and its clocks are checked.")


def _power_data(path: str, reference: tuple[float, float] | None, device: str | None,
                columns: dict[str, str] | None = None, on_invalid: str = "raise", clip: bool = False) -> PowerDataset:
    """A gpmTOOL power CSV, or a measured grid with power and each workload's utilizations at ``reference``.

    The utilizations are its DCGM activities, or its profiler counters over ``device``'s peak
    rates.
    """
    spec = resolve_gpu(device)[1] if device else None
    found = None if columns else detect_format(path)
    if found in ("gpmtool", "gpmtool-utils"):
        ds = read_power_dataset(path, on_invalid, clip)
    elif found == "tidy":
        ds = _sweep_power_data(path, spec)
    else:
        grid = read_measured_grid(path, "the power model", ("nvdvfs", "dcgm", "grid"), on_invalid, columns)
        if spec is not None:
            grid = options.on_gpu(grid, spec)
        if grid.watts is None:
            raise InputError(f"{path}: this is {DESCRIPTIONS[grid.format]} without a power column; the power model "
                             "is fitted and scored on measured power")
        if spec is not None:
            reference = grid_reference(grid, spec, reference)
        elif reference is None:
            raise InputError(f"{path}: a measured grid needs --reference CORE,MEM (or --device, whose default clocks "
                             "it then is): the clocks whose DCGM activities or counters are each workload's "
                             "utilizations")
        if is_dcgm_grid(grid):
            ds = dcgm_power_dataset(grid, reference, clip)
        elif spec is None:
            raise InputError(f"{path}: utilizations from profiler counters need --device: the catalog GPU whose "
                             "peak rates they are measured against")
        else:
            ds = counter_power_dataset(grid, reference, spec, clip)
    if spec is not None:
        check_clocks(spec, path, ds.core_mhz, ds.mem_mhz, " Give --device the GPU that measured it.")
    return ds


def _sweep_power_data(path: str, spec: DeviceSpec | None) -> PowerDataset:
    """The power suite's `gpudvfs sweep`: its power with the utilizations its record profiled.

    Refused if the record names another GPU than ``spec``.
    """
    measured = load_record(path)["plan"]["device"].get("name")
    if spec is not None and measured:
        try:
            other = lookup(measured)
        except InputError:
            other = None  # a GPU the catalog lacks (the simulator): its clocks still tell
        if other is not None and other.key != spec.key:
            raise InputError(f"{path}: swept on {measured} ({other.key}), not on {spec.key}: give --device {other.key}")
    return to_power_dataset(path)


@click.group()
def power() -> None:
    """The DVFS-aware power model (Guerreiro et al.)."""


def _load_model(path: str) -> PowerModel:
    """A gpmTOOL model file (CSV, opening with its domain count), else a gpudvfs model file (JSON).

    Told apart by the first character that is not white space or a byte-order mark; the JSON
    loader names what is wrong with anything else.
    """
    try:
        with open(path, "rb") as f:
            head = f.read(4096).removeprefix(b"\xef\xbb\xbf").lstrip()[:1]
    except OSError:
        head = b"{"  # the JSON loader names the problem (missing, a folder, unreadable)
    return PowerModel.from_gpmtool(path) if head.isdigit() else PowerModel.load(path)


@power.command()
@click.argument("train", type=click.Path(dir_okay=False))
@click.option("--variant", type=click.Choice(VARIANTS), default="default", show_default=True)
@click.option("-o", "--out", type=click.Path(dir_okay=False), callback=output_file,
              help="Write the model (versioned JSON).")
@options.force
@click.option("--cv", "folds", type=click.IntRange(min=2), help="Also report K-fold CV error grouped by benchmark.")
@click.option("--skip-invalid", is_flag=True, help="Leave out invalid rows of TRAIN (listed) instead of stopping.")
@options.mem_clock_unit
@click.option("--drop-unused", is_flag=True, help="Leave out components that are zero in every row.")
@_REFERENCE
@_DEVICE
@options.columns
@options.clip_utilization
@click.option("--json", "as_json", is_flag=True)
def fit(train: str, variant: str, out: str | None, force: bool, folds: int | None, skip_invalid: bool,
        drop_unused: bool, reference: tuple[float, float] | None, device: str | None, columns: dict[str, str] | None,
        clip_utilization: bool, as_json: bool) -> None:
    """Estimate coefficients and voltages from microbenchmarks or a measured grid with power.

    TRAIN: microbenchmark measurements (gpmTOOL CSV) or a measured grid with power (with
    --reference; a grid of profiler counters also --device).
    """
    with user_errors(skip_option=True):
        refuse_overwrite([out], [train], force)
        ds = _power_data(train, reference, device, columns, "skip" if skip_invalid else "raise", clip_utilization)
    with user_errors(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", GpudvfsWarning)  # the fit's notes, shown with its report
        dropped = ds.unused_components() if drop_unused else []
        if dropped:
            ds = ds.without_components(dropped)
        model = PowerModel(variant).fit(ds)
        if device:
            model.device_ = resolve_gpu(device)[1].key
        cv = cross_validate_power(ds, folds, variant=variant) if folds else None
        if out:
            model.save(out)
    report = {
        "variant": variant, "rows": len(ds), "benchmarks": len(ds.benchmarks),
        "configurations": len(model.configs_), "train_mape": model.train_mape_,
        "cv_mape": cv.mape if cv else None,
        "cv_calibrated_mape": cv.calibrated_mape if cv else None,
        "cv_reference_scaled_mape": cv.reference_scaled_mape if cv else None,
        "cv_zero_weight_folds": cv.zero_weight_folds if cv else None,
        "cv_fallback_folds": cv.fallback_folds if cv else None,
        "cv_unconverged_folds": cv.unconverged_folds if cv else None,
        "cv_intervals": cv.intervals if cv else None,
        "iterations": model.iterations_, "converged": model.converged_, "fallback": model.fallback_,
        "voltages_on_bound": int(model.on_bound_.sum()), "skipped_rows": len(ds.skipped),
        "dropped_components": dropped, "notes": model.notes_,
        "static_w": dict(zip(("core", "memory"), model.static_w_.tolist())),
        "idle_w": dict(zip(("core", "memory"), model.idle_w_.tolist())),
        "weights_w": model.weights_, "model": out,
    }
    if as_json:
        print_json(report)
        return
    rows = [["training MAPE", f"{model.train_mape_:.3f}%"]]
    if cv:
        ci = cv.intervals
        rows.append([f"grouped {folds}-fold CV MAPE (95% interval over the benchmarks)",
                     f"{cv.mape:.3f}% {interval(ci['mape'])}"])
        if cv.calibrated_mape is not None:
            cal = ci["calibrated"]
            rows += [["  calibrated on each held-out benchmark's reference power",
                      f"{cv.calibrated_mape:.3f}% {interval(cal['mean'])}"],
                     ["  baseline: reference power x training mean curve", f"{cv.reference_scaled_mape:.3f}%"]]
            if "minus_reference_scaled" in cal:
                rows.append(["  calibrated minus the baseline, 95% interval (points)",
                             interval(cal["minus_reference_scaled"])])
        if cv.zero_weight_folds:
            rows.append(["  zero weight where no training benchmark uses it (folds)",
                         ", ".join(f"{c}: {n}" for c, n in cv.zero_weight_folds.items())])
        if cv.fallback_folds or cv.unconverged_folds:
            rows.append(["  folds whose fit fell back to per-domain voltages / did not converge",
                         f"{cv.fallback_folds} / {cv.unconverged_folds} of {folds}"])
    rows += [["iterations", f"{model.iterations_} ({'converged' if model.converged_ else 'NOT converged'})"],
             ["rows / benchmarks / configs", f"{len(ds)} / {len(ds.benchmarks)} / {len(model.configs_)}"]]
    if dropped:
        rows.append(["dropped (unused) components", ", ".join(dropped)])
    rows += [[f"{k} (W)", ", ".join(f"{n}={v:.2f}" for n, v in report[k].items())] for k in ("static_w", "idle_w")]
    rows.append(["weights (W at U=1)", ", ".join(f"{n}={v:.1f}" for n, v in model.weights_.items())])
    console.print(table(f"power model ({variant}) on {train}", ["", ""], rows))
    for w in caught:
        console.print(f"[yellow]warning:[/yellow] {w.message}", highlight=False)
    if len(ds.skipped):
        console.print(f"skipped {len(ds.skipped)} invalid rows, first: {ds.skipped[0]}", highlight=False)
    if out:
        console.print(f"wrote {out}")


@power.command("eval")
@click.argument("model_path", metavar="MODEL", type=click.Path(dir_okay=False))
@click.argument("test", type=click.Path(dir_okay=False))
@_REFERENCE
@_DEVICE
@options.columns
@options.skip_invalid
@options.mem_clock_unit
@options.clip_utilization
@click.option("--json", "as_json", is_flag=True)
def eval_(model_path: str, test: str, reference: tuple[float, float] | None, device: str | None,
          columns: dict[str, str] | None, clip_utilization: bool, as_json: bool) -> None:
    """Errors of a model on measured power (mean, median and max APE; per config and benchmark)."""
    with user_errors():
        model = _load_model(model_path)
        if device:
            model.check_gpu(resolve_gpu(device)[1].key)
        r = power_errors(model, _power_data(test, reference, device, columns, options.on_invalid(), clip_utilization))
    if as_json:
        print_json(r)
        return
    console.print(f"MAPE {r['mape']:.3f}% (95% interval over the benchmarks {interval(r['mape_interval'])})  "
                  f"median {r['median_ape']:.3f}%  max {r['max_ape']:.3f}%  (n = {r['n']})")
    console.print(table("per benchmark", ["benchmark", "MAPE %"],
                        [[k, f"{v:.2f}"] for k, v in r["per_benchmark"].items()]))
    console.print(table("per configuration (core/memory MHz)", ["config", "MAPE %"],
                        [[k, f"{v:.2f}"] for k, v in r["per_config"].items()]))


@power.command("cv")
@click.argument("micro", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--apps", "apps", nargs=2, multiple=True, type=click.Path(dir_okay=False), metavar="MICRO APPS",
              help="Also score every setting fitted on MICRO (one of the files) on APPS, applications measured on "
                   "the same GPU: the chosen setting's figure there is unseen. Repeatable.")
@click.option("--folds", default=6, show_default=True, type=click.IntRange(min=2),
              help="Folds of the grouped CV on each microbenchmark file.")
@options.skip_invalid
@click.option("--json", "as_json", is_flag=True)
def cv(micro: tuple[str, ...], apps: tuple[tuple[str, str], ...], folds: int, as_json: bool) -> None:
    """Choose the power fit's setting (voltage structure, objective, ridge) by grouped CV.

    Over the microbenchmark files MICRO... of several GPUs: no application has a say in it.
    """
    with user_errors(skip_option=True):
        sets = {p: read_power_dataset(p, options.on_invalid()) for p in dict.fromkeys(micro)}
        tests = {t: read_power_dataset(t, options.on_invalid()) for _, t in apps}
    with user_errors(), progress_bars(disable=as_json) as update:
        r = choose_settings(sets, list(apps), tests, folds,
                            progress=lambda done, total, label: update("settings", done, total, label))
    if as_json:
        print_json(r.to_dict())
        return
    console.print(f"chosen on all {len(sets)} files: [bold]{r.chosen.label}[/bold] "
                  f"(mean grouped {folds}-fold CV MAPE {r.chosen_cv_mean:.2f}% over {r.n_settings} settings)",
                  highlight=False)
    console.print(table(f"grouped {folds}-fold CV MAPE % per file (leave-one-GPU-out mean "
                        f"{r.leave_one_gpu_out_mean:.2f}%)",
                        ["file", "chosen", "chosen on the other files", "its MAPE", "best in hindsight"],
                        [[p, f"{v.cv_mape:.2f}", v.chosen_on_others, f"{v.cv_mape_chosen_on_others:.2f}",
                          f"{v.best_in_hindsight:.2f}"] for p, v in r.files.items()]))
    for a in r.apps:
        console.print(table(f"fitted on {a.train}, MAPE % on the applications of {a.test}",
                            ["", ""],
                            [["chosen setting (unseen)", f"{a.mape:.2f}"],
                             *([["setting chosen on the other applications", f"{a.chosen_on_other_apps:.2f}"]]
                               if a.chosen_on_other_apps is not None else []),
                             [f"best in hindsight ({a.best_in_hindsight_label})", f"{a.best_in_hindsight_mape:.2f}"],
                             *[[f"chosen, ridge {k}", f"{v:.2f}"] for k, v in a.over_ridge.items()]]))


@power.command()
@click.argument("model_path", metavar="MODEL", type=click.Path(dir_okay=False))
@click.argument("utils", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True)
def predict(model_path: str, utils: str, as_json: bool) -> None:
    """Power of each application of UTILS (gpmTOOL utilization or power CSV) over the model's grid."""
    with user_errors():
        model = _load_model(model_path)
        ds = read(utils)
        if isinstance(ds, UtilizationTable):
            names, u = list(ds.names), ds.utilization
        elif isinstance(ds, PowerDataset):
            names, u = list(ds.benchmarks), ds.benchmark_utilization()
        else:
            raise InputError(f"{utils}: expected a gpmTOOL utilization or power CSV, got {ds.format}")
        if tuple(ds.components) != model.components_:
            raise InputError(f"{utils}: components {list(ds.components)} differ from the model's "
                             f"{list(model.components_)}")
        watts = model.predict_grid(u)
    if as_json:
        cfg = [f"{c:g}/{m:g}" for c, m in model.configs_]
        print_json({"configs": cfg, "watts": {n: w.tolist() for n, w in zip(names, watts)}})
        return
    # Long form, one row per (application, configuration): readable for any number of either.
    rows = [[n, f"{c:g}", f"{m:g}", f"{watts[i, k]:.1f}"]
            for i, n in enumerate(names) for k, (c, m) in enumerate(model.configs_)]
    console.print(table("predicted power", ["application", "core MHz", "memory MHz", "power W"], rows))


@power.command()
@click.argument("model_path", metavar="MODEL", type=click.Path(dir_okay=False))
@click.option("--data", type=click.Path(dir_okay=False), help="Measured power CSV for a measured-vs-predicted panel.")
@click.option("-o", "--out", default="power_model.png", show_default=True, type=click.Path(dir_okay=False),
              callback=figure_file, help="Figure file; its suffix sets the format (.png, .pdf, .svg, ...).")
@options.force
def plot(model_path: str, data: str | None, out: str, force: bool) -> None:
    """Voltage curves over the clocks (the paper's Figure 6) and measured vs predicted power."""
    from gpudvfs.power.plots import plot_model

    with user_errors():
        refuse_overwrite([out], [model_path, data], force)
        model = _load_model(model_path)
        plot_model(model, out, read_power_dataset(data) if data else None)
    console.print(f"wrote {out}")


power.add_command(prior)
power.add_command(prior_cv)
power.add_command(prior_pipes)
power.add_command(prior_curve)
power.add_command(observe_)
