"""Shared output: one JSON object with --json, rich tables otherwise, and one-line errors with status 2."""

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
    """Print a JSON-ready object (a record's `to_dict`) indented: what every ``--json`` prints."""
    click.echo(json.dumps(obj, indent=2))


def table(title: str, columns: list[str], rows: Sequence[Sequence[Any]]) -> Table:
    """A rich table, each cell printed with `str`."""
    t = Table(title=title, title_justify="left")
    for c in columns:
        # Fold, not cut: a long workload name or pair must reach a file or a pipe whole.
        t.add_column(c, overflow="fold")
    for r in rows:
        t.add_row(*[str(x) for x in r])
    return t


def interval(ends: Sequence[float], scale: float = 1.0) -> str:
    """A bootstrap interval's ends (``gpudvfs.stats``) as ``[low, high]``, times ``scale`` (100 for a percent)."""
    return f"[{scale * ends[0]:.2f}, {scale * ends[1]:.2f}]"


def paired_line(ci: dict, names: dict[str, str], scale: float = 1.0, sep: str = ", ") -> str:
    """`gpudvfs.stats.paired_intervals`' result in a line: the mean's interval, then each paired difference.

    ``names`` says how each baseline reads (its key where absent); ``scale`` multiplies the ends.
    """
    return sep.join([interval(ci["mean"], scale)] + [
        f"minus {names.get(k.removeprefix('minus_'), k.removeprefix('minus_'))} {interval(v, scale)}"
        for k, v in ci.items() if k != "mean"])


def show_error(message: str) -> None:
    """Print an error in the one form of every error the command line reports."""
    click.echo(f"gpudvfs: error: {message}", err=True)


def fail(message: str) -> NoReturn:
    """Print an error (:func:`show_error`) and exit with status 2."""
    show_error(message)
    sys.exit(2)


class UsageError(click.UsageError):
    """click's own errors (an unknown option, a bad value, a missing argument) in gpudvfs's form.

    One line naming the help to read, status 2.
    """

    exit_code = 2

    def show(self, file: IO[Any] | None = None) -> None:
        """Print the error as :func:`show_error` does (``file`` unused), naming the help to read."""
        show_error(self.format_message() + (f" (see '{self.ctx.command_path} --help')" if self.ctx else ""))


class Group(click.Group):
    """A command group whose click errors, its sub-commands' included, read as gpudvfs's."""

    def make_context(self, info_name: str | None, args: list[str], parent: click.Context | None = None,
                     **extra: Any) -> click.Context:
        """The context of click, its errors in gpudvfs's form."""
        with _one_error_form():
            return super().make_context(info_name, args, parent, **extra)

    def invoke(self, ctx: click.Context) -> Any:
        """Run the sub-command, its errors in gpudvfs's form."""
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
    read or written. ``skip_option``: the command takes --skip-invalid, so an invalid row's error says it.
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
    """Click callback: an output file whose folder exists and can be written, or None.

    Checked before any work starts, so a long run does not end on an unwritable path.
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
    An output folder counts as existing once it holds something; None stands for an option
    not given; ``how`` names the option that grants overwriting, for the InputError.
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
    """Click callback: an output folder that exists and can be written, or can be created; or None."""
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
    """Click callback: a writable figure file in a format matplotlib writes (by its suffix), or None."""
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

