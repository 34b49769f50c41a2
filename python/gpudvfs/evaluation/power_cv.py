"""Choosing the power fit's settings by cross-validation over microbenchmarks: no application has a say.

A *setting* is the voltage structure (``per-config``, ``per-domain``, ``curve``), the objective
(squared watts or squared relative errors) and the ridge on the component weights
(:data:`SETTINGS`). Each is scored on each microbenchmark file by grouped k-fold
cross-validation (every benchmark held out once, `cross_validate_power`); the
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

    Parameters
    ----------
    variant : str
        The voltage structure: ``"per-config"``, ``"per-domain"`` or ``"curve"``.
    relative_error : bool
        Fit squared relative errors instead of squared watts.
    ridge : float
        The ridge on the component weights.
    """

    variant: str
    relative_error: bool
    ridge: float

    @property
    def label(self) -> str:
        """The setting in words, as the reports name it.

        Returns
        -------
        str
            E.g. ``"per-config, relative, ridge 0"``.
        """
        return f"{self.variant}, {'relative' if self.relative_error else 'watts'}, ridge {self.ridge:g}"

    def model(self) -> PowerModel:
        """An unfitted power model of this setting.

        Returns
        -------
        PowerModel
            With the setting's variant, objective and ridge.
        """
        return PowerModel(self.variant, relative_error=self.relative_error, ridge=self.ridge)

    def as_dict(self) -> dict:
        """The setting as `PowerModel`'s keyword arguments.

        Returns
        -------
        dict
            ``variant``, ``relative_error`` and ``ridge``.
        """
        return {"variant": self.variant, "relative_error": self.relative_error, "ridge": self.ridge}


SETTINGS = tuple(Setting(v, rel, r) for v in ("per-config", "per-domain", "curve") for rel in (False, True)
                 for r in RIDGES)


@dataclass(frozen=True)
class FileChoice:
    """One microbenchmark file under the protocol.

    Attributes
    ----------
    cv_mape : float
        Its grouped CV MAPE (%) under the setting chosen on all files.
    chosen_on_others : str
        The label of the setting chosen on the other files alone.
    cv_mape_chosen_on_others : float
        Its grouped CV MAPE (%) under that setting: leave-one-GPU-out.
    best_in_hindsight : float
        Its least grouped CV MAPE (%) over every setting.
    """

    cv_mape: float
    chosen_on_others: str
    cv_mape_chosen_on_others: float
    best_in_hindsight: float

    def to_dict(self) -> dict:
        """The figures as a JSON object, keyed by the attributes' names.

        Returns
        -------
        dict
            JSON-ready.
        """
        return {"cv_mape": self.cv_mape, "chosen_on_others": self.chosen_on_others,
                "cv_mape_chosen_on_others": self.cv_mape_chosen_on_others,
                "best_in_hindsight": self.best_in_hindsight}


@dataclass(frozen=True)
class ApplicationsScore:
    """Every setting fitted on a microbenchmark file and scored on applications of the same GPU.

    Attributes
    ----------
    train, test : str
        The microbenchmark file and the file of applications.
    mape : float
        MAPE (%) of the setting chosen on the microbenchmarks: an unseen figure.
    chosen_on_other_apps : float or None
        Mean MAPE (%) over the applications of the setting with the least mean error on the
        *other* applications: what choosing on applications gives one it did not see. None
        with fewer than two applications.
    best_in_hindsight_label : str
        The setting with the least MAPE on the applications.
    best_in_hindsight_mape : float
        Its MAPE (%).
    over_ridge : dict of str to float
        MAPE (%) of the chosen voltage structure and objective at each ridge (``f"{ridge:g}"``).
    """

    train: str
    test: str
    mape: float
    chosen_on_other_apps: float | None
    best_in_hindsight_label: str
    best_in_hindsight_mape: float
    over_ridge: dict[str, float]

    def to_dict(self) -> dict:
        """The figures as `gpudvfs power cv --json` prints them.

        Returns
        -------
        dict
            JSON-ready; the best in hindsight as ``{"label", "mape"}``.
        """
        return {"train": self.train, "test": self.test, "mape": self.mape,
                "chosen_on_other_apps": self.chosen_on_other_apps,
                "best_in_hindsight": {"label": self.best_in_hindsight_label, "mape": self.best_in_hindsight_mape},
                "over_ridge": self.over_ridge}


@dataclass(frozen=True)
class SettingCV:
    """One setting's figures under the protocol.

    Attributes
    ----------
    cv_mean : float
        Its grouped CV MAPE (%), mean over the microbenchmark files.
    cv : dict of str to float
        Per file, its grouped CV MAPE (%).
    apps : list of float
        Per pair of files of `choose_settings`'s ``apps``, its MAPE (%) on the applications.
    """

    cv_mean: float
    cv: dict[str, float]
    apps: list[float]

    def to_dict(self) -> dict:
        """The figures as a JSON object, keyed by the attributes' names.

        Returns
        -------
        dict
            JSON-ready.
        """
        return {"cv_mean": self.cv_mean, "cv": self.cv, "apps": self.apps}


@dataclass(frozen=True)
class SettingsChoice:
    """The power fit's setting chosen by the protocol (`choose_settings`).

    Attributes
    ----------
    folds : int
        Folds of the grouped CV on each file.
    n_settings : int
        Settings chosen among.
    chosen : Setting
        The setting with the lowest mean grouped CV MAPE over the files.
    chosen_cv_mean : float
        That mean (%).
    files : dict of str to FileChoice
        Per microbenchmark file, its figures.
    leave_one_gpu_out_mean : float
        Mean over the files of each one's MAPE (%) under the setting chosen on the others.
    apps : list of ApplicationsScore
        Per pair of files of ``apps``, the settings on the applications.
    per_setting : dict of str to SettingCV
        Per setting (by label), its figures.
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
        """The choice as `gpudvfs power cv --json` prints it.

        Returns
        -------
        dict
            JSON-ready; the count of settings under ``settings``, the chosen one with its label.
        """
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

    Every setting's grouped ``folds``-fold CV MAPE on every file, the setting chosen on all
    files (lowest mean), and each file under the setting chosen on the others.

    Parameters
    ----------
    micro : dict of str to PowerDataset
        The microbenchmark files, path -> dataset; at least two.
    apps : list of tuple of str or None
        Pairs of a file of ``micro`` and a file of ``tests``: every setting fitted on the
        first and scored on the second.
    tests : dict of str to PowerDataset or None
        Files of applications, path -> dataset, each measured on the GPU of its pair's
        microbenchmarks.
    folds : int
        Folds of the grouped CV on each file.
    settings : sequence of Setting
        The settings chosen among.
    progress : callable or None
        ``progress(done, total, label)``, called after each setting.

    Returns
    -------
    SettingsChoice
        The setting chosen, each file's figures, the leave-one-GPU-out mean, the settings on
        the applications and every setting's figures.

    Raises
    ------
    InputError
        With fewer than two files or no setting, or on a pair whose first file is not
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
