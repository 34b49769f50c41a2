"""The governor's estimates and decisions in numpy: what `rust/src/govern/` replaced, the
baseline of bench_govern.py and the cross-check of the Rust core (tests/govern/test_govern.py).

Same method as `gpudvfs.govern.governor` (its module notes): per phase two streams (log
time, log watts), each the offline prediction corrected by an RLS fit linear in (1, log
fc/fc_default, log fm/fm_default) and by the residual of its most correlated measured pair;
a measured pair known by its own mean. No argument checks: the Governor makes them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpudvfs import OnlinePredictor
from gpudvfs.govern.governor import RECHECK_RUNS, policy_recheck_z


@dataclass
class _Stream:
    prior: np.ndarray
    rls: OnlinePredictor
    n: np.ndarray
    measured: np.ndarray
    near: np.ndarray
    corr: np.ndarray
    residual_var: np.ndarray


@dataclass
class _Phase:
    t: _Stream
    p: _Stream
    excluded: np.ndarray
    surprise: float = 0.0
    visited: int = 0


class NumpyGovernor:
    """``decide(current)`` and ``observe`` as `gpudvfs.govern.Governor`'s, for one phase at a time."""

    def __init__(self, configs, default_index: int, *, policy="energy", slowdown=0.1, power_cap_w=None,
                 prior_sd=0.05, noise_sd=0.01, explore=4.0, hysteresis=0.005, residual_sd=0.03,
                 residual_scale=0.4, default_runs=4, bound_z=0.5, recheck_z=None, recheck_runs=RECHECK_RUNS):
        cfg = np.asarray(configs, dtype=np.float64)
        self.default_index, self.policy, self.slowdown, self.power_cap_w = default_index, policy, slowdown, power_cap_w
        self.prior_sd, self.noise_sd, self.explore, self.hysteresis = prior_sd, noise_sd, explore, hysteresis
        self.residual_sd, self.residual_scale = residual_sd, residual_scale
        self.default_runs, self.bound_z = default_runs, bound_z
        self.recheck_z = policy_recheck_z(policy) if recheck_z is None else recheck_z
        self.recheck_runs = recheck_runs
        self._phi = np.column_stack([np.ones(len(cfg)), np.log(cfg / cfg[default_index])])
        self._phi2 = (self._phi[:, :, None] * self._phi[:, None, :]).reshape(len(cfg), 9) * noise_sd ** 2
        self._phases: dict = {}
        self._phase: _Phase | None = None

    def phase(self, key, time_ms, watts) -> None:
        if key not in self._phases:
            k = len(self._phi)
            cov = (self.prior_sd / self.noise_sd) ** 2

            def stream(x):
                return _Stream(np.log(np.asarray(x, dtype=np.float64)), OnlinePredictor(3, 1.0, cov), np.zeros(k),
                               np.zeros(k), np.zeros(k, dtype=np.intp), np.zeros(k), np.full(k, self.residual_sd ** 2))
            self._phases[key] = _Phase(stream(time_ms), stream(watts), np.zeros(k, dtype=bool))
        self._phase = self._phases[key]

    def _model(self, s: _Stream):
        return s.prior + self._phi @ s.rls.coef, self._phi2 @ s.rls.covariance.ravel()

    def estimates(self):
        ph = self._phase
        inflate = max(1.0, ph.surprise / ph.visited) if ph.visited else 1.0
        out = []
        for s in (ph.t, ph.p):
            mean, var = self._model(s)
            mean += s.corr * (s.measured[s.near] - mean[s.near])
            var = var * inflate + s.residual_var
            seen = s.n > 0
            np.copyto(mean, s.measured, where=seen)
            np.copyto(var, self.noise_sd ** 2 / np.maximum(s.n, 1), where=seen)
            out += [mean, var]
        return out[0], out[2], out[1], out[3]

    def decide(self, current: int) -> int:
        lt, lp, vt, vp = self.estimates()
        ph = self._phase
        score = lt + lp
        allowed = ~ph.excluded
        if self.policy == "edp":
            score = score + lt
        elif self.policy == "deadline":
            d = self.default_index
            margin = self.bound_z * np.sqrt(vt + vt[d])
            margin[d] = 0.0
            allowed = allowed & (lt + margin <= lt[d] + np.log1p(self.slowdown))
        elif self.policy == "power-cap":
            score = lt
            allowed = allowed & (lp <= np.log(self.power_cap_w))
        if not allowed.any():
            held = ~ph.excluded if not ph.excluded.all() else np.ones_like(allowed)
            allowed = np.zeros_like(allowed)
            allowed[np.argmin(np.where(held, lt if self.policy == "deadline" else lp, np.inf))] = True
        masked = np.where(allowed, score, np.inf)
        best = int(np.argmin(masked))
        sd = np.sqrt(vt if self.policy == "power-cap" else 4 * vt + vp if self.policy == "edp" else vt + vp)
        n = ph.p.n
        recheck = 0.0 if self.policy == "deadline" else self.recheck_z
        lcb = masked - sd * np.where(n == 0, self.explore, np.where(n < self.recheck_runs, recheck, 0.0))
        candidate = int(np.argmin(lcb))
        exploring = lcb[candidate] < masked[best] - self.hysteresis
        d = self.default_index
        if self.policy == "deadline" and ph.p.n[d] < self.default_runs and not ph.excluded[d]:
            exploring, candidate = True, d
        nxt = candidate if exploring else best
        if not exploring and allowed[current] and masked[current] - masked[best] <= self.hysteresis:
            nxt = current
        return nxt

    def exclude(self, index: int) -> None:
        self._phase.excluded[index] = True

    def observe(self, index: int, time_ms: float | None, watts: float) -> None:
        ph = self._phase
        lp = np.log(watts)
        lt = None if time_ms is None else np.log(time_ms)
        if ph.p.n[index] == 0:
            (mp, vp), (mt, vt) = (self._model(s) for s in (ph.p, ph.t))
            if lt is None:
                ph.surprise += (lp - mp[index]) ** 2 / (vp[index] + self.noise_sd ** 2)
            else:
                ph.surprise += (((lt - mt[index]) + (lp - mp[index])) ** 2
                                / (vt[index] + vp[index] + 2 * self.noise_sd ** 2))
            ph.visited += 1
        self._update(ph.p, index, lp)
        if lt is not None:
            self._update(ph.t, index, lt)

    def _update(self, s: _Stream, index: int, value: float) -> None:
        if s.n[index] == 0 and self.residual_sd > 0:
            d2 = ((self._phi[:, 1:] - self._phi[index, 1:]) ** 2).sum(axis=1)
            c = np.exp(-d2 / (2 * self.residual_scale ** 2))
            closer = c > s.corr
            s.near[closer] = index
            s.corr[closer] = c[closer]
            s.residual_var[closer] = self.residual_sd ** 2 * (1 - c[closer] ** 2)
        s.n[index] += 1
        s.measured[index] += (value - s.measured[index]) / s.n[index]
        s.rls.update(self._phi[index], value - s.prior[index])
