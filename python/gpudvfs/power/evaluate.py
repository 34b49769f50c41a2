"""Grouped cross-validation of the power model: every benchmark held out once."""

from __future__ import annotations

import warnings

import numpy as np

from ..errors import GpudvfsWarning, InputError
from ..io.datasets import PowerDataset
from .model import PowerModel


def cross_validate(dataset: PowerDataset, folds: int = 6, **model_options) -> dict:
    """Grouped k-fold cross-validation: each benchmark (all its configurations) is held out
    once, benchmarks dealt to folds in file order. Returns the MAPE over all held-out rows
    and per fold."""
    n_b = len(dataset.benchmarks)
    if not 2 <= folds <= n_b:
        raise InputError(f"folds must be between 2 and the number of benchmarks ({n_b}), got {folds}")
    fold_of = np.arange(n_b) % folds
    ape = np.empty(len(dataset))
    per_fold = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GpudvfsWarning)  # bound hits are reported by the full fit
        for k in range(folds):
            test = fold_of[dataset.benchmark] == k
            model = PowerModel(**model_options).fit(dataset.subset(~test))
            held = dataset.subset(test)
            pred = model.predict(held.utilization, held.core_mhz, held.mem_mhz)
            ape[test] = 100.0 * np.abs(pred - held.watts) / held.watts
            per_fold.append(float(np.mean(ape[test])))
    return {"mape": float(np.mean(ape)), "folds": folds, "per_fold": per_fold}
