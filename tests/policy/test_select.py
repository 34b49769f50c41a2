"""Frequency selection: each policy's choice is feasible and optimal by brute force, and
the Pareto front is exactly the non-dominated set."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from gpudvfs import InputError
from gpudvfs.policy import POLICIES, pareto_front, select


@st.composite
def grids(draw):
    w, k = draw(st.integers(1, 6)), draw(st.integers(1, 12))
    t = draw(hnp.arrays(np.float64, (w, k), elements=st.floats(0.1, 100)))
    p = draw(hnp.arrays(np.float64, (w, k), elements=st.floats(10, 300)))
    cfg = np.column_stack([np.arange(k) * 10.0 + 500, np.full(k, 3505.0)])
    return t, p, cfg


@settings(max_examples=200, deadline=None)
@given(g=grids(), policy=st.sampled_from(POLICIES), slowdown=st.floats(0, 0.5), cap=st.floats(10, 300))
def test_choice_is_feasible_and_optimal(g, policy, slowdown, cap):
    t, p, cfg = g
    s = select(t, p, cfg, policy, default_index=0, slowdown=slowdown, power_cap_w=cap)
    e = t * p / 1e3
    for w in range(t.shape[0]):
        i = s.index[w]
        assert s.core_mhz[w] == cfg[i, 0] and s.joules[w] == pytest.approx(e[w, i])
        obj = {"energy": e[w], "edp": e[w] * t[w], "ed2p": e[w] * t[w] ** 2,
               "cost": 0.5 * e[w] + 0.5 * p[w].max() * t[w] / 1e3}.get(policy)
        if obj is not None:
            assert obj[i] == obj.min()
            continue
        ok = t[w] <= t[w, 0] * (1 + slowdown) if policy == "deadline" else p[w] <= cap
        assert s.feasible[w] == ok.any()
        if ok.any():
            target = e[w] if policy == "deadline" else t[w]
            assert ok[i] and target[i] == target[ok].min()
        else:
            assert i == (np.argmin(t[w]) if policy == "deadline" else np.argmin(p[w]))


@settings(max_examples=200, deadline=None)
@given(t=hnp.arrays(np.float64, st.integers(1, 30), elements=st.floats(0.1, 10)), data=st.data())
def test_pareto_front_is_the_non_dominated_set(t, data):
    e = data.draw(hnp.arrays(np.float64, t.shape, elements=st.floats(0.1, 10)))
    front = set(pareto_front(t, e).tolist())
    for i in range(len(t)):
        dominated = np.any((t <= t[i]) & (e <= e[i]) & ((t < t[i]) | (e < e[i])))
        duplicate_kept_elsewhere = np.any((t == t[i]) & (e == e[i]) & (np.arange(len(t)) != i))
        if dominated:
            assert i not in front
        elif not duplicate_kept_elsewhere:
            assert i in front


@settings(max_examples=200, deadline=None)
@given(g=grids(), policy=st.sampled_from(("energy", "edp", "ed2p")), data=st.data())
def test_error_aware_choices(g, policy, data):
    """worst: the minimum of the objective's upper error bound; expected: the minimum of its
    log-normal mean; near ties: the configuration nearest the default among those within the
    point choice's error band."""
    t, p, cfg = g
    err = data.draw(hnp.arrays(np.float64, t.shape, elements=st.floats(0, 0.3)))
    default = data.draw(st.integers(0, t.shape[1] - 1))
    e = t * p / 1e3
    obj = {"energy": e, "edp": e * t, "ed2p": e * t * t}[policy]
    worst = select(t, p, cfg, policy, error=err, rule="worst").index
    point = select(t, p, cfg, policy).index
    near = select(t, p, cfg, policy, error=err, near_ties=True, default_index=default).index
    dist = np.abs(np.log(cfg[:, 0] / cfg[default, 0]))
    for w in range(t.shape[0]):
        upper = obj[w] * (1 + err[w])
        assert upper[worst[w]] == upper.min()
        band = obj[w] <= obj[w, point[w]] * (1 + err[w, point[w]])
        assert band[near[w]] and dist[near[w]] == dist[band].min()
    # Expected energy: the prediction times exp(log(1 + error)^2 / 2); a uniform error changes nothing.
    expected = select(t, p, cfg, policy, error=err, rule="expected").index
    uniform = select(t, p, cfg, policy, error=np.full_like(t, 0.2), rule="expected").index
    for w in range(t.shape[0]):
        mean = obj[w] * np.exp(np.log1p(err[w]) ** 2 / 2)
        assert mean[expected[w]] == mean.min()
        assert obj[w, uniform[w]] == obj[w, point[w]]
    # No error: still a minimum, exact ties going to the configuration nearest the default.
    exact = select(t, p, cfg, policy, error=np.zeros_like(t), near_ties=True, default_index=default).index
    rows = np.arange(t.shape[0])
    assert np.array_equal(obj[rows, exact], obj.min(axis=1))


