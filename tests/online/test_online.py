"""The RLS estimators from Python: convergence and symmetry properties (hypothesis), input
rejection leaving the state untouched, state save/restore, and the bank against single
streams and the numpy reference (benches/rls_reference.py)."""

from __future__ import annotations

import importlib.util
import pickle
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gpudvfs
from gpudvfs import OnlinePredictor, OnlinePredictorBank
from gpudvfs.online import load_predictor, save_predictor

_spec = importlib.util.spec_from_file_location(
    "rls_reference", Path(__file__).resolve().parents[2] / "benches" / "rls_reference.py")
_ref = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_ref)
NumpyRlsBank, make_batches = _ref.NumpyRlsBank, _ref.make_batches

MODES = ("directional", "exponential")


def assert_same_state(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for k in a:
        assert np.array_equal(a[k], b[k]) if isinstance(a[k], np.ndarray) else a[k] == b[k], k


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 8), seed=st.integers(0, 2**32 - 1), forgetting=st.floats(0.9, 1.0),
       mode=st.sampled_from(MODES))
def test_noiseless_fixed_model_coefficients_converge(n, seed, forgetting, mode):
    rng = np.random.default_rng(seed)
    truth = rng.uniform(-5, 5, n)
    p = OnlinePredictor(n, forgetting, 1e6, forgetting_mode=mode)
    for _ in range(40 * n + 100):
        x = rng.uniform(-1, 1, n)
        p.update(x, float(x @ truth))
    np.testing.assert_allclose(p.coef, truth, atol=1e-6 * (1 + np.abs(truth).max()))
    x = rng.uniform(-1, 1, n)
    assert p.predict(x) == pytest.approx(float(x @ truth), abs=1e-5)


@st.composite
def feature_rows(draw):
    """Sequences mixing what real counters do: zero rows (nothing changed), collinear
    columns, tiny and large magnitudes."""
    n = draw(st.integers(1, 6))
    kinds = draw(st.lists(st.sampled_from(["random", "zero", "collinear", "tiny", "large"]), min_size=1, max_size=60))
    seed = draw(st.integers(0, 2**32 - 1))
    return n, kinds, seed


@settings(max_examples=80, deadline=None)
@given(rows=feature_rows(), forgetting=st.floats(0.5, 1.0), mode=st.sampled_from(MODES))
def test_covariance_stays_symmetric_positive_definite(rows, forgetting, mode):
    n, kinds, seed = rows
    rng = np.random.default_rng(seed)
    p = OnlinePredictor(n, forgetting, 10.0, forgetting_mode=mode)
    for kind in kinds:
        x = rng.uniform(-1, 1, n)
        if kind == "zero":
            x[:] = 0.0
        elif kind == "collinear":
            x[:] = x[0] * np.arange(1, n + 1)
        elif kind == "tiny":
            x *= 1e-9
        elif kind == "large":
            x *= 1e6
        p.update(x, float(rng.normal()))
        c = p.covariance
        assert np.all(np.isfinite(c))
        assert np.array_equal(c, c.T)  # exactly: the core stores one triangle
        assert np.linalg.eigvalsh(c).min() > 0
        assert np.trace(c) <= p.trace_max * (1 + 1e-12)


def test_nan_and_inf_rejected_state_untouched():
    p = OnlinePredictor(3, 0.95)
    p.update([1.0, 2.0, 3.0], 1.0)
    before = p.state()
    for x, y in (([np.nan, 0.0, 1.0], 1.0), ([1.0, np.inf, 0.0], 1.0), ([1.0, 0.0, 0.0], np.nan),
                 ([1.0, 0.0, 0.0], -np.inf)):
        with pytest.raises(ValueError, match="finite"):
            p.update(x, y)
    with pytest.raises(ValueError, match="finite"):
        p.predict(np.array([0.0, np.nan, 0.0]))
    with pytest.raises(ValueError, match="shape"):
        p.update([1.0, 2.0], 1.0)
    with pytest.raises(ValueError, match="overflow"):  # finite, but x'Px overflows
        p.update([1e200, 1e200, 0.0], 1.0)
    assert p.state() == before


def test_zero_excitation_changes_nothing():
    p = OnlinePredictor(2, 0.5)
    p.update([1.0, -1.0], 2.0)
    before = p.state()
    for _ in range(1000):
        p.update([0.0, 0.0], 5.0)
    after = p.state()
    assert after["skipped"] == 1000 and after["updates"] == 1
    assert after["coef"] == before["coef"] and after["covariance"] == before["covariance"]


def test_feature_containers_agree():
    p = OnlinePredictor(4)
    p.update([1.0, 2.0, 3.0, 4.0], 1.0)
    p.update([0.5, -1.0, 2.0, 0.0], -2.0)
    x = [0.3, -0.2, 1.5, 2.0]
    want = p.predict(x)
    strided = np.zeros(8)
    strided[::2] = x
    for v in (tuple(x), np.array(x), strided[::2], list(map(np.float64, x))):
        assert p.predict(v) == want
    assert p.predict([1, 2, 3, 4]) == p.predict([1.0, 2.0, 3.0, 4.0])
    big = OnlinePredictor(20)  # beyond the stack buffer
    big.update(list(range(20)), 3.0)
    assert big.predict(list(range(20))) == big.predict(np.arange(20.0))
    for junk in ("abcd", None, [[1.0, 2.0, 3.0, 4.0]]):
        with pytest.raises((TypeError, ValueError)):
            p.predict(junk)


