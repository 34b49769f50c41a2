"""Rich progress bars with ETA, fed by the progress callbacks of long-running library functions.

A bar appears with the first report of its stage, so a command refused before any work starts
prints its error alone. Bars go to stderr, and only when it is a terminal (rich's test, which
FORCE_COLOR and TTY_COMPATIBLE override): stdout piped to a file or to jq holds the results alone,
and a log of stderr holds no redraws.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Protocol

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)


class Update(Protocol):
    """``update(stage, done, total, label)``: one bar per stage (``total`` None: open-ended)."""

    def __call__(self, stage: str, done: int, total: int | None, label: str = "") -> None:
        """Move the stage's bar to ``done`` units of ``total``, ``label`` saying what is being done."""


@contextlib.contextmanager
def progress_bars(disable: bool = False) -> Iterator[Update]:
    """Progress bars for the block, stopped at its end; ``disable``: none even at a terminal (``--json``)."""
    console = Console(stderr=True)
    bars = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                    TextColumn("{task.fields[label]}"), console=console, transient=False,
                    disable=disable or not console.is_terminal)
    tasks: dict[str, TaskID] = {}

    def update(stage: str, done: int, total: int | None, label: str = "") -> None:
        if not tasks:
            bars.start()
        if stage not in tasks:
            tasks[stage] = bars.add_task(stage, total=total, label=label)
        bars.update(tasks[stage], completed=done, total=total, label=label)

    try:
        yield update
    finally:
        if tasks:
            bars.stop()
