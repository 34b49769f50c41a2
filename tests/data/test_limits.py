"""The number checks every reader and option shares (gpudvfs.limits)."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpudvfs.errors import InputError
from gpudvfs.limits import MAX_MHZ, clock_array, is_count, is_finite_number, is_integer, is_number


@pytest.mark.parametrize("v", [0, -3, 2.5, np.float32(1.5), np.int64(7), np.uint8(3), math.inf, math.nan])
def test_numbers_python_and_numpy_give_are_numbers(v):
    assert is_number(v)


@pytest.mark.parametrize("v", [True, False, np.bool_(True), "1", None, [1], {"a": 1}, 1j])
def test_bools_strings_and_containers_are_not_numbers(v):
    assert not is_number(v)


@pytest.mark.parametrize("v,least,ok", [
    (0, 0, True), (-1e-300, 0, False), (5, 5, True), (4.999, 5, False), (math.inf, 0, False),
    (math.nan, -math.inf, False), (-math.inf, -math.inf, False), (10**400, 0, False),
    (-(10**400), -math.inf, False), (True, 0, False),
])
def test_finite_numbers_at_least_a_bound(v, least, ok):
    assert is_finite_number(v, least) is ok


@pytest.mark.parametrize("v,least,ok", [
    (0, 0, True), (3, 1, True), (0, 1, False), (np.int32(2), 1, True), (2.0, 1, False), (True, 0, False),
    (-1, 0, False), (10**30, 1, True),
])
def test_counts_are_whole_numbers(v, least, ok):
    assert is_count(v, least) is ok


@pytest.mark.parametrize("v,ok", [(0, True), (-7, True), (np.int8(-1), True), (2.0, False), (True, False),
                                  (np.bool_(False), False), ("3", False)])
def test_integers_are_ints_of_python_or_numpy(v, ok):
    assert is_integer(v) is ok


@given(st.floats(allow_nan=True, allow_infinity=True), st.floats(min_value=-1e6, max_value=1e6))
def test_a_finite_number_check_agrees_with_its_definition(v, least):
    assert is_finite_number(v, least) == (math.isfinite(v) and v >= least)


@pytest.mark.parametrize("bad", [[0.0], [-5], [math.nan], [MAX_MHZ * 2], ["700"], [True]])
def test_clock_arrays_refuse_what_no_gpu_runs(bad):
    with pytest.raises(InputError):
        clock_array(bad, "core_mhz")
