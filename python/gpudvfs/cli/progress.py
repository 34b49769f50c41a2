"""A rich progress bar with ETA, fed by the `progress(done, total, label)` callbacks of
long-running library functions."""

from __future__ import annotations

import contextlib

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from .output import console


@contextlib.contextmanager
def progress_bar(title: str):
    bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                   TextColumn("{task.fields[label]}"), console=console, transient=False)
    task = bar.add_task(title, total=None, label="")

    def update(done: int, total: int, label: str) -> None:
        bar.update(task, completed=done, total=total, label=label)

    with bar:
        yield update
