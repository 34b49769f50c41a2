"""The cluster power budget (multiple-choice knapsack in the Rust core): the heuristic against
the exact Pareto program on random instances, forbidden pairs, bad input, the bench command."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from gpudvfs.cli.app import cli
from gpudvfs.errors import InputError
from gpudvfs.fleet.budget import random_instance, solve_budget


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), gpus=st.integers(1, 30), pairs=st.integers(1, 12),
       tightness=st.floats(0.0, 1.0))
def test_heuristic_is_feasible_and_bounded_by_the_exact_optimum(seed, gpus, pairs, tightness):
    watts, t, budget = random_instance(np.random.default_rng(seed), gpus, pairs, tightness)
    exact = solve_budget(watts, t, budget, exact=True)
    got = solve_budget(watts, t, budget)
    rows = np.arange(gpus)
    assert got.watts == pytest.approx(watts[rows, got.choice].sum()) and got.watts <= budget * (1 + 1e-12)
    assert got.value == pytest.approx(t[rows, got.choice].sum())
    assert exact.watts <= budget * (1 + 1e-12)
    assert got.bound <= exact.value * (1 + 1e-9) <= got.value * (1 + 2e-9)
    assert got.value <= exact.value * 1.005  # the 0.5% optimality gap


def test_forbidden_pairs_are_never_chosen():
    watts, t, budget = random_instance(np.random.default_rng(3), 40, 20)
    t[:, -5:] = np.nan  # e.g. over a slowdown bound
    for exact in (False, True):
        r = solve_budget(watts, t, budget, exact=exact)
        assert np.all(r.choice < 15)


def test_a_generous_budget_takes_each_gpus_fastest_pair():
    watts, t, _ = random_instance(np.random.default_rng(1), 50, 30)
    r = solve_budget(watts, t, 1e9)
    assert np.array_equal(r.choice, np.argmin(t, axis=1)) and r.gap_bound == 0.0


@pytest.mark.parametrize("args,message", [
    ((np.ones((2, 3)), np.ones((3, 2)), 10.0), "one \\[GPUs x options\\] shape"),
    ((np.ones(3), np.ones(3), 10.0), "one \\[GPUs x options\\] shape"),
    ((np.ones((2, 3)), np.ones((2, 3)), 1.0), "below the 2 W"),
    ((-np.ones((2, 3)), np.ones((2, 3)), 10.0), "costs must be finite and >= 0"),
    ((np.ones((2, 3)), np.full((2, 3), np.inf), 10.0), "values must be finite"),
    ((np.ones((2, 3)), np.full((2, 3), np.nan), 10.0), "no allowed option"),
    ((np.ones((2, 3)), np.ones((2, 3)), float("nan")), "budget must be finite"),
    ((np.ones((0, 3)), np.ones((0, 3)), 10.0), "at least one GPU"),
])
def test_bad_input(args, message):
    with pytest.raises(InputError, match=message):
        solve_budget(*args)


def test_bench_command():
    r = CliRunner().invoke(cli, ["fleet", "budget", "--bench", "--gpus", "300", "--pairs", "40", "--small", "10",
                                 "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["ms"] > 0 and d["within_budget"] and 0 <= d["gap_max"] <= 0.005 and d["bound_gap"] < 1e-3
