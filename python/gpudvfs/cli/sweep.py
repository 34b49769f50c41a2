"""`gpudvfs sweep`: measure workloads over a frequency grid, crash-safe and resumable."""

from __future__ import annotations

import click

from gpudvfs.cli import options
from gpudvfs.cli.output import console, output_file, refuse_overwrite, user_errors
from gpudvfs.cli.progress import progress_bars
from gpudvfs.data import write
from gpudvfs.hardware.kinds import make_device
from gpudvfs.hardware.sweep import grid, run_sweep, suite_workloads, to_power_dataset
from gpudvfs.hardware.workload_file import read_workloads


@click.command()
@click.option("--suite", type=click.Choice(["power", "time"]),
              help="A microbenchmark suite of the kernel manifest.")
@click.option("--workloads", "workload_file", type=click.Path(dir_okay=False),
              help="JSON file of user workloads (see gpudvfs.hardware.workload_file).")
@options.device_kind()
@options.gpu_index()
@options.seed("Noise seed of the simulated GPU.")
@click.option("-o", "--out", required=True, type=click.Path(dir_okay=False), callback=output_file,
              help="Tidy CSV of measurements (appended row by row); the sweep's plan and profiles go to "
                   "OUT.sweep.json.")
@click.option("--resume", is_flag=True,
              help="Continue a partial sweep in OUT, started with the same options (refused otherwise).")
@click.option("--core-mhz", callback=options.clock_list, help="Restrict to these core clocks (comma-separated).")
@click.option("--mem-mhz", callback=options.clock_list, help="Restrict to these memory clocks (comma-separated).")
@options.min_seconds(1.0, "Repeat each workload until a measurement spans this long.")
@click.option("--repetitions", type=click.IntRange(min=1), help="Repeat exactly this often instead.")
@click.option("--leave-clocks", is_flag=True,
              help="Never set the GPU's clocks: measure each workload once at the clocks the driver runs "
                   "(no root needed; each row records the clocks seen).")
@click.option("--gpmtool", "gpmtool_out", type=click.Path(dir_okay=False), callback=output_file,
              help="Also write the power suite's result as a gpmTOOL power CSV (for gpmTOOL; `gpudvfs power fit` "
                   "reads OUT itself).")
def sweep(suite: str | None, workload_file: str | None, device_kind: str, index: int, seed: int, out: str,
          resume: bool, core_mhz: list[float] | None, mem_mhz: list[float] | None, min_seconds: float,
          repetitions: int | None, leave_clocks: bool, gpmtool_out: str | None) -> None:
    """Measure workloads at every (core, memory) clock pair of a device.

    A microbenchmark suite (power: `gpudvfs power fit OUT` fits the power model on it; time:
    the latency suite) or user workloads.
    """
    with user_errors():
        if (suite is None) == (workload_file is None):
            raise click.UsageError("give either --suite or --workloads FILE")
        if leave_clocks and (core_mhz or mem_mhz):
            raise click.UsageError("--leave-clocks measures at the driver's clocks: it takes no --core-mhz/--mem-mhz")
        # A sweep continues (--resume), never starts over: its rows are measurements.
        refuse_overwrite([out], [workload_file], resume, "give --resume to continue the sweep in it, or another -o")
        refuse_overwrite([gpmtool_out], [workload_file, out], resume, "give --resume (which rewrites it) or another "
                                                                      "--gpmtool")
        if suite is not None:
            workloads = suite_workloads(suite)
        else:
            assert workload_file is not None  # one of the two, checked above
            workloads = read_workloads(workload_file)
        device = make_device(device_kind, seed=seed, index=index, leave_clocks=leave_clocks)
        configs = None if leave_clocks else grid(device, core_mhz, mem_mhz)
        with progress_bars() as update:
            result = run_sweep(device, workloads, out, configs=configs, resume=resume, min_seconds=min_seconds,
                               repetitions=repetitions, progress=lambda done, total, label: update(
                                   "sweep", done, total, label), leave_clocks=leave_clocks)
        console.print(f"measured {result.measured} rows ({result.skipped} already in {out}); "
                      f"{result.throttled} throttled; plan and profiles in {result.record}")
        if gpmtool_out:
            write(to_power_dataset(out), gpmtool_out)
            console.print(f"wrote {gpmtool_out}")
