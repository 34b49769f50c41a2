"""Regressors of the differential time model (Gupta et al. Eq. 6), one frequency term per clock domain.

Two forms:

``paper``   dt = sum_d a_d (f_d,prev / f_d,new - 1) + sum_i a_i dx_i        (Eq. 6)
``inverse`` dt = sum_j c_j (phi_j(f_new) - phi_j(f_prev)) + sum_i a_i dx_i
            phi = (u_d, u_d^2 per domain, u_core * u_mem), u_d = f_d,ref / f_d

In the paper's form the frequency coefficient is the frequency-scalable time at the clock
the step starts from, a0 = t_s(f_prev): it changes whenever the clock does, so the
estimator chases a moving target, and one coefficient cannot describe both domains'
interaction. The inverse form writes the time itself as t(f) = c0 + sum_j c_j phi_j(f)
(time per cycle is 1/f; the square and the product absorb stalls and memory-core
coupling), whose coefficients are constants of the workload, and differences it.

Counters enter as changes divided by a recorded scale (their spread over the training
grid), so coefficients and the RLS prior (initial covariance) are comparable across
counters of very different magnitudes. Clocks are (m, domains) arrays in MHz, counters
(m, counters).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from gpudvfs.errors import InputError
from gpudvfs.online.grid import GridTable

FORMS = ("paper", "inverse")


def frequency_names(form: str, domains: Sequence[str]) -> list[str]:
    """The names of a form's frequency terms over the clock ``domains``.

    The domains are ``core``, and ``mem`` where the grid moves it. ``ratio:<domain>`` per domain
    (``paper``); ``inv:<domain>``, ``inv2:<domain>`` per domain and ``inv:core*mem`` for two domains
    (``inverse``).
    """
    if form == "paper":
        return [f"ratio:{d}" for d in domains]
    if form == "inverse":
        return ([f"inv:{d}" for d in domains] + [f"inv2:{d}" for d in domains]
                + (["inv:core*mem"] if len(domains) == 2 else []))
    raise InputError(f"unknown form {form!r}; expected one of {FORMS}")


@dataclass(frozen=True)
class FeatureMap:
    """How (clocks, counters) before and after a step become the regressors h of a step.

    ``ref_mhz`` is one reference clock per domain (the inverse form's u_d = f_d,ref / f_d),
    ``scale`` one per counter (changes are divided by it); ``selected`` indexes :attr:`all_names`,
    the columns :meth:`regressors` returns. Raises `InputError` if the form is unknown, or the
    clocks, scales or selection do not match.
    """

    form: str
    domains: tuple[str, ...]
    ref_mhz: tuple[float, ...]
    counters: tuple[str, ...]
    scale: tuple[float, ...]
    selected: tuple[int, ...]

    def __post_init__(self) -> None:
        """Check the map (see Raises above)."""
        n_all = len(self.all_names)  # also checks the form
        if len(self.ref_mhz) != len(self.domains) or not all(f > 0 for f in self.ref_mhz):
            raise InputError(f"FeatureMap: need one positive reference clock per domain {self.domains}")
        if len(self.scale) != len(self.counters) or not all(s > 0 and np.isfinite(s) for s in self.scale):
            raise InputError("FeatureMap: need one positive finite scale per counter")
        if not self.selected or any(not 0 <= i < n_all for i in self.selected):
            raise InputError(f"FeatureMap: selected must index the {n_all} features")

    @classmethod
    def fit(cls, table: GridTable, apps: Sequence[int], form: str, counters: Iterable[str] | None = None) -> FeatureMap:
        """The map of a grid's training workloads ``apps``, each counter scaled by its standard deviation there.

        Counters constant there carry no information and are left out; the reference clocks are
        the highest levels; every feature is selected (see :meth:`with_selection`). Raises
        `InputError` if every counter is constant over the workloads.
        """
        _, _, x = table.rows(apps)
        sd = x.std(axis=0)
        wanted = set(table.counter_names if counters is None else counters)
        keep = [i for i, c in enumerate(table.counter_names) if sd[i] > 0 and c in wanted]
        if not keep:
            raise InputError(f"{table.path}: every counter is constant over the training workloads")
        n_all = len(frequency_names(form, table.domains)) + len(keep)
        return cls(form, table.domains, tuple(float(lv[-1]) for lv in table.levels),
                   tuple(table.counter_names[i] for i in keep), tuple(float(sd[i]) for i in keep),
                   tuple(range(n_all)))

    def with_selection(self, selected: Iterable[int]) -> FeatureMap:
        """The same map with other columns of :attr:`all_names` selected; `InputError` if none or out of range."""
        return FeatureMap(self.form, self.domains, self.ref_mhz, self.counters, self.scale,
                          tuple(int(i) for i in selected))

    @property
    def n_frequency(self) -> int:
        """The number of frequency terms."""
        return len(frequency_names(self.form, self.domains))

    @property
    def all_names(self) -> list[str]:
        """Every feature's name: the frequency terms, then ``d:<counter>`` per counter."""
        return frequency_names(self.form, self.domains) + [f"d:{c}" for c in self.counters]

    @property
    def names(self) -> list[str]:
        """The selected features' names."""
        all_names = self.all_names
        return [all_names[i] for i in self.selected]

    @property
    def n_features(self) -> int:
        """The number of selected features."""
        return len(self.selected)

    def _phi(self, f: np.ndarray) -> np.ndarray:
        u = np.asarray(self.ref_mhz) / f
        parts = [u, u * u] + ([u[:, :1] * u[:, 1:2]] if f.shape[1] == 2 else [])
        return np.hstack(parts)

    def frequency_terms(self, f_prev: ArrayLike, f_new: ArrayLike) -> np.ndarray:
        """The (m, :attr:`n_frequency`) frequency regressors of steps f_prev -> f_new."""
        f_prev, f_new = np.atleast_2d(f_prev), np.atleast_2d(f_new)
        if self.form == "paper":
            return f_prev / f_new - 1.0
        return self._phi(f_new) - self._phi(f_prev)

    def counter_change(self, dx: ArrayLike) -> np.ndarray:
        """Raw counter changes over each counter's scale."""
        return np.atleast_2d(dx) / np.asarray(self.scale)

    def regressors(self, f_prev: ArrayLike, f_new: ArrayLike, x_prev: ArrayLike, x_new: ArrayLike) -> np.ndarray:
        """The C-contiguous (m, :attr:`n_features`) regressors of steps, from clocks and raw counters around each."""
        h = np.hstack([self.frequency_terms(f_prev, f_new),
                       self.counter_change(np.atleast_2d(x_new) - np.atleast_2d(x_prev))])
        return np.ascontiguousarray(h[:, list(self.selected)])

    def to_dict(self) -> dict[str, Any]:
        """The map as plain data (JSON, tuples as lists), which :meth:`from_dict` reads."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> FeatureMap:
        """A map from :meth:`to_dict`'s data; `InputError` if it is not a complete, valid map."""
        try:
            return cls(str(d["form"]), tuple(d["domains"]), tuple(map(float, d["ref_mhz"])),
                       tuple(d["counters"]), tuple(map(float, d["scale"])), tuple(map(int, d["selected"])))
        except (KeyError, TypeError, ValueError) as e:
            raise InputError(f"not a FeatureMap description: {e}") from None
