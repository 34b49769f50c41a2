"""`gpudvfs time ...`: the analytical kernel-time model (Wang & Chu)."""

from __future__ import annotations

from pathlib import Path

import click
import numpy as np

from ..errors import InputError
from ..io import read
from ..time import MODES, TimeDevice, TimeModel, evaluate, profiles_from_grid
from .output import console, print_json, table, user_errors


def _pair(ctx, param, value):
    try:
        a, b = (float(x) for x in value.split(","))
    except ValueError:
        raise click.BadParameter(f"expected CORE,MEM in MHz, got {value!r}") from None
    return (a, b)


def _device(spec: str) -> TimeDevice:
    """A preset name or a device JSON file (TimeDevice.save)."""
    return TimeDevice.load(spec) if Path(spec).suffix == ".json" else TimeDevice.preset(spec)


def _grid(path):
    g = read(path)
    if g.format != "nvprof":
        raise InputError(f"{path}: the time model reads NV-DVFS nvprof CSVs (core and memory clocks with "
                         f"nvprof counters), got {g.format}")
    return g


@click.group("time")
def time_() -> None:
    """The analytical kernel-time model (Wang & Chu)."""


@time_.command("eval")
@click.argument("data", type=click.Path(dir_okay=False))
@click.option("--device", default="gtx980", show_default=True, help="Preset name or device JSON file.")
@click.option("--reference", default="700,700", show_default=True, callback=_pair,
              help="Clock pair (core,memory MHz) whose counters are the model's input.")
@click.option("--mode", type=click.Choice(MODES), default="default", show_default=True)
@click.option("--baselines", is_flag=True, help="Also the time-unchanged and two-term scaling baselines.")
@click.option("--json", "as_json", is_flag=True)
def eval_(data, device, reference, mode, baselines, as_json) -> None:
    """Errors predicting every clock pair of DATA from the reference pair's counters:
    absolute (counters alone) and calibrated (one scale per kernel on its measured reference time)."""
    with user_errors():
        grid = _grid(data)
        model = TimeModel(_device(device), mode)
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


@time_.command()
@click.argument("data", type=click.Path(dir_okay=False))
@click.option("--kernel", "kernels", multiple=True, help="Only these workloads (default: all).")
@click.option("--device", default="gtx980", show_default=True, help="Preset name or device JSON file.")
@click.option("--reference", default="700,700", show_default=True, callback=_pair)
@click.option("--core-mhz", help="Core clocks (comma-separated; default: DATA's).")
@click.option("--mem-mhz", help="Memory clocks (comma-separated; default: DATA's).")
@click.option("--mode", type=click.Choice(MODES), default="default", show_default=True)
@click.option("--calibrate", is_flag=True, help="Scale each kernel to its measured reference time.")
@click.option("--json", "as_json", is_flag=True)
def predict(data, kernels, device, reference, core_mhz, mem_mhz, mode, calibrate, as_json) -> None:
    """Predicted time (ms) of kernels profiled at the reference pair over a grid of clocks."""
    with user_errors():
        grid = _grid(data)
        model = TimeModel(_device(device), mode)
        profiles = profiles_from_grid(grid, reference, model.device)
        if kernels:
            unknown = set(kernels) - {p.name for p in profiles}
            if unknown:
                raise InputError(f"{data}: no workload named {sorted(unknown)}")
            profiles = [p for p in profiles if p.name in kernels]
        try:
            cores = [float(x) for x in core_mhz.split(",")] if core_mhz else np.unique(grid.core_mhz).tolist()
            mems = [float(x) for x in mem_mhz.split(",")] if mem_mhz else np.unique(grid.mem_mhz).tolist()
        except ValueError:
            raise InputError("--core-mhz and --mem-mhz take comma-separated numbers") from None
        fc, fm = np.meshgrid(cores, mems, indexing="ij")
        t, cases = model.predict(profiles, fc, fm, calibrate=calibrate, return_cases=True)
    if as_json:
        print_json({"core_mhz": cores, "mem_mhz": mems, "time_ms": {p.name: t[i].tolist() for i, p in enumerate(profiles)},
                    "case": {p.name: cases[i].tolist() for i, p in enumerate(profiles)}})
        return
    for i, p in enumerate(profiles):
        console.print(table(f"{p.name}: time (ms) and bound (case), core MHz x memory MHz", ["core \\ mem", *[f"{m:g}" for m in mems]],
                            [[f"{c:g}", *[f"{t[i, a, b]:.4g} ({cases[i, a, b]})" for b in range(len(mems))]]
                             for a, c in enumerate(cores)]))
