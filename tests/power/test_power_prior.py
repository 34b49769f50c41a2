"""The power prior of every catalog GPU: its invariants, the shipped rule against what
`gpudvfs power prior-cv` fits on the public data, and its cross-validated figures."""

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
from gpudvfs.catalog import catalog
from gpudvfs.cli.app import cli
from gpudvfs.data.counters import COMPONENTS
from gpudvfs.power.prior import check_rule, rule_document
from gpudvfs.power.prior_rule import choose_rule, gpu_files

from conftest import REPO

KEYS = sorted(catalog())
H100 = REPO / "validation" / "nvidia-h100-80gb-hbm3"


@pytest.mark.parametrize("key", KEYS)
def test_every_catalog_gpu_has_a_prior_at_its_default_clocks(key):
    model = PowerModel.prior(key)
    spec = catalog()[key]
    assert model.source_ == "prior" and model.device_ == key and model.interval_ > 0
    assert tuple(model.reference_mhz_) == spec.default_mhz
    assert model.voltage(*spec.default_mhz).tolist() == pytest.approx([1.0, 1.0])
    # Busy power at the default clocks is of the order of the TDP the rule scales by.
    busy = model.predict(np.full(len(COMPONENTS), 0.5), *spec.default_mhz)
    assert 0.2 * spec.tdp_w < busy < 2.0 * spec.tdp_w


@settings(max_examples=60, deadline=None)
@given(key=st.sampled_from(KEYS), u=st.lists(st.floats(0, 1), min_size=len(COMPONENTS), max_size=len(COMPONENTS)),
       more=st.integers(0, len(COMPONENTS) - 1), a=st.floats(0.3, 1.0), b=st.floats(0.3, 1.0))
def test_prior_power_rises_with_each_utilization_and_with_the_core_clock(key, u, more, a, b):
    model = PowerModel.prior(key)
    boost, mem = catalog()[key].core_mhz["boost"], catalog()[key].default_mhz[1]
    lo, hi = sorted((a * boost, b * boost))
    u = np.array(u)
    assert model.predict(u, lo, mem) <= model.predict(u, hi, mem) + 1e-9
    v = model.voltage(np.array([lo, hi]), mem)[:, 0]
    assert v[0] <= v[1] + 1e-12
    busier = u.copy()
    busier[more] = min(1.0, busier[more] + 0.1)
    assert model.predict(u, hi, mem) <= model.predict(busier, hi, mem) + 1e-9


def test_a_prior_saves_and_loads_as_a_prior(tmp_path):
    model = PowerModel.prior("h100-sxm")
    model.save(tmp_path / "p.json")
    back = PowerModel.load(tmp_path / "p.json")
    assert back.source_ == "prior" and back.interval_ == model.interval_ and back.device_ == "h100-sxm"
    u = np.full((2, len(COMPONENTS)), 0.3)
    assert np.allclose(back.predict_grid(u), model.predict_grid(u))
    doc = json.loads((tmp_path / "p.json").read_text())
    for key, bad in (("interval", -1.0), ("source", "guessed")):
        (tmp_path / "bad.json").write_text(json.dumps(doc | {key: bad}))
        with pytest.raises(InputError, match=key):
            PowerModel.load(tmp_path / "bad.json")


def test_bad_prior_input_is_refused():
    with pytest.raises(InputError, match="unknown GPU"):
        PowerModel.prior("gtx 9999")
    rule = rule_document()
    with pytest.raises(InputError, match="components"):
        check_rule(rule | {"components": ["SP"]}, "r.json")
    with pytest.raises(InputError, match="curves"):
        check_rule(rule | {"curves": [[0.8, -1.0], None]}, "r.json")
    with pytest.raises(InputError, match="not a gpudvfs"):
        check_rule(rule | {"version": 99}, "r.json")


