"""`gpudvfs validate`: one pass of the measurement layer over a GPU (the checklist of docs/measuring.md)."""

from __future__ import annotations

import re

import click

from gpudvfs.cli import options
from gpudvfs.cli.output import console, print_json, refuse_overwrite, user_errors
from gpudvfs.cli.progress import progress_bars
from gpudvfs.evaluation.hardware_report import validate as run_validation
from gpudvfs.hardware.kinds import make_device


@click.command()
@options.device_kind()
@options.gpu_index()
@options.seed("Noise seed of the simulated GPU.")
@click.option("-o", "--out", type=click.Path(file_okay=False),
              help="Folder for the raw files and report.md (default: validation/<gpu name>).")
@click.option("--budget-s", default=480.0, show_default=True, type=options.Finite(min=0, min_open=True),
              help="Seconds the sweeps may take: the clock grid gets as many pairs as fit.")
@options.min_seconds(0.5)
@click.option("--power-stride", default=1, show_default=True, type=click.IntRange(min=1),
              help="Measure every N-th kernel of the power suite.")
@click.option("--no-profile", is_flag=True,
              help="Do not profile (no Nsight Compute): power and time only, no model fits that need counters.")
@click.option("--resume", is_flag=True, help="Continue the sweeps of an interrupted run in the folder.")
@click.option("--leave-clocks", is_flag=True,
              help="Never set or reset the GPU's clocks (a shared or lent machine): measure at the clocks the "
                   "driver runs; the model fits that need several clock pairs are skipped.")
@click.option("--json", "as_json", is_flag=True)
def validate(device_kind: str, index: int, seed: int, out: str | None, budget_s: float, min_seconds: float,
             power_stride: int, no_profile: bool, resume: bool, leave_clocks: bool, as_json: bool) -> None:
    """One pass of the measurement layer over a GPU: raw files and report.md in one folder.

    What the driver reports, both microbenchmark suites and four real workloads (SGEMM,
    STREAM triad, Jacobi, histogram) over a coarse clock grid, power from the energy counter
    and from samples side by side, Nsight Compute profiles, the models fitted on the suites
    and scored on the real workloads, `predict` on their ncu CSVs. A step that fails is
    reported and the next one runs.
    """
    with user_errors():
        device = make_device(device_kind, seed=seed, index=index, leave_clocks=leave_clocks)
        folder = out or f"validation/{re.sub(r'[^a-z0-9]+', '-', device.name.lower()).strip('-')}"
        refuse_overwrite([folder], force=resume, how="give --resume to continue the run in it, or another -o")
        try:
            with progress_bars(disable=as_json) as update:
                report = run_validation(device, folder, budget_s=budget_s, min_seconds=min_seconds,
                                        power_stride=power_stride, profile=not no_profile, resume=resume,
                                        progress=lambda step, done, total: update(step, done, total, ""),
                                        leave_clocks=leave_clocks)
        finally:
            close = getattr(device, "close", None)
            if close is not None:
                close()
    if as_json:
        print_json(report)
        return
    console.print(f"wrote {folder}/report.md")
    for name, step in report["steps"].items():
        state = "ok" if step["ok"] else f"failed: {step['error']}"
        console.print(f"  {name}: {step.get('skipped', state)}")
