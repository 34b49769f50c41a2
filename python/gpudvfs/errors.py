"""Exceptions and warnings of gpudvfs.

Every error about user input is an :class:`InputError`, a ``ValueError`` subclass, so
callers can catch either. Errors about a data file also carry where the problem is.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


class GpudvfsError(Exception):
    """Base of every gpudvfs exception."""


class InputError(GpudvfsError, ValueError):
    """An argument or file content that gpudvfs cannot accept."""


class GpudvfsWarning(UserWarning):
    """Something the user should know about a result (a bound hit, a skipped row)."""


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a data file, located to its line and column (both 1-based).

    ``line`` is None where the problem is the whole file's, ``column`` None where it is the
    whole line's; ``column_name`` is the column's header, where the file has one; ``message``
    says what is wrong and what was expected.
    """

    path: str
    line: int | None
    column: int | None
    column_name: str | None
    message: str

    def __str__(self) -> str:
        """The problem as ``path, line L, column C ('name'): message``."""
        where = [self.path]
        if self.line is not None:
            where.append(f"line {self.line}")
        if self.column is not None:
            col = f"column {self.column}"
            if self.column_name:
                col += f" ({self.column_name!r})"
            where.append(col)
        return f"{', '.join(where)}: {self.message}"


class DataFileError(InputError):
    """A data file that cannot be read as its format: says file, line, column and what was expected (its `Problem`)."""

    def __init__(self, problem: Problem) -> None:
        super().__init__(str(problem))
        self.problem = problem

    @classmethod
    def at(
        cls,
        path: str | Path,
        message: str,
        line: int | None = None,
        column: int | None = None,
        column_name: str | None = None,
    ) -> DataFileError:
        """The error (of the class it is called on) of one `Problem` located in a file, to raise."""
        return cls(Problem(str(path), line, column, column_name, message))

    @property
    def path(self) -> str:
        """The data file."""
        return self.problem.path

    @property
    def line(self) -> int | None:
        """The 1-based line of the problem, None for the whole file."""
        return self.problem.line

    @property
    def column(self) -> int | None:
        """The 1-based column of the problem, None for the whole line."""
        return self.problem.column


class InvalidRowError(DataFileError):
    """One invalid row of a data file.

    Reading with ``on_invalid="skip"`` would leave it out (and record it) instead.
    """
