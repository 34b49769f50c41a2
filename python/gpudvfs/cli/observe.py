"""`gpudvfs power observe`: refine a GPU's power prior while the user's work runs.

From the clocks and power its driver visits by itself. It sets nothing.
"""

from __future__ import annotations

import warnings
from collections import Counter

import click

from gpudvfs.cli import options
from gpudvfs.cli.output import console, output_file, print_json, refuse_overwrite, user_errors
from gpudvfs.cli.progress import progress_bars
from gpudvfs.errors import GpudvfsWarning
from gpudvfs.hardware.driver_sim import DriverManagedGpu
from gpudvfs.hardware.nvml import NvmlDevice
from gpudvfs.hardware.observer import NvmlObserver, Observation, observe, read_readings, write_readings
from gpudvfs.power import PowerModel
from gpudvfs.power.observe import fit_readings


@click.command("observe")
@options.device_kind("kind", help="The GPU to watch: the simulated one under its own driver, or a real one "
                                  "through NVML.", unused_with="replay")
@click.option("--index", default=0, show_default=True, type=click.IntRange(min=0), help="NVML GPU index.")
@click.option("--seconds", default=60.0, show_default=True, type=click.FloatRange(min=0, min_open=True),
              help="How long to watch (the simulator's time is virtual).")
@click.option("--interval", "window_s", default=0.1, show_default=True,
              type=click.FloatRange(min=0.01), help="Seconds per reading.")
@click.option("--from-readings", "replay", type=click.Path(dir_okay=False, exists=True),
              help="Refit the readings of an earlier run (its --readings file) instead of watching a GPU.")
@click.option("--readings", type=click.Path(dir_okay=False), callback=output_file,
              help="Also write every reading as CSV (what --from-readings reads).")
@click.option("-o", "--out", required=True, type=click.Path(dir_okay=False), callback=output_file,
              help="The refined power model (JSON; its components are the activities observed).")
@options.force
@click.option("--json", "as_json", is_flag=True)
def observe_(kind: str, index: int, seconds: float, window_s: float, replay: str | None, readings: str | None,
             out: str, force: bool, as_json: bool) -> None:
    """Watch a GPU while your own work runs and refine its catalog power prior.

    From the clock, power and activity points the driver visits by itself (idle, boost, power
    and thermal throttling): static, idle and dynamic power and the core voltage curve. Sets no
    clock and no limit; needs no root.
    """
    sim = None
    with user_errors():
        refuse_overwrite([out, readings], [replay], force)
        obs, sim = (read_readings(replay), None) if replay else _watch(kind, index, seconds, window_s, as_json)
        if readings:  # first: a fit that fails keeps what was read
            write_readings(readings, obs)
        prior = PowerModel.prior(obs.catalog_key, reference=obs.default_mhz)
        fit = fit_readings(prior, obs)
        if fit.prior_stands:
            warnings.warn(GpudvfsWarning(f"the prior stands: {fit.prior_stands}"), stacklevel=1)
        fit.model.save(out)
    got, key, default = obs.readings, obs.catalog_key, obs.default_mhz
    reasons = Counter(r for x in got for r in x.throttle_reasons)
    volts = fit.model.voltage(list(fit.clocks_seen) or [default[0]], default[1])[:, 0].tolist()
    core_voltage: dict[str, float] = dict(zip(map(str, fit.clocks_seen), volts))
    scores = sim.truth_scores(fit.model, fit.clocks_seen) if sim is not None else {}
    r = {"device": key, "samples": len(got), "samples_used": fit.readings_used,
         "clocks_seen": list(fit.clocks_seen), "clock_changes_made": 0, "activities": list(obs.activities),
         "power_reading": obs.power,
         "throttle_reasons_seen": dict(reasons), "source": fit.model.source_, "prior_stands": fit.prior_stands,
         "residual_sd": fit.residual_sd, "interval": fit.model.interval_, "model": out,
         "readings": readings, "core_voltage": core_voltage, **scores}
    if as_json:
        print_json(r)
        return
    console.print(f"{key}: {len(got)} readings ({fit.readings_used} at a steady clock) at {len(fit.clocks_seen)} core "
                  f"clocks; no clock or limit set; throttle reasons seen: "
                  f"{', '.join(f'{k} ({v})' for k, v in reasons.items()) or 'none'}", highlight=False, soft_wrap=True)
    if fit.prior_stands:
        console.print(f"the prior stands: {fit.prior_stands}", highlight=False, soft_wrap=True)
    else:
        console.print(f"refined the prior: readings fit within {100 * fit.residual_sd:.1f}% (sd); core voltage "
                      "relative to the default clock: " + ", ".join(f"{c} MHz {v:.3f}" for c, v in
                                                                     core_voltage.items()),
                      highlight=False, soft_wrap=True)
    if scores:
        console.print(f"against the simulator's truth: voltage within {100 * scores['voltage_error_max']:.2f}%; "
                      f"power at the {len(scores['unseen_clocks'])} clocks never seen within "
                      f"{scores['power_mape_unseen']:.2f}% (MAPE)", highlight=False)
    console.print(f"wrote {out}" + (f" and {readings}" if readings else ""))


def _watch(kind: str, index: int, seconds: float, window_s: float,
           quiet: bool) -> tuple[Observation, DriverManagedGpu | None]:
    """The observation of the GPU of ``kind``, and the simulator to score it against (None on NVML).

    The simulator under its own driver, or NVML without setting anything, with a progress bar.
    """
    with progress_bars(disable=quiet) as update:
        def progress(done: int, total: int) -> None:
            update("observing", done, total, f"{done * window_s:.0f} of {seconds:g} s")
        if kind == "sim":
            sim = DriverManagedGpu()
            return observe(sim, seconds, window_s, progress), sim
        with NvmlDevice(index=index, leave_clocks=True) as dev:
            source = NvmlObserver(dev)
            try:
                return observe(source, seconds, window_s, progress), None
            finally:
                source.close()
