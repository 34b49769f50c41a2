"""Choosing the power fit's settings by cross-validation over microbenchmarks: no application has a say.

A *setting* (:data:`SETTINGS`) is the voltage structure, the objective (squared watts or
squared relative errors) and the ridge on the component weights. Each is scored on each
microbenchmark file by grouped k-fold cross-validation (`cross_validate_power`); the lowest
mean over the files is chosen, and it is :class:`~gpudvfs.power.PowerModel`'s ``default``
variant (a test holds the two together). How well that rule carries to an unseen GPU: each
file scored under the setting chosen on the *other* files (leave-one-GPU-out). Applications
measured on a GPU whose microbenchmarks are among the files give an unseen figure, beside
every setting's error on them: how far the choice is from the best in hindsight, and how
the figure moves with the ridge.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from gpudvfs.data.datasets import PowerDataset
from gpudvfs.errors import GpudvfsWarning, InputError
from gpudvfs.evaluation.nested import nested_choice
from gpudvfs.evaluation.power_errors import cross_validate_power, power_errors
from gpudvfs.power.model import PowerModel

#: Ridge strengths tried on the component weights (``PowerModel(ridge=...)``).
RIDGES = (0.0, 0.001, 0.003, 0.01, 0.03, 0.1)


@dataclass(frozen=True)
class Setting:
    """One setting of the power fit: voltage structure, objective and ridge.

    ``variant`` is ``"per-config"``, ``"per-domain"`` or ``"curve"``; ``relative_error`` fits
    squared relative errors instead of squared watts; ``ridge`` acts on the component weights.
    """

    variant: str
    relative_error: bool
    ridge: float

    @property
    def label(self) -> str:
        """The setting in words, as the reports name it (``"per-config, relative, ridge 0"``)."""
        return f"{self.variant}, {'relative' if self.relative_error else 'watts'}, ridge {self.ridge:g}"

    def model(self) -> PowerModel:
        """An unfitted power model of this setting."""
        return PowerModel(self.variant, relative_error=self.relative_error, ridge=self.ridge)

    def as_dict(self) -> dict:
        """The setting as `PowerModel`'s keyword arguments."""
        return {"variant": self.variant, "relative_error": self.relative_error, "ridge": self.ridge}


SETTINGS = tuple(Setting(v, rel, r) for v in ("per-config", "per-domain", "curve") for rel in (False, True)
                 for r in RIDGES)


@dataclass(frozen=True)
class FileChoice:
    """One microbenchmark file's grouped CV MAPE (%) under the protocol.

    Under the setting chosen on all files (``cv_mape``), under the one chosen on the others
    (leave-one-GPU-out), and the least over every setting.
    """

    cv_mape: float
    chosen_on_others: str
    cv_mape_chosen_on_others: float
    best_in_hindsight: float

    def to_dict(self) -> dict:
        """The figures as a JSON object, keyed by the attributes' names."""
        return {"cv_mape": self.cv_mape, "chosen_on_others": self.chosen_on_others,
                "cv_mape_chosen_on_others": self.cv_mape_chosen_on_others,
                "best_in_hindsight": self.best_in_hindsight}


@dataclass(frozen=True)
class ApplicationsScore:
    """Every setting fitted on a microbenchmark file and scored on applications of the same GPU (MAPE, %).

    ``mape`` is the setting chosen on the microbenchmarks: an unseen figure.
    ``chosen_on_other_apps`` is the mean over the applications of the setting with the least
    mean error on the *other* applications: what choosing on applications gives one it did not
    see (None with fewer than two). ``over_ridge`` gives the chosen voltage structure and
    objective at each ridge (``f"{ridge:g}"``).
    """

    train: str
    test: str
    mape: float
    chosen_on_other_apps: float | None
    best_in_hindsight_label: str
    best_in_hindsight_mape: float
    over_ridge: dict[str, float]

    def to_dict(self) -> dict:
        """The figures as `gpudvfs power cv --json` prints them; the best in hindsight as ``{"label", "mape"}``."""
        return {"train": self.train, "test": self.test, "mape": self.mape,
                "chosen_on_other_apps": self.chosen_on_other_apps,
                "best_in_hindsight": {"label": self.best_in_hindsight_label, "mape": self.best_in_hindsight_mape},
                "over_ridge": self.over_ridge}


