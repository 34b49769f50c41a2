"""`gpudvfs demo`: the end-to-end job on the simulated GPU (or a real one)."""

from __future__ import annotations

import click

from gpudvfs.cli import options
from gpudvfs.cli.output import console, output_dir, print_json, refuse_overwrite, table, user_errors
from gpudvfs.cli.progress import progress_bars
from gpudvfs.demo import demo_report
from gpudvfs.hardware.kinds import make_device


@click.command()
@options.device_kind()
@options.gpu_index()
@options.seed("Noise seed of the simulated GPU.")
@click.option("--out-dir", default="gpudvfs-demo", show_default=True, type=click.Path(file_okay=False),
              callback=output_dir,
              help="Sweeps and (with the plot extra) figures go here.")
@options.min_seconds(1.0, "Length of each measurement (the power paper's protocol: 1 s).")
@click.option("--slowdown", default=0.1, show_default=True, type=options.Finite(min=0))
@click.option("--power-cap", type=options.Finite(min=0, min_open=True),
              help="Power cap (W) of the power-cap policy (default: the median predicted power).")
@click.option("--resume", is_flag=True, help="Continue the sweeps of an interrupted demo in OUT_DIR.")
@options.force
@click.option("--json", "as_json", is_flag=True)
def demo(device_kind: str, index: int, seed: int, out_dir: str, min_seconds: float, slowdown: float,
         power_cap: float | None, resume: bool, force: bool, as_json: bool) -> None:
    """Sweep the microbenchmark suites, fit both models, and choose the frequencies of four real workloads.

    The workloads (SGEMM, STREAM triad, Jacobi stencil, histogram) are profiled at the default
    clocks; the policies: energy, EDP, ED2P, deadline, power cap.
    """
    with user_errors(), progress_bars(disable=as_json) as progress:
        refuse_overwrite([out_dir], force=force or resume,
                         how="give --resume to continue the demo in it, --force to start it over, or another --out-dir")
        summary = demo_report(make_device(device_kind, seed=seed, index=index), out_dir, min_seconds=min_seconds,
                              slowdown=slowdown, power_cap_w=power_cap, resume=resume, progress=progress)
    if as_json:
        print_json(summary)
        return
    _print(summary)


def _print(summary: dict) -> None:
    """The demo's summary as tables: per workload, each policy's choice (beside the simulator's truth)."""
    pm, fit, rows = summary["power_model"], summary["time_device_fit"]["dm_lat"], summary["choices"]
    console.print(f"power model ({pm['variant']}): training MAPE {pm['train_mape']:.2f}% in {pm['iterations']} "
                  "iterations" + (f"; voltages within {100 * summary['voltage_error_max']:.2f}% of the simulator's"
                                  if "voltage_error_max" in summary else ""))
    console.print(f"time device: DRAM latency {fit['a']:.1f} fc/fm + {fit['b']:.1f} cycles (R^2 {fit['r2']:.4f})")
    truth = "true_time_ms" in rows[0]
    pair = (lambda a, b, f: f"{a:{f}}/{b:{f}}") if truth else (lambda a, b, f: f"{a:{f}}")
    cols = ["policy", "core/memory MHz", "time (ms)", "power (W)", "energy (mJ)"] + (
        ["true energy over the true minimum"] if truth else [])
    for name in dict.fromkeys(r["workload"] for r in rows):
        out = []
        for r in (r for r in rows if r["workload"] == name):
            line = [r["policy"] + ("" if r["feasible"] else " (infeasible)"), f"{r['core_mhz']:g}/{r['mem_mhz']:g}",
                    pair(r["time_ms"], r.get("true_time_ms", 0.0), ".3f"),
                    pair(r["watts"], r.get("true_watts", 0.0), ".1f"),
                    pair(1e3 * r["joules"], 1e3 * r.get("true_joules", 0.0), ".1f")]
            if truth:
                line.append(f"+{100 * (r['true_joules'] / r['true_min_joules'] - 1):.1f}%")
            out.append(line)
        console.print(table(f"{name}: " + ("predicted / simulator's true values" if truth else "predicted"),
                            cols, out))
    if truth:
        console.print("The simulator's time and power follow the models' own structure: these figures check the "
                      "pipeline end to end. Accuracy on real GPUs: see docs/accuracy.md (GTX 980, GTX Titan X).")
    for f in summary["files"]:
        console.print(f"wrote {f}")
