"""A choice that stays safe where the models are unsure.

The models' least-energy pair is often far from the reference clocks, where their error is
largest: on the V100 grid their choice costs more than one pair for all. Here each predicted
objective (energy, or energy x time) carries a spread that grows with the pair's distance
from the reference clocks, fitted to the log residuals of the training workloads
(`gpudvfs.time.interval.fit_spread`: ``r^2 ~ a + b * d^2``, ``d`` the log distance of the pair
from the reference). The choice
(`safe_indices`) keeps the predicted optimum only where its predicted gain over an ANCHOR,
a pair known to be safe, exceeds ``z`` spreads of the difference; else it takes the anchor:
the reference clocks, or one pair for all chosen on the other workloads of the same GPU.

The anchor and ``z`` are chosen by nested cross-validation (`safe_report`): for each workload
held out, every (anchor, z) is scored on the other workloads, each of them with its anchor and
spread fitted without it and without the held-out one, and the best by the project's protocol
(`gpudvfs.evaluation.nested.protocol_least`: the aggregate of the scores chosen one level in, as
for the time model's settings) is applied to the held-out workload. ``z = 0`` is the plain
choice; ``z = inf`` the anchor always. A cap (`within_cap`) keeps the choice near the anchor;
`gpudvfs.evaluation.safe_grids` chooses (anchor, cap, z) on other GPUs' grids (`SHARED_RULE`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpudvfs.errors import InputError
from gpudvfs.evaluation.nested import protocol_least
from gpudvfs.evaluation.regret import MeanMax
from gpudvfs.records import Record
from gpudvfs.stats import paired_intervals
from gpudvfs.time.interval import fit_spread, log_distance, spread

#: The spreads the gain must exceed (0: the models' plain choice; inf: the anchor always).
Z_GRID = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, np.inf)
#: What the choice falls back to.
ANCHORS = ("single_pair", "reference")
#: The rule (anchor, cap, z) `gpudvfs select safe-cv` chooses on every public grid, for a GPU
#: none of them measured (`gpudvfs.evaluation.safe_grids`; its test checks it still is).
SHARED_RULE = ("single_pair", 0.3, 0.5)
#: Groups the nested choice needs: one held out, one to choose the constants on, one to anchor on.
MIN_GROUPS = 3


@dataclass(frozen=True)
class SafeChoice(MeanMax):
    """The safe choice's regret, each workload with the (anchor, z) chosen on the others.

    ``chosen``: each workload's constants, named as in `SafeReport.over_constants`;
    ``aggregates``: the aggregate of the scores that chose them.
    """

    chosen: tuple[str, ...]
    aggregates: tuple[str, ...]


@dataclass(frozen=True)
class Spread(Record):
    """The spread of a predicted log objective, fitted on every workload: its range over the pairs."""

    at_reference: float
    farthest: float


@dataclass(frozen=True, eq=False)
class SafeReport(Record):
    """The safe choice scored by nested cross-validation, beside its baselines.

    ``plain``, ``single_pair`` and ``reference`` are baselines on the same workloads: the models'
    plain choice, one pair for all chosen without the workload, the reference clocks.
    ``over_constants`` is the regret at each fixed (anchor, z), each workload's anchor and
    spread fitted without it: how the figure moves with the constants. ``intervals`` holds 95%
    bootstrap intervals of the safe choice's mean regret and of its paired differences from the
    plain choice and one pair for all (`gpudvfs.stats.paired_intervals`). ``note`` says why the
    safe setting is the reference without a choice (fewer than :data:`MIN_GROUPS` groups: no
    others to choose the rule on). ``shared_rule`` is the regret under `SHARED_RULE`, each
    workload's anchor and spread fitted without it (None with one group); the rule was chosen
    on the public grids, the GTX 980's and the V100's among them: on those it is not held out.
    """

    cross_validated: SafeChoice
    plain: MeanMax
    single_pair: MeanMax | None
    reference: MeanMax
    over_constants: dict[str, MeanMax]
    intervals: dict
    spread: Spread
    per_workload: np.ndarray
    note: str | None = None
    shared_rule: MeanMax | None = None


def safe_indices(log_pred: np.ndarray, sd: np.ndarray, anchor: np.ndarray, z: float,
                 allowed: np.ndarray | None = None) -> np.ndarray:
    """Per workload [A], the predicted optimum where its gain over the anchor exceeds ``z`` spreads; else the anchor.

    ``log_pred`` and ``sd`` are [A x K]; the spread of a difference is the root sum of squares.
    ``z`` 0 is the plain choice, inf the anchor always. ``allowed`` [A x K] limits where the
    optimum is sought (`within_cap`); the anchor is always allowed.
    """
    rows = np.arange(log_pred.shape[0])
    best = np.argmin(log_pred if allowed is None else np.where(allowed, log_pred, np.inf), axis=1)
    gain = log_pred[rows, anchor] - log_pred[rows, best]
    band = z * np.hypot(sd[rows, best], sd[rows, anchor]) if np.isfinite(z) else np.inf
    return np.where(gain > band, best, anchor)


def within_cap(configs: np.ndarray, anchor: np.ndarray, cap: float) -> np.ndarray:
    """[A x K] whether each pair lies within ``cap`` of its workload's anchor, in log distance (inf: every pair).

    A cap bounds what a wrong prediction can cost: the choice stays near a pair known to be safe.
    """
    return np.array([log_distance(configs, np.asarray(configs, dtype=np.float64)[a]) <= cap for a in anchor])


def candidate_regrets(regret: np.ndarray, log_pred: np.ndarray, log_measured: np.ndarray, configs: np.ndarray,
                      reference_index: int, candidates: list[tuple[str, float, float]]) -> dict[str, np.ndarray]:
    """Each workload's regret under each rule (anchor, cap, z), its anchor and spread fitted on the other workloads.

    Arrays as `safe_report`'s; the keys name the rules as `rule_name` does.
    """
    regret, log_pred = np.asarray(regret, dtype=np.float64), np.asarray(log_pred, dtype=np.float64)
    n = len(regret)
    d = log_distance(configs, np.asarray(configs, dtype=np.float64)[reference_index])
    fold = _Fold(regret, log_pred - np.asarray(log_measured, dtype=np.float64), d, reference_index, np.arange(n))
    fits = [fold.anchor_and_spread(a, np.zeros(n, dtype=bool)) for a in range(n)]
    return {rule_name(*rule): _under(rule, regret, log_pred, configs, fits) for rule in candidates}


def _under(rule: tuple[str, float, float], regret: np.ndarray, log_pred: np.ndarray, configs: np.ndarray,
           fits: list[tuple[dict, np.ndarray]]) -> np.ndarray:
    """Each workload's regret under ``rule``, with its anchors and spread (``fits``) fitted without it."""
    anchor, cap, z = rule
    at = np.array([f[0][anchor] for f in fits])
    chosen = safe_indices(log_pred, np.array([f[1] for f in fits]), at, z, within_cap(configs, at, cap))
    return regret[np.arange(len(regret)), chosen]


