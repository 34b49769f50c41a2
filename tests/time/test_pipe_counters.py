"""The pipe counters Hopper's time needs beyond the paper's: the XU pipe's and the FMA-heavy
pipe's warp instructions, asked for by `profile-command` and used where a profile has them.

The recorded H100 profiles (validation/) predate both; the H200 kernel profiles hold the XU
count. No recorded profile holds the FMA pipes' counts, so a recorded H100 profile with those
two rows added stands in for one that has them."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from gpudvfs.catalog import lookup
from gpudvfs.cli.app import cli
from gpudvfs.data import read
from gpudvfs.errors import InputError
from gpudvfs.predict.profile import kernel_inputs
from gpudvfs.time import KernelProfile, TimeDevice, TimeModel

from conftest import REPO

H100 = REPO / "validation" / "nvidia-h100-80gb-hbm3"
H200 = REPO / "validation" / "nvidia-h200"
HEAVY, LITE = "smsp__inst_executed_pipe_fmaheavy.sum", "smsp__inst_executed_pipe_fmalite.sum"
DEV = TimeDevice.from_spec(lookup("h100-sxm"))


def _with_fma_pipes(tmp_path, heavy: float, lite: float):
    """int_ops064's recorded profile with the two FMA pipes' counts added as Nsight Compute prints them."""
    lines = (H100 / "ncu" / "int_ops064.ncu.csv").read_text().splitlines()
    row = next(line for line in lines if '"smsp__inst_issued.sum"' in line)
    head = row.split('"smsp__inst_issued.sum"')[0]
    added = [f'{head}"{name}","inst","{value:,.0f}"' for name, value in ((HEAVY, heavy), (LITE, lite))]
    path = tmp_path / "int_ops064.ncu.csv"
    path.write_text("\n".join(lines + added) + "\n")
    return path


def _uncalibrated_ms(path, core: float = 1980.0) -> float:
    r = CliRunner().invoke(cli, ["predict", str(path), "--device", "h100-sxm", "--uncalibrated", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    cfg = np.array(d["configs"])
    sel = cfg[:, 1] == cfg[:, 1].max()
    return float(np.interp(core, cfg[sel, 0], np.array(d["application"]["time_ms"])[sel]))


def test_profile_command_asks_for_the_xu_and_fma_pipes_and_the_atomics():
    r = CliRunner().invoke(cli, ["profile-command", "--device", "h100-sxm", "./app"])
    assert r.exit_code == 0, r.output
    metrics = r.output.split("--metrics ")[1].split()[0].split(",")
    for name in ("smsp__inst_executed_pipe_xu.sum", HEAVY, LITE, "lts__t_sectors_op_atom.sum",
                 "lts__t_sectors_op_red.sum"):
        assert name in metrics


def test_fma_heavy_only_instructions_reach_the_model_at_the_imad_rate(tmp_path):
    """The heavy pipe's instructions beyond the light one's cost the H100's IMAD rate (64 lanes,
    0.5 cycle a warp instruction against FP32's 0.25): as many SFU instructions at that rate."""
    report = read(_with_fma_pipes(tmp_path, heavy=3.0e8, lite=1.0e8))
    [k] = kernel_inputs(report)
    assert k.inputs["inst_fma_heavy_only"] == 2.0e8
    p = KernelProfile.from_counters("k", {n: v for n, v in k.inputs.items() if v is not None}, device=DEV)
    assert p.imad_inst == pytest.approx(2.0e8 / p.warps_total) and p.sf_inst == 0
    assert DEV.imad_inst_cycle == 0.5 and DEV.inst_cycle == 0.25
    as_sf = dataclasses.replace(p, imad_inst=0.0, sf_inst=p.imad_inst)
    clocks = np.array([1000.0, 1980.0]), np.array([2619.0, 2619.0])
    got = TimeModel(DEV).predict(p, *clocks)
    assert got == pytest.approx(TimeModel(dataclasses.replace(DEV, sf_inst_cycle=0.5)).predict(as_sf, *clocks),
                                rel=1e-12)
    assert (got > TimeModel(DEV).predict(dataclasses.replace(p, imad_inst=0.0), *clocks)).all()
    # Through `predict`: longer than the same profile without the two rows.
    assert _uncalibrated_ms(tmp_path / "int_ops064.ncu.csv") > _uncalibrated_ms(H100 / "ncu" / "int_ops064.ncu.csv")


