"""The online predictors' arguments: a prediction that overflows is an error as the update
is, a wrong shape is a ValueError that names the argument with the shape expected and the
shape given (not numpy's "dimensionality mismatch"), and complex numbers are refused rather
than cast to their real parts."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

from gpudvfs import OnlinePredictor, OnlinePredictorBank


def shape_msg(name: str, want: str, got: str) -> str:
    return re.escape(f"{name} must have shape {want}, got {got}")


@pytest.fixture
def p() -> OnlinePredictor:
    p = OnlinePredictor(4)
    p.update([1.0, 1.0, 1.0, -1.0], 4.0)
    return p


@pytest.fixture
def bank() -> OnlinePredictorBank:
    b = OnlinePredictorBank(5, 4)
    b.update(np.arange(20.0).reshape(5, 4) / 20, np.arange(5.0))
    return b


def test_prediction_that_overflows_is_an_error_like_the_update(p):
    before = p.state()
    big = [1e308] * 4
    with pytest.raises(ValueError, match="overflow"):
        p.update(big, 1.0)
    for x in (big, np.array(big), tuple(big), [1e308, 1e308, 0.0, 1e308]):
        with pytest.raises(ValueError, match="overflows"):
            p.predict(x)
    assert p.state() == before
    assert np.isfinite(p.predict([1e300, 0.0, 0.0, 0.0]))


def test_bank_prediction_that_overflows_names_the_stream(bank):
    x = np.ones((5, 4))
    assert np.isfinite(bank.predict(x)).all()
    x[3] = 1e308 * np.sign(bank.coef[3])
    with pytest.raises(ValueError, match="stream 3"):
        bank.predict(x)


@pytest.mark.parametrize("x,got", [
    (np.ones((1, 4)), "(1, 4)"),
    (np.ones((4, 1)), "(4, 1)"),
    (1.0, "()"),
    (np.float64(2.0), "()"),
    (np.array(3.0), "()"),
    ([1.0, 2.0, 3.0], "(3,)"),
    (np.ones(5), "(5,)"),
    ([[1.0, 2.0, 3.0, 4.0]], "(1, 4)"),
    (list(range(20)), "(20,)"),
])
def test_features_of_another_shape_say_which(p, x, got):
    before = p.state()
    with pytest.raises(ValueError, match=shape_msg("features", "(4,)", got)):
        p.predict(x)
    with pytest.raises(ValueError, match=shape_msg("features", "(4,)", got)):
        p.update(x, 1.0)
    assert p.state() == before


def test_bank_arguments_of_another_shape_say_which(bank):
    before = bank.state()
    x = np.ones((5, 4))
    with pytest.raises(ValueError, match=shape_msg("observed", "(5,)", "(5, 1)")):
        bank.update(x, np.ones((5, 1)))
    with pytest.raises(ValueError, match=shape_msg("observed", "(5,)", "()")):
        bank.update(x, 1.0)
    with pytest.raises(ValueError, match=shape_msg("features", "(5, 4)", "(20,)")):
        bank.update(x.ravel(), np.ones(5))
    with pytest.raises(ValueError, match=shape_msg("mask", "(5,)", "(5, 1)")):
        bank.update(x, np.ones(5), np.ones((5, 1), dtype=bool))
    # Transposed features hold as many numbers: they were read row by row as if (5, 4).
    with pytest.raises(ValueError, match=shape_msg("features", "(5, 4)", "(4, 5)")):
        bank.predict(np.ones((4, 5)))
    with pytest.raises(ValueError, match=shape_msg("features", "(5, 4)", "(4, 5)")):
        bank.update(np.ones((4, 5)), np.ones(5))
    for k, v in bank.state().items():
        np.testing.assert_array_equal(v, before[k])


@pytest.mark.parametrize("x", [
    np.ones(4, dtype=complex),
    np.array([1.0, 2.0, 3.0, 4.0 + 1.0j]),
    np.ones(4, dtype=np.complex64),
    [1.0, 2.0, 3.0, 1j],
    [1.0, 2.0, 3.0, np.complex128(4.0)],
    [1.0, 2.0, 3.0, np.complex64(4.0)],
])
def test_complex_features_are_refused(p, x):
    before = p.state()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no ComplexWarning on the way
        with pytest.raises(TypeError, match="real"):
            p.predict(x)
        with pytest.raises(TypeError, match="real"):
            p.update(x, 1.0)
    assert p.state() == before


def test_complex_observations_and_bank_arguments_are_refused(p, bank):
    before = p.state()
    for y in (1j, np.complex128(2.0), np.complex64(2.0)):
        with pytest.raises(TypeError, match="observed must be a real number"):
            p.update([1.0, 2.0, 3.0, 4.0], y)
    assert p.state() == before
    with pytest.raises(TypeError, match="features must be real numbers"):
        bank.predict(np.ones((5, 4), dtype=complex))
    with pytest.raises(TypeError, match="features must be real numbers"):
        bank.update(np.ones((5, 4), dtype=complex), np.ones(5))
    with pytest.raises(TypeError, match="observed must be real numbers"):
        bank.update(np.ones((5, 4)), np.ones(5, dtype=complex))


def test_ints_too_large_for_a_float_name_the_argument(p):
    """A Python int past the float range is an OverflowError that names what it was given as,
    in a list, a tuple or alone, and leaves the predictor as it was."""
    before = p.state()
    for x in ([1.0, 2.0, 3.0, 10 ** 400], (10 ** 400, 2.0, 3.0, 4.0)):
        with pytest.raises(OverflowError, match="features"):
            p.predict(x)
        with pytest.raises(OverflowError, match="features"):
            p.update(x, 1.0)
    with pytest.raises(OverflowError, match="observed"):
        p.update([1.0, 2.0, 3.0, 4.0], 10 ** 400)
    assert p.state() == before


def test_real_inputs_of_any_container_and_dtype_still_agree(p, bank):
    x = [0.3, -0.2, 1.5, 2.0]
    want = p.predict(x)
    for v in (tuple(x), np.array(x), np.array(x)[None, :][0], list(map(np.float64, x)), np.array(x, dtype=object)):
        assert p.predict(v) == want
    ints = [1, 2, 3, 4]
    for v in (ints, tuple(ints), np.array(ints), np.array(ints, dtype=np.uint8), np.array(ints, dtype=np.float32),
              [np.int64(i) for i in ints], [np.float32(i) for i in ints], [True, 2, 3.0, np.int8(4)]):
        assert p.predict(v) == p.predict([1.0, 2.0, 3.0, 4.0])
    q = OnlinePredictor(4)
    q.update(ints, np.int64(3))
    r = OnlinePredictor(4)
    r.update(ints, 3.0)
    assert q.state() == r.state()
    feats = np.arange(20).reshape(5, 4)
    np.testing.assert_array_equal(bank.predict(feats), bank.predict(feats.astype(float)))
    np.testing.assert_array_equal(bank.predict(feats.tolist()), bank.predict(feats.astype(float)))
