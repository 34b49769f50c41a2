"""The online time predictor of Gupta et al. (Section 4): the differential time model,
its coefficients learned by covariance-form RLS as a workload runs.

* ``OnlinePredictor`` / ``OnlinePredictorBank``: the RLS estimators (Rust core), one stream
  or many updated in one call; ``save_predictor`` / ``load_predictor``.
* ``FeatureMap``: the model's regressors (the paper's frequency term or the inverse-clock
  form, one term per clock domain; counter changes over a recorded scale).
* ``lasso_select``: offline feature selection (Lasso, CV, one-standard-error rule; needs
  scikit-learn, the ``online`` extra).
* ``CounterFrequencyModel``, ``predict_time_at``, ``time_slope``: frequency sensitivity
  (Eq. 12-14).
* ``replay`` / ``tune``: the predictors on traces drawn from a measurement grid.

Importing needs numpy alone.
"""

from .._core import OnlinePredictor, OnlinePredictorBank
from .features import FORMS, FeatureMap
from .grid import GridTable
from .predictor import load_predictor, save_predictor
from .replay import ReplaySettings, replay, tune
from .selection import FeatureSelection, lasso_select
from .sensitivity import CounterFrequencyModel, predict_time_at, time_slope

__all__ = [
    "FORMS",
    "CounterFrequencyModel",
    "FeatureMap",
    "FeatureSelection",
    "GridTable",
    "OnlinePredictor",
    "OnlinePredictorBank",
    "ReplaySettings",
    "lasso_select",
    "load_predictor",
    "predict_time_at",
    "replay",
    "save_predictor",
    "time_slope",
    "tune",
]
