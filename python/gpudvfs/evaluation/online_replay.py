"""Replay: the online predictor on a trace drawn from a measurement grid.

A trace of K steps runs one application at a time: at each step the application switches
to a random other one with probability ``p_switch`` and each clock domain moves with
probability ``p_move`` (to a random other supported level, or one level up or down with
``moves="step"``); the observed time is the measured time of (application, clocks) times
(1 + ``noise`` N(0, 1)). Everything random comes from one seed.

Predictors of t_k, scored by MAPE over steps k >= ``start``, on all steps and on steps
without an application switch:

* naive: the last value, t_{k-1};
* online: t_base + h . a, ``a`` learned by RLS (the Rust core) as the trace goes. With
  ``streams="per-app"`` (default) each application has its own stream and a step is
  predicted from that application's last observation (time, clocks, counters): a governor
  keys its streams by kernel or process name, as the GPU driver reports it. A first visit
  falls back to the last value. With ``streams="shared"`` one stream learns from
  consecutive steps, as in the paper;
* offline: the same features and bases, coefficients fitted once by least squares on the
  training traces.

Training side (all from the training applications, never the scored ones): counter scales,
Lasso selection, offline coefficients and the Eq. 14 counter model, on ``train_traces``
traces of K steps over the training applications. Without a TRAIN file the DATA file's
applications are split: sorted by name, even positions train, odd positions are scored.

The sensitivity error compares Eq. 12 (with Eq. 14 counters, the online coefficients
after step k) with the measured time one level up and one level down in each domain.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

from gpudvfs._core import OnlinePredictor
from gpudvfs.data import read_measured_grid
from gpudvfs.data.datasets import MeasurementGrid
from gpudvfs.errors import InputError
from gpudvfs.evaluation.online_traces import MOVES, Trace, counter_columns, make_trace, step_clocks, step_rows
from gpudvfs.online.features import FORMS, FeatureMap
from gpudvfs.online.grid import GridTable
from gpudvfs.online.selection import FeatureSelection, lasso_select
from gpudvfs.online.sensitivity import CounterFrequencyModel, predict_time_at
from gpudvfs.stats import mape, paired_intervals

STREAMS = ("per-app", "shared")

#: A grid to replay: a measured grid, or the path of one.
GridSource = MeasurementGrid | str | Path


@dataclass(frozen=True)
class ReplaySettings:
    """The online model's settings and the traces' parameters.

    The form (one of ``gpudvfs.online.FORMS``), stream layout (``"per-app"``: one RLS stream per
    application; ``"shared"``: one for the trace), forgetting factor, initial covariance (times
    the identity) and forgetting mode (``"directional"`` or ``"exponential"``) were chosen on
    training traces only (see :func:`tune` and docs/online.md). ``p_switch`` and ``p_move`` are
    the probabilities that a step switches application and that it moves each clock domain;
    ``noise`` is the relative noise of each observed time; ``start`` the warm-up steps before
    scoring.

    Raises InputError on an unknown form or stream layout, a probability outside [0, 1], a negative or
    non-finite noise, or a ``start`` or ``train_traces`` below 1.
    """

    form: str = "inverse"
    streams: str = "per-app"
    forgetting: float = 0.95
    initial_covariance: float = 100.0
    forgetting_mode: str = "directional"
    p_switch: float = 0.05
    p_move: float = 0.3
    noise: float = 0.01
    start: int = 50
    train_traces: int = 3
    folds: int = 10

    def __post_init__(self) -> None:
        """Refuse a setting out of range."""
        if self.form not in FORMS:
            raise InputError(f"unknown form {self.form!r}; expected one of {FORMS}")
        if self.streams not in STREAMS:
            raise InputError(f"unknown streams {self.streams!r}; expected one of {STREAMS}")
        for name in ("p_switch", "p_move"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise InputError(f"{name} must be in [0, 1], got {getattr(self, name)}")
        if not (self.noise >= 0 and np.isfinite(self.noise)):
            raise InputError(f"noise must be finite and >= 0, got {self.noise}")
        if self.start < 1 or self.train_traces < 1:
            raise InputError("start and train_traces must be >= 1")


@dataclass(frozen=True, eq=False)
class Trained:
    """What the replay learns offline from the training applications (`train_model`).

    ``features`` is restricted to the Lasso's ``selection``; ``offline_coef`` is least squares
    on the training ``traces``; ``counter_model`` is Eq. 14.
    """

    features: FeatureMap
    selection: FeatureSelection
    offline_coef: np.ndarray
    counter_model: CounterFrequencyModel
    traces: tuple[Trace, ...]


def train_model(table: GridTable, apps: Sequence[int], counters: Sequence[str], steps: int,
                rngs: Sequence[np.random.Generator], moves: str, settings: ReplaySettings) -> Trained:
    """Counter scales, Lasso selection, offline coefficients and the Eq. 14 counter model, from training traces."""
    full = FeatureMap.fit(table, apps, settings.form, counters)
    cols = counter_columns(table, full.counters)
    traces = tuple(make_trace(table, apps, steps, rng, moves=moves, p_switch=settings.p_switch,
                              p_move=settings.p_move, noise=settings.noise) for rng in rngs)
    rows = [step_rows(table, tr, full, cols, settings.streams) for tr in traces]
    h = np.vstack([r[1][r[0] >= 0] for r in rows])
    y = np.concatenate([r[2][r[0] >= 0] for r in rows])
    sel = lasso_select(h, y, keep=range(full.n_frequency), folds=settings.folds)
    fm = full.with_selection(sel.selected)
    coef = np.linalg.lstsq(h[:, list(sel.selected)], y, rcond=None)[0]
    return Trained(fm, sel, coef, CounterFrequencyModel.fit(table, apps, fm.counters), traces)


def run_online(table: GridTable, tr: Trace, fm: FeatureMap,
               settings: ReplaySettings) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The online model along a trace.

    Returns
    -------
    tuple of numpy.ndarray
        The prediction of every step (NaN at step 0), the coefficients of the stream each step
        used after its update, each step's base (the step it is predicted from; -1: none) and
        its regressors.
    """
    base, h, y = step_rows(table, tr, fm, counter_columns(table, fm.counters), settings.streams)
    t = tr.time_ms
    pred = np.empty(len(t))
    pred[0] = np.nan
    coef_after = np.zeros((len(t), fm.n_features))
    streams: dict[int, OnlinePredictor] = {}
    per_app = settings.streams == "per-app"
    for k in range(1, len(t)):
        key = int(tr.app[k]) if per_app else 0
        p = streams.get(key)
        if p is None:
            p = streams[key] = OnlinePredictor(fm.n_features, settings.forgetting, settings.initial_covariance,
                                               forgetting_mode=settings.forgetting_mode)
        j = base[k]
        if j < 0:
            pred[k] = t[k - 1]
        else:
            pred[k] = t[j] + p.predict(h[k])
            p.update(h[k], y[k])
        coef_after[k] = p.coef
    return pred, coef_after, base, h


