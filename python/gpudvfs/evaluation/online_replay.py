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
from dataclasses import asdict, dataclass, replace

import numpy as np

from gpudvfs._core import OnlinePredictor
from gpudvfs.data import read_measured_grid
from gpudvfs.data.datasets import MeasurementGrid
from gpudvfs.errors import InputError
from gpudvfs.online.features import FORMS, FeatureMap
from gpudvfs.online.grid import GridTable
from gpudvfs.online.selection import FeatureSelection, lasso_select
from gpudvfs.online.sensitivity import CounterFrequencyModel, predict_time_at
from gpudvfs.stats import mape, paired_intervals

MOVES = ("random", "step")
STREAMS = ("per-app", "shared")


@dataclass(frozen=True)
class ReplaySettings:
    """Defaults: the form, stream layout, forgetting factor, initial covariance and
    forgetting mode were chosen on training traces only (see :func:`tune` and docs/online.md);
    the trace parameters are the issue's."""

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
class Trace:
    app: np.ndarray      # (K,) index into the table's apps
    level: np.ndarray    # (K, domains) level indices
    time_ms: np.ndarray  # (K,) observed (with noise)
    switch: np.ndarray   # (K,) the application changed at this step


def make_trace(table: GridTable, apps, steps: int, rng: np.random.Generator, *, moves: str = "random",
               p_switch: float = 0.05, p_move: float = 0.3, noise: float = 0.01) -> Trace:
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


def _clocks(table: GridTable, tr: Trace) -> np.ndarray:
    return np.stack([table.levels[d][tr.level[:, d]] for d in range(len(table.domains))], axis=1)


def _counter_columns(table: GridTable, names) -> list[int]:
    return [table.counter_names.index(c) for c in names]


def _bases(tr: Trace, streams: str) -> np.ndarray:
    """Index of the step each step is predicted from (-1: none, the last value is used)."""
    k = len(tr.app)
    if streams == "shared":
        return np.arange(k) - 1
    base = np.full(k, -1)
    last: dict[int, int] = {}
    for i, a in enumerate(tr.app.tolist()):
        base[i] = last.get(a, -1)
        last[a] = i
    return base


def _rows(table: GridTable, tr: Trace, fm: FeatureMap, cols, streams: str):
    """Per step: base index, regressors h (zeros where there is no base), target t_k - t_base."""
    base = _bases(tr, streams)
    f, x = _clocks(table, tr), table.counters[(tr.app,) + tuple(tr.level.T)][:, cols]
    b = np.maximum(base, 0)
    h = fm.regressors(f[b], f, x[b], x)
    y = tr.time_ms - tr.time_ms[b]
    h[base < 0], y[base < 0] = 0.0, 0.0
    return base, h, y


@dataclass(frozen=True, eq=False)
class Trained:
    """What the replay learns offline from the training applications."""

    features: FeatureMap
    selection: FeatureSelection
    offline_coef: np.ndarray
    counter_model: CounterFrequencyModel
    traces: tuple[Trace, ...]


def train_model(table: GridTable, apps, counters, steps: int, rngs, moves: str, settings: ReplaySettings) -> Trained:
    full = FeatureMap.fit(table, apps, settings.form, counters)
    cols = _counter_columns(table, full.counters)
    kw = dict(moves=moves, p_switch=settings.p_switch, p_move=settings.p_move, noise=settings.noise)
    traces = tuple(make_trace(table, apps, steps, rng, **kw) for rng in rngs)
    rows = [_rows(table, tr, full, cols, settings.streams) for tr in traces]
    h = np.vstack([r[1][r[0] >= 0] for r in rows])
    y = np.concatenate([r[2][r[0] >= 0] for r in rows])
    sel = lasso_select(h, y, keep=range(full.n_frequency), folds=settings.folds)
    fm = full.with_selection(sel.selected)
    coef = np.linalg.lstsq(h[:, list(sel.selected)], y, rcond=None)[0]
    return Trained(fm, sel, coef, CounterFrequencyModel.fit(table, apps, fm.counters), traces)


def run_online(table: GridTable, tr: Trace, fm: FeatureMap, settings: ReplaySettings):
    """The online model along a trace: predictions of every step (NaN at step 0), the
    coefficients of the stream each step used after its update, the bases and regressors."""
    base, h, y = _rows(table, tr, fm, _counter_columns(table, fm.counters), settings.streams)
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


def _score(tr: Trace, pred, start: int) -> dict:
    k = np.arange(len(tr.time_ms)) >= start
    return {"mape": mape(pred, tr.time_ms, k), "mape_same_app": mape(pred, tr.time_ms, k & ~tr.switch)}


