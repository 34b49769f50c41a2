"""The cluster bootstrap behind the cross-validated figures' intervals (gpudvfs.stats)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpudvfs.errors import InputError
from gpudvfs.stats import mean_interval, paired_intervals

values = st.lists(st.floats(-1e3, 1e3), min_size=1, max_size=20)


@settings(max_examples=100, deadline=None)
@given(v=values, shift=st.floats(-1e3, 1e3), data=st.data())
def test_the_interval_lies_within_the_values_and_moves_with_them(v, shift, data):
    """Every resample's mean lies between the least and the largest value; with the same seed,
    values shifted by c give the interval shifted by c; a narrower level gives an interval
    inside the wider one (the same resampled means)."""
    groups = data.draw(st.lists(st.integers(0, 4), min_size=len(v), max_size=len(v)))
    lo, hi = mean_interval(v, groups, resamples=200)
    assert min(v) - 1e-9 <= lo <= hi <= max(v) + 1e-9
    moved = mean_interval(np.asarray(v) + shift, groups, resamples=200)
    assert moved == pytest.approx((lo + shift, hi + shift), abs=1e-6)
    inner = mean_interval(v, groups, resamples=200, level=0.5)
    assert lo - 1e-9 <= inner[0] <= inner[1] <= hi + 1e-9


@given(v=values)
def test_one_group_is_always_drawn_whole(v):
    """With every value in one group each resample is the whole set: the interval is its mean."""
    lo, hi = mean_interval(v, ["app"] * len(v), resamples=50)
    assert lo == pytest.approx(np.mean(v)) and hi == pytest.approx(np.mean(v))


def test_two_groups_resampled_give_every_mix_of_them():
    """Groups {0} and {1, 1}: a resample draws two groups, so its mean is 0 (both the first),
    1 (both the second) or 2/3 (one of each, weighed by their sizes); the 95% interval spans
    0 to 1, its middle 2/3 (drawn half the time). Two values, each its own group, mix as 0,
    1/2 or 1: the middle is 1/2."""
    assert mean_interval([0.0, 1.0, 1.0], [0, 1, 1]) == (0.0, 1.0)
    assert mean_interval([0.0, 1.0, 1.0], [0, 1, 1], level=0.01) == pytest.approx((2 / 3, 2 / 3))
    assert mean_interval([0.0, 1.0], level=0.01) == pytest.approx((0.5, 0.5))


@settings(max_examples=50, deadline=None)
@given(v=values, scale=st.floats(1e-3, 1e3), data=st.data())
def test_equal_weights_are_no_weights_and_one_group_gives_its_weighted_mean(v, scale, data):
    """Weights all alike give the unweighted interval, whatever their size; with every value
    in one group, each resample is the whole set, so the interval is the weighted mean."""
    groups = data.draw(st.lists(st.integers(0, 4), min_size=len(v), max_size=len(v)))
    assert mean_interval(v, groups, weights=[scale] * len(v), resamples=200) == pytest.approx(
        mean_interval(v, groups, resamples=200), abs=1e-6)
    w = data.draw(st.lists(st.floats(1e-3, 1e3), min_size=len(v), max_size=len(v)))
    expected = np.dot(w, v) / np.sum(w)
    assert mean_interval(v, [0] * len(v), weights=w, resamples=50) == pytest.approx((expected, expected), abs=1e-6)


def test_weights_make_a_mean_of_means():
    """Two replays, one of two phases (0, 1) and one of four (all 1): the mean of their means
    is 0.75, which weights of 1/2 and 1/4 give and the plain mean (5/6) does not. Each
    replay its own group: the resamples are both the first (0.5), both the second (1) or one
    of each (0.75)."""
    v, replay = [0.0, 1.0, 1.0, 1.0, 1.0, 1.0], [0, 0, 1, 1, 1, 1]
    w = [0.5, 0.5, 0.25, 0.25, 0.25, 0.25]
    assert mean_interval(v, replay, weights=w) == (0.5, 1.0)
    assert mean_interval(v, replay, weights=w, level=0.01) == pytest.approx((0.75, 0.75))
    assert mean_interval(v, replay, level=0.01) == pytest.approx((5 / 6, 5 / 6))


@settings(max_examples=50, deadline=None)
@given(v=values, data=st.data())
def test_paired_intervals_resample_the_same_groups(v, data):
    """Each difference's interval is the interval of the differences; a baseline equal to the
    values gives a difference of 0 at both ends."""
    b = data.draw(st.lists(st.floats(-1e3, 1e3), min_size=len(v), max_size=len(v)))
    groups = data.draw(st.lists(st.integers(0, 3), min_size=len(v), max_size=len(v)))
    out = paired_intervals(v, {"b": b, "same": v}, groups, resamples=200)
    assert set(out) == {"mean", "minus_b", "minus_same"}
    assert out["mean"] == mean_interval(v, groups, resamples=200)
    assert out["minus_b"] == mean_interval(np.subtract(v, b), groups, resamples=200)
    assert out["minus_same"] == (0.0, 0.0)


def test_paired_intervals_refuse_a_baseline_of_other_workloads():
    with pytest.raises(InputError, match="baseline 'b' has shape"):
        paired_intervals([1.0, 2.0], {"b": [1.0, 2.0, 3.0]})


@pytest.mark.parametrize("kwargs,match", [
    ({"values": []}, "non-empty 1-D"),
    ({"values": [[1.0, 2.0]]}, "non-empty 1-D"),
    ({"values": ["1", "2"]}, "numbers"),
    ({"values": [True, False]}, "numbers"),
    ({"values": [1.0, np.nan]}, "finite"),
    ({"values": [1.0, np.inf]}, "finite"),
    ({"values": [1.0, 2.0], "groups": [0]}, "one label per value"),
    ({"values": [1.0, 2.0], "level": 0}, "level"),
    ({"values": [1.0, 2.0], "level": 1.0}, "level"),
    ({"values": [1.0, 2.0], "level": np.nan}, "level"),
    ({"values": [1.0, 2.0], "level": True}, "level"),
    ({"values": [1.0, 2.0], "resamples": 0}, "resamples"),
    ({"values": [1.0, 2.0], "resamples": 10.0}, "resamples"),
    ({"values": [1.0, 2.0], "resamples": True}, "resamples"),
    ({"values": [1.0, 2.0], "seed": -1}, "seed"),
    ({"values": [1.0, 2.0], "weights": [1.0]}, "weights must be 2 numbers > 0"),
    ({"values": [1.0, 2.0], "weights": [1.0, 0.0]}, "weights must be 2 numbers > 0"),
    ({"values": [1.0, 2.0], "weights": [1.0, -1.0]}, "weights must be 2 numbers > 0"),
    ({"values": [1.0, 2.0], "weights": [1.0, np.nan]}, "weights must be finite"),
    ({"values": [1.0, 2.0], "weights": ["a", "b"]}, "weights must be a non-empty"),
])
def test_bad_input_is_refused(kwargs, match):
    with pytest.raises(InputError, match=match):
        mean_interval(**kwargs)