@dataclass(frozen=True)
class TraceErrors:
    """A predictor's MAPE (%) over the scored steps (k >= ``start``), and over those without an application switch."""

    mape: float
    mape_same_app: float

    def to_dict(self) -> dict:
        """The errors as `gpudvfs online replay --json` prints them."""
        return {"mape": self.mape, "mape_same_app": self.mape_same_app}


@dataclass(frozen=True)
class SensitivityErrors:
    """MAPE (%) of the time predicted one clock level away.

    Eq. 12 with Eq. 14 counters, with the counters held, and the no-change guess, for scale.
    """

    eq14: float
    counters_held: float
    no_change: float


@dataclass(frozen=True)
class Sensitivity:
    """Eq. 12 one level up and down in every clock domain from each scored step.

    ``cases`` counts (step, domain, direction); ``mean_measured_change`` (%) is how much the
    measured time moves over one level: what there is to predict.
    """

    errors: SensitivityErrors
    cases: int
    mean_measured_change: float
    per_domain: dict[str, SensitivityErrors]

    def to_dict(self) -> dict:
        """The sensitivity as `gpudvfs online replay --json` prints it."""
        e = self.errors
        return {"mape": e.eq14, "mape_counters_held": e.counters_held, "mape_no_change": e.no_change,
                "cases": self.cases, "mean_measured_change": self.mean_measured_change,
                "per_domain": {d: {"mape_eq14": v.eq14, "mape_counters_held": v.counters_held,
                                   "mape_no_change": v.no_change} for d, v in self.per_domain.items()}}


