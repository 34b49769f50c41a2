"""Root of the command line: one click group, one module per sub-command group."""

from __future__ import annotations

import warnings
from typing import TextIO

import click

from gpudvfs import __version__
from gpudvfs.cli.data import data
from gpudvfs.cli.demo import demo
from gpudvfs.cli.fleet import fleet
from gpudvfs.cli.govern import govern
from gpudvfs.cli.online import online
from gpudvfs.cli.output import Group
from gpudvfs.cli.power import power
from gpudvfs.cli.predict import devices, predict, profile_command_
from gpudvfs.cli.select import select_
from gpudvfs.cli.sweep import sweep
from gpudvfs.cli.time import time_
from gpudvfs.cli.validate import validate
from gpudvfs.errors import GpudvfsWarning

_shown: set[str] = set()


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="gpudvfs")
def cli() -> None:
    """Predict and choose GPU core/memory frequencies from time and power models."""
    warnings.showwarning = _show_warning
    # Each of gpudvfs's warnings once per invocation: Python's own once-per-line would hide a
    # second invocation's in one process (tests), and show one text twice from two lines.
    warnings.simplefilter("always", GpudvfsWarning)
    _shown.clear()


_python_show_warning = warnings.showwarning


def _show_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                  file: TextIO | None = None, line: str | None = None) -> None:
    """Show gpudvfs's own warnings as one line, like its errors, each once; others as Python prints them.

    Once: several steps of one command may read the same file and warn alike.
    """
    if issubclass(category, GpudvfsWarning):
        text = f"gpudvfs: warning: {message}"
        if text not in _shown:
            _shown.add(text)
            click.echo(text, err=True)
    else:
        _python_show_warning(message, category, filename, lineno, file, line)


cli.add_command(data)
cli.add_command(demo)
cli.add_command(fleet)
cli.add_command(govern)
cli.add_command(online)
cli.add_command(power)
cli.add_command(predict)
cli.add_command(profile_command_)
cli.add_command(devices)
cli.add_command(select_)
cli.add_command(sweep)
cli.add_command(time_)
cli.add_command(validate)
