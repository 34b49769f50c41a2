"""Shared output helpers: one JSON object with --json, rich tables otherwise, and input
errors turned into a one-line message with a non-zero exit status."""

from __future__ import annotations

import contextlib
import json
import sys

import click
from rich.console import Console
from rich.table import Table

from ..errors import GpudvfsError
from ..measure.device import ClockPermissionError

console = Console()


def print_json(obj) -> None:
    click.echo(json.dumps(obj, indent=2))


def table(title: str, columns: list[str], rows: list[list]) -> Table:
    t = Table(title=title, title_justify="left")
    for c in columns:
        t.add_column(c)
    for r in rows:
        t.add_row(*[str(x) for x in r])
    return t


@contextlib.contextmanager
def user_errors():
    """Report input errors, and the device's (no driver, no permission), as
    `gpudvfs: error: ...` and exit 2, without a traceback."""
    try:
        yield
    except (GpudvfsError, ClockPermissionError) as e:
        click.echo(f"gpudvfs: error: {e}", err=True)
        sys.exit(2)
