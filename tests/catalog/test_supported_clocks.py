"""The clocks a GPU supports: the catalog's H100 and H200 lists against those recorded on them, predict's
choice always among them (the catalog's, or NVML's through the stand-in tests/fake_pynvml.py: no GPU
here), a coarse grid for display only, and clocks asked for that the GPU does not take refused with
the nearest it does."""

from __future__ import annotations

import json
import re
from functools import cache

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpudvfs.catalog import catalog, lookup
from gpudvfs.catalog.clocks import SupportedClocks
from gpudvfs.cli.app import cli
from gpudvfs.data import read
from gpudvfs.errors import InputError
from gpudvfs.hardware import SimulatedDevice, grid
from gpudvfs.hardware.nvml import gpu as nvml_gpu
from gpudvfs.predict.profile import kernel_inputs, predict_detail

from conftest import REPO
from fake_pynvml import FakeNvml

H100, H200 = REPO / "validation" / "nvidia-h100-80gb-hbm3", REPO / "validation" / "nvidia-h200"
GEMM = str(H200 / "kernels" / "gemm_bf16.ncu.csv")


def _recorded(folder) -> dict[float, list[float]]:
    """``nvidia-smi -q -d SUPPORTED_CLOCKS`` as recorded: graphics clocks per memory clock."""
    out: dict[float, list[float]] = {}
    for line in (folder / "nvidia-smi-supported-clocks.txt").read_text().splitlines():
        m = re.match(r"\s*(Memory|Graphics)\s*:\s*(\d+) MHz", line)
        if m and m[1] == "Memory":
            mem = float(m[2])
            out[mem] = []
        elif m:
            out[mem].append(float(m[2]))
    return out


@pytest.mark.parametrize("key, folder", [("h100-sxm", H100), ("h200", H200)])
def test_the_catalog_lists_the_clocks_recorded_on_the_gpu(key, folder):
    got, want = SupportedClocks.of_spec(lookup(key)), SupportedClocks.from_lists(_recorded(folder), key)
    assert got.exact and got.source == "catalog" and len(got.pairs) == 220
    assert np.array_equal(got.pairs, want.pairs)


def test_a_gpu_without_a_step_in_the_catalog_gets_points_of_its_range_marked_so():
    spec = lookup("a100-sxm4-40gb")
    c = SupportedClocks.of_spec(spec)
    assert not c.exact and c.source == "catalog-range" and c.supports(*spec.default_mhz)
    c.check("--reference", [1000.5], [1215.0])  # a point of a range is no list to refuse by


@cache
def _launches(key: str):
    report = read(str(H100 / "ncu" / "sgemm.ncu.csv") if key != "h200" else GEMM)
    return report, kernel_inputs(report)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(key=st.sampled_from(["h100-sxm", "h200", "a100-sxm4-40gb"]),
       policy=st.sampled_from(["energy", "edp", "ed2p", "deadline", "cost"]),
       slowdown=st.floats(0.0, 0.5), eta=st.floats(0.0, 1.0))
def test_every_choice_is_a_pair_of_the_gpus_list(key, policy, slowdown, eta):
    """The H100 and H200 profiles on their own GPU; the H100's on an A100's catalog range (at its
    default clocks) for a GPU with no step in the catalog, where the choice is one of the range's points."""
    spec = lookup(key)
    report, kernels = _launches(key)
    reference = None if key != "a100-sxm4-40gb" else spec.default_mhz
    r = predict_detail(report, spec, policy=policy, slowdown=slowdown, eta=eta, kernels=kernels,
                        reference=reference)
    clocks = SupportedClocks.of_spec(spec)
    assert np.array_equal(r.configs, clocks.pairs) and r.clocks_source == clocks.source
    for chosen in [r.application.chosen, *(k.chosen for k in r.kernels.values())]:
        assert clocks.supports(chosen.core_mhz, chosen.mem_mhz)
        if clocks.exact:
            assert (chosen.core_mhz - 345.0) % 15.0 == 0 and chosen.mem_mhz in spec.mem_mhz