@dataclass(frozen=True, eq=False)
class OnlineReplayResult:
    """The online model, the last value and the offline model on one trace (`replay`).

    ``shared_time_curves`` groups applications with the same measured time at every
    configuration. ``intervals_same_app`` holds 95% bootstrap intervals over the scored
    applications (a step goes with its application) of the online same-application MAPE
    (``mean``) and of its paired differences from the other two (``minus_naive``,
    ``minus_offline``).
    """

    data: str
    train_source: str
    train_apps: list[str]
    scored_apps: list[str]
    steps: int
    seed: int
    moves: str
    settings: ReplaySettings
    features: FeatureMap
    selection: FeatureSelection
    shared_time_curves: list[list[str]]
    switches_scored: int
    naive: TraceErrors
    online: TraceErrors
    offline: TraceErrors
    sensitivity: Sensitivity
    intervals_same_app: dict

    @property
    def ratio_same_app(self) -> float:
        """The online model's same-application MAPE over the last value's: at most 0.5 meets the target."""
        return self.online.mape_same_app / self.naive.mape_same_app

    def to_dict(self) -> dict:
        """The replay as `gpudvfs online replay --json` prints it; the Lasso's selection under ``lasso``."""
        sel = self.selection
        return {
            "data": self.data, "train": {"source": self.train_source, "apps": self.train_apps},
            "scored_apps": self.scored_apps, "steps": self.steps, "seed": self.seed, "moves": self.moves,
            "settings": asdict(self.settings), "features": self.features.names,
            "lasso": {"selected": [self.features.all_names[i] for i in sel.lasso_selected],
                      "alpha_min": sel.alpha_min, "alpha_1se": sel.alpha_1se,
                      "features_at_alpha_min": sel.n_at_alpha_min, "converged": sel.converged},
            "shared_time_curves": self.shared_time_curves, "switches_scored": self.switches_scored,
            "naive": self.naive.to_dict(), "online": self.online.to_dict(), "offline": self.offline.to_dict(),
            "sensitivity": self.sensitivity.to_dict(), "ratio_same_app": self.ratio_same_app,
            "intervals_same_app": self.intervals_same_app,
        }


def _score(tr: Trace, pred: np.ndarray, start: int) -> TraceErrors:
    k = np.arange(len(tr.time_ms)) >= start
    return TraceErrors(mape(pred, tr.time_ms, k), mape(pred, tr.time_ms, k & ~tr.switch))


def _sensitivity(table: GridTable, tr: Trace, fm: FeatureMap, cm: CounterFrequencyModel, coef_after: np.ndarray,
                 start: int) -> Sensitivity:
    """Eq. 12 one level up and down in every domain from each step k >= start.

    With the coefficients after step k, against the measured (noise-free) time there: with
    Eq. 14 counters, with the counters held, and the no-change guess t_k for scale.
    """
    f = step_clocks(table, tr)
    x = table.counters[(tr.app,) + tuple(tr.level.T)][:, counter_columns(table, fm.counters)]
    ks = np.arange(start, len(tr.time_ms))
    kinds = ("eq14", "counters_held", "no_change")
    errs: dict[str, dict[str, list[np.ndarray]]] = {d: {k: [] for k in kinds} for d in table.domains}
    moved = []  # how much the measured time moves over one level: what there is to predict
    for (d, dom), s in itertools.product(enumerate(table.domains), (-1, 1)):
        lv = tr.level[ks].copy()
        lv[:, d] += s
        ok = (lv[:, d] >= 0) & (lv[:, d] < len(table.levels[d]))
        kk, lv = ks[ok], lv[ok]
        truth = table.time_ms[(tr.app[kk],) + tuple(lv.T)]
        f_new = f[kk].copy()
        f_new[:, d] = table.levels[d][lv[:, d]]
        t_k = tr.time_ms[kk]
        guesses = (predict_time_at(fm, coef_after[kk], t_k, f[kk], f_new, x[kk], cm),
                   predict_time_at(fm, coef_after[kk], t_k, f[kk], f_new, x[kk]), t_k)
        for kind, g in zip(kinds, guesses):
            errs[dom][kind].append(np.abs(g - truth) / truth)
        t_true = table.time_ms[(tr.app[kk],) + tuple(tr.level[kk].T)]
        moved.append(np.abs(truth - t_true) / t_true)

    def errors(parts: dict[str, list[np.ndarray]]) -> SensitivityErrors:
        return SensitivityErrors(*(float(100 * np.concatenate(parts[k]).mean()) for k in kinds))

    pooled = {k: [e for d in errs.values() for e in d[k]] for k in kinds}
    return Sensitivity(errors(pooled), len(np.concatenate(pooled["eq14"])),
                       float(100 * np.concatenate(moved).mean()), {d: errors(v) for d, v in errs.items()})


def _table(source: GridSource) -> GridTable:
    grid = source if isinstance(source, MeasurementGrid) else read_measured_grid(source, "the replay")
    return GridTable.from_grid(grid)


def _split(data: GridTable, train_source: GridSource | None
           ) -> tuple[GridTable, list[int], list[int], Sequence[str], str]:
    """(training table, training apps, scored apps, counters both files have, how the split was made)."""
    if train_source is None:
        if len(data.apps) < 2:
            raise InputError(f"{data.path}: splitting into training and scored applications needs at least 2")
        idx = list(range(len(data.apps)))  # apps are sorted by name
        how = ("no TRAIN file: DATA's applications sorted by name, even positions train, "
               "odd positions are scored")
        return data, idx[0::2], idx[1::2], data.counter_names, how
    tr = _table(train_source)
    if tr.domains != data.domains:
        raise InputError(f"{tr.path} has clock domains {tr.domains}, {data.path} has {data.domains}")
    common = [c for c in tr.counter_names if c in data.counter_names]
    if not common:
        raise InputError(f"{tr.path} and {data.path} have no counter in common")
    return (tr, list(range(len(tr.apps))), list(range(len(data.apps))), common,
            f"TRAIN file {tr.path}, all its applications")


