"""`gpudvfs data ...`: look at measurement files."""

from __future__ import annotations

import warnings

import click

from gpudvfs.cli import options
from gpudvfs.cli.output import console, print_json, table, user_errors
from gpudvfs.data import DESCRIPTIONS, FORMATS, read, read_measured_grid
from gpudvfs.data.datasets import MeasurementGrid
from gpudvfs.data.spikes import find_spikes
from gpudvfs.hardware.sweep import load_record, record_path

PROFILER_FORMATS = ("ncu", "nvprof", "nvidia-smi")


def _some(names: list[str], n: int = 8) -> str:
    return f"{len(names)}: " + ", ".join(names[:n]) + (", ..." if len(names) > n else "") if names else "none"


def _print_profiler(file: str, d: dict) -> None:
    rows = [["format", f"{d['format']}: {DESCRIPTIONS[d['format']]}"]]
    if d["format"] == "nvidia-smi":
        rows += [["samples", d["samples"]], ["GPUs", ", ".join(d["gpus"]) or "not logged"],
                 ["fields", _some([f"{f} [{d['units'][f]}]" if d["units"].get(f) else f for f in d["fields"]])]]
    else:
        rows += [["form", d["form"]], ["kernels", _some(d["kernel_names"], 4)], ["launches", d["launches"]],
                 ["devices", ", ".join(d["devices"]) or "not recorded"], ["metrics", _some(d["metrics"])],
                 ["rule results", d["rules"]], ["errors the tool printed", _some(d["errors"], 3)]]
    console.print(table(f"{file}", ["", ""], rows))


def _fmt_range(r: list[float]) -> str:
    return f"{r[0]:.6g} .. {r[1]:.6g}" if r else "-"


def _levels(xs: list[float]) -> str:
    return ", ".join(f"{x:g}" for x in xs) if xs else "-"


@click.group()
def data() -> None:
    """Inspect measurement files."""


@data.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--format", "fmt", type=click.Choice(FORMATS), default=None,
              help="Read as this format instead of detecting it.")
@click.option("--skip-invalid", is_flag=True,
              help="Leave out invalid rows (each is listed) instead of stopping at the first.")
@options.columns
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def info(file: str, fmt: str | None, skip_invalid: bool, columns: dict, as_json: bool) -> None:
    """What a measurement file holds.

    Format, reference, grid, components, benchmarks, ranges; for a profiler's output, the
    kernels, metrics and what the tool said.
    """
    with user_errors(skip_option=True), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # skipped rows are reported below
        ds = read(file, fmt, on_invalid="skip" if skip_invalid else "raise", columns=columns)
    d = ds.describe()
    if isinstance(ds, MeasurementGrid):
        d["spikes"] = len(find_spikes(ds))
    if d.get("reference_mhz") is None and d["format"] == "tidy" and record_path(file).is_file():
        # A sweep keeps its reference clocks in its record beside the CSV.
        with user_errors():
            d |= {"reference_mhz": load_record(file)["reference_mhz"], "reference_from": record_path(file).name}
    if as_json:
        print_json(d)
        return
    if d["format"] in PROFILER_FORMATS:
        _print_profiler(file, d)
        return
    ref = d.get("reference_mhz")
    rows = [
        ["format", d["format"]],
        ["rows", d["rows"]],
        ["reference (MHz)", "/".join(f"{x:g}" for x in ref) + (f"  (from {d['reference_from']})"
                                                                  if "reference_from" in d else "")
         if ref else "not recorded"],
        ["configurations", d.get("configurations", "-")],
        ["power limit W levels", _levels(d["power_limit_w_levels"])] if d.get("knob") == "power-limit"
        else ["core MHz levels", _levels(d.get("core_mhz_levels", []))],
        ["memory MHz levels", _levels(d.get("mem_mhz_levels", []))],
    ]
    if "components" in d:
        rows.append(["components", ", ".join(d["components"]) + f"  (per domain: {d['domain_sizes']})"])
    if "metrics" in d:
        rows.append(["counters", f"{len(d['metrics'])}: " + ", ".join(d["metrics"][:8])
                     + (", ..." if len(d["metrics"]) > 8 else "")])
    if "spikes" in d:
        rows.append(["spikes (a factor 1.1)", f"{d['spikes']}" + ("  (gpudvfs data spikes lists them)"
                                                                    if d["spikes"] else "")])
    names = d["benchmark_names"]
    rows.append(["benchmarks", f"{len(names)}: " + ", ".join(names[:10]) + (", ..." if len(names) > 10 else "")])
    console.print(table(f"{file}", ["", ""], rows))
    console.print(table("value ranges", ["column", "min .. max"],
                        [[k, _fmt_range(v)] for k, v in d["ranges"].items()]))
    for p in d["skipped"]:
        console.print(f"[yellow]skipped[/yellow] {p}", highlight=False)


@data.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--threshold", default=0.1, show_default=True, type=options.Finite(min=0, min_open=True),
              help="A spike is more than a factor 1 + THRESHOLD from both neighbours, which agree within it.")
@options.skip_invalid
@options.columns
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def spikes(file: str, threshold: float, columns: dict, as_json: bool) -> None:
    """Cells of a measured grid whose time or power departs from both neighbours.

    Along the core or the memory clock, while those agree: sensor glitches, which
    --drop-spikes leaves out of the commands that score or fit on a grid.
    """
    with user_errors(skip_option=True):
        grid = read_measured_grid(file, "the spike check", on_invalid=options.on_invalid(), columns=columns)
        found = find_spikes(grid, threshold)
    if as_json:
        print_json({"path": file, "threshold": threshold, "rows": len(grid), "spikes": [
            {"row": s.row, "workload": s.workload, "core_mhz": s.core_mhz, "mem_mhz": s.mem_mhz,
             "quantity": s.quantity, "value": s.value, "axis": s.axis, "neighbours": list(s.neighbours),
             "neighbour_mhz": list(s.neighbour_mhz), "deviation": s.deviation} for s in found]})
        return
    console.print(f"{file}: {len(found)} spike(s) in {len(grid)} rows (a factor {1 + threshold:g} from both "
                  "neighbours along a clock, which agree)", highlight=False)
    for s in found:
        console.print(f"  {s}", highlight=False)