def test_fp32_split_evenly_over_both_fma_pipes_costs_nothing_more(tmp_path):
    """Balanced pipes (FP32 alone) or a lighter heavy pipe leave the issue rate: no IMAD excess."""
    base = _uncalibrated_ms(H100 / "ncu" / "int_ops064.ncu.csv")
    for heavy, lite in ((1.0e8, 1.0e8), (1.0e8, 2.0e8)):
        path = _with_fma_pipes(tmp_path, heavy, lite)
        assert kernel_inputs(read(path))[0].inputs["inst_fma_heavy_only"] == 0.0
        assert _uncalibrated_ms(path) == base


def test_a_profile_without_the_pipe_counts_predicts_as_before():
    """The recorded H100 profiles lack both counts: no excess, and the prediction is the one of
    a device without the IMAD rate (a time-device file written before it)."""
    report = read(H100 / "ncu" / "int_ops064.ncu.csv")
    [k] = kernel_inputs(report)
    assert "inst_fma_heavy_only" not in k.inputs and "flop_count_sp_special" not in k.inputs
    p = KernelProfile.from_counters("k", {n: v for n, v in k.inputs.items() if v is not None}, device=DEV)
    assert (p.imad_inst, p.sf_inst) == (0.0, 0.0)
    old = dataclasses.replace(DEV, imad_inst_cycle=0.0)
    assert TimeModel(DEV).predict(p, 1980.0, 2619.0) == TimeModel(old).predict(p, 1980.0, 2619.0)


def test_the_h200_kernels_xu_count_reaches_the_model():
    """The H200 profiles hold the XU count: GELU's 32 x its XU warp instructions as special-function
    operations. Its uncalibrated time at the clock it ran at, against its measured time: -4.1%
    with them, -9.8% without."""
    report = read(H200 / "kernels" / "elementwise.ncu.csv")
    [k] = kernel_inputs(report)
    xu = report.kernels[0].metrics["smsp__inst_executed_pipe_xu.sum"]
    assert xu > 0 and k.inputs["flop_count_sp_special"] == 32 * xu
    dev = TimeDevice.from_spec(lookup("h200"))
    p = KernelProfile.from_counters("k", {n: v for n, v in k.inputs.items() if v is not None}, device=dev)
    assert p.sf_inst == pytest.approx(xu / p.warps_total)
    measured = json.loads((H200 / "kernels" / "elementwise.power.json").read_text())
    core, mem = (float(np.median([q[c] for q in measured["polls"]])) for c in ("core_mhz", "mem_mhz"))
    errors = [100 * (TimeModel(dev).predict(q, core, mem) / measured["time_ms"] - 1)
              for q in (p, dataclasses.replace(p, sf_inst=0.0))]
    assert errors == pytest.approx([-4.1, -9.8], abs=0.05)


def test_a_time_device_file_without_the_imad_rate_loads_at_the_issue_rate(tmp_path):
    DEV.save(tmp_path / "d.json")
    doc = json.loads((tmp_path / "d.json").read_text())
    del doc["params"]["imad_inst_cycle"]
    (tmp_path / "d.json").write_text(json.dumps(doc))
    assert TimeDevice.load(tmp_path / "d.json") == dataclasses.replace(DEV, imad_inst_cycle=0.0)


def test_a_negative_imad_count_is_refused():
    with pytest.raises(InputError, match="imad_inst must be finite"):
        KernelProfile("k", 1e5, 60, 8, 10.0, 4.0, 0.5, 300, 0, imad_inst=-1.0)


@settings(max_examples=60, deadline=None)
@given(imad=st.floats(0, 500), extra=st.floats(0, 500), cycle=st.floats(0, 2), core=st.floats(300, 2000))
def test_imad_instructions_never_shorten_a_kernel(imad, extra, cycle, core):
    """More FMA-heavy-only instructions never make a kernel faster; at or below the issue rate
    they cost nothing."""
    p = KernelProfile("k", 1e5, 60, 8, 10.0, 4.0, 0.5, 300, 2, imad_inst=imad)
    dev = dataclasses.replace(DEV, imad_inst_cycle=cycle)
    t = TimeModel(dev).predict(p, core, 2619.0)
    assert TimeModel(dev).predict(dataclasses.replace(p, imad_inst=imad + extra), core, 2619.0) >= t
    at_issue = dataclasses.replace(DEV, imad_inst_cycle=min(cycle, DEV.inst_cycle))
    assert TimeModel(at_issue).predict(p, core, 2619.0) == TimeModel(at_issue).predict(
        dataclasses.replace(p, imad_inst=0.0), core, 2619.0)
