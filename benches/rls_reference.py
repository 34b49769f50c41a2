"""Vectorised numpy implementation of the RLS bank update: the baseline of
bench_online.py and the cross-check of the Rust kernel (rust/src/online/kernel.rs).

Same algorithm: covariance-form RLS with exponential or directional forgetting, a dead
zone for negligible excitation, a trace bound, and rejection of non-finite or indefinite
results (those streams are left unchanged). Covariances are full (S, n, n) arrays here;
numpy has no cheap packed form, the Rust side stores packed triangles.
"""

from __future__ import annotations

import numpy as np


class NumpyRlsBank:
    def __init__(self, streams: int, n: int, forgetting: float = 1.0, initial_covariance: float = 100.0,
                 forgetting_mode: str = "directional", trace_max: float | None = None,
                 min_excitation: float = 1e-10):
        if not 0.0 < forgetting <= 1.0:
            raise ValueError(f"forgetting must be in (0, 1], got {forgetting}")
        if forgetting_mode not in ("exponential", "directional"):
            raise ValueError(f"unknown forgetting_mode {forgetting_mode!r}")
        self.lam, self.mode = forgetting, forgetting_mode
        self.trace_max = n * initial_covariance if trace_max is None else trace_max
        self.min_excitation = min_excitation
        self.coef = np.zeros((streams, n))
        self.cov = np.broadcast_to(initial_covariance * np.eye(n), (streams, n, n)).copy()

    def predict(self, x):
        return np.einsum("si,si->s", self.coef, x)

    def update(self, x, y, mask=None) -> int:
        x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
        if not (np.isfinite(x).all() and np.isfinite(y).all()):
            raise ValueError("non-finite input")
        ph = np.einsum("sij,sj->si", self.cov, x)
        s = np.einsum("si,si->s", x, ph)
        active = np.isfinite(s) & (s > self.min_excitation)
        if mask is not None:
            active &= mask
        lam = self.lam
        denom = lam + s
        err = y - np.einsum("si,si->s", self.coef, x)
        with np.errstate(all="ignore"):
            if self.mode == "exponential":
                gamma, mu = 1.0 / denom, 1.0 / lam
            else:
                gamma, mu = (s + lam - 1.0) / (s * denom), 1.0
            newcov = (self.cov - gamma[:, None, None] * ph[:, :, None] * ph[:, None, :]) * mu
            newcoef = self.coef + ph * (err / denom)[:, None]
            diag = np.einsum("sii->si", newcov)
            trace = diag.sum(axis=1)
            ok = (np.isfinite(newcov).all(axis=(1, 2)) & np.isfinite(newcoef).all(axis=1)
                  & (diag.min(axis=1) > 0) & np.isfinite(trace))
            scale = np.where(trace > self.trace_max, self.trace_max / trace, 1.0)
        apply = active & ok
        self.cov[apply] = newcov[apply] * scale[apply, None, None]
        self.coef[apply] = newcoef[apply]
        return int(apply.sum())


def make_batches(steps: int, streams: int, n: int, seed: int = 0):
    """Batches like real traces: 30% zero rows (no excitation), 20% rows with the last
    feature a copy of the first (collinear), a mask leaving out 10%."""
    rng = np.random.default_rng(seed)
    truth = rng.normal(size=(streams, n))
    x = rng.uniform(-1, 1, size=(steps, streams, n))
    x[rng.random((steps, streams)) < 0.3] = 0.0
    col = rng.random((steps, streams)) < 0.2
    x[..., n - 1][col] = x[..., 0][col]
    y = np.einsum("ksi,si->ks", x, truth) + 0.01 * rng.normal(size=(steps, streams))
    mask = rng.random((steps, streams)) < 0.9
    return x, y, mask
