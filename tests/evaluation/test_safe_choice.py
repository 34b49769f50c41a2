"""The safe offline choice (`gpudvfs.evaluation.safe`): its invariants (property-based), bad input,
and its cross-validated figures on the GTX 980 and V100 grids of ../shared/data, where the
models' plain choice on the V100 costs three times one pair for all."""

from __future__ import annotations

import csv

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from gpudvfs import InputError
from gpudvfs.catalog import lookup
from gpudvfs.cli.app import cli
from gpudvfs.data import read
from gpudvfs.evaluation.dcgm_selection import evaluate_dcgm_selection as evaluate_dcgm
from gpudvfs.evaluation.safe import SHARED_RULE, candidate_regrets, rule_name, safe_indices, safe_report
from gpudvfs.evaluation.selection import evaluate_selection
from gpudvfs.time.device import TimeDevice

CONFIGS = np.array([(c, m) for m in (500.0, 1000.0) for c in (400.0, 600.0, 800.0, 1000.0)])


@settings(max_examples=60, deadline=None)
@given(hnp.arrays(np.float64, (5, 8), elements=st.floats(-1, 1)),
       hnp.arrays(np.float64, (5, 8), elements=st.floats(0.01, 0.5)),
       st.lists(st.integers(0, 7), min_size=5, max_size=5))
def test_the_choice_moves_from_the_optimum_to_the_anchor_as_z_grows(log_pred, spread, anchor):
    anchor = np.array(anchor)
    rows = np.arange(5)
    best = np.argmin(log_pred, axis=1)
    assert (safe_indices(log_pred, spread, anchor, 0.0) == np.where(log_pred[rows, anchor] > log_pred[rows, best],
                                                                     best, anchor)).all()
    assert (safe_indices(log_pred, spread, anchor, np.inf) == anchor).all()
    # A workload that falls back at some z falls back at every larger z.
    at_anchor = [safe_indices(log_pred, spread, anchor, z) == anchor for z in (0.0, 0.5, 1.0, 2.0, 4.0)]
    for lo, hi in zip(at_anchor, at_anchor[1:]):
        assert (hi | ~lo).all()
    # Every choice is the optimum or the anchor.
    for z in (0.5, 1.0):
        k = safe_indices(log_pred, spread, anchor, z)
        assert ((k == best) | (k == anchor)).all()


@pytest.mark.parametrize("groups", [[0, 0], [0, 1]])
def test_with_fewer_than_three_applications_the_reference_is_the_safe_setting_and_the_report_says_so(groups):
    """No other application to choose the rule on and yet another to anchor on: the safe
    choice is the reference, scored as such; one pair for all is still chosen on the other
    application where there is one."""
    rng = np.random.default_rng(1)
    regret = rng.random((2, 8))
    pred = rng.random((2, 8))
    r = safe_report(regret, pred, pred, CONFIGS, 2, groups=np.array(groups))
    assert r.note is not None and "the reference is the safe setting" in r.note
    assert r.note.startswith(f"{len(set(groups))} application")
    assert r.cross_validated.chosen == ("reference", "reference")
    assert r.cross_validated.mean == pytest.approx(regret[:, 2].mean())
    assert (r.per_workload == regret[:, 2]).all()
    if groups == [0, 0]:
        assert r.single_pair is None and r.shared_rule is None
    else:  # each application's pair is the other's least-regret pair
        other = [int(np.argmin(regret[1])), int(np.argmin(regret[0]))]
        assert r.single_pair.mean == pytest.approx(regret[[0, 1], other].mean())
        # The rule chosen on the public grids needs no choice here: it is scored.
        alone = candidate_regrets(regret, pred, pred, CONFIGS, 2, [SHARED_RULE])[rule_name(*SHARED_RULE)]
        assert r.shared_rule is not None and r.shared_rule.mean == pytest.approx(alone.mean())
    assert r.to_dict()["note"] == r.note


def test_bad_input():
    with pytest.raises(InputError, match="must all be"):
        safe_report(np.zeros((4, 8)), np.zeros((4, 7)), np.zeros((4, 8)), CONFIGS, 0)


