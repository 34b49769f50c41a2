"""`gpudvfs demo`: the end-to-end job on the simulated GPU (or a real one)."""

from __future__ import annotations

import importlib.util

import click
import numpy as np

from gpudvfs.cli import options
from gpudvfs.cli.output import console, output_dir, print_json, refuse_overwrite, table, user_errors
from gpudvfs.cli.progress import progress_bars
from gpudvfs.demo import plot_demo, run_demo
from gpudvfs.hardware.kinds import DEVICE_KINDS, make_device


@click.command()
@click.option("--device", "device_kind", type=click.Choice(DEVICE_KINDS), default="sim", show_default=True)
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
def demo(device_kind, index, seed, out_dir, min_seconds, slowdown, power_cap, resume, force, as_json) -> None:
    """Sweep the microbenchmark suites, fit both models, profile four real workloads (SGEMM,
    STREAM triad, Jacobi stencil, histogram) at the default clocks and choose their
    frequencies (energy, EDP, ED2P, deadline, power cap)."""
    with user_errors(), progress_bars(disable=as_json) as progress:
        refuse_overwrite([out_dir], force=force or resume,
                         how="give --resume to continue the demo in it, --force to start it over, or another --out-dir")
        device = make_device(device_kind, seed=seed, index=index)
        result = run_demo(device, workdir=out_dir, min_seconds=min_seconds, slowdown=slowdown,
                          power_cap_w=power_cap, resume=resume, progress=progress)
    plots = plot_demo(result, out_dir) if importlib.util.find_spec("matplotlib") else []
    rows = []
    for w in result.workloads:
        for policy, s in w.choices.items():
            k = int(s.index[0])
            row = {"workload": w.name, "policy": policy, "core_mhz": float(s.core_mhz[0]),
                   "mem_mhz": float(s.mem_mhz[0]), "feasible": bool(s.feasible[0]),
                   "time_ms": float(s.time_ms[0]), "watts": float(s.watts[0]), "joules": float(s.joules[0])}
            if w.true_time_ms is not None:
                true_e = w.true_time_ms * w.true_watts / 1e3
                row |= {"true_time_ms": float(w.true_time_ms[k]), "true_watts": float(w.true_watts[k]),
                        "true_joules": float(true_e[k]), "true_min_joules": float(true_e.min())}
            rows.append(row)
    pm = result.power_model
    summary = {"device": result.device, "power_model": {"variant": pm.variant, "train_mape": pm.train_mape_,
                                                        "iterations": pm.iterations_},
               "time_device_fit": result.time_fit, "choices": rows,
               "files": [str(f) for f in result.files + plots]}
    if result.true_volts is not None:
        cfg = result.workloads[0].configs
        err = np.abs(pm.voltage(cfg[:, 0], cfg[:, 1]) / result.true_volts - 1)
        summary["voltage_error_max"] = float(err.max())
    if as_json:
        print_json(summary)
        return
    fit = result.time_fit["dm_lat"]
    console.print(f"power model ({pm.variant}): training MAPE {pm.train_mape_:.2f}% in {pm.iterations_} iterations"
                  + (f"; voltages within {100 * summary['voltage_error_max']:.2f}% of the simulator's"
                     if "voltage_error_max" in summary else ""))
    console.print(f"time device: DRAM latency {fit['a']:.1f} fc/fm + {fit['b']:.1f} cycles (R^2 {fit['r2']:.4f})")
    truth = result.workloads[0].true_time_ms is not None
    pair = (lambda a, b, f: f"{a:{f}}/{b:{f}}") if truth else (lambda a, b, f: f"{a:{f}}")
    cols = ["policy", "core/memory MHz", "time (ms)", "power (W)", "energy (mJ)"] + (
        ["true energy over the true minimum"] if truth else [])
    for w in result.workloads:
        out = []
        for r in (r for r in rows if r["workload"] == w.name):
            line = [r["policy"] + ("" if r["feasible"] else " (infeasible)"), f"{r['core_mhz']:g}/{r['mem_mhz']:g}",
                    pair(r["time_ms"], r.get("true_time_ms", 0.0), ".3f"),
                    pair(r["watts"], r.get("true_watts", 0.0), ".1f"),
                    pair(1e3 * r["joules"], 1e3 * r.get("true_joules", 0.0), ".1f")]
            if truth:
                line.append(f"+{100 * (r['true_joules'] / r['true_min_joules'] - 1):.1f}%")
            out.append(line)
        console.print(table(f"{w.name}: " + ("predicted / simulator's true values" if truth else "predicted"),
                            cols, out))
    if truth:
        console.print("The simulator's time and power follow the models' own structure: these figures check the "
                      "pipeline end to end. Accuracy on real GPUs: see docs/accuracy.md (GTX 980, GTX Titan X).")
    for f in summary["files"]:
        console.print(f"wrote {f}")
