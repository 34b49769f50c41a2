"""The prior's core voltage curve (gpudvfs.power.prior_curve): the shipped floor and knee against what
`gpudvfs power prior-curve` chooses on the public clock sweeps, and the energy its least-energy
clock costs on each GPU left out."""

from __future__ import annotations

import json
from importlib import resources

import pytest
from click.testing import CliRunner

from gpudvfs import InputError, PowerModel
from gpudvfs.catalog import lookup
from gpudvfs.cli.app import cli
from gpudvfs.power import prior_curve_fit
from gpudvfs.power.prior_curve import check_curve, curve_document
from gpudvfs.power.prior_curve_fit import choose_curve


@pytest.fixture(scope="module")
def chosen(data):
    return choose_curve(data)


def test_the_shipped_curve_is_what_prior_curve_chooses(chosen):
    shipped = json.loads(resources.files("gpudvfs.catalog").joinpath("power_prior_curve.json").read_text())
    assert shipped == chosen["document"]


def test_least_energy_regret_each_gpu_left_out(chosen):
    """The figures docs/accuracy.md gives: mean regret (%) per GPU of the prior's least-energy core
    clock, the floor and knee chosen on the other GPUs (by their worst GPU), against the rule's own
    curve; the target is 5% on every GPU."""
    per = {g: (round(r["before"], 2), round(r["after"], 2), round(r["after_by_mean"], 2))
           for g, r in chosen["per_gpu"].items()}
    assert per == {"a40": (8.38, 0.94, 8.38), "v100-pcie": (4.17, 3.74, 3.74), "gtx-titan-x": (1.99, 3.27, 2.61),
                   "gtx980": (0.22, 0.28, 0.22)}
    # The prior gives the chosen curve from Ampere on (the A40), the rule's to the older GPUs.
    prior = {g: round(r["prior"], 2) for g, r in chosen["per_gpu"].items()}
    assert prior == {"a40": 0.94, "v100-pcie": 4.17, "gtx-titan-x": 1.99, "gtx980": 0.22}
    assert max(prior.values()) < 5
    # How the figures move with the shipped knee and floor a step either way.
    assert {k: round(max(v.values()), 2) for k, v in chosen["moves"].items()} == {
        "knee 0.25, floor 0.7": 3.82, "knee 0.35, floor 0.7": 3.73, "knee 0.3, floor 0.65": 3.62,
        "knee 0.3, floor 0.75": 4.16}


def test_the_prior_runs_at_the_floor_below_the_knee_from_ampere_on():
    doc = curve_document()
    for key, floor in (("a40", doc["floor"]), ("h100-sxm", doc["floor"]), ("v100-pcie", None)):
        spec = lookup(key)
        model = PowerModel.prior(spec)
        low = model.voltage(doc["knee"] * spec.default_mhz[0] * 0.9, spec.default_mhz[1])[0]
        assert model.voltage(*spec.default_mhz)[0] == pytest.approx(1.0)
        assert low == pytest.approx(floor) if floor else low > doc["floor"] + 0.1, key


def test_bad_curve_documents_are_refused():
    doc = curve_document()
    for key, bad in (("floor", 0.0), ("knee", 1.5), ("floor", "0.7")):
        with pytest.raises(InputError, match=f"c.json: {key} must be a number in"):
            check_curve(doc | {key: bad}, "c.json")
    with pytest.raises(InputError, match="from_compute_capability must be"):
        check_curve(doc | {"from_compute_capability": None}, "c.json")
    with pytest.raises(InputError, match="not a gpudvfs power-prior-curve"):
        check_curve(doc | {"kind": "power-prior-rule"}, "c.json")


def test_prior_curve_command(data, tmp_path, monkeypatch):
    # One candidate only: the command's wiring, not the search (the fixture above runs that).
    monkeypatch.setattr(prior_curve_fit, "KNEES", (0.3,))
    monkeypatch.setattr(prior_curve_fit, "FLOORS", (0.7,))
    r = CliRunner().invoke(cli, ["power", "prior-curve", str(data), "--write", str(tmp_path / "c.json")])
    assert r.exit_code == 0, r.output
    assert "a40" in r.output and "knee 0.3" in r.output
    assert check_curve(json.loads((tmp_path / "c.json").read_text()), "c.json")["floor"] == 0.7
    bad = CliRunner().invoke(cli, ["power", "prior-curve", str(tmp_path)])
    assert bad.exit_code == 2 and "none of the sweeps" in bad.output
