"""The Rust power-equation kernel against the plain numpy evaluation, and its input checks."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import gpudvfs
from gpudvfs.power.equations import power_grid_numpy

pos = st.floats(min_value=0.0, max_value=500.0)


@st.composite
def problems(draw):
    sizes = draw(st.lists(st.integers(0, 4), min_size=1, max_size=3).filter(lambda s: sum(s) > 0))
    nd, nc = len(sizes), sum(sizes)
    nw = draw(st.integers(0, 30))
    nk = draw(st.integers(0, 30))
    util = draw(hnp.arrays(np.float64, (nw, nc), elements=st.floats(0.0, 1.0)))
    freqs = draw(hnp.arrays(np.float64, (nk, nd), elements=st.floats(0.1, 2.0)))
    volts = draw(hnp.arrays(np.float64, (nk, nd), elements=st.floats(0.5, 1.5)))
    s = draw(hnp.arrays(np.float64, nd, elements=pos))
    i = draw(hnp.arrays(np.float64, nd, elements=pos))
    w = draw(hnp.arrays(np.float64, nc, elements=pos))
    return util, sizes, s, i, w, freqs, volts


@settings(max_examples=300, deadline=None)
@given(problems())
def test_rust_kernel_matches_numpy(p):
    got = gpudvfs.power_grid(*p)
    want = power_grid_numpy(*p)
    assert got.shape == want.shape == (p[0].shape[0], p[5].shape[0])
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12 * max(1.0, np.abs(want).max(initial=0)))


def test_large_grid_uses_threads_and_still_matches():
    rng = np.random.default_rng(1)
    util = rng.uniform(0, 1, (3000, 8))
    freqs, volts = rng.uniform(0.5, 1.5, (400, 2)), rng.uniform(0.8, 1.2, (400, 2))
    args = (util, [7, 1], [40.0, 9.0], [20.0, 5.0], rng.uniform(0, 80, 8), freqs, volts)
    np.testing.assert_allclose(gpudvfs.power_grid(*args), power_grid_numpy(*args), rtol=1e-12)


def test_accepts_non_contiguous_and_integer_input():
    util = np.ones((4, 6), dtype=np.int64)[:, ::2]  # 3 columns, strided, integers
    p = gpudvfs.power_grid(util, [2, 1], [1, 1], [1, 1], [1, 1, 1], [[1.0, 1.0]], [[1.0, 1.0]])
    assert p.shape == (4, 1)
    assert np.allclose(p, 1 + 1 * (1 + 2) + 1 + 1 * (1 + 1))


@pytest.mark.parametrize("bad,match", [
    (dict(util=np.ones((2, 4))), "utilization must have 3 columns"),
    (dict(util=np.ones(3)), "2-D"),
    (dict(freqs=np.ones((2, 3))), "freqs must have 2 columns"),
    (dict(volts=np.ones((3, 2))), "same shape"),
    (dict(weights=[1.0, 2.0]), r"weights must have shape \(3,\)"),
    (dict(static=[1.0]), r"static_coef must have shape \(2,\)"),
    (dict(util=[[0.1, np.nan, 0.1]]), "NaN"),
    (dict(volts=[[1.0, np.inf], [1.0, 1.0]]), "NaN or infinite"),
    (dict(sizes=[2, -1]), "non-negative"),
    (dict(sizes=[]), "non-negative"),
])
def test_bad_input_is_an_input_error(bad, match):
    args = dict(util=np.ones((1, 3)), sizes=[2, 1], static=[1.0, 1.0], idle=[1.0, 1.0],
                weights=[1.0, 1.0, 1.0], freqs=np.ones((2, 2)), volts=np.ones((2, 2)))
    args |= bad
    with pytest.raises(gpudvfs.InputError, match=match):
        gpudvfs.power_grid(args["util"], args["sizes"], args["static"], args["idle"], args["weights"],
                           args["freqs"], args["volts"])


def test_core_rejects_shape_errors_itself():
    """The extension checks shapes too (callers may bypass the Python wrapper)."""
    from gpudvfs import _core
    ones = np.ones
    with pytest.raises(ValueError, match="shape mismatch"):
        _core.power_grid(ones((2, 4)), [2, 1], ones(2), ones(2), ones(3), ones((1, 2)), ones((1, 2)))
    with pytest.raises(ValueError, match="C-contiguous"):
        _core.power_grid(ones((2, 6))[:, ::2], [2, 1], ones(2), ones(2), ones(3), ones((1, 2)), ones((1, 2)))
    with pytest.raises(ValueError, match="not finite"):
        _core.power_grid(ones((2, 3)), [2, 1], ones(2), ones(2), np.array([1, np.nan, 1.0]),
                         ones((1, 2)), ones((1, 2)))
