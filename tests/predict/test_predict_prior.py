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


def test_predict_writes_its_json_and_its_figure_and_takes_a_power_cap(tmp_path):
    """`-o` writes what --json prints; `--plot` draws three panels with the choice starred;
    `--policy power-cap --power-cap W` chooses the fastest pair predicted under W (the least
    power where none is); each output is refused over an existing file without --force."""
    pytest.importorskip("matplotlib")
    out, fig = tmp_path / "p.json", tmp_path / "p.png"
    r = _predict(SGEMM, "-o", out, "--plot", fig, "--policy", "power-cap", "--power-cap", "300", "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(out.read_text())
    assert d == json.loads(r.stdout) and d["policy"] == "power-cap"
    watts, time_ms = np.array(d["application"]["watts"]), np.array(d["application"]["time_ms"])
    chosen = d["application"]["chosen"]
    assert chosen["feasible"] and chosen["watts"] <= 300
    assert chosen["time_ms"] == pytest.approx(time_ms[watts <= 300].min())
    assert fig.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    r = _predict(SGEMM, "-o", out)
    assert r.exit_code == 2 and "give --force" in r.output
    assert _predict(SGEMM, "-o", out, "--force").exit_code == 0
    r = _predict(SGEMM, "--policy", "power-cap")
    assert r.exit_code == 2 and "needs --power-cap" in r.output


def test_the_prediction_figure_draws_each_memory_clock_its_band_and_the_choice(monkeypatch, tmp_path):
    """The figure's artists, read before it is closed: three panels, a line per memory clock
    over every supported core clock, a 90% band each, and the choice starred at its pair."""
    pytest.importorskip("matplotlib")
    from matplotlib.figure import Figure

    from gpudvfs.data import read
    from gpudvfs.predict.plot import plot_prediction
    from gpudvfs.predict.profile import predict_detail

    drawn = []
    monkeypatch.setattr(Figure, "savefig", lambda self, path, **kw: drawn.append(self))
    r = predict_detail(read(SGEMM), lookup("h100-sxm"))
    plot_prediction(r, tmp_path / "p.png")
    (fig,) = drawn
    mems = np.unique(r.configs[:, 1])
    assert len(fig.axes) == 3 and len(mems) == 2
    for ax, y in zip(fig.axes, (r.application.time_ms, r.application.watts, r.application.joules)):
        lines = [ln for ln in ax.get_lines() if ln.get_marker() != "*"]
        assert len(lines) == len(mems) and len(ax.collections) == len(mems)
        assert sum(len(ln.get_xdata()) for ln in lines) == len(r.configs)
        (star,) = [ln for ln in ax.get_lines() if ln.get_marker() == "*"]
        c = r.application.chosen
        k = np.flatnonzero((r.configs[:, 0] == c.core_mhz) & (r.configs[:, 1] == c.mem_mhz))[0]
        assert star.get_xdata()[0] == c.core_mhz and star.get_ydata()[0] == pytest.approx(y[k])
