"""The 90% interval of a predicted time (`gpudvfs.time.interval`): it grows with the pair's
distance from the reference; its invariants and bad input. Its constants and coverage on the
GTX 980 grids are pinned where `time cv` is (tests/cli/test_demo.py)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpudvfs import InputError
from gpudvfs.evaluation.interval_cv import interval_cv
from gpudvfs.time.interval import UNCALIBRATED_LEVEL, fit_spread, log_distance, spread, time_interval

CONFIGS = np.array([(c, m) for m in (3505.0, 5000.0) for c in (400.0, 700.0, 1000.0, 1400.0)])


@settings(max_examples=50, deadline=None)
@given(st.floats(0.0, 0.2), st.floats(0.0, 0.5))
def test_the_fit_recovers_a_known_spread(a, b):
    d = log_distance(CONFIGS, (700.0, 3505.0))
    r = spread(d, a, b) * np.array([[1.0], [-1.0]])  # residuals of exactly that size, both signs
    assert spread(d, *fit_spread(r, d)) == pytest.approx(spread(d, a, b), rel=1e-6, abs=1e-6)


@settings(max_examples=50, deadline=None)
@given(st.sampled_from(CONFIGS.tolist()))
def test_the_interval_grows_with_the_distance_and_uncalibrated_is_wider(reference):
    d = log_distance(CONFIGS, reference)
    cal, unc = time_interval(CONFIGS, reference, True), time_interval(CONFIGS, reference, False)
    order = np.argsort(d)
    assert (np.diff(cal[order]) >= -1e-12).all() and (cal > 0).all()
    assert (unc > cal).all() and (unc >= UNCALIBRATED_LEVEL - 1e-12).all()
    assert cal[d == 0] == pytest.approx(cal.min())


def test_a_flat_or_shrinking_error_falls_back_to_its_mean_square():
    d = np.array([0.0, 0.5, 1.0])
    assert fit_spread(np.array([[0.2, 0.1, 0.0]]), d) == pytest.approx((0.05 / 3, 0.0))
    a, b = fit_spread(np.array([[0.0, 0.1, 0.3]]), d)  # a fit through the origin: none at the reference
    assert a == 0 and b > 0


def test_coverage_on_held_out_groups_of_a_known_law():
    rng = np.random.default_rng(0)
    d = [np.linspace(0, 1, 30) for _ in range(40)]
    r = [rng.normal(0, 0.1 * x) for x in d]
    out = interval_cv(r, d, np.arange(40) // 4)
    assert out["coverage"] == pytest.approx(0.9, abs=0.03)
    assert out["on_all"]["spread_b"] == pytest.approx(0.01, rel=0.15)
    far = out["by_distance"]["0.5-inf"]
    assert far["coverage"] > far["constant_coverage"]  # the constant interval is too narrow far away


def test_bad_input():
    with pytest.raises(InputError, match="configs must be"):
        log_distance([[700.0]], (700.0, 3505.0))
    with pytest.raises(InputError, match="positive, finite MHz"):
        log_distance(CONFIGS, (-1.0, 3505.0))
    with pytest.raises(InputError, match="at least one finite residual"):
        fit_spread(np.array([]), np.array([]))
    with pytest.raises(InputError, match="at least two groups"):
        interval_cv([np.zeros(3)], [np.ones(3)], [0])