def test_predict_on_the_h200_gemm_chooses_a_clock_the_gpu_runs_and_shows_a_coarse_grid_when_asked():
    r = CliRunner().invoke(cli, ["predict", GEMM, "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    chosen = d["application"]["chosen"]
    assert d["clocks_source"] == "catalog" and len(d["configs"]) == 220 and {m for _, m in d["configs"]} == {
        3201.0, 2201.0}
    assert (chosen["core_mhz"] - 345.0) % 15.0 == 0
    r = CliRunner().invoke(cli, ["predict", GEMM, "--display-cores", "5"])
    assert r.exit_code == 0, r.output
    rows = re.findall(r"│ (\d+)/(\d+)( \*)? ", r.output)
    assert re.search(r"of\s+the\s+220\s+pairs", r.output) and 10 <= len(rows) <= 11
    assert f"{chosen['core_mhz']:g}/{chosen['mem_mhz']:g} *" in r.output  # the choice among all 220, shown
    assert {("1980", "3201"), ("345", "3201"), ("1980", "2201"), ("345", "2201")} <= {(c, m) for c, m, _ in rows}


def test_clocks_the_gpu_does_not_take_are_refused_with_the_nearest_it_does():
    r = CliRunner().invoke(cli, ["predict", GEMM, "--reference", "1762,3201"])
    assert r.exit_code == 2
    assert "--reference 1762,3201: 1762/3201 MHz is not a clock pair h200 supports" in r.output
    assert "the nearest supported: 1755/3201, 1770/3201" in r.output
    r = CliRunner().invoke(cli, ["predict", GEMM, "--reference", "1755,2619"])
    assert r.exit_code == 2 and "its memory clocks are 2201, 3201 MHz" in r.output
    with pytest.raises(InputError, match="nearest supported: 1980/2619"):
        SupportedClocks.of_spec(lookup("h100-sxm")).check("configs", [1990.0], [2619.0])


def test_time_predict_refuses_core_clocks_off_the_step(data, tmp_path, monkeypatch):
    """A catalog file of the test's own gives the GTX 980 a 10 MHz step from 106 MHz (no source
    gives its list) and NV-DVFS's memory clock, so its grid's clocks are asked for against it."""
    entry = lookup("gtx980").to_dict() | {"core_step_mhz": 10, "mem_mhz": [3505, 1400]}
    entry["core_mhz"] = dict(entry["core_mhz"], min=106)
    path = tmp_path / "cat.json"
    path.write_text(json.dumps({"version": 1, "devices": {"gtx980": entry}}))
    monkeypatch.setenv("GPUDVFS_CATALOG", str(path))
    args = ["time", "predict", "--device", "gtx980", str(data / "nv-dvfs-benchmark/gtx980_time_dev.csv"),
            "--kernel", "backprop", "--mem-mhz", "700", "--json", "--core-mhz"]
    assert CliRunner().invoke(cli, [*args, "506,1006"]).exit_code == 0
    r = CliRunner().invoke(cli, [*args, "500,1006"])
    assert r.exit_code == 2 and "--core-mhz/--mem-mhz: 500/1400 MHz is not a clock pair gtx980 supports" in r.output
    assert "nearest supported: 496/1400, 506/1400" in r.output


def test_a_catalog_step_that_misses_the_boost_clock_is_refused(tmp_path):
    entry = lookup("h200").to_dict() | {"core_step_mhz": 16}
    path = tmp_path / "cat.json"
    path.write_text(json.dumps({"version": 1, "devices": {"h200x": entry | {"aliases": []}}}))
    with pytest.raises(InputError, match=r"cat.json: device 'h200x': the boost core clock 1980 MHz is not "
                                         r"core_mhz.min 345 plus whole steps of core_step_mhz 16"):
        catalog(path)
    entry["core_mhz"] = {"boost": 1980}
    path.write_text(json.dumps({"version": 1, "devices": {"h200x": entry | {"aliases": [], "core_step_mhz": 15}}}))
    with pytest.raises(InputError, match="core_step_mhz needs core_mhz.min"):
        catalog(path)


H200_NVML = {3201: list(range(1980, 995, -10)), 2201: list(range(1500, 995, -10))}


def test_predict_takes_the_gpus_own_list_from_nvml(monkeypatch):
    """STAND-IN: tests/fake_pynvml.py plays an H200 listing 10 MHz steps (not the catalog's 15): the
    prediction covers NVML's pairs, and a reference off that list is refused with its nearest."""
    fake = FakeNvml(name="NVIDIA H200", clock_table=H200_NVML, default_clocks=(1980, 3201))
    monkeypatch.setattr(nvml_gpu, "import_pynvml", lambda: fake)
    r = CliRunner().invoke(cli, ["predict", GEMM, "--gpu", "0", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    listed = {(float(c), float(m)) for m, cs in H200_NVML.items() for c in cs}
    chosen = d["application"]["chosen"]
    assert d["clocks_source"] == "nvml" and {tuple(p) for p in d["configs"]} == listed
    assert (chosen["core_mhz"], chosen["mem_mhz"]) in listed
    r = CliRunner().invoke(cli, ["predict", GEMM, "--gpu", "0", "--reference", "1755,3201"])
    assert r.exit_code == 2 and "(NVML's list)" in r.output and "nearest supported: 1760/3201, 1750/3201" in r.output


def test_predict_refuses_the_list_of_another_gpu(monkeypatch):
    """STAND-IN: the NVML stand-in plays an H100 while the profile is an H200's."""
    fake = FakeNvml(name="NVIDIA H100 80GB HBM3", clock_table=H200_NVML, default_clocks=(1980, 3201))
    monkeypatch.setattr(nvml_gpu, "import_pynvml", lambda: fake)
    r = CliRunner().invoke(cli, ["predict", GEMM, "--gpu", "0"])
    assert r.exit_code == 2 and "--gpu 0: the GPU is a NVIDIA H100 80GB HBM3, the profile's is NVIDIA H200" in r.output


def test_the_prior_is_laid_out_on_the_supported_clocks():
    r = CliRunner().invoke(cli, ["power", "prior", "h200", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["core_mhz"] == [345.0 + 15 * i for i in range(110)] and len(d["core_voltage"]) == 110
    assert d["core_voltage"][-1] == pytest.approx(1.0)  # 1980 MHz, the default clock
    text = CliRunner().invoke(cli, ["power", "prior", "h200"]).output
    assert "1980 MHz 1.000" in text and text.count(" MHz 0.") + text.count(" MHz 1.") == 16  # a coarse list to read


def test_a_sweep_refuses_core_clocks_the_gpu_does_not_list():
    dev = SimulatedDevice()
    cores = sorted(dev.core_clocks(dev.memory_clocks()[0]))
    between = (cores[-1] + cores[-2]) / 2
    with pytest.raises(InputError, match=f"nearest to {between:g} supported: {cores[-2]:g}, {cores[-1]:g} MHz"):
        grid(dev, core_mhz=[between])
