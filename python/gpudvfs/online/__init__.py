"""The online time predictor of Gupta et al. (Section 4).

The differential time model, its coefficients learned by covariance-form RLS as a workload runs.

* ``OnlinePredictor`` / ``OnlinePredictorBank``: the RLS estimators (Rust core), one stream
  or many updated in one call; ``save_predictor`` / ``load_predictor``.
* ``FeatureMap``: the model's regressors (the paper's frequency term or the inverse-clock
  form, one term per clock domain; counter changes over a recorded scale).
* ``lasso_select``: offline feature selection (Lasso, CV, one-standard-error rule; needs
  scikit-learn, the ``online`` extra).
* ``CounterFrequencyModel``, ``predict_time_at``, ``time_slope``: frequency sensitivity
  (Eq. 12-14).

The predictors replayed on traces drawn from a measurement grid (``replay``, ``tune``) are in
:mod:`gpudvfs.evaluation.online_replay`. Importing needs numpy alone.

Examples
--------
An `OnlinePredictor` learns ``y = 2 h0 + 3 h1`` one observation at a time:

>>> import numpy as np
>>> from gpudvfs import OnlinePredictor
>>> predictor = OnlinePredictor(2)
>>> rng = np.random.default_rng(0)
>>> for _ in range(50):
...     h = rng.uniform(-1, 1, 2)
...     predictor.update(h, 2.0 * h[0] + 3.0 * h[1])
>>> predictor.coef.round(2), round(predictor.predict([1.0, 1.0]), 2)
(array([2., 3.]), 5.0)
"""

from gpudvfs._core import OnlinePredictor, OnlinePredictorBank
from gpudvfs.online.features import FORMS, FeatureMap
from gpudvfs.online.grid import GridTable
from gpudvfs.online.predictor import load_predictor, save_predictor
from gpudvfs.online.selection import FeatureSelection, lasso_select
from gpudvfs.online.sensitivity import CounterFrequencyModel, predict_time_at, time_slope

__all__ = [
    "FORMS",
    "CounterFrequencyModel",
    "FeatureMap",
    "FeatureSelection",
    "GridTable",
    "OnlinePredictor",
    "OnlinePredictorBank",
    "lasso_select",
    "load_predictor",
    "predict_time_at",
    "save_predictor",
    "time_slope",
]
