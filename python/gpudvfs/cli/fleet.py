"""`gpudvfs fleet ...`: fleet scale. So far the cluster power budget's solver and its benchmark."""

from __future__ import annotations

import click

from ..fleet.budget import bench
from .output import console, print_json, table, user_errors


@click.group()
def fleet() -> None:
    """Fleet scale: cluster power budgets."""


@fleet.command()
@click.option("--bench", "run_bench", is_flag=True, required=True,
              help="Time the solver on random instances and measure its gap to the exact optimum.")
@click.option("--gpus", default=10_000, show_default=True, type=click.IntRange(min=1))
@click.option("--pairs", default=1_000, show_default=True, type=click.IntRange(min=1))
@click.option("--small", default=50, show_default=True, type=click.IntRange(min=1),
              help="Small random instances scored against the exact solver.")
@click.option("--seed", default=0, show_default=True, type=int)
@click.option("--json", "as_json", is_flag=True)
def budget(run_bench, gpus, pairs, small, seed, as_json) -> None:
    """One clock pair per GPU under a cluster power budget (a multiple-choice knapsack in the
    Rust core). --bench: milliseconds for GPUS x PAIRS (key `ms`) and the worst optimality gap
    on small instances (key `gap_max`)."""
    with user_errors():
        r = bench(gpus, pairs, small, seed)
    if as_json:
        print_json(r)
        return
    console.print(table(f"budget solver, {gpus} GPUs x {pairs} pairs", ["", ""],
                        [["time (best of 3)", f"{r['ms']:.1f} ms"],
                         ["gap to the LP bound (certificate)", f"{100 * r['bound_gap']:.2g}%"],
                         [f"worst gap to the exact optimum ({small} small instances)", f"{100 * r['gap_max']:.3g}%"],
                         ["mean gap", f"{100 * r['gap_mean']:.3g}%"]]))
