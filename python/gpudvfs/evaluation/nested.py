"""Nested cross-validation over groups of columns (a kernel, an application).

Each held-out group is scored by the candidate the other groups chose, and the way that
choice sums up errors is itself chosen one level in. The time and selection protocols share it.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence

import numpy as np

from gpudvfs.errors import InputError

#: How a candidate's errors over the training kernels are summed up before the least is chosen:
#: the textbook aggregates of one method's errors over several data sets. The mean lets the few
#: kernels no candidate fits (errors of 10-15%) decide between candidates that differ by tenths
#: of a point elsewhere; the others weigh them less. The protocol chooses among them by
#: leave-one-group-out on the training kernels (:func:`protocol_choice`); the first wins a tie.
AGGREGATES = ("mean", "trimmed mean", "median", "log mean", "mean rank")
#: Kernels the trimmed mean leaves out at each end (docs/accuracy.md: the figures with 2-4).
TRIM = 1
#: Errors are floored here before their logarithm (an error of 0 would be minus infinity).
_LOG_FLOOR = 1e-12


def application_groups(names: list[str]) -> np.ndarray:
    """A group label per workload name, equal for names of one application.

    Cross-validation then holds out an application's every kernel, in every file, together.
    A name's application is its first '/'-part, compared without case and punctuation; two
    are one application where one begins the other (the NV-DVFS files name an application in
    one file, 'scan', and its kernels in the other, 'scanScanExclusiveShared',
    'scanUniformUpdate').
    """
    keys = [re.sub(r"[^0-9a-z]", "", n.split("/")[0].lower()) for n in names]
    label = list(range(len(names)))

    def root(i: int) -> int:
        while label[i] != i:
            i = label[i]
        return i

    for i, j in itertools.combinations(range(len(names)), 2):
        if keys[i] and keys[j] and (keys[i].startswith(keys[j]) or keys[j].startswith(keys[i])):
            label[root(j)] = root(i)
    return np.array([root(i) for i in range(len(names))])


def held_out_groups(groups: Sequence | np.ndarray | None, n: int) -> np.ndarray:
    """The group labels of ``n`` columns (None: each its own), checked.

    One per column, and at least two groups to hold out in turn.

    Raises InputError for a label count other than ``n``, or fewer than two groups.
    """
    groups = np.arange(n) if groups is None else np.asarray(groups)
    if len(groups) != n:
        raise InputError(f"{len(groups)} group labels for {n} columns")
    if len(np.unique(groups)) < 2:
        raise InputError("cross-validation needs at least 2 kernels (of 2 applications)")
    return groups


def nested_choice(errors: np.ndarray, groups: np.ndarray | None = None) -> np.ndarray:
    """Per column of [candidates x columns], the candidate with the lowest mean error over the other groups' columns."""
    groups = held_out_groups(groups, errors.shape[1])
    same = groups[:, None] == groups[None, :]
    # Per held-out column j, the mean over the columns outside j's group.
    return np.argmin(errors @ ~same / (~same).sum(axis=0), axis=0)


def aggregate_scores(errors: np.ndarray, aggregate: str) -> np.ndarray:
    """Per candidate (row of [candidates x columns]), its errors summed up by ``aggregate`` (lower is better).

    The aggregates (:data:`AGGREGATES`): the mean; the mean without the :data:`TRIM` least and
    greatest columns (with more than twice as many); the median; the mean logarithm; the mean
    rank among the candidates per column (tied candidates share their ranks' mean).

    Raises InputError for an unknown aggregate.
    """
    if aggregate == "mean":
        return errors.mean(axis=1)
    if aggregate == "trimmed mean":
        s = np.sort(errors, axis=1)
        return (s[:, TRIM:-TRIM] if s.shape[1] > 2 * TRIM else s).mean(axis=1)
    if aggregate == "median":
        return np.median(errors, axis=1)
    if aggregate == "log mean":
        return np.log(np.maximum(errors, _LOG_FLOOR)).mean(axis=1)
    if aggregate == "mean rank":
        return _ranks(errors).mean(axis=1)
    raise InputError(f"aggregate must be one of {AGGREGATES}, got {aggregate!r}")


def _ranks(errors: np.ndarray) -> np.ndarray:
    """Each entry's 1-based rank within its column, tied entries sharing their ranks' mean."""
    n = errors.shape[0]
    order = np.argsort(errors, axis=0, kind="stable")
    s = np.take_along_axis(errors, order, axis=0)
    step = s[1:] != s[:-1]
    at = np.arange(n)[:, None]
    # In sorted order, a tie's first position and one past its last.
    first = np.maximum.accumulate(np.where(np.vstack([np.ones((1, s.shape[1]), bool), step]), at, 0), axis=0)
    end = np.minimum.accumulate(np.where(np.vstack([step, np.ones((1, s.shape[1]), bool)]), at + 1, n)[::-1],
                                axis=0)[::-1]
    ranks = np.empty_like(errors, dtype=np.float64)
    np.put_along_axis(ranks, order, (first + end + 1) / 2, axis=0)
    return ranks


def _least(errors: np.ndarray, aggregate: str) -> int:
    return int(np.argmin(aggregate_scores(errors, aggregate)))


def chosen_aggregate(errors: np.ndarray, groups: np.ndarray, aggregates: Sequence[str] = AGGREGATES) -> str:
    """The aggregate whose choice scores best by leave-one-group-out over these columns.

    Each column is scored with the candidate that aggregate chooses on the columns of the
    other groups; the least mean score wins (the first on a tie; with one group, the first).
    """
    held = np.unique(groups)
    if len(held) < 2 or len(aggregates) == 1:
        return aggregates[0]
    score = {}
    for a in aggregates:
        total = 0.0
        for g in held:
            out = groups == g
            total += errors[_least(errors[:, ~out], a), out].sum()
        score[a] = total
    return min(aggregates, key=lambda a: score[a])


def protocol_least(errors: np.ndarray, groups: np.ndarray,
                   aggregates: Sequence[str] = AGGREGATES) -> tuple[int, str]:
    """The protocol's choice of a candidate (row) on these columns, and the aggregate that found it."""
    a = chosen_aggregate(errors, groups, aggregates)
    return _least(errors, a), a


def protocol_choice(errors: np.ndarray, groups: np.ndarray,
                    aggregates: Sequence[str] = AGGREGATES) -> tuple[np.ndarray, list[str]]:
    """Per column, the protocol's choice (:func:`protocol_least`) on the columns of the other groups.

    The nested choice, with the aggregate chosen one level in; returns the chosen candidates and
    the aggregate that chose each.
    """
    groups = held_out_groups(groups, errors.shape[1])
    chosen, used = np.empty(len(groups), dtype=int), [""] * len(groups)
    for g in np.unique(groups):
        keep = groups != g
        c, a = protocol_least(errors[:, keep], groups[keep], aggregates)
        for j in np.flatnonzero(~keep):
            chosen[j], used[j] = c, a
    return chosen, used
