"""Options that several commands share, and the values they resolve to."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import click
import numpy as np
from click.core import ParameterSource

from gpudvfs.catalog import DeviceSpec
from gpudvfs.catalog.mem_unit import MEM_CLOCK_UNITS, in_gpu_mem_unit
from gpudvfs.data import parse_columns, read_measured_grid
from gpudvfs.data.datasets import MeasurementGrid
from gpudvfs.data.grid_csv import SPECS
from gpudvfs.errors import InputError
from gpudvfs.hardware.kinds import DEVICE_CHOICES, resolve_kind
from gpudvfs.limits import clock_array
from gpudvfs.time.device import TimeDevice

#: A click option: a decorator that adds it to a command.
Option = Callable[[Callable[..., Any]], Callable[..., Any]]


def _columns(ctx: click.Context, param: click.Parameter, value: str | None) -> dict[str, str] | None:
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


def _on_invalid(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    ctx.meta[ON_INVALID] = "skip" if value else "raise"


skip_invalid = click.option(
    "--skip-invalid", is_flag=True, expose_value=False, callback=_on_invalid,
    help="Leave out invalid rows (a repeated measurement of a pair, a bad cell; each is listed) instead of "
         "stopping at the first.")


def on_invalid() -> str:
    """What the running command's --skip-invalid asks of a reader: ``"skip"`` or ``"raise"`` (also without it)."""
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

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """The value as a float within the range, refusing inf and nan."""
        v = super().convert(value, param, ctx)
        if not math.isfinite(v):
            self.fail(f"{v} is not a finite number", param, ctx)
        return v


#: Where --drop-spikes leaves its threshold for the grid readers of the command (``ctx.meta``).
DROP_SPIKES = "gpudvfs.drop_spikes"


def _drop_spikes(ctx: click.Context, param: click.Parameter, value: float | None) -> None:
    ctx.meta[DROP_SPIKES] = value


drop_spikes = click.option(
    "--drop-spikes", type=Finite(min=0, min_open=True), metavar="FRACTION", expose_value=False,
    callback=_drop_spikes,
    help="Leave out spikes: cells whose time or power is more than a factor 1 + FRACTION from both neighbours "
         "along the core or the memory clock while those agree (a sensor glitch; each is named; "
         "`gpudvfs data spikes` lists them). Default: every row counts.")


def spike_threshold() -> float | None:
    """The running command's --drop-spikes threshold; None keeps every row."""
    ctx = click.get_current_context(silent=True)
    return ctx.meta.get(DROP_SPIKES) if ctx is not None else None


#: Where --mem-clock-unit leaves its unit for the grid readers of the command (``ctx.meta``).
MEM_CLOCK_UNIT = "gpudvfs.mem_clock_unit"


