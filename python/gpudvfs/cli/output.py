"""Shared output helpers: one JSON object with --json, rich tables otherwise, and one-line errors.

Input errors are turned into a one-line message with a non-zero exit status.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any, NoReturn

import click
from rich.console import Console
from rich.table import Table

from gpudvfs.cli.options import offers_skip
from gpudvfs.errors import GpudvfsError, InputError, InvalidRowError
from gpudvfs.hardware.device import ClockPermissionError

#: Output that goes to a file or a pipe is read whole, not at a terminal's width: without a
#: terminal (and no COLUMNS), tables take the width they need up to this many characters.
PIPE_WIDTH = 200

console = Console(width=None if sys.stdout.isatty() or "COLUMNS" in os.environ else PIPE_WIDTH)


def print_json(obj: Any) -> None:
    """Print ``obj`` as indented JSON: what every ``--json`` prints.

    Parameters
    ----------
    obj : Any
        A JSON-ready object (a record's `to_dict`).
    """
    click.echo(json.dumps(obj, indent=2))


def table(title: str, columns: list[str], rows: Sequence[Sequence[Any]]) -> Table:
    """A rich table whose cells fold rather than get cut, so a long name reaches a file or a pipe whole.

    Parameters
    ----------
    title : str
        Its title.
    columns : list of str
        The column headers.
    rows : sequence of sequence
        The rows, each cell printed with `str`.

    Returns
    -------
    rich.table.Table
        The table, for `console.print`.
    """
    t = Table(title=title, title_justify="left")
    for c in columns:
        # Fold, not cut: a long workload name or pair must reach a file or a pipe whole.
        t.add_column(c, overflow="fold")
    for r in rows:
        t.add_row(*[str(x) for x in r])
    return t


def interval(ends: Sequence[float], scale: float = 1.0) -> str:
    """A bootstrap interval's ends (``gpudvfs.stats``), times ``scale`` (100 for a percent).

    Parameters
    ----------
    ends : sequence of float
        The low and high ends.
    scale : float
        What they are multiplied by.

    Returns
    -------
    str
        ``[low, high]``.
    """
    return f"[{scale * ends[0]:.2f}, {scale * ends[1]:.2f}]"


def paired_line(ci: dict, names: dict[str, str], scale: float = 1.0, sep: str = ", ") -> str:
    """`gpudvfs.stats.paired_intervals`' result in a line: the mean's interval, then each paired difference.

    Parameters
    ----------
    ci : dict
        The intervals: ``mean`` and ``minus_<baseline>``.
    names : dict
        How each baseline reads (by its key where absent).
    scale : float
        What the ends are multiplied by (100 for a percent).
    sep : str
        Between the intervals.

    Returns
    -------
    str
        The line.
    """
    return sep.join([interval(ci["mean"], scale)] + [
        f"minus {names.get(k.removeprefix('minus_'), k.removeprefix('minus_'))} {interval(v, scale)}"
        for k, v in ci.items() if k != "mean"])


def show_error(message: str) -> None:
    """Print an error in the one form of every error the command line reports.

    Parameters
    ----------
    message : str
        What went wrong.
    """
    click.echo(f"gpudvfs: error: {message}", err=True)


def fail(message: str) -> NoReturn:
    """Print an error (:func:`show_error`) and exit with status 2.

    Parameters
    ----------
    message : str
        What went wrong.
    """
    show_error(message)
    sys.exit(2)


class UsageError(click.UsageError):
    """click's own errors (an unknown option, a bad value, a missing argument) in gpudvfs's form.

    One line naming the help to read, status 2.
    """

    exit_code = 2

    def show(self, file: IO[Any] | None = None) -> None:
        """Print the error as :func:`show_error` does, naming the help to read.

        Parameters
        ----------
        file : file object, optional
            Unused: the error goes where every error does.
        """
        show_error(self.format_message() + (f" (see '{self.ctx.command_path} --help')" if self.ctx else ""))


class Group(click.Group):
    """A command group whose click errors, its sub-commands' included, read as gpudvfs's."""

    def make_context(self, info_name: str | None, args: list[str], parent: click.Context | None = None,
                     **extra: Any) -> click.Context:
        """The context of click, its errors in gpudvfs's form.

        Parameters
        ----------
        info_name : str or None
            The command's name as invoked.
        args : list of str
            The arguments.
        parent : click.Context, optional
            The parent command's context.
        **extra
            click's other context settings.

        Returns
        -------
        click.Context
            The context.
        """
        with _one_error_form():
            return super().make_context(info_name, args, parent, **extra)

    def invoke(self, ctx: click.Context) -> Any:
        """Run the sub-command, its errors in gpudvfs's form.

        Parameters
        ----------
        ctx : click.Context
            The group's context.

        Returns
        -------
        Any
            What the sub-command returns.
        """
        with _one_error_form():
            return super().invoke(ctx)


@contextlib.contextmanager
def _one_error_form() -> Iterator[None]:
    try:
        yield
    except (UsageError, click.exceptions.NoArgsIsHelpError):  # already in form; a bare group shows its help
        raise
    except click.ClickException as e:
        raise UsageError(e.format_message(), getattr(e, "ctx", None)) from None


@contextlib.contextmanager
def user_errors(skip_option: bool = False) -> Iterator[None]:
    """Report input, device and file-system errors as `gpudvfs: error: ...` and exit 2, without a traceback.

    The device's errors: no driver, no permission; the file system's: a path that cannot be
    read or written.

    Parameters
    ----------
    skip_option : bool
        The command takes --skip-invalid, so an invalid row's error says it.

    Yields
    ------
    None
        The block whose errors are reported.
    """
    try:
        yield
    except InvalidRowError as e:
        offered = skip_option or offers_skip()
        fail(f"{e} (--skip-invalid leaves out invalid rows and lists them)" if offered else str(e))
    except (GpudvfsError, ClockPermissionError) as e:
        fail(str(e))
    except OSError as e:
        fail(f"{e.filename}: {e.strerror}" if e.filename and e.strerror else str(e))


def _writable_dir(d: Path) -> bool:
    return d.is_dir() and os.access(d, os.W_OK | os.X_OK)


def output_file(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """Click callback: an output file whose folder exists and can be written.

    Checked before any work starts, so a long run does not end on an unwritable path.

    Parameters
    ----------
    ctx : click.Context
        The command's context.
    param : click.Parameter
        The option.
    value : str or None
        The path given.

    Returns
    -------
    str or None
        The path, None where the option was not given.

    Raises
    ------
    click.BadParameter
        For a folder, a path in a folder that does not exist, or one that cannot be written.
    """
    if value is None:
        return None
    p = Path(value)
    if p.is_dir():
        raise click.BadParameter(f"{value} is a directory; give a file name", ctx, param)
    parent = p.parent
    if not parent.is_dir():
        raise click.BadParameter(f"{value}: the folder {parent} does not exist", ctx, param)
    if not _writable_dir(parent) or (p.exists() and not os.access(p, os.W_OK)):
        raise click.BadParameter(f"{value} cannot be written (permission denied)", ctx, param)
    return value


def _taken(p: Path) -> bool:
    return p.is_file() or (p.is_dir() and any(p.iterdir()))


def refuse_overwrite(outputs: Iterable[str | Path | None], inputs: Iterable[str | Path | None] = (),
                     force: bool = False, how: str = "give --force to write over it") -> None:
    """The one rule of every command that writes: never over its inputs, over an output only with ``force``.

    Never over one of its own inputs, whatever the options: the measurement would be lost.
    An output folder counts as existing once it holds something.

    Parameters
    ----------
    outputs : iterable of str, pathlib.Path or None
        The files or folders the command writes (None: an option not given).
    inputs : iterable of str, pathlib.Path or None
        The files it reads (None: an option not given).
    force : bool
        Write over existing outputs.
    how : str
        Which option grants it, for the error.

    Raises
    ------
    InputError
        For an output that is an input, or that exists without ``force``.
    """
    given = [Path(i) for i in inputs if i is not None and Path(i).exists()]
    for out in outputs:
        if out is None or not _taken(Path(out)):
            continue
        if any(Path(out).samefile(i) for i in given):
            raise InputError(f"{out} is an input of this command; write the output elsewhere")
        if not force:
            raise InputError(f"{out} exists; {how}")


def output_dir(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """Click callback: an output folder that exists and can be written, or can be created.

    Parameters
    ----------
    ctx : click.Context
        The command's context.
    param : click.Parameter
        The option.
    value : str or None
        The path given.

    Returns
    -------
    str or None
        The path, None where the option was not given.

    Raises
    ------
    click.BadParameter
        For a file, or a path that cannot be written or created.
    """
    if value is None:
        return None
    p = Path(value)
    if p.exists() and not p.is_dir():
        raise click.BadParameter(f"{value} exists and is not a folder", ctx, param)
    ancestor = next(a for a in (p, *p.parents) if a.exists())
    if not _writable_dir(ancestor):
        raise click.BadParameter(f"{value} cannot be written or created ({ancestor} is not a writable folder)",
                                 ctx, param)
    return value


def figure_file(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """Click callback: a writable figure file in a format matplotlib writes (by its suffix).

    Parameters
    ----------
    ctx : click.Context
        The command's context.
    param : click.Parameter
        The option.
    value : str or None
        The path given.

    Returns
    -------
    str or None
        The path, None where the option was not given.

    Raises
    ------
    click.BadParameter
        For a path :func:`output_file` refuses, or a suffix matplotlib does not write.
    """
    value = output_file(ctx, param, value)
    if value is None:
        return None
    from matplotlib.backend_bases import FigureCanvasBase

    formats = FigureCanvasBase.get_supported_filetypes()
    suffix = Path(value).suffix.lstrip(".").lower()
    if suffix not in formats:
        given = f".{suffix}" if suffix else "no suffix"
        raise click.BadParameter(f"{value}: cannot tell the figure format from {given}; use one of "
                                 f"{', '.join('.' + f for f in sorted(formats))}", ctx, param)
    return value