def rule_name(anchor: str, cap: float, z: float) -> str:
    """How a rule is named in the reports: ``single_pair cap=0.3 z=0.5``."""
    return f"{anchor} cap={cap:g} z={z:g}"


class _Fold:
    """Anchors and spreads for workloads predicted without a set of others."""

    def __init__(self, regret: np.ndarray, residual: np.ndarray, d: np.ndarray, reference_index: int,
                 labels: np.ndarray) -> None:
        self.regret, self.residual, self.d, self.ref, self.labels = regret, residual, d, reference_index, labels

    def anchor_and_spread(self, a: int, out: np.ndarray) -> tuple[dict, np.ndarray]:
        """Workload ``a``'s anchors and spread, fitted on the others where ``out`` is False, not of its group."""
        train = ~out & (self.labels != self.labels[a])
        pair = int(np.argmin(self.regret[train].mean(axis=0)))
        return {"single_pair": pair, "reference": self.ref}, spread(self.d, *fit_spread(self.residual[train], self.d))


def safe_report(regret: np.ndarray, log_pred: np.ndarray, log_measured: np.ndarray, configs: np.ndarray,
                reference_index: int, groups: np.ndarray | None = None, z_grid: tuple[float, ...] = Z_GRID,
                anchors: tuple[str, ...] = ANCHORS) -> SafeReport:
    """The safe choice scored by nested cross-validation (module notes).

    ``regret``, ``log_pred`` (predicted without the workload) and ``log_measured`` are
    [A x K]; ``reference_index`` is where the spread is least; ``groups`` label workloads held
    out together (default: each alone); ``z_grid`` and ``anchors`` (`ANCHORS`) are tried.

    Raises InputError where the shapes differ.
    """
    regret, log_pred = np.asarray(regret, dtype=np.float64), np.asarray(log_pred, dtype=np.float64)
    n, k = regret.shape
    labels = np.arange(n) if groups is None else np.asarray(groups)
    if log_pred.shape != (n, k) or np.shape(log_measured) != (n, k) or labels.shape != (n,):
        raise InputError(f"regret, log_pred and log_measured must all be [{n} x {k}] and groups one per workload")
    d = log_distance(configs, np.asarray(configs, dtype=np.float64)[reference_index])
    fold = _Fold(regret, log_pred - np.asarray(log_measured, dtype=np.float64), d, reference_index, labels)
    rows = np.arange(n)
    plain = regret[rows, np.argmin(log_pred, axis=1)]
    reference = regret[:, reference_index]
    overall = spread(d, *fit_spread(fold.residual, d))
    groups_n = len(np.unique(labels))
    none = np.zeros(n, dtype=bool)
    # Each workload with its anchors and spread fitted without it (one group: none to fit on).
    own = [fold.anchor_and_spread(a, none) for a in range(n)] if groups_n > 1 else []
    single = regret[rows, [f[0]["single_pair"] for f in own]] if own else None
    shared = MeanMax.of(_under(SHARED_RULE, regret, log_pred, configs, own)) if own else None
    if groups_n < MIN_GROUPS or single is None:  # single is None only with one group
        return _reference_only(plain, reference, single, groups_n, overall, shared)

    def regrets(fits: list[tuple[dict, np.ndarray]], members: np.ndarray, anchor: str, z: float) -> np.ndarray:
        idx = [safe_indices(log_pred[[a]], fits[i][1][None, :], np.array([fits[i][0][anchor]]), z)[0]
               for i, a in enumerate(members)]
        return regret[members, idx]

    constants = [(anchor, z) for anchor in anchors for z in z_grid]
    over = {f"{anchor} z={z:g}": regrets(own, rows, anchor, z) for anchor, z in constants}
    safe, chosen, used = np.empty(n), [], []  # chosen: the constants' names, as in over_constants
    for a in rows:
        inner = rows[labels != labels[a]]
        out = labels == labels[a]
        fits = [fold.anchor_and_spread(b, out) for b in inner]
        scores = np.array([regrets(fits, inner, anchor, z) for anchor, z in constants])
        # The project's protocol: the aggregate over the workloads chosen one level in (ties: the
        # first candidate, the plainer choice).
        c, aggregate = protocol_least(scores, labels[inner])
        anchor, z = constants[c]
        chosen.append(f"{anchor} z={z:g}")
        used.append(aggregate)
        safe[a] = over[chosen[-1]][a]
    return SafeReport(
        cross_validated=SafeChoice.of(safe, chosen=tuple(chosen), aggregates=tuple(used)),
        plain=MeanMax.of(plain), single_pair=MeanMax.of(single), reference=MeanMax.of(reference),
        over_constants={name: MeanMax.of(r) for name, r in over.items()},
        intervals=paired_intervals(safe, {"plain": plain, "single_pair": single}, groups=labels),
        spread=Spread(float(overall.min()), float(overall.max())),
        per_workload=safe, shared_rule=shared)


def _reference_only(plain: np.ndarray, reference: np.ndarray, single: np.ndarray | None, groups: int,
                    overall: np.ndarray, shared: MeanMax | None) -> SafeReport:
    """The report where too few groups leave nothing to choose the rule on: the reference is the safe setting.

    One pair for all (``single``) is still scored where there are two groups, each chosen on the other.
    """
    n = len(plain)
    return SafeReport(
        cross_validated=SafeChoice.of(reference, chosen=("reference",) * n, aggregates=("none",) * n),
        plain=MeanMax.of(plain), single_pair=None if single is None else MeanMax.of(single),
        reference=MeanMax.of(reference), over_constants={},
        intervals={}, spread=Spread(float(overall.min()), float(overall.max())), per_workload=reference,
        note=f"{groups} application{'s' if groups > 1 else ''}: the safe choice is chosen on other applications and "
             f"anchored on yet others, which needs at least {MIN_GROUPS}; the reference is the safe setting",
        shared_rule=shared)
