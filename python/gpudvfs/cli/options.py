"""Options that several commands share: how to read a grid's columns, clipping of utilizations."""

from __future__ import annotations

import click

from ..errors import InputError
from ..io import parse_columns


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

clip_utilization = click.option(
    "--clip-utilization", is_flag=True,
    help="Clip utilizations outside [0, 1] (counter noise, or counters of another vendor) into it, with a "
         "warning that counts them, instead of stopping.")
