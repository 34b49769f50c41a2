"""Offline feature selection (Gupta et al. Sec. 4.2, Eq. 7).

Lasso with cross-validation and the one-standard-error rule. Needs scikit-learn, the
``online`` extra.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from gpudvfs.errors import InputError


def _sklearn() -> tuple[Any, Any, Any, type[Warning]]:
    try:
        from sklearn.exceptions import ConvergenceWarning
        from sklearn.linear_model import Lasso, LassoCV
        from sklearn.model_selection import KFold
    except ImportError:
        raise ImportError("Lasso feature selection needs scikit-learn, the 'online' extra: "
                          "pip install 'gpudvfs[online]'") from None
    return Lasso, LassoCV, KFold, ConvergenceWarning


@dataclass(frozen=True)
class FeatureSelection:
    """The columns Lasso keeps, and how it chose them.

    ``alpha_min`` is the penalty of the smallest cross-validated MSE, ``alpha_1se`` the largest
    within one standard error of it; ``lasso_selected`` the columns with a nonzero coefficient at
    ``alpha_1se``, ``selected`` those plus the forced ones; ``converged``: coordinate descent
    converged on every fit.
    """

    selected: tuple[int, ...]
    lasso_selected: tuple[int, ...]
    alpha_min: float
    alpha_1se: float
    n_at_alpha_min: int
    converged: bool


def lasso_select(h: ArrayLike, y: ArrayLike, *, keep: Iterable[int] = (), folds: int = 10,
                 n_alphas: int = 100) -> FeatureSelection:
    """The columns of the regressors h (m, p) that predict the target y (m,): Lasso, one-standard-error rule.

    The rule takes the largest penalty whose cross-validated MSE is within one standard error
    of the minimum (fewer features for a statistically equal error). Columns are
    standardised first (the penalty then weighs them alike). Folds are contiguous blocks, not
    shuffled rows: rows are consecutive steps of traces, and shuffling would let a fold
    validate on neighbours of its training rows.

    ``keep`` are columns kept whatever Lasso says (the frequency terms: the sensitivity needs
    them); ``n_alphas`` penalties are tried, log-spaced from the one that zeroes every coefficient
    down to 1e-3 of it. Raises `InputError` if the shapes do not match, the rows are too few for
    the folds, a value is not finite, or ``y`` is orthogonal to every column; `ImportError`
    without scikit-learn.
    """
    Lasso, LassoCV, KFold, ConvergenceWarning = _sklearn()
    h, y = np.asarray(h, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if h.ndim != 2 or y.shape != (h.shape[0],):
        raise InputError(f"lasso_select: h must be (m, p) and y (m,), got {h.shape} and {y.shape}")
    if h.shape[0] < 2 * folds:
        raise InputError(f"lasso_select: {h.shape[0]} rows are too few for {folds}-fold cross-validation")
    if not (np.all(np.isfinite(h)) and np.all(np.isfinite(y))):
        raise InputError("lasso_select: h and y must be finite")
    sd = h.std(axis=0)
    z = h / np.where(sd > 0, sd, 1.0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        # scikit-learn's own grid: n_alphas log-spaced from the smallest alpha that zeroes
        # every coefficient down to 1e-3 of it (given explicitly: the argument changed name).
        alpha_max = float(np.max(np.abs(z.T @ y))) / len(y)
        if alpha_max == 0.0:
            raise InputError("lasso_select: y is orthogonal to every column (or zero); nothing to select")
        alphas = np.geomspace(alpha_max, alpha_max * 1e-3, n_alphas)
        cv = LassoCV(cv=KFold(folds), fit_intercept=False, alphas=alphas, max_iter=50_000).fit(z, y)
        mse = cv.mse_path_.mean(axis=1)
        se = cv.mse_path_.std(axis=1) / np.sqrt(cv.mse_path_.shape[1])
        i_min = int(np.argmin(mse))
        alpha_1se = float(cv.alphas_[mse <= mse[i_min] + se[i_min]].max())
        coef = Lasso(alpha=alpha_1se, fit_intercept=False, max_iter=50_000).fit(z, y).coef_
        coef_min = Lasso(alpha=cv.alphas_[i_min], fit_intercept=False, max_iter=50_000).fit(z, y).coef_
    converged = not any(issubclass(w.category, ConvergenceWarning) for w in caught)
    lasso = tuple(int(i) for i in np.flatnonzero(coef))
    return FeatureSelection(tuple(sorted(set(lasso) | {int(k) for k in keep})), lasso, float(cv.alphas_[i_min]),
                     alpha_1se, int(np.count_nonzero(coef_min)), converged)
