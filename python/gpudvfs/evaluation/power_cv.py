"""Choosing the power model's settings by cross-validation over microbenchmarks, so that no
application figure had a say in them.

A *setting* is the voltage structure (``per-config``, ``per-domain``, ``curve``), the objective
(squared watts or squared relative errors) and the ridge on the component weights
(:data:`SETTINGS`). Each is scored on each microbenchmark file by grouped k-fold
cross-validation (every benchmark held out once, :func:`gpudvfs.power.cross_validate`); the
setting with the lowest mean over the files is chosen, and it is the ``default`` variant of
:class:`~gpudvfs.power.PowerModel` (a test holds the two together). How well
that rule carries to a GPU it did not see: each file scored under the setting chosen on the
*other* files alone (leave-one-GPU-out). Where applications were measured on a GPU whose
microbenchmarks are among the files, the chosen setting's error on them is an unseen figure;
every setting's error on them comes alongside, to show how far the choice is from the best in
hindsight and how the figure moves with the ridge.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from gpudvfs.data.datasets import PowerDataset
from gpudvfs.errors import GpudvfsWarning, InputError
from gpudvfs.evaluation.nested import nested_choice
from gpudvfs.evaluation.power_errors import cross_validate
from gpudvfs.power.model import PowerModel

#: Ridge strengths tried on the component weights (``PowerModel(ridge=...)``).
RIDGES = (0.0, 0.001, 0.003, 0.01, 0.03, 0.1)


@dataclass(frozen=True)
class Setting:
    """One setting of the power fit: voltage structure, objective and ridge."""

    variant: str
    relative_error: bool
    ridge: float

    @property
    def label(self) -> str:
        return f"{self.variant}, {'relative' if self.relative_error else 'watts'}, ridge {self.ridge:g}"

    def model(self) -> PowerModel:
        return PowerModel(self.variant, relative_error=self.relative_error, ridge=self.ridge)

    def as_dict(self) -> dict:
        return {"variant": self.variant, "relative_error": self.relative_error, "ridge": self.ridge}


SETTINGS = tuple(Setting(v, rel, r) for v in ("per-config", "per-domain", "curve") for rel in (False, True)
                 for r in RIDGES)


def choose_settings(micro: dict[str, PowerDataset], apps: list[tuple[str, str]] | None = None,
                    tests: dict[str, PowerDataset] | None = None, folds: int = 6, settings=SETTINGS,
                    progress: Callable[[int, int, str], None] | None = None) -> dict:
    """The protocol over the microbenchmark files ``micro`` (path -> dataset): grouped
    ``folds``-fold CV MAPE of every setting on every file, the setting chosen on all files
    (lowest mean), and each file under the setting chosen on the others. ``apps`` pairs a
    file of ``micro`` with a file of ``tests`` (path -> dataset of applications measured on
    the same GPU): every setting fitted on the first and scored on the second.
    ``progress(done, total, label)`` is called after each setting."""
    if len(micro) < 2:
        raise InputError("choosing settings across GPUs needs at least two microbenchmark files")
    if not settings:
        raise InputError("no settings to choose among")
    pairs = list(apps or [])
    tests = tests or {}
    for train, test in pairs:
        if train not in micro or test not in tests:
            raise InputError(f"--apps {train} {test}: the first must be one of the microbenchmark files, "
                             "the second a file of applications")
        if micro[train].components != tests[test].components:  # refused now, not after the CV
            raise InputError(f"{test}: components {list(tests[test].components)} differ from the model's "
                             f"{list(micro[train].components)} (fitted on {train})")
    paths = list(micro)
    cv = np.empty((len(settings), len(paths)))
    unseen = np.empty((len(settings), len(pairs)))
    per_app = [np.empty((len(settings), len(tests[t].benchmarks))) for _, t in pairs]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GpudvfsWarning)  # every fold's notes; the figures say enough
        for i, s in enumerate(settings):
            for j, p in enumerate(paths):
                cv[i, j] = cross_validate(micro[p], folds, **s.as_dict())["mape"]
            for j, (train, test) in enumerate(pairs):
                r = s.model().fit(micro[train], unused="zero").evaluate(tests[test])
                unseen[i, j] = r["mape"]
                per_app[j][i] = list(r["per_benchmark"].values())
            if progress is not None:
                progress(i + 1, len(settings), s.label)
    best = int(np.argmin(cv.mean(axis=1)))
    others = nested_choice(cv)
    chosen = settings[best]
    return {
        "folds": folds, "settings": len(settings), "chosen": {**chosen.as_dict(), "label": chosen.label},
        "chosen_cv_mean": float(cv[best].mean()),
        "files": {p: {"cv_mape": float(cv[best, j]), "chosen_on_others": settings[others[j]].label,
                      "cv_mape_chosen_on_others": float(cv[others[j], j]),
                      "best_in_hindsight": float(cv[:, j].min())} for j, p in enumerate(paths)},
        "leave_one_gpu_out_mean": float(cv[others, np.arange(len(paths))].mean()),
        "apps": [{"train": train, "test": test, "mape": float(unseen[best, j]),
                  "chosen_on_other_apps": _chosen_on_other_apps(per_app[j]),
                  "best_in_hindsight": {"label": settings[int(np.argmin(unseen[:, j]))].label,
                                        "mape": float(unseen[:, j].min())},
                  "over_ridge": {f"{s.ridge:g}": float(unseen[i, j]) for i, s in enumerate(settings)
                                 if (s.variant, s.relative_error) == (chosen.variant, chosen.relative_error)}}
                 for j, (train, test) in enumerate(pairs)],
        "per_setting": {s.label: {"cv_mean": float(cv[i].mean()), "cv": dict(zip(paths, map(float, cv[i]))),
                                  "apps": [float(x) for x in unseen[i]]} for i, s in enumerate(settings)},
    }


def _chosen_on_other_apps(errors: np.ndarray) -> float | None:
    """Mean MAPE over applications (``errors``: [settings x applications]) of the setting with
    the least mean error on the *other* applications: what choosing on applications gives one
    it did not see. None with fewer than two applications."""
    if errors.shape[1] < 2:
        return None
    return float(errors[nested_choice(errors), np.arange(errors.shape[1])].mean())
