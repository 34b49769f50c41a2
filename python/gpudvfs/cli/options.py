"""Options that several commands share: how to read a grid's columns, clipping of utilizations,
comma-separated clocks, seeds, finite numbers, the GPU's index, the options of one policy."""

from __future__ import annotations

import math

import click
from click.core import ParameterSource

from gpudvfs.data import parse_columns
from gpudvfs.errors import InputError
from gpudvfs.limits import clock_array


def _columns(ctx, param, value):
    try:
        return parse_columns(value)
    except InputError as e:
        raise click.BadParameter(str(e)) from None


columns = click.option(
    "--columns", callback=_columns, metavar="ROLE=COLUMN,...",
    help="Read DATA as a grid CSV with these columns (roles: workload, kernel, args, core_mhz, mem_mhz, time, "
         "watts; and time_unit=ms|us|s). Without it, common names (coreF, sm_app_clock, time/ms, run_time, "
         "power/W, benchmark, ...) are recognized.")

#: Where --skip-invalid leaves its choice for the grid readers of the command (``ctx.meta``).
ON_INVALID = "gpudvfs.on_invalid"


def _on_invalid(ctx, param, value):
    ctx.meta[ON_INVALID] = "skip" if value else "raise"


skip_invalid = click.option(
    "--skip-invalid", is_flag=True, expose_value=False, callback=_on_invalid,
    help="Leave out invalid rows (a repeated measurement of a pair, a bad cell; each is listed) instead of "
         "stopping at the first.")


def on_invalid() -> str:
    """What the running command's --skip-invalid asks of a reader ("raise" for commands without it)."""
    ctx = click.get_current_context(silent=True)
    return ctx.meta.get(ON_INVALID, "raise") if ctx is not None else "raise"


def offers_skip() -> bool:
    """Whether the running command takes --skip-invalid (an invalid row's error then says so)."""
    ctx = click.get_current_context(silent=True)
    return ctx is not None and ON_INVALID in ctx.meta


clip_utilization = click.option(
    "--clip-utilization", is_flag=True,
    help="Clip utilizations outside [0, 1] (counter noise, or counters of another vendor) into it, with a "
         "warning that counts them, instead of stopping.")


class Finite(click.FloatRange):
    """click's FloatRange, refusing inf and nan (which a range open above lets through)."""

    name = "finite float range"

    def convert(self, value, param, ctx):
        v = super().convert(value, param, ctx)
        if not math.isfinite(v):
            self.fail(f"{v} is not a finite number", param, ctx)
        return v


#: Where --drop-spikes leaves its threshold for the grid readers of the command (``ctx.meta``).
DROP_SPIKES = "gpudvfs.drop_spikes"


def _drop_spikes(ctx, param, value):
    ctx.meta[DROP_SPIKES] = value


drop_spikes = click.option(
    "--drop-spikes", type=Finite(min=0, min_open=True), metavar="FRACTION", expose_value=False,
    callback=_drop_spikes,
    help="Leave out spikes: cells whose time or power is more than a factor 1 + FRACTION from both neighbours "
         "along the core or the memory clock while those agree (a sensor glitch; each is named; "
         "`gpudvfs data spikes` lists them). Default: every row counts.")


def spike_threshold() -> float | None:
    """The running command's --drop-spikes threshold (None: keep every row)."""
    ctx = click.get_current_context(silent=True)
    return ctx.meta.get(DROP_SPIKES) if ctx is not None else None


#: Longest measurement window (--min-seconds) a command takes: an hour per pair and workload.
MAX_WINDOW_S = 3600.0


def min_seconds(default: float = 1.0, help: str = "Length of each measurement."):
    """A --min-seconds option: a measurement window, positive and at most :data:`MAX_WINDOW_S`."""
    return click.option("--min-seconds", default=default, show_default=True,
                        type=Finite(min=0, min_open=True, max=MAX_WINDOW_S), help=help)


def seed(help: str | None = None):
    """A --seed option: numpy's generators take non-negative integers only."""
    return click.option("--seed", default=0, show_default=True, type=click.IntRange(min=0), help=help)


def workers():
    """A --workers option: processes for independent replays (default: one per core)."""
    return click.option("--workers", type=click.IntRange(min=1),
                        help="Worker processes for the replays (default: one per core; 1: in this process).")


def clocks(text: str, what: str, count: int | None = None) -> list[float]:
    """Comma-separated clocks in MHz (``count`` of them, if given), each checked as a clock."""
    shape = "CORE,MEM: two clocks in MHz" if count == 2 else "comma-separated clocks in MHz"
    try:
        values = clock_array([float(x) for x in text.split(",")], what).tolist()
    except InputError as e:  # a ValueError too: first
        raise click.BadParameter(f"expected {shape}, got {text!r}: {e}") from None
    except ValueError:
        raise click.BadParameter(f"expected {shape}, got {text!r}") from None
    if count is not None and len(values) != count:
        raise click.BadParameter(f"expected {shape}, got {text!r}")
    return values


def clock_list(ctx, param, value):
    """Click callback: a comma-separated list of clocks, or None."""
    return None if value is None else clocks(value, f"--{param.name.replace('_', '-')}")


#: --force: write over existing output files (`output.refuse_overwrite`).
force = click.option("--force", is_flag=True, help="Write over existing output files (never over an input).")


def gpu_index(help: str = "NVML index of the GPU (nvml; the simulated GPU is index 0)."):
    return click.option("--index", default=0, show_default=True, type=click.IntRange(min=0), help=help)


#: --eta: the cost policy's weight of energy against time.
eta = click.option("--eta", default=0.5, show_default=True, type=Finite(0, 1),
                   help="cost: Zeus's weight of energy against time, eta * energy + (1 - eta) * MAXPOWER * time "
                        "(MAXPOWER: the highest power limit, or the GPU's TDP, or the most power at the highest "
                        "setting).")


def policy_options(policy: str, power_cap: float | None) -> None:
    """--power-cap and --slowdown each belong to one policy: given with another, refused
    (ignored, they would let the user believe they applied)."""
    if policy == "power-cap" and power_cap is None:
        raise click.UsageError("--policy power-cap needs --power-cap WATTS (the cap to stay under)")
    if policy != "power-cap" and power_cap is not None:
        raise click.UsageError(f"--power-cap is for --policy power-cap (the {policy} policy has no cap)")
    ctx = click.get_current_context()
    if policy != "deadline" and ctx.get_parameter_source("slowdown") is not ParameterSource.DEFAULT:
        raise click.UsageError(f"--slowdown is for --policy deadline (the {policy} policy has no time bound)")
    if policy != "cost" and "eta" in ctx.params and ctx.get_parameter_source("eta") is not ParameterSource.DEFAULT:
        raise click.UsageError(f"--eta is for --policy cost (the {policy} policy does not price time)")