def _sensitivity(table: GridTable, tr: Trace, fm: FeatureMap, cm: CounterFrequencyModel, coef_after,
                 start: int) -> dict:
    """Eq. 12 one level up and down in every domain from each step k >= start, with the
    coefficients after step k, against the measured (noise-free) time there: with Eq. 14
    counters, with the counters held, and the no-change guess t_k for scale."""
    f = _clocks(table, tr)
    x = table.counters[(tr.app,) + tuple(tr.level.T)][:, _counter_columns(table, fm.counters)]
    ks = np.arange(start, len(tr.time_ms))
    kinds = ("eq14", "counters_held", "no_change")
    errs: dict = {d: {k: [] for k in kinds} for d in table.domains}
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
    pooled = {k: np.concatenate([e for d in errs.values() for e in d[k]]) for k in kinds}
    return {"mape": float(100 * pooled["eq14"].mean()),
            "mape_counters_held": float(100 * pooled["counters_held"].mean()),
            "mape_no_change": float(100 * pooled["no_change"].mean()),
            "cases": len(pooled["eq14"]),
            "mean_measured_change": float(100 * np.concatenate(moved).mean()),
            "per_domain": {d: {f"mape_{k}": float(100 * np.concatenate(v[k]).mean()) for k in kinds}
                           for d, v in errs.items()}}


def _table(source) -> GridTable:
    grid = source if isinstance(source, MeasurementGrid) else read_measured_grid(source, "the replay")
    return GridTable.from_grid(grid)


def _split(data: GridTable, train_source):
    """(training table, training apps, scored apps, counters both files have, how the
    split was made)."""
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


def replay(data, train=None, *, steps: int = 2000, seed: int = 0, moves: str = "random",
           settings: ReplaySettings = ReplaySettings()) -> dict:
    """Replay a trace of ``steps`` steps drawn from the grid ``data`` (a path or a
    MeasurementGrid); see the module documentation. Returns a JSON-ready dict with
    "naive", "online", "offline" ({"mape", "mape_same_app"}), "sensitivity" and
    "intervals_same_app" (95% bootstrap intervals over the scored applications of the online
    same-application MAPE and of its paired differences from the other two)."""
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
    res = {
        "data": table.path,
        "train": {"source": how, "apps": [tr_table.apps[i] for i in tr_apps]},
        "scored_apps": [table.apps[i] for i in test_apps],
        "steps": steps, "seed": seed, "moves": moves,
        "settings": asdict(settings),
        "features": fm.names,
        "lasso": {"selected": [fm.all_names[i] for i in trained.selection.lasso_selected],
                  "alpha_min": trained.selection.alpha_min, "alpha_1se": trained.selection.alpha_1se,
                  "features_at_alpha_min": trained.selection.n_at_alpha_min,
                  "converged": trained.selection.converged},
        "shared_time_curves": table.shared_time_curves(),
        "switches_scored": int(np.sum(tr.switch[settings.start:])),
        "naive": _score(tr, naive, settings.start),
        "online": _score(tr, pred, settings.start),
        "offline": _score(tr, offline, settings.start),
        "sensitivity": _sensitivity(table, tr, fm, trained.counter_model, coef_after, settings.start),
    }
    res["ratio_same_app"] = res["online"]["mape_same_app"] / res["naive"]["mape_same_app"]
    # How far the same-application figures could move with other applications: their steps
    # resampled by application (a step goes with its application), online beside the others.
    same = (np.arange(steps) >= settings.start) & ~tr.switch
    ape = {k: 100.0 * np.abs(p[same] - tr.time_ms[same]) / tr.time_ms[same]
           for k, p in (("online", pred), ("naive", naive), ("offline", offline))}
    res["intervals_same_app"] = paired_intervals(ape["online"], {"naive": ape["naive"], "offline": ape["offline"]},
                                                 tr.app[same])
    return res


def tune(data, train=None, *, steps: int = 2000, seed: int = 0, moves: str = "random",
         settings: ReplaySettings = ReplaySettings(), forgetting=(0.9, 0.95, 0.98, 0.99, 1.0),
         initial_covariance=(1.0, 100.0, 1e4), forgetting_mode=("directional", "exponential")) -> list[dict]:
    """How the replay defaults are chosen: the online model's same-application MAPE on the
    training traces (the applications ``replay`` trains on, never the scored ones) for
    every combination of the given values; best first. The features are selected once,
    with ``settings``."""
    table = _table(data)
    tr_table, tr_apps, _, counters, _ = _split(table, train)
    seeds = np.random.SeedSequence(seed).spawn(1 + settings.train_traces)
    trained = train_model(tr_table, tr_apps, counters, steps, [np.random.default_rng(s) for s in seeds[1:]], moves,
                          settings)
    out = []
    for lam, delta, mode in itertools.product(forgetting, initial_covariance, forgetting_mode):
        s = replace(settings, forgetting=lam, initial_covariance=delta, forgetting_mode=mode)
        preds = [run_online(tr_table, tr, trained.features, s)[0] for tr in trained.traces]
        mape = np.mean([_score(tr, p, s.start)["mape_same_app"] for tr, p in zip(trained.traces, preds)])
        out.append({"forgetting": lam, "initial_covariance": delta, "forgetting_mode": mode,
                    "train_mape_same_app": float(mape)})
    return sorted(out, key=lambda r: r["train_mape_same_app"])
