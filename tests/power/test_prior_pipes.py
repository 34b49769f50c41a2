"""The prior's SFU and tensor weights (gpudvfs.power.prior_pipes): the shipped weights against what
`gpudvfs power prior-pipes validation` fits on the recorded H100 and H200 kernels, their figures
leaving each kernel out, and a profile with and without the tensor pipe's metric."""

from __future__ import annotations

import json
import math
from importlib import resources

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from gpudvfs import InputError, PowerModel
from gpudvfs.catalog import lookup
from gpudvfs.cli.app import cli
from gpudvfs.data.profilers import read_counters
from gpudvfs.data.tensor_counters import TENSOR_METRICS
from gpudvfs.power.prior_pipes import check_pipes, pipes_document
from gpudvfs.power.prior_pipes_fit import fit_pipes
from gpudvfs.predict.profile import kernel_inputs, predict_detail, profile_command
from gpudvfs.predict.tensor import with_tensor

from conftest import REPO

VALIDATION = REPO / "validation"
GEMM = VALIDATION / "nvidia-h200" / "kernels" / "gemm_bf16.ncu.csv"


@pytest.fixture(scope="module")
def fitted():
    return fit_pipes(VALIDATION / "nvidia-h100-80gb-hbm3", VALIDATION / "nvidia-h200")


def test_the_shipped_weights_are_what_prior_pipes_fits(fitted):
    shipped = json.loads(resources.files("gpudvfs.catalog").joinpath("power_prior_pipes.json").read_text())
    assert shipped.keys() == fitted["document"].keys()
    for k, v in fitted["document"].items():
        assert shipped[k] == (pytest.approx(v, rel=1e-9) if isinstance(v, float) else v), k


def test_the_weights_left_out_by_kernel(fitted):
    """The figures docs/accuracy.md gives. H100: 32 kernels at the driver's clocks, the SFU weight
    fitted without each; H200: the tensor weight fitted on the other tensor kernel (GPM's
    busiest-pipe activity standing in for the tensor metric the profiles lack)."""
    s = fitted["summary"]
    assert s["h100-sxm"]["before_mape"] == pytest.approx(23.3, abs=0.05)
    assert s["h100-sxm"]["after_mape"] == pytest.approx(12.7, abs=0.05)
    assert s["h100-sxm"]["before_outside"] == ["sf_ops004", "sf_ops012", "sf_ops064", "histogram"]
    assert s["h100-sxm"]["after_outside"] == ["histogram"]
    h200 = {n: (round(100 * (k["before"] / k["watts"] - 1), 1), round(100 * (k["after"] / k["watts"] - 1), 1))
            for n, k in fitted["kernels"]["h200"].items()}
    # Before: the rule's SFU weight and no tensor term, on the shipped voltage curve.
    assert h200 == {"gemm_bf16": (-51.3, -1.6), "sdpa": (-33.1, 1.5), "layernorm": (-18.4, -26.7),
                    "elementwise": (-15.4, -24.7)}
    assert s["h200"]["before_outside"] == ["gemm_bf16", "sdpa"] and s["h200"]["after_outside"] == []
    d = fitted["document"]
    # The H100 puts the XU pipe's weight at zero; the tensor weight rests on one GPU: its spread is
    # the rule's cross-GPU interval at least.
    assert d["sfu_per_tdp"] == 0.0 and d["tensor_per_tdp"] == pytest.approx(0.972, abs=1e-3)
    assert d["tensor_spread"] == pytest.approx(0.392, abs=1e-3)


def test_the_prior_takes_the_xu_weight_from_volta_on():
    sfu = {k: PowerModel.prior(k).weights_["SFU"] for k in ("h100-sxm", "a40", "titan-xp")}
    assert sfu["h100-sxm"] == sfu["a40"] == 0.0 and sfu["titan-xp"] > 0


def test_bad_pipes_documents_are_refused():
    doc = pipes_document()
    with pytest.raises(InputError, match="tensor_per_tdp must be a finite number >= 0"):
        check_pipes(doc | {"tensor_per_tdp": -1.0}, "p.json")
    with pytest.raises(InputError, match="p.json: not a gpudvfs power-prior-pipes"):
        check_pipes(doc | {"version": 9}, "p.json")