def test_a_model_that_is_right_is_kept_and_one_that_is_wrong_far_away_falls_back():
    """Six workloads whose measured energy is least at pair 0: a model that says so is kept
    (z chosen 0); one that predicts a deep saving far from the reference, where it has erred
    on every other workload, falls back to one pair for all."""
    rng = np.random.default_rng(0)
    measured = np.log(1 + np.arange(8.0))[None, :] + rng.normal(0, 0.01, (6, 8))
    regret = np.exp(measured - measured.min(axis=1, keepdims=True)) - 1
    right = safe_report(regret, measured + rng.normal(0, 0.01, (6, 8)), measured, CONFIGS, 3)
    assert right.cross_validated.mean == pytest.approx(right.plain.mean) and right.plain.mean < 0.05
    wrong = measured.copy()
    wrong[:, 4] -= 3.0  # the pair farthest from the reference (400/1000 MHz) predicted far cheaper
    r = safe_report(regret, wrong, measured, CONFIGS, 3)
    assert r.plain.mean > 1 and r.cross_validated.mean == pytest.approx(r.single_pair.mean)
    assert r.spread.farthest > r.spread.at_reference


# ------------------------------------------------------------------ real grids
def test_gtx980_the_safe_choice_keeps_the_models_choice(data):
    """GTX 980 (15 applications, reference 700/700 MHz): cross-validated, the safe choice is the
    plain one, 3.36% (max 18.9%), below one pair for all chosen on the other applications,
    5.34% (max 32.8%); the figure over the constants moves 3.22-24.24%."""
    grid = read(data / "nv-dvfs-benchmark/gtx980_time_power_dev.csv")
    r = evaluate_selection(grid, (700.0, 700.0), time_device=TimeDevice.gtx980(), spec=lookup("gtx980")).safe
    cv = r.cross_validated
    assert (cv.mean, cv.max) == pytest.approx((0.0336, 0.189), abs=1e-3)
    assert cv.mean <= r.single_pair.mean and cv.max < 0.2
    assert r.single_pair.mean == pytest.approx(0.0534, abs=1e-4)
    over = [v.mean for v in r.over_constants.values()]
    assert (min(over), max(over)) == pytest.approx((0.0322, 0.2424), abs=1e-4)
    # The rule chosen on the public grids (this one among them): the move capped near one pair for all.
    assert r.shared_rule is not None
    assert (r.shared_rule.mean, r.shared_rule.max) == pytest.approx((0.0451, 0.156), abs=1e-3)


def test_v100_the_safe_choice_falls_back_to_one_pair_for_all(data):
    """V100 DCGM grid (11 applications, reference 1245 MHz): the plain choice costs 11.29% (max
    33.1%); the safe choice 3.80% (max 18.7%), as one pair for all, which it falls back to on
    every application (its 95% paired difference from the plain choice -13.4 to -2.4 points).
    Under EDP it gets 6.62% (max 25.7%) against the plain 18.50% and one pair's 4.78%."""
    grid = read(data / "nsfcac/v100_spec_dev.csv")
    r = evaluate_dcgm(grid, (1245.0, 877.0)).safe
    assert r is not None
    cv = r.cross_validated
    assert (cv.mean, cv.max) == pytest.approx((0.0380, 0.187), abs=1e-3)
    assert cv.mean <= r.single_pair.mean + 1e-12 and cv.max < 0.2
    # Each application's constants, chosen on the others, anchor it on one pair for all.
    assert len(cv.chosen) == 11 and all(c.startswith("single_pair z=") for c in cv.chosen)
    assert r.plain.mean == pytest.approx(0.1129, abs=1e-4)
    assert r.intervals["minus_plain"] == pytest.approx((-0.1339, -0.0243), abs=1e-3)
    assert r.spread.farthest > 2 * r.spread.at_reference
    assert r.shared_rule is not None
    assert (r.shared_rule.mean, r.shared_rule.max) == pytest.approx((cv.mean, cv.max), abs=1e-4)
    edp = evaluate_dcgm(grid, (1245.0, 877.0), policy="edp").safe
    assert edp is not None
    assert (edp.cross_validated.mean, edp.plain.mean, edp.single_pair.mean) == pytest.approx(
        (0.0662, 0.1850, 0.0478), abs=1e-4)


def test_select_eval_on_two_applications_says_the_reference_is_the_safe_setting(data, tmp_path):
    """Two GTX 980 applications: every figure but the safe choice's is computed, and the
    output says why that one is the reference (a stand-in for a grid with too few
    applications, cut from the real one)."""
    with open(data / "nv-dvfs-benchmark/gtx980_time_power_dev.csv", newline="") as f:
        rows = list(csv.reader(f))
    app = rows[0].index("appName")
    keep = sorted({r[app] for r in rows[1:]})[:2]
    path = tmp_path / "two.csv"
    with open(path, "w", newline="") as f:
        csv.writer(f).writerows([rows[0], *[r for r in rows[1:] if r[app] in keep]])
    out = CliRunner().invoke(cli, ["select", "eval", str(path), "--device", "gtx980", "--reference", "700,700"])
    assert out.exit_code == 0, out.output
    assert "safe choice: 2 applications" in out.output and "the reference is the safe setting" in out.output
