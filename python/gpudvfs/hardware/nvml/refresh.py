"""How often a power reading updates, inferred from the times its value was seen to change.

Power samples are taken at half the reading's refresh period, so that no update is missed;
NVML does not report the period, so it is inferred: the reading is polled as fast as possible,
the changes of value are timed, and the period is estimated from them.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

from gpudvfs.errors import GpudvfsError, InputError


def refresh_period_from_changes(changes: list[tuple[float, float]]) -> float:
    """The update period of a sensor, s, from the times its value was seen to change.

    Each change is a bracket ``(start of the last poll that saw the old value, end of the first
    poll that saw the new one)``, s, in time order: the update happened inside it. A change within a
    twentieth of the usual interval after the one before is the same update landing in two steps
    (an H100's instant power field does this at about one update in four, 0.1 ms apart: see
    validation/), and is merged into it. Brackets much wider than usual (the poller was
    descheduled) are dropped, since their update time is vague. The intervals between the
    remaining changes are whole multiples of the period (more than one where an update
    repeated the previous value or fell in a dropped bracket), so the period is taken as the
    largest value that (nearly) as many intervals are near-whole multiples of as of any value
    (an approximate greatest common divisor, where a median would follow the multiples), then
    refined as those intervals' total time over their total count of periods. `ValueError` with
    fewer than 5 usable intervals, or where the intervals share no period.
    """
    if len(changes) < 6:
        raise ValueError(f"{len(changes)} changes seen, at least 6 needed")
    # The upper quartile of the intervals is a whole period even where half the updates land
    # in two steps (or where some repeat the value: then a multiple, still far above a step).
    gaps = sorted(b2 - b1 for (_, b1), (_, b2) in zip(changes, changes[1:]))
    split = gaps[3 * len(gaps) // 4] / 20
    merged = changes[:1]
    for a, b in changes[1:]:
        if b - merged[-1][1] >= split:
            merged.append((a, b))
    changes = merged
    widths = [b - a for a, b in changes]
    if len(widths) < 6:
        raise ValueError(f"{len(widths)} distinct updates seen, at least 6 needed")
    # A precise bracket is one poll wide; a quarter of them at least are, even when the
    # poller is descheduled often, so the lower quartile measures a poll.
    limit = 3 * sorted(widths)[len(widths) // 4]
    times = [b for a, b in changes if b - a <= limit]
    diffs = [y - x for x, y in zip(times, times[1:]) if y > x]
    if len(diffs) < 5:
        raise ValueError(f"{len(diffs)} precisely timed intervals, at least 5 needed")

    def fits(d: float, c: float) -> bool:
        m = round(d / c)
        return m >= 1 and abs(d / c - m) <= 0.12  # in periods; the polls' timing error

    candidates = sorted({d / m for d in diffs for m in range(1, 9)}, reverse=True)
    share = {c: sum(fits(d, c) for d in diffs) / len(diffs) for c in candidates}
    # Every fraction of the period fits as well as the period; a multiple of it fits only
    # the intervals that happen to be its multiples. Hence: the largest candidate that fits
    # (nearly) as many as the best one.
    top = max(share.values())
    if top < 0.8:
        raise ValueError("the intervals between changes share no common period")
    best = next(c for c in candidates if share[c] >= top - 0.05)
    kept = [d for d in diffs if fits(d, best)]
    period = sum(kept) / sum(round(d / best) for d in kept)
    # Cross-check against all changes, precise or not: each needs an update of its own, so no
    # more than span / period can be seen, and most updates should be seen (values rarely
    # repeat). A poller starved in step with the scheduler can fake a period that fails this.
    seen = (len(changes) - 1) * period / (changes[-1][1] - changes[0][1])
    if not 0.5 <= seen <= 1.05:
        raise ValueError(f"a period of {period:.4g} s would mean {seen:.0%} of the updates were "
                         "seen to change the value; the polls were likely delayed too much")
    return period


def infer_period(read: Callable[[], float], label: str, seconds: float = 3.0, min_changes: int = 30,
                 launch: Callable[[], object] | None = None, attempts: int = 3) -> float:
    """Infer how often a reading updates, s: poll it, time its changes, `refresh_period_from_changes`.

    Polls as fast as possible until ``min_changes`` changes (at least 7) or ``seconds``; polls again,
    up to ``attempts`` times in all, when the polls were timed too badly to tell (a busy CPU).
    ``launch`` runs repeatedly meanwhile, so a reading flat at idle still moves; ``label`` names the
    reading in messages. `InputError` where an argument is out of its range; `GpudvfsError` where
    the reading changed too rarely, or no attempt could tell the period.
    """
    if not (seconds > 0 and math.isfinite(seconds)):
        raise InputError(f"seconds: expected a positive duration, got {seconds!r}")
    if min_changes < 7:
        raise InputError(f"min_changes: expected at least 7, got {min_changes!r}")
    if attempts < 1:
        raise InputError(f"attempts: expected at least 1, got {attempts!r}")
    for attempt in range(1, attempts + 1):
        changes = poll_changes(read, seconds, min_changes, launch)
        try:
            return refresh_period_from_changes(changes)
        except ValueError as exc:
            if len(changes) < min_changes:
                raise GpudvfsError(
                    f"{label} changed {len(changes)} times in {seconds} s, too few to infer its refresh "
                    f"period ({exc}); pass a workload to keep the GPU busy (launch=...) or poll for longer "
                    "(seconds=...)") from None
            if attempt == attempts:
                raise GpudvfsError(f"could not infer the refresh period of {label} in {attempts} attempts "
                                   f"({exc}); retry on a less busy CPU") from None
    raise AssertionError("unreachable")


def poll_changes(read: Callable[[], float], seconds: float, min_changes: int,
                 launch: Callable[[], object] | None = None) -> list[tuple[float, float]]:
    """Poll a reading as fast as possible and bracket the times its value changed, until ``min_changes``.

    ``launch`` runs repeatedly in this thread meanwhile, while the polls run in a thread of their
    own (a launch can last longer than a refresh period).
    """
    done = threading.Event()
    changes: list[tuple[float, float]] = []
    error: list[BaseException] = []

    def poll() -> None:
        try:
            # A reading is taken somewhere inside its call, so a change seen by one call
            # happened after the previous call began and before this one returned.
            previous_start = time.perf_counter()
            deadline = previous_start + seconds
            last = read()
            while not done.is_set() and len(changes) < min_changes:
                start = time.perf_counter()
                value = read()
                end = time.perf_counter()
                if value != last:
                    changes.append((previous_start, end))
                    last = value
                previous_start = start
                if end > deadline:
                    break
        except BaseException as exc:
            error.append(exc)
        finally:
            done.set()

    if launch is None:
        poll()
    else:
        poller = threading.Thread(target=poll, name="gpudvfs-refresh-poll", daemon=True)
        poller.start()
        try:
            while not done.is_set():
                launch()
        finally:
            done.set()
            poller.join()
    if error:
        raise error[0]
    return changes
