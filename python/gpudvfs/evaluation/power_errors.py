"""Grouped cross-validation of the power model: every benchmark held out once."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpudvfs.data.datasets import PowerDataset
from gpudvfs.errors import GpudvfsWarning, InputError
from gpudvfs.limits import check_watts
from gpudvfs.power.model import PowerModel
from gpudvfs.stats import mean_interval, paired_intervals


def power_errors(model: PowerModel, dataset: PowerDataset) -> dict[str, Any]:
    """Absolute percentage errors of a fitted model on a measured dataset over its components.

    ``mape``, ``median_ape``, ``max_ape`` (%), the count ``n``, ``per_config`` and
    ``per_benchmark`` MAPEs, and ``mape_interval``: the MAPE's 95% bootstrap interval over the
    benchmarks (a benchmark's rows drawn together).
    """
    if not isinstance(dataset, PowerDataset):
        raise InputError(f"power_errors needs a PowerDataset (gpudvfs.read_power_dataset), got "
                         f"{type(dataset).__name__}")
    check_watts(dataset.watts, dataset.path)
    names = getattr(model, "components_", None)  # None before a fit: predict says it is not fitted
    if names is not None and tuple(dataset.components) != tuple(names):
        raise InputError(f"{dataset.path}: components {list(dataset.components)} differ from the "
                         f"model's {list(names)}")
    pred = model.predict(dataset.utilization, dataset.core_mhz, dataset.mem_mhz)
    ape = 100.0 * np.abs(pred - dataset.watts) / dataset.watts
    per_cfg: dict[str, list] = {}
    for (c, m), a in zip(dataset.freqs_mhz, ape):
        per_cfg.setdefault(f"{c:g}/{m:g}", []).append(a)
    per_b = {name: float(np.mean(ape[dataset.benchmark == i])) for i, name in enumerate(dataset.benchmarks)}
    return {"mape": float(np.mean(ape)), "mape_interval": mean_interval(ape, dataset.benchmark),
            "median_ape": float(np.median(ape)), "max_ape": float(np.max(ape)),
            "n": int(len(ape)), "per_config": {k: float(np.mean(v)) for k, v in per_cfg.items()},
            "per_benchmark": per_b}


def held_out_predictions(dataset: PowerDataset, folds: int, **model_options: Any
                         ) -> tuple[dict[str, np.ndarray], dict]:
    """Per row, power predicted by a model fitted without the row's benchmark.

    Benchmarks are dealt to ``folds`` folds (2 to the number of benchmarks) in file order;
    ``**model_options`` go to `PowerModel` (``variant``, ``relative_error``, ``ridge``, ...).
    Each row is predicted from its utilizations alone (``model``); scaled to its measured power
    at the reference configuration (``calibrated``: what a user who measured that one point
    gets); and by the baseline that scales its reference power by the training benchmarks'
    mean power relative to their own reference power per configuration
    (``reference_scaled``). The calibrated and baseline rows are NaN for a benchmark with no
    row at the reference.

    Returns
    -------
    tuple of dict
        The predictions by kind [rows]; and how the folds' fits went, since their warnings are
        held back: ``zero_weight``, per component no training benchmark of a fold uses, the
        folds where it got a zero weight (it is left out of the fit); ``fell_back``, the folds
        whose fit fell back to per-domain voltages; ``not_converged``, those that stopped
        unconverged.

    Raises InputError on a count of folds out of range.
    """
    n_b = len(dataset.benchmarks)
    if not 2 <= folds <= n_b:
        raise InputError(f"folds must be between 2 and the number of benchmarks ({n_b}), got {folds}")
    fold_of = np.arange(n_b) % folds
    at_ref = np.all(dataset.freqs_mhz == np.asarray(dataset.reference_mhz), axis=1)
    ref_watts = np.full(n_b, np.nan)
    ref_watts[dataset.benchmark[at_ref]] = dataset.watts[at_ref]
    ratio = dataset.watts / ref_watts[dataset.benchmark]
    _, config_of = np.unique(dataset.freqs_mhz, axis=0, return_inverse=True)
    config_of = config_of.ravel()
    preds = {k: np.full(len(dataset), np.nan) for k in ("model", "calibrated", "reference_scaled")}
    absent: dict[str, int] = {}
    fell_back = not_converged = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GpudvfsWarning)  # the full fit warns; folds that fall back are counted
        for k in range(folds):
            test = fold_of[dataset.benchmark] == k
            train_set = dataset.subset(~test)
            model = PowerModel(**model_options).fit(train_set, unused="zero")
            for c in model.untrained_:
                absent[c] = absent.get(c, 0) + 1
            fell_back += model.fallback_ is not None
            not_converged += not model.converged_
            held = dataset.subset(test)
            pred = model.predict(held.utilization, held.core_mhz, held.mem_mhz)
            preds["model"][test] = pred
            at_ref_pred = np.full(n_b, np.nan)
            at_ref_pred[dataset.benchmark[test & at_ref]] = pred[at_ref[test]]
            preds["calibrated"][test] = pred * (ref_watts / at_ref_pred)[dataset.benchmark[test]]
            train = ~test & np.isfinite(ratio)
            counts = np.bincount(config_of[train], minlength=config_of.max() + 1)
            mean_ratio = np.bincount(config_of[train], ratio[train], minlength=len(counts)) / np.maximum(counts, 1)
            mean_ratio[counts == 0] = np.nan
            preds["reference_scaled"][test] = (ref_watts[dataset.benchmark] * mean_ratio[config_of])[test]
    return preds, {"zero_weight": absent, "fell_back": fell_back, "not_converged": not_converged}


@dataclass(frozen=True)
class PowerCV:
    """The power model's grouped cross-validation (`cross_validate_power`); figures are MAPE (%).

    ``zero_weight_folds``, ``fallback_folds`` and ``unconverged_folds`` are how the folds' fits
    went (`held_out_predictions`). ``calibrated_mape`` and ``reference_scaled_mape`` are over
    the ``calibrated_benchmarks`` measured at the reference (None where none was). ``intervals``
    holds 95% bootstrap intervals over the benchmarks (a benchmark's rows drawn together) of
    ``mape`` and of the calibrated MAPE, with the latter's paired difference from the baseline
    where the baseline predicts every row the calibration does.
    """

    mape: float
    folds: int
    zero_weight_folds: dict[str, int]
    fallback_folds: int
    unconverged_folds: int
    per_fold: list[float]
    calibrated_benchmarks: int
    calibrated_mape: float | None
    reference_scaled_mape: float | None
    intervals: dict

    def to_dict(self) -> dict:
        """The figures as a JSON object, keyed by the attributes' names in order."""
        return {"mape": self.mape, "folds": self.folds, "zero_weight_folds": self.zero_weight_folds,
                "fallback_folds": self.fallback_folds, "unconverged_folds": self.unconverged_folds,
                "per_fold": self.per_fold, "calibrated_benchmarks": self.calibrated_benchmarks,
                "calibrated_mape": self.calibrated_mape, "reference_scaled_mape": self.reference_scaled_mape,
                "intervals": self.intervals}


def cross_validate_power(dataset: PowerDataset, folds: int = 6, **model_options: Any) -> PowerCV:
    """Grouped k-fold cross-validation of the power model: each benchmark (all its configurations) held out once.

    Folds and options as in `held_out_predictions`, whose calibrated and baseline figures it
    scores.

    Raises InputError on a count of folds out of range.
    """
    preds, fits = held_out_predictions(dataset, folds, **model_options)
    ape = {k: 100.0 * np.abs(v - dataset.watts) / dataset.watts for k, v in preds.items()}
    fold_of = (np.arange(len(dataset.benchmarks)) % folds)[dataset.benchmark]
    known = np.isfinite(ape["calibrated"])
    calibrated, reference_scaled = (float(np.mean(ape[k][known])) if known.any() else None
                                    for k in ("calibrated", "reference_scaled"))
    intervals: dict[str, Any] = {"mape": mean_interval(ape["model"], dataset.benchmark)}
    if known.any():
        base = ape["reference_scaled"][known]
        intervals["calibrated"] = paired_intervals(
            ape["calibrated"][known], {"reference_scaled": base} if np.isfinite(base).all() else {},
            dataset.benchmark[known])
    return PowerCV(float(np.mean(ape["model"])), folds, fits["zero_weight"], fits["fell_back"], fits["not_converged"],
                   [float(np.mean(ape["model"][fold_of == k])) for k in range(folds)],
                   len(np.unique(dataset.benchmark[known])), calibrated, reference_scaled, intervals)