@pytest.mark.parametrize("kw,match", [
    (dict(policy="fastest"), "unknown policy"),
    (dict(rule="best"), "unknown rule"),
    (dict(rule="worst"), "need error="),
    (dict(rule="expected"), "need error="),
    (dict(near_ties=True, error=0.1), "default_index"),
    (dict(rule="worst", error=[-0.1, 0.1]), "finite and >= 0"),
    (dict(rule="worst", error=[0.1, 0.1, 0.1]), "broadcast"),
    (dict(policy="deadline"), "default_index"),
    (dict(policy="power-cap"), "power_cap_w"),
    (dict(time_ms=[[1.0, -1.0]]), "positive"),
    (dict(time_ms=[[1.0, np.nan]]), "finite"),
    (dict(watts=[[1.0, 2.0, 3.0]]), "same shape"),
    (dict(configs=[[1, 2, 3]]), "configs"),
])
def test_bad_input(kw, match):
    args = dict(time_ms=[[1.0, 2.0]], watts=[[100.0, 50.0]], configs=[[1000, 3505], [500, 3505]], policy="energy")
    args |= kw
    with pytest.raises(InputError, match=match):
        select(args.pop("time_ms"), args.pop("watts"), args.pop("configs"), args.pop("policy"), **args)


@settings(max_examples=200, deadline=None)
@given(r=hnp.arrays(np.float64, st.tuples(st.integers(2, 8), st.integers(1, 10)), elements=st.floats(0, 1)))
def test_one_pair_chosen_without_an_application_does_no_better_on_it_than_in_hindsight(r):
    """Whatever pair the other applications choose, it is no better for the one left out than
    the pair chosen on all: S(k) - r[a, k] <= S(h) - r[a, h] and S(k) >= S(h) give
    r[a, k] >= r[a, h]."""
    from gpudvfs.evaluation.regret import single_pair

    cfg = np.column_stack([np.arange(r.shape[1]) * 10.0 + 500, np.full(r.shape[1], 877.0)])
    out = single_pair(r, cfg)
    h = int(np.flatnonzero(cfg[:, 0] == out.hindsight.pair[0])[0])
    assert out.hindsight.mean == pytest.approx(r.mean(axis=0).min())
    chosen = [int(np.flatnonzero(cfg[:, 0] == p[0])[0]) for p in out.cross_validated.pairs]
    per_app = r[np.arange(len(r)), chosen]
    assert np.all(per_app >= r[:, h] - 1e-12)
    assert out.cross_validated.mean == pytest.approx(per_app.mean())


def test_one_pair_is_chosen_without_the_application_and_among_pairs_the_others_allow():
    from gpudvfs.evaluation.regret import single_pair

    cfg = np.array([[500.0, 877.0], [700.0, 877.0], [900.0, 877.0]])
    r = np.array([[0.0, 0.4, 0.4],
                  [0.3, 0.0, 0.2],
                  [0.3, 0.1, 0.0]])
    out = single_pair(r, cfg)
    assert out.hindsight.pair == (700.0, 877.0) and out.hindsight.mean == pytest.approx(0.5 / 3)
    # Without application 0 the others choose 700; without 1 or 2, application 0 pulls them to 500.
    assert out.cross_validated.pairs == ((700.0, 877.0), (500.0, 877.0), (500.0, 877.0))
    assert out.cross_validated.mean == pytest.approx(1.0 / 3)
    # Application 2 meets its deadline at 900 only: a pair chosen on it must be 900, one chosen
    # without it need not meet it.
    allowed = np.array([[True, True, True], [True, True, True], [False, False, True]])
    out = single_pair(r, cfg, allowed)
    assert out.hindsight.pair == (900.0, 877.0)
    assert out.cross_validated.pairs == ((900.0, 877.0), (900.0, 877.0), (500.0, 877.0))
    assert out.cross_validated.mean == pytest.approx(0.9 / 3)
    assert (out.hindsight.met, out.cross_validated.met) == (3, 2)
    # Without a constraint nothing is met or missed: the JSON has no "met".
    unconstrained = single_pair(r, cfg)
    assert unconstrained.cross_validated.met is None and "met" not in unconstrained.to_dict()["cross_validated"]
    assert out.to_dict()["cross_validated"] == {"mean": pytest.approx(0.3), "max": pytest.approx(0.4),
                                                "pairs": [[900.0, 877.0], [900.0, 877.0], [500.0, 877.0]], "met": 2}


def test_one_pair_is_chosen_without_the_applications_whole_group():
    """Applications 0 and 1 are one group (two kernels of one application): each is scored at
    the pair application 2 alone chooses (900), not one its group mate helped choose."""
    from gpudvfs.evaluation.regret import single_pair_indices

    r = np.array([[0.0, 0.4, 0.4],
                  [0.3, 0.0, 0.2],
                  [0.3, 0.1, 0.0]])
    assert single_pair_indices(r)[1].tolist() == [1, 0, 0]
    hindsight, held_out = single_pair_indices(r, groups=np.array(["a", "a", "b"]))
    assert hindsight == 1 and held_out.tolist() == [2, 2, 0]