def replay(data: GridSource, train: GridSource | None = None, *, steps: int = 2000, seed: int = 0,
           moves: str = "random", settings: ReplaySettings = ReplaySettings()) -> OnlineReplayResult:
    """Replay a trace drawn from a grid: the online model against the last value and the offline model.

    See the module documentation for the trace, the predictors and the training side.
    ``train`` None splits ``data``'s applications (sorted by name, even positions train);
    ``steps`` must exceed ``settings.start`` + 1.

    Raises InputError on unknown ``moves``, too few steps, a grid that cannot be replayed, or a TRAIN
    grid of other clock domains or with no counter in common.
    """
    if moves not in MOVES:
        raise InputError(f"unknown moves {moves!r}; expected one of {MOVES}")
    if steps <= settings.start + 1:
        raise InputError(f"steps must exceed the {settings.start} warm-up steps, got {steps}")
    table = _table(data)
    tr_table, tr_apps, test_apps, counters, how = _split(table, train)
    seeds = np.random.SeedSequence(seed).spawn(1 + settings.train_traces)
    rngs = [np.random.default_rng(s) for s in seeds]
    trained = train_model(tr_table, tr_apps, counters, steps, rngs[1:], moves, settings)
    fm = trained.features
    tr = make_trace(table, test_apps, steps, rngs[0], moves=moves, p_switch=settings.p_switch,
                    p_move=settings.p_move, noise=settings.noise)
    pred, coef_after, base, h = run_online(table, tr, fm, settings)
    naive = np.concatenate([[np.nan], tr.time_ms[:-1]])
    offline = np.where(base >= 0, tr.time_ms[np.maximum(base, 0)] + h @ trained.offline_coef, naive)
    # How far the same-application figures could move with other applications: their steps
    # resampled by application (a step goes with its application), online beside the others.
    same = (np.arange(steps) >= settings.start) & ~tr.switch
    ape = {k: 100.0 * np.abs(p[same] - tr.time_ms[same]) / tr.time_ms[same]
           for k, p in (("online", pred), ("naive", naive), ("offline", offline))}
    return OnlineReplayResult(
        table.path, how, [tr_table.apps[i] for i in tr_apps], [table.apps[i] for i in test_apps], steps, seed, moves,
        settings, fm, trained.selection, table.shared_time_curves(), int(np.sum(tr.switch[settings.start:])),
        _score(tr, naive, settings.start), _score(tr, pred, settings.start), _score(tr, offline, settings.start),
        _sensitivity(table, tr, fm, trained.counter_model, coef_after, settings.start),
        paired_intervals(ape["online"], {"naive": ape["naive"], "offline": ape["offline"]}, tr.app[same]))


@dataclass(frozen=True)
class TuneScore:
    """One combination of the online model's settings and its same-application MAPE (%) on the training traces."""

    forgetting: float
    initial_covariance: float
    forgetting_mode: str
    train_mape_same_app: float

    def to_dict(self) -> dict:
        """The combination and its score in one JSON object."""
        return asdict(self)


def tune(data: GridSource, train: GridSource | None = None, *, steps: int = 2000, seed: int = 0,
         moves: str = "random", settings: ReplaySettings = ReplaySettings(),
         forgetting: Iterable[float] = (0.9, 0.95, 0.98, 0.99, 1.0),
         initial_covariance: Iterable[float] = (1.0, 100.0, 1e4),
         forgetting_mode: Iterable[str] = ("directional", "exponential")) -> list[TuneScore]:
    """How the replay defaults are chosen: the online model on the training traces under every combination.

    The training traces are those of the applications ``replay`` trains on, never the scored
    ones; the features are selected once, with ``settings``. Returns the scores best first.
    """
    table = _table(data)
    tr_table, tr_apps, _, counters, _ = _split(table, train)
    seeds = np.random.SeedSequence(seed).spawn(1 + settings.train_traces)
    trained = train_model(tr_table, tr_apps, counters, steps, [np.random.default_rng(s) for s in seeds[1:]], moves,
                          settings)
    out = []
    for lam, delta, mode in itertools.product(forgetting, initial_covariance, forgetting_mode):
        s = replace(settings, forgetting=lam, initial_covariance=delta, forgetting_mode=mode)
        preds = [run_online(tr_table, tr, trained.features, s)[0] for tr in trained.traces]
        score = np.mean([_score(tr, p, s.start).mape_same_app for tr, p in zip(trained.traces, preds)])
        out.append(TuneScore(lam, delta, mode, float(score)))
    return sorted(out, key=lambda r: r.train_mape_same_app)