def _mem_clock_unit(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    ctx.meta[MEM_CLOCK_UNIT] = value


mem_clock_unit = click.option(
    "--mem-clock-unit", type=click.Choice(list(MEM_CLOCK_UNITS)), expose_value=False, callback=_mem_clock_unit,
    help="The unit of the grid's memory clocks: " + "; ".join(f"{u}: {w}" for u, w in MEM_CLOCK_UNITS.items())
         + ". Default: the format's, or the other unit whose clocks are the GPU's where the format's lie above them "
           "(with a warning).")


def measured_grid(path: str, needs: str, columns: dict[str, str] | None = None,
                  formats: tuple[str, ...] = ("nvdvfs", "grid"), spec: DeviceSpec | None = None,
                  counters: bool = True) -> MeasurementGrid:
    """A measured grid read as the running command's --skip-invalid and --drop-spikes ask.

    ``needs`` names the command or model that reads it, for the error of a file of another format;
    ``spec``, the GPU that measured it (see :func:`on_gpu`); ``counters=False`` reads the counters
    as unchecked text (a use of time and power alone).
    """
    grid = read_measured_grid(path, needs, formats, on_invalid(), columns, spike_threshold(), counters)
    return grid if spec is None else on_gpu(grid, spec)


def on_gpu(grid: MeasurementGrid, spec: DeviceSpec) -> MeasurementGrid:
    """A grid's memory clocks in the unit --mem-clock-unit names or its clocks tell, its clocks checked.

    See :func:`~gpudvfs.catalog.mem_unit.in_gpu_mem_unit`. Raises InputError for an ambiguous unit,
    or clocks the GPU does not run.
    """
    ctx = click.get_current_context(silent=True)
    unit = ctx.meta.get(MEM_CLOCK_UNIT) if ctx is not None else None
    grid = in_gpu_mem_unit(grid, spec, unit)
    mem = grid.mem_mhz
    other_unit = ", or --mem-clock-unit the unit of its memory clocks" if mem is not None and unit is None else ""
    check_clocks(spec, grid.path, grid.core_mhz, None if mem is None else mem * grid.mem_clock_to_nvml,
                 f" Give --device the GPU that measured it{other_unit}.")
    return grid


#: Longest measurement window (--min-seconds) a command takes: an hour per pair and workload.
MAX_WINDOW_S = 3600.0


def min_seconds(default: float = 1.0, help: str = "Length of each measurement.") -> Option:
    """A --min-seconds option: a measurement window, positive and at most :data:`MAX_WINDOW_S`."""
    return click.option("--min-seconds", default=default, show_default=True,
                        type=Finite(min=0, min_open=True, max=MAX_WINDOW_S), help=help)


def seed(help: str | None = None) -> Option:
    """A --seed option: numpy's generators take non-negative integers only."""
    return click.option("--seed", default=0, show_default=True, type=click.IntRange(min=0), help=help)


def workers() -> Option:
    """A --workers option: processes for independent replays (default: one per core)."""
    return click.option("--workers", type=click.IntRange(min=1),
                        help="Worker processes for the replays (default: one per core; 1: in this process).")


def clocks(text: str, what: str, count: int | None = None) -> list[float]:
    """Comma-separated clocks in MHz, each checked as a clock, ``count`` of them where given.

    ``what`` names the option in the error (click.BadParameter).
    """
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


def clock_list(ctx: click.Context | None, param: click.Parameter, value: str | None) -> list[float] | None:
    """Click callback: a comma-separated list of clocks (the option's name names them in an error), or None."""
    return None if value is None else clocks(value, f"--{(param.name or '').replace('_', '-')}")


def clock_pair(ctx: click.Context | None, param: click.Parameter | None, value: str) -> tuple[float, float]:
    """Click callback: CORE,MEM, two clocks in MHz."""
    a, b = clocks(value, "clocks", count=2)
    return (a, b)


def optional_clock_pair(ctx: click.Context | None, param: click.Parameter | None,
                        value: str | None) -> tuple[float, float] | None:
    """Click callback: CORE,MEM as :func:`clock_pair`, or None where the option was not given."""
    return None if value is None else clock_pair(ctx, param, value)


#: --force: write over existing output files (`output.refuse_overwrite`).
force = click.option("--force", is_flag=True, help="Write over existing output files (never over an input).")


def device_kind(dest: str = "device_kind", help: str = "", unused_with: str | None = None) -> Option:
    """--device of the commands that run on a GPU: auto, sim or nvml.

    auto is NVML's GPU where there is one, else the simulated GPU, saying so on stderr; left
    unresolved (and unsaid) where the option named ``unused_with`` is given, since then no GPU
    is opened. Click processes the options given on the command line before defaulted ones,
    so that option is seen first unless ``--device`` itself is given.
    """
    def resolve(ctx: click.Context, param: click.Parameter, value: str) -> str:
        if unused_with and ctx.params.get(unused_with):
            return value
        kind, why = resolve_kind(value)
        if why:
            click.echo(f"gpudvfs: no NVIDIA GPU here ({why}): on the simulated GPU (--device sim)", err=True)
        return kind

    return click.option("--device", dest, type=click.Choice(DEVICE_CHOICES), default="auto", show_default=True,
                        callback=resolve,
                        help=(help + " " if help else "") + "auto: a GPU where NVML finds one, else the simulated GPU.")


def gpu_index(help: str = "NVML index of the GPU (nvml; the simulated GPU is index 0).") -> Option:
    """An --index option: the NVML index of the GPU."""
    return click.option("--index", default=0, show_default=True, type=click.IntRange(min=0), help=help)


#: --eta: the cost policy's weight of energy against time.
eta = click.option("--eta", default=0.5, show_default=True, type=Finite(0, 1),
                   help="cost: Zeus's weight of energy against time, eta * energy + (1 - eta) * MAXPOWER * time "
                        "(MAXPOWER: the highest power limit, or the GPU's TDP, or the most power at the highest "
                        "setting).")


def policy_options(policy: str, power_cap: float | None) -> None:
    """Refuse --power-cap, --slowdown and --eta given with another policy than theirs.

    Each belongs to one policy: ignored, they would let the user believe they applied. The
    power-cap policy without a cap is refused too (click.UsageError).
    """
    if policy == "power-cap" and power_cap is None:
        raise click.UsageError("--policy power-cap needs --power-cap WATTS (the cap to stay under)")
    if policy != "power-cap" and power_cap is not None:
        raise click.UsageError(f"--power-cap is for --policy power-cap (the {policy} policy has no cap)")
    ctx = click.get_current_context()
    if policy != "deadline" and ctx.get_parameter_source("slowdown") is not ParameterSource.DEFAULT:
        raise click.UsageError(f"--slowdown is for --policy deadline (the {policy} policy has no time bound)")
    if policy != "cost" and "eta" in ctx.params and ctx.get_parameter_source("eta") is not ParameterSource.DEFAULT:
        raise click.UsageError(f"--eta is for --policy cost (the {policy} policy does not price time)")


#: --device: no default, since a grid does not say which GPU measured it.
DEVICE_HELP = "The GPU the data was measured on: a catalog name (gpudvfs devices list) or a device JSON file."
#: --reference of the commands that profile each workload of a grid at one pair.
REFERENCE_HELP = ("The clock pair CORE,MEM (the grid's units) whose counters profile each workload. Default: the "
                  "grid's own (an NV-DVFS grid's 700,700), else the GPU's default clocks.")


def check_clocks(spec: DeviceSpec, what: str, core_mhz: Sequence[float] | np.ndarray,
                 mem_mhz: Sequence[float] | np.ndarray | None = None, hint: str = "") -> None:
    """Refuse clocks the catalog GPU does not run: data measured there came from another GPU.

    A prediction there answers nothing. ``mem_mhz`` is in NVML's unit; ``what`` (a file, an option)
    begins the InputError's message and ``hint`` ends it.
    """
    beyond = spec.clock_warnings(core_mhz, mem_mhz)
    if beyond:
        raise InputError(f"{what}: {'; '.join(beyond)}{hint}")


def resolve_device(name: str) -> tuple[TimeDevice, DeviceSpec | None]:
    """The time device of a catalog GPU or a device JSON file, and its catalog entry where it has one."""
    return TimeDevice.resolve(name)


def resolve_gpu(name: str) -> tuple[TimeDevice, DeviceSpec]:
    """:func:`resolve_device` for commands that also need the GPU's peak rates, which the catalog gives.

    Raises InputError for a device file that names no catalog GPU.
    """
    device, spec = resolve_device(name)
    if spec is None:
        raise InputError(f"{name}: the device file names no catalog GPU ({device.name!r}); the peak rates "
                         "come from the catalog: save the device under a catalog key")
    return device, spec


def grid_reference(grid: MeasurementGrid, spec: DeviceSpec | None,
                   reference: tuple[float, float] | None = None) -> tuple[float, float]:
    """--reference, else the pair the grid's format profiles at, else the GPU's default clocks.

    In the grid's units. Checked to be a pair the GPU runs and the grid measured every workload at
    (else an InputError that suggests --reference).
    """
    why = None
    if reference is None:
        reference, why = _default_reference(grid, spec)
    if spec is not None:
        check_clocks(spec, f"--reference {reference[0]:g},{reference[1]:g}", [reference[0]],
                     [reference[1] * grid.mem_clock_to_nvml])
    try:
        grid.reference_rows(reference)
    except InputError as e:
        raise InputError(f"{e}; " + (f"the reference defaults to {why}: " if why else "") + "give --reference "
                         f"CORE,MEM, a pair the grid measured every workload at ({_nearest_pairs(grid, reference)})"
                         ) from None
    return reference


def _default_reference(grid: MeasurementGrid, spec: DeviceSpec | None) -> tuple[tuple[float, float], str]:
    """The pair the grid's format profiles at, else the GPU's default clocks in the grid's memory unit.

    Beside it, where it comes from, for an error to say.
    """
    spec_of = SPECS.get(grid.format)
    # The format's pair is in its own memory unit: a grid read in another has none.
    own = spec_of.reference_mhz if spec_of and spec_of.mem_clock_to_nvml == grid.mem_clock_to_nvml else None
    if own is not None:
        return own, f"the grid's own {own[0]:g},{own[1]:g}"
    if spec is None:
        raise InputError(f"{grid.path}: give --reference CORE,MEM: the grid records no reference pair, and the "
                         "device file names no catalog GPU whose default clocks it would be")
    pair = (spec.default_mhz[0], spec.default_mhz[1] / grid.mem_clock_to_nvml)
    return pair, f"{spec.key}'s default clocks {pair[0]:g},{pair[1]:g}"


def _nearest_pairs(grid: MeasurementGrid, reference: tuple[float, float], n: int = 4) -> str:
    """The ``n`` pairs nearest ``reference`` at which every workload of ``grid`` has a row."""
    mem = np.zeros(len(grid)) if grid.mem_mhz is None else grid.mem_mhz
    pairs, of = np.unique(np.column_stack([grid.core_mhz, mem]), axis=0, return_inverse=True)
    work = grid.workload
    full = [k for k in range(len(pairs)) if len(set(work[of.ravel() == k].tolist())) == len(set(work.tolist()))]
    if not full:
        return "it has none"
    near = sorted(full, key=lambda k: abs(pairs[k, 0] - reference[0]) + abs(pairs[k, 1] - reference[1]))[:n]
    # A grid at one memory clock matches the core clock alone: any MEM does.
    mem_of: Callable[[int], float] = (lambda k: reference[1]) if grid.mem_mhz is None else (lambda k: pairs[k, 1])
    return "nearest: " + "; ".join(f"{pairs[k, 0]:g},{mem_of(k):g}" for k in near)