def test_power_prior_command(tmp_path):
    runner = CliRunner()
    r = runner.invoke(cli, ["power", "prior", "h100-sxm", "--json", "-o", str(tmp_path / "p.json")])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["source"] == "prior" and d["reference_mhz"] == [1980.0, 2619.0] and d["core_voltage"][-1] >= 1.0
    assert d["tensor_w"] > 0 and d["weights_w"]["SFU"] == 0.0  # Hopper: the tensor pipe, the XU pipe's weight
    again = runner.invoke(cli, ["power", "prior", "h100-sxm", "-o", str(tmp_path / "p.json")])
    assert again.exit_code == 2 and "--force" in again.output
    text = runner.invoke(cli, ["power", "prior", "a100"])
    assert text.exit_code == 0 and "prior" in text.output and "90% interval" in text.output
    assert "tensor pipe" in text.output and "tensor pipe" not in runner.invoke(cli, ["power", "prior", "k40c"]).output


@pytest.fixture(scope="module")
def prior_cv(data):
    return choose_rule(gpu_files(data, H100))


def test_the_shipped_rule_is_what_prior_cv_fits_on_the_public_data(prior_cv):
    shipped = json.loads(resources.files("gpudvfs.catalog").joinpath("power_prior.json").read_text())
    fitted = prior_cv["rule"]
    assert set(shipped) == set(fitted)
    for k, v in fitted.items():
        if k == "curves":
            assert [None if c is None else pytest.approx(c, rel=1e-6) for c in v] == shipped[k]
        elif isinstance(v, (list, float)) and k not in ("trained_on", "files", "components", "domain_sizes"):
            assert shipped[k] == pytest.approx(v, rel=1e-6), k
        else:
            assert shipped[k] == v, k


def test_prior_cross_validated_by_gpu(prior_cv):
    """The figures docs/accuracy.md gives: each GPU's prior made without any of its files, by the
    setting chosen on the other GPUs (nested)."""
    files = prior_cv["cv"]["files"]
    assert set(prior_cv["rule"]["trained_on"]) == {"gtx-titan-x", "titan-xp", "k40c", "gtx980", "h100-sxm"}
    for name, f in files.items():
        assert f["gpu"] not in f["trained_on"], name
    mape = {k: round(f["mape"], 1) for k, f in files.items() if "mape" in f}
    shape = {k: round(f["reference_mape"], 1) for k, f in files.items() if "reference_mape" in f}
    assert mape == EXPECTED_MAPE and shape == EXPECTED_SHAPE
    assert prior_cv["cv"]["mean_mape"] == pytest.approx(19.73, abs=0.01)
    assert math.exp(prior_cv["cv"]["interval"]) == pytest.approx(EXPECTED_FACTOR, abs=0.01)
    assert prior_cv["chosen"]["on_all"] == "watts, all rows"
    # How the plain leave-one-GPU-out mean moves with the setting.
    moves = {k: round(v["mean_mape"], 2) for k, v in prior_cv["settings"].items()}
    assert moves == {"relative, 400 rows a GPU": 21.02, "relative, 800 rows a GPU": 23.04,
                     "relative, 1600 rows a GPU": 21.86, "relative, all rows": 20.83,
                     "watts, 400 rows a GPU": 22.82, "watts, 800 rows a GPU": 24.84,
                     "watts, 1600 rows a GPU": 22.69, "watts, all rows": 20.04}


#: Absolute power MAPE (%) of each GPU's prior against its files (V100: DCGM activities mapped).
EXPECTED_MAPE = {"titanx_micro.csv": 12.6, "titanx_hpca18_micro.csv": 12.3, "titanx_real_dev.csv": 15.1,
                 "titanxp_micro.csv": 19.7, "k40c_micro.csv": 17.3, "gtx980_micro.csv": 24.1,
                 "v100_spec_dev.csv": 46.1, "nvidia-h100-80gb-hbm3/power-suite.csv": 24.2}
#: Shape alone: each workload's measured power at the reference clocks, scaled over the clocks by the
#: prior (the H100 ran at one pair: 0 by construction).
EXPECTED_SHAPE = {"titanx_micro.csv": 12.2, "titanx_hpca18_micro.csv": 12.1, "titanx_real_dev.csv": 14.2,
                  "titanxp_micro.csv": 6.1, "k40c_micro.csv": 7.5, "gtx980_micro.csv": 8.7, "v100_spec_dev.csv": 13.6,
                  "bloom_a40_stages.csv": 14.4, "gpt3-175b_a40_stages.csv": 13.9,
                  "nvidia-h100-80gb-hbm3/power-suite.csv": 0.0}
EXPECTED_FACTOR = 1.48