def test_constructor_validation():
    for bad in (dict(forgetting=0.0), dict(forgetting=1.5), dict(forgetting=float("nan")),
                dict(initial_covariance=0.0), dict(initial_covariance=float("inf")),
                dict(forgetting_mode="sliding"), dict(trace_max=1.0)):
        with pytest.raises(ValueError):
            OnlinePredictor(3, **bad)
    with pytest.raises(ValueError):
        OnlinePredictor(0)
    p = OnlinePredictor(3)
    assert (p.forgetting, p.initial_covariance, p.forgetting_mode, p.trace_max) == (1.0, 100.0, "directional", 300.0)


def test_state_roundtrip_pickle_and_file(tmp_path):
    rng = np.random.default_rng(1)
    p = OnlinePredictor(3, 0.9, 5.0, forgetting_mode="exponential")
    for _ in range(30):
        x = rng.normal(size=3)
        p.update(x, float(x[0] - x[2]))
    s = p.state()
    for q in (OnlinePredictor.from_state(s), pickle.loads(pickle.dumps(p))):
        assert q.state() == s
        x = rng.normal(size=3)
        q.update(x, 0.3)
        r = OnlinePredictor.from_state(s)
        r.update(x, 0.3)
        assert q.state() == r.state()
    save_predictor(p, tmp_path / "p.json")
    assert load_predictor(tmp_path / "p.json").state() == s

    bad = dict(s, covariance=[[1.0, 2.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    with pytest.raises(ValueError, match="symmetric"):
        OnlinePredictor.from_state(bad)
    with pytest.raises(ValueError, match="positive definite"):
        OnlinePredictor.from_state(dict(s, covariance=[[1.0, 0, 0], [0, -1.0, 0], [0, 0, 1.0]]))
    with pytest.raises(ValueError, match="version"):
        OnlinePredictor.from_state(dict(s, version=99))
    with pytest.raises(ValueError, match="coef"):
        OnlinePredictor.from_state({k: v for k, v in s.items() if k != "coef"})
    (tmp_path / "bad.json").write_text('{"kind": "online-predictor", "version": 1, "state": {"n_features": 2}}')
    with pytest.raises(gpudvfs.InputError, match="bad.json"):
        load_predictor(tmp_path / "bad.json")


def test_reset():
    p = OnlinePredictor(2, 0.9, 3.0)
    p.update([1.0, 2.0], 1.0)
    p.reset()
    assert p.state() == OnlinePredictor(2, 0.9, 3.0).state()


def test_bank_streams_match_single_predictors():
    streams, n = 7, 3
    x, y, mask = make_batches(40, streams, n, seed=3)
    bank = OnlinePredictorBank(streams, n, 0.9, 20.0)
    singles = [OnlinePredictor(n, 0.9, 20.0) for _ in range(streams)]
    for k in range(len(x)):
        pred = bank.predict(x[k])
        counts = bank.update(x[k], y[k], mask[k])
        assert counts["masked"] == int(np.sum(~mask[k]))
        for s, p in enumerate(singles):
            assert pred[s] == p.predict(x[k, s])
            if mask[k, s]:
                p.update(x[k, s], y[k, s])
    for s, p in enumerate(singles):
        assert np.array_equal(bank.coef[s], p.coef)
        assert np.array_equal(bank.covariance(s), p.covariance)
        assert bank.updates[s] == p.updates


def test_bank_agrees_with_numpy_reference():
    streams, n = 5000, 4
    x, y, mask = make_batches(30, streams, n, seed=4)
    for mode in MODES:
        bank = OnlinePredictorBank(streams, n, 0.95, forgetting_mode=mode)
        ref = NumpyRlsBank(streams, n, 0.95, forgetting_mode=mode)
        for k in range(len(x)):
            bank.update(x[k], y[k], mask[k])
            ref.update(x[k], y[k], mask[k])
        s = bank.state()
        np.testing.assert_allclose(s["coef"], ref.coef, rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(s["covariance"], ref.cov, rtol=1e-9, atol=1e-9)


def test_bank_bad_batch_changes_nothing_and_state_roundtrip(tmp_path):
    bank = OnlinePredictorBank(4, 2, 0.8)
    x = np.arange(8.0).reshape(4, 2) / 8
    bank.update(x, [1.0, 2.0, 3.0, 4.0])
    before = bank.state()
    bad = x.copy()
    bad[3, 1] = np.nan
    with pytest.raises(ValueError, match=r"x\[3, 1\]"):
        bank.update(bad, np.ones(4))
    with pytest.raises(ValueError, match="finite"):
        bank.update(x, [1.0, np.inf, 1.0, 1.0])
    with pytest.raises(ValueError, match="shape"):
        bank.update(x[:3], np.ones(3))
    with pytest.raises(ValueError, match="shape"):
        bank.update(x, np.ones(4), np.ones(3, dtype=bool))
    with pytest.raises(ValueError):
        bank.covariance(4)
    assert_same_state(bank.state(), before)
    for b in (OnlinePredictorBank.from_state(before), pickle.loads(pickle.dumps(bank))):
        assert_same_state(b.state(), before)
    save_predictor(bank, tmp_path / "bank.json")
    assert_same_state(load_predictor(tmp_path / "bank.json").state(), before)
    bank.reset_stream(1)
    assert np.array_equal(bank.coef[1], [0.0, 0.0]) and bank.updates[1] == 0
    broken = dict(before)
    broken["covariance"] = before["covariance"].copy()
    broken["covariance"][2, 0, 1] += 1.0
    with pytest.raises(ValueError, match="stream 2"):
        OnlinePredictorBank.from_state(broken)