def _with_tensor_row(tmp_path, value: str, unit: str = "%"):
    """The H200 GEMM's profile with the tensor metric added: a stand-in for a profile that has it
    (the recorded one lacks it), at the GEMM's GPM busiest-pipe activity."""
    lines = GEMM.read_text().splitlines()
    last = lines[-1].rsplit('","', 3)
    lines.append('","'.join([last[0], TENSOR_METRICS[0], unit, value]) + '"')
    out = tmp_path / "gemm_tensor.ncu.csv"
    out.write_text("\n".join(lines) + "\n")
    return out


def test_a_profile_with_the_tensor_metric_adds_the_pipes_power(tmp_path):
    without = predict_detail(read_counters(GEMM), lookup("h200"))
    with_it = predict_detail(read_counters(_with_tensor_row(tmp_path, "93.3")), lookup("h200"))
    assert kernel_inputs(read_counters(_with_tensor_row(tmp_path, "93.3")))[0].tensor == pytest.approx(0.933)
    assert np.all(with_it.application.watts > without.application.watts)
    assert "rests on one GPU" in with_it.rests_on and "collect" not in with_it.rests_on
    assert "collect " + TENSOR_METRICS[0] in without.rests_on
    # Knowing the activity narrows the interval that not knowing it widened.
    assert PowerModel.prior("h200").interval_ < with_it.intervals.power < without.intervals.power


def test_a_tensor_metric_that_is_not_a_percentage_is_refused(tmp_path):
    with pytest.raises(InputError, match="sm__pipe_tensor_cycles_active.*expected a percentage"):
        kernel_inputs(read_counters(_with_tensor_row(tmp_path, "9330")))
    with pytest.raises(InputError, match="sm__pipe_tensor_cycles_active"):
        kernel_inputs(read_counters(_with_tensor_row(tmp_path, "93.3", unit="cycle")))


def test_gpus_without_tensor_cores_and_fitted_models_are_left_as_they_are():
    model = PowerModel.prior("gtx1080")
    w = model.predict_grid(np.full((1, 7), 0.5), model.configs_)
    out, q, note = with_tensor(lookup("gtx1080"), model, [None], model.configs_, w, model.interval_)
    assert out is w and q == model.interval_ and note == ""


@settings(max_examples=40, deadline=None)
@given(a=st.floats(0, 1), b=st.floats(0, 1), u=st.floats(0, 1))
def test_tensor_power_rises_with_the_activity_and_never_narrows_the_interval(a, b, u):
    spec = lookup("h100-sxm")
    model = PowerModel.prior(spec)
    cfg = model.configs_
    w = model.predict_grid(np.full((1, 7), u), cfg)
    lo, q_lo, _ = with_tensor(spec, model, [min(a, b)], cfg, w, model.interval_)
    hi, q_hi, _ = with_tensor(spec, model, [max(a, b)], cfg, w, model.interval_)
    assert np.all(lo <= hi + 1e-9) and model.interval_ <= q_lo <= q_hi + 1e-12
    _, q_none, _ = with_tensor(spec, model, [None], cfg, w, model.interval_)
    assert q_none >= q_hi - 1e-12 and math.isfinite(q_none)


def test_the_profiling_command_asks_for_the_tensor_metric():
    assert TENSOR_METRICS[0] in profile_command("9.0") and TENSOR_METRICS[0] not in profile_command("6.1")


def test_prior_pipes_command(tmp_path):
    r = CliRunner().invoke(cli, ["power", "prior-pipes", str(VALIDATION), "--write", str(tmp_path / "p.json")])
    assert r.exit_code == 0, r.output
    assert "h100-sxm: MAPE 23.3% -> 12.7%" in r.output and check_pipes(json.loads((tmp_path / "p.json").read_text()),
                                                                      "p.json")
    bad = CliRunner().invoke(cli, ["power", "prior-pipes", str(tmp_path)])
    assert bad.exit_code == 2 and "power-suite.csv" in bad.output
