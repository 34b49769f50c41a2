"""`gpudvfs predict` on a profile with nothing else: the catalog prior's power, intervals on
time, power and energy, the line saying what the answer rests on, and the traps refused (a
profile of another GPU, clocks the GPU does not run). On the H100's real profiles
(validation/)."""

from __future__ import annotations

import json
import math
import sys

import numpy as np
import pytest
from click.testing import CliRunner

from gpudvfs.catalog import lookup
from gpudvfs.cli.app import cli
from gpudvfs.time.device import TimeDevice
from gpudvfs.time.interval import UNCALIBRATED_LEVEL, time_interval

from conftest import REPO

H100 = REPO / "validation" / "nvidia-h100-80gb-hbm3"
SGEMM = str(H100 / "ncu" / "sgemm.ncu.csv")


def _predict(*args, device=("--device", "h100-sxm")):
    # The H100's ncu CSVs record compute capability 9.0, which four catalog GPUs share.
    return CliRunner().invoke(cli, ["predict", *args, *device])


def test_predict_gives_power_and_energy_from_the_prior_with_intervals():
    r = _predict(SGEMM, "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["device"] == "h100-sxm" and d["power_source"] == "prior" and not d["calibrated_on_measured_time"]
    q = d["intervals"]
    # Uncalibrated: the level's error at the reference, wider with the distance from it.
    assert q["time"] == pytest.approx(time_interval(d["configs"], d["reference_mhz"], False).tolist())
    assert min(q["time"]) == pytest.approx(UNCALIBRATED_LEVEL, abs=1e-3) and max(q["time"]) > UNCALIBRATED_LEVEL
    assert q["power"] > 0 and q["energy"] == pytest.approx([t + q["power"] for t in q["time"]])
    app = d["application"]
    assert len(app["watts"]) == len(d["configs"]) and app["chosen"]["core_mhz"] in [c for c, _ in d["configs"]]
    assert np.allclose(np.array(app["joules"]), np.array(app["time_ms"]) * np.array(app["watts"]) / 1e3)
    assert "prior" in d["rests_on"] and "uncalibrated" in d["rests_on"]
    # The measured power of this run (GPM record of the same sgemm, 431 W) lies inside the interval.
    gpm = json.loads((H100 / "gpm.json").read_text())["sgemm"]
    k = d["configs"].index([1980.0, 2619.0])
    lo, hi = (app["watts"][k] * math.exp(s * q["power"]) for s in (-1, 1))
    assert lo <= gpm["watts"] <= hi


def test_predict_text_says_prior_and_tabulates_every_pair():
    r = _predict(SGEMM)
    assert r.exit_code == 0, r.output
    assert "catalog prior" in r.output and "uncalibrated" in r.output and "90% intervals" in r.output
    assert "1980/2619" in r.output and " *" in r.output  # every pair, the chosen one marked
    pairs = len(json.loads(_predict(SGEMM, "--json").output)["configs"])
    table = [line for line in r.output.splitlines() if line[:1] in "┏┃┡│└"]
    assert len(table) == 4 + pairs and max(len(line) for line in table) <= 100  # every pair, read at 100 columns


def test_a_profile_of_another_gpu_and_clocks_the_gpu_does_not_run_are_refused():
    r = _predict(SGEMM, device=("--device", "a100-sxm4-80gb"))
    assert r.exit_code == 2 and "compute capability 9.0, not on a100-sxm4-80gb (8.0)" in r.output
    r = _predict(SGEMM, device=())
    assert r.exit_code == 2 and "shared by h100-sxm" in r.output and "--device" in r.output
    r = _predict(SGEMM, "--reference", "5000,2619")
    assert r.exit_code == 2 and "--reference 5000,2619" in r.output


def test_the_reference_defaults_to_the_gpus_own_default_clocks():
    assert lookup("h100-sxm").default_mhz == (1980.0, 2619.0)
    d = json.loads(_predict(SGEMM, "--json").output)
    assert d["reference_mhz"][1] == 2619.0 and "default memory clock" in d["reference_from"]


def test_the_uncalibrated_time_interval_is_the_h100_kernels_90th_percentile():
    sys.path.insert(0, str(REPO / "validation"))
    from absolute_time import time_errors

    errors = np.array(list(time_errors(H100, TimeDevice.from_spec(lookup("h100-sxm"))).values()))
    assert UNCALIBRATED_LEVEL == pytest.approx(np.quantile(np.abs(np.log1p(errors / 100)), 0.9), abs=5e-4)


def test_predict_profile_for_schedulers_gives_arrays_and_the_choice():
    import gpudvfs

    p = gpudvfs.predict_profile(SGEMM, device="h100-sxm", policy="energy")
    assert isinstance(p, gpudvfs.ProfilePrediction) and p.device == "h100-sxm"
    assert p.configs.shape == (len(p.time_ms), 2) and np.allclose(p.joules, p.time_ms * p.watts / 1e3)
    assert p.chosen == int(np.argmin(p.joules))  # the energy policy's choice is the least energy
    lo, hi = p.bounds("watts")
    assert np.all(lo < p.watts) and np.all(p.watts < hi)
    assert p.to_dict()["application"]["chosen"]["core_mhz"] == p.configs[p.chosen, 0]
    with pytest.raises(gpudvfs.InputError, match="bounds of"):
        p.bounds("volts")
    with pytest.raises(gpudvfs.InputError, match="compute capability 9.0, not on a100"):
        gpudvfs.predict_profile(SGEMM, device="a100-sxm4-80gb")
