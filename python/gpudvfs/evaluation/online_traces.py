"""Traces drawn from a measurement grid, and each step's regression row.

The traces are those `gpudvfs.evaluation.online_replay` replays; a step's row is the step it
is predicted from, its regressors and its target.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from gpudvfs.errors import InputError
from gpudvfs.online.features import FeatureMap
from gpudvfs.online.grid import GridTable

MOVES = ("random", "step")


@dataclass(frozen=True, eq=False)
class Trace:
    """A trace of K steps drawn from a grid (`make_trace`).

    ``app`` (K,) indexes the table's apps; ``level`` (K, domains) is each step's level index in
    each clock domain; ``time_ms`` (K,) the observed time, with noise; ``switch`` (K,) whether
    the application changed at the step.
    """

    app: np.ndarray
    level: np.ndarray
    time_ms: np.ndarray
    switch: np.ndarray


def make_trace(table: GridTable, apps: Iterable[int], steps: int, rng: np.random.Generator, *,
               moves: str = "random", p_switch: float = 0.05, p_move: float = 0.3, noise: float = 0.01) -> Trace:
    """A trace of ``steps`` steps over some of a grid's applications (indices into ``table.apps``).

    At each step the application switches to a random other one with probability
    ``p_switch`` and each clock domain moves with probability ``p_move`` (``moves="random"``:
    to a random other level; ``"step"``: one level up or down); the observed time is the
    measured time of (application, clocks) times (1 + ``noise`` N(0, 1)). Every draw comes
    from ``rng``.

    Raises InputError on unknown ``moves``.
    """
    if moves not in MOVES:
        raise InputError(f"unknown moves {moves!r}; expected one of {MOVES}")
    apps = list(apps)
    n_lev = [len(lv) for lv in table.levels]
    app = np.empty(steps, dtype=np.int64)
    lvl = np.empty((steps, len(n_lev)), dtype=np.int64)
    switch = np.zeros(steps, dtype=bool)
    app[0] = rng.choice(apps)
    lvl[0] = [rng.integers(n) for n in n_lev]
    for k in range(1, steps):
        app[k], lvl[k] = app[k - 1], lvl[k - 1]
        if len(apps) > 1 and rng.random() < p_switch:
            app[k] = rng.choice([a for a in apps if a != app[k - 1]])
            switch[k] = True
        for d, n in enumerate(n_lev):
            if n > 1 and rng.random() < p_move:
                if moves == "random":  # a different supported level, uniformly
                    lvl[k, d] = (lvl[k - 1, d] + rng.integers(1, n)) % n
                else:  # one level up or down; at an end the only way there is
                    s = 1 if rng.random() < 0.5 else -1
                    lvl[k, d] += s if 0 <= lvl[k - 1, d] + s < n else -s
    t_true = table.time_ms[(app,) + tuple(lvl.T)]
    return Trace(app, lvl, t_true * (1.0 + noise * rng.standard_normal(steps)), switch)


def step_clocks(table: GridTable, tr: Trace) -> np.ndarray:
    """Each step's clocks, (K, domains) MHz."""
    return np.stack([table.levels[d][tr.level[:, d]] for d in range(len(table.domains))], axis=1)


def counter_columns(table: GridTable, names: Sequence[str]) -> list[int]:
    """The columns of ``table.counters`` of the counters ``names``, in that order."""
    return [table.counter_names.index(c) for c in names]


def step_bases(tr: Trace, streams: str) -> np.ndarray:
    """(K,) the step each step is predicted from; -1 where there is none (the last value is used).

    ``streams="shared"``: the step before; ``"per-app"``: the application's last step.
    """
    k = len(tr.app)
    if streams == "shared":
        return np.arange(k) - 1
    base = np.full(k, -1)
    last: dict[int, int] = {}
    for i, a in enumerate(tr.app.tolist()):
        base[i] = last.get(a, -1)
        last[a] = i
    return base


def step_rows(table: GridTable, tr: Trace, fm: FeatureMap, cols: list[int],
          streams: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each step's regression row.

    ``cols`` are the columns of ``fm``'s counters in ``table.counters`` (`counter_columns`).

    Returns
    -------
    tuple of numpy.ndarray
        Per step: its base (`step_bases`), its regressors h (zeros where there is no base)
        and its target t_k - t_base (0 there).
    """
    base = step_bases(tr, streams)
    f, x = step_clocks(table, tr), table.counters[(tr.app,) + tuple(tr.level.T)][:, cols]
    b = np.maximum(base, 0)
    h = fm.regressors(f[b], f, x[b], x)
    y = tr.time_ms - tr.time_ms[b]
    h[base < 0], y[base < 0] = 0.0, 0.0
    return base, h, y