@dataclass(frozen=True)
class SettingCV:
    """One setting's grouped CV MAPE (%): mean over the files, per file, and per pair of `choose_settings`' ``apps``."""

    cv_mean: float
    cv: dict[str, float]
    apps: list[float]

    def to_dict(self) -> dict:
        """The figures as a JSON object, keyed by the attributes' names."""
        return {"cv_mean": self.cv_mean, "cv": self.cv, "apps": self.apps}


@dataclass(frozen=True)
class SettingsChoice:
    """The power fit's setting chosen by the protocol (`choose_settings`); figures are MAPE (%).

    ``leave_one_gpu_out_mean`` is the mean over the files of each one's MAPE under the setting
    chosen on the others; ``per_setting`` is keyed by label.
    """

    folds: int
    n_settings: int
    chosen: Setting
    chosen_cv_mean: float
    files: dict[str, FileChoice]
    leave_one_gpu_out_mean: float
    apps: list[ApplicationsScore]
    per_setting: dict[str, SettingCV]

    def to_dict(self) -> dict:
        """The choice as `gpudvfs power cv --json` prints it; the count of settings under ``settings``."""
        return {"folds": self.folds, "settings": self.n_settings,
                "chosen": {**self.chosen.as_dict(), "label": self.chosen.label},
                "chosen_cv_mean": self.chosen_cv_mean, "files": {p: f.to_dict() for p, f in self.files.items()},
                "leave_one_gpu_out_mean": self.leave_one_gpu_out_mean, "apps": [a.to_dict() for a in self.apps],
                "per_setting": {k: v.to_dict() for k, v in self.per_setting.items()}}


def choose_settings(micro: dict[str, PowerDataset], apps: list[tuple[str, str]] | None = None,
                    tests: dict[str, PowerDataset] | None = None, folds: int = 6,
                    settings: Sequence[Setting] = SETTINGS,
                    progress: Callable[[int, int, str], None] | None = None) -> SettingsChoice:
    """The protocol over microbenchmark files of several GPUs: the setting with the lowest mean grouped CV MAPE.

    Every setting's grouped ``folds``-fold CV MAPE on every file (``micro``: path -> dataset, at
    least two), the setting chosen on all files (lowest mean), and each file under the setting
    chosen on the others. ``apps`` pairs a file of ``micro`` with a file of ``tests``
    (applications measured on the same GPU): every setting is fitted on the first and scored on
    the second. ``progress(done, total, label)`` is called after each setting.

    Raises InputError with fewer than two files or no setting, or on a pair whose first file is not
    among ``micro``, whose second is not among ``tests``, or whose components differ.
    """
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
                cv[i, j] = cross_validate_power(micro[p], folds, **s.as_dict()).mape
            for j, (train, test) in enumerate(pairs):
                r = power_errors(s.model().fit(micro[train], unused="zero"), tests[test])
                unseen[i, j] = r["mape"]
                per_app[j][i] = list(r["per_benchmark"].values())
            if progress is not None:
                progress(i + 1, len(settings), s.label)
    best = int(np.argmin(cv.mean(axis=1)))
    others = nested_choice(cv)
    chosen = settings[best]
    return SettingsChoice(
        folds, len(settings), chosen, float(cv[best].mean()),
        {p: FileChoice(float(cv[best, j]), settings[others[j]].label, float(cv[others[j], j]), float(cv[:, j].min()))
         for j, p in enumerate(paths)},
        float(cv[others, np.arange(len(paths))].mean()),
        [ApplicationsScore(train, test, float(unseen[best, j]), _chosen_on_other_apps(per_app[j]),
                           settings[int(np.argmin(unseen[:, j]))].label, float(unseen[:, j].min()),
                           {f"{s.ridge:g}": float(unseen[i, j]) for i, s in enumerate(settings)
                            if (s.variant, s.relative_error) == (chosen.variant, chosen.relative_error)})
         for j, (train, test) in enumerate(pairs)],
        {s.label: SettingCV(float(cv[i].mean()), dict(zip(paths, map(float, cv[i]))), [float(x) for x in unseen[i]])
         for i, s in enumerate(settings)})


def _chosen_on_other_apps(errors: np.ndarray) -> float | None:
    """Mean MAPE over applications of the setting with the least mean error on the *other* ones.

    What choosing on applications gives one it did not see (``errors``: [settings x
    applications]). None with fewer than two applications.
    """
    if errors.shape[1] < 2:
        return None
    return float(errors[nested_choice(errors), np.arange(errors.shape[1])].mean())
