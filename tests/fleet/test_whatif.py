"""`fleet whatif`: DCGM telemetry replayed at a policy's clocks through each GPU's registry
model and a DCGM time model, on Ray Data; checked against an in-process pass, against the
simulated chips' truth, and on bad input."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpudvfs.data import read_measured_grid
from gpudvfs.errors import InputError
from gpudvfs.fleet import whatif as wi
from gpudvfs.fleet.telemetry import sample_dcgm_grid, sample_telemetry
from gpudvfs.hardware.apps import APPS
from gpudvfs.hardware.chips import chip_device
from gpudvfs.time.dcgm import DcgmTimeModel

ray = pytest.importorskip("ray")
pq = pytest.importorskip("pyarrow.parquet")
pd = pytest.importorskip("pandas")
REFERENCE = (975.0, 3505.0)


@pytest.fixture(scope="module")
def time_model(tmp_path_factory):
    """The DCGM time model fitted on the power suite of the simulated GPU, saved and loaded."""
    d = tmp_path_factory.mktemp("dcgm")
    sample_dcgm_grid(d / "grid.csv")
    DcgmTimeModel().fit(read_measured_grid(d / "grid.csv", "test", ("dcgm", "grid")), REFERENCE).save(d / "tm.json")
    return DcgmTimeModel.load(d / "tm.json")


def test_the_dcgm_time_model_round_trips_and_refuses_damaged_files(time_model, tmp_path):
    d = tmp_path / "grid.csv"
    sample_dcgm_grid(d)
    fitted = DcgmTimeModel().fit(read_measured_grid(d, "test", ("dcgm", "grid")), REFERENCE)
    act = np.array([[0.9, 0.8, 0.1], [0.3, 0.0, 0.9]])
    assert np.array_equal(fitted.predict(act, [1.0, 2.0], [700, 1164], [3505, 810]),
                          time_model.predict(act, [1.0, 2.0], [700, 1164], [3505, 810]))
    assert time_model.varies_mem_ and time_model.chosen_ == "activity"
    fitted.save(tmp_path / "m.json")
    doc = json.loads((tmp_path / "m.json").read_text())
    for damage, match in (({"version": 2}, "version"), ({"coef": [[1, 2]]}, "shapes"), ({"chosen": "x"}, "shapes"),
                          ({"kind": "power-model"}, "not a gpudvfs")):
        (tmp_path / "bad.json").write_text(json.dumps(doc | damage))
        with pytest.raises(InputError, match=match):
            DcgmTimeModel.load(tmp_path / "bad.json")
    with pytest.raises(InputError, match="not fitted"):
        DcgmTimeModel().save(tmp_path / "unfitted.json")


def _in_process(path, registry, model, **options) -> dict:
    """The what-if without Ray: the same function over the file's batches in this process."""
    tables = wi.gpu_tables(registry)
    f = pq.ParquetFile(path)
    cols = wi.resolve_columns(f.schema_arrow.names)
    parts = [wi.whatif_frame(b.to_pandas(), tables, model, cols, **options) for b in f.iter_batches(1 << 20)]
    return wi.summarize(pd.concat(parts))


def test_ten_million_samples_on_ray_data_equal_one_pass_in_process(registry3, time_model, tmp_path):
    path = tmp_path / "telemetry.parquet"
    rows = 10_000_000
    assert sample_telemetry(registry3, rows, path)["rows"] == rows
    r = wi.whatif(str(path), registry3, time_model, policy="deadline", slowdown=0.1)
    local = _in_process(path, registry3, time_model, policy="deadline", slowdown=0.1)
    assert r["cluster"]["samples"] == rows == local["cluster"]["samples"]
    for key, value in local["cluster"].items():
        assert r["cluster"][key] == pytest.approx(value, rel=1e-9), key
    assert r["jobs"].keys() == local["jobs"].keys() == {w.name for w in APPS[:3]}
    # Every sample ran at the default clocks: the deadline policy slows none by more than 10%
    # and saves energy.
    assert -0.2 < r["cluster"]["energy_change"] < 0 and 0 <= r["cluster"]["time_change"] <= 0.1 + 1e-9
    assert all(j["time_change"] <= 0.1 + 1e-9 for j in r["jobs"].values())


def test_the_whatif_against_the_simulated_chips_truth(registry3, time_model, tmp_path):
    """Over every calibrated pair, the estimated energy relative to the sample's, against the
    chips' truth, and the true energy regret of the energy policy's choice."""
    sample_telemetry(registry3, 3, tmp_path / "t.parquet", noise=0.0)
    frame = pq.read_table(tmp_path / "t.parquet").to_pandas()
    s = wi.parse_samples(frame, wi.resolve_columns(list(frame.columns)))
    by_name = {w.name: w for w in APPS}
    errors, regrets = [], []
    for p in wi.predict_samples(s, wi.gpu_tables(registry3), time_model):
        k = wi.choose(p, time_model, "energy", 0.1)
        for i, row in enumerate(p.rows):
            dev, w = chip_device(s.gpus[s.gpu_of[row]]), by_name[s.jobs[s.job_of[row]]]
            true = np.array([dev.true_power_w(w, c, m) * dev.true_time_ms(w, c, m) for c, m in p.table.configs])
            est = p.watts[i] * p.ratio[i]
            true, est = true / true[p.at[i]], est / est[p.at[i]]
            errors.append(np.mean(np.abs(est / true - 1)))
            regrets.append(true[k[i]] / true.min() - 1)
    # Figures of this simulator (3 chips x their job): energy relative to the sample's within
    # 9% on average over the pairs; the chosen pair within 5% of the true least energy.
    assert np.mean(errors) < 0.09 and max(regrets) < 0.05


ROW = st.fixed_dictionaries({
    "gpu": st.integers(0, 2), "job": st.sampled_from(["a", "b", "c"]), "watts": st.floats(0, 400),
    "core": st.floats(500, 1300), "mem": st.sampled_from([810.0, 3300.0, 3505.0, 3000.0]),
    "sm": st.floats(0, 1), "fp32": st.floats(0, 1), "dram": st.floats(0, 1)})


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(ROW, min_size=2, max_size=30), cut=st.integers(1, 29),
       policy=st.sampled_from(["energy", "edp", "deadline"]))
def test_sums_do_not_depend_on_how_samples_are_partitioned(registry3, time_model, rows, cut, policy):
    uuids = list(registry3.entries)
    frame = pd.DataFrame({"UUID": [uuids[r["gpu"]] for r in rows], "job": [r["job"] for r in rows],
                          "DCGM_FI_DEV_POWER_USAGE": [r["watts"] for r in rows],
                          "DCGM_FI_DEV_SM_CLOCK": [r["core"] for r in rows],
                          "DCGM_FI_DEV_MEM_CLOCK": [r["mem"] for r in rows],
                          "DCGM_FI_PROF_SM_ACTIVE": [r["sm"] for r in rows],
                          "DCGM_FI_PROF_PIPE_FP32_ACTIVE": [r["fp32"] for r in rows],
                          "DCGM_FI_PROF_DRAM_ACTIVE": [r["dram"] for r in rows]})
    tables, cols = wi.gpu_tables(registry3), wi.resolve_columns(list(frame.columns))
    whole = wi.summarize(wi.whatif_frame(frame, tables, time_model, cols, policy=policy))
    cut = min(cut, len(rows) - 1)
    parts = wi.summarize(pd.concat([wi.whatif_frame(frame.iloc[:cut], tables, time_model, cols, policy=policy),
                                    wi.whatif_frame(frame.iloc[cut:], tables, time_model, cols, policy=policy)]))
    for key, value in whole["cluster"].items():
        assert (parts["cluster"][key] is None if value is None
                else parts["cluster"][key] == pytest.approx(value, rel=1e-12, abs=1e-9)), key
    # Each sample's choice scores no worse than the pair it ran at (which every policy allows
    # when it ran at the default clocks; the energy policy always).
    s = wi.parse_samples(frame, cols)
    for p in wi.predict_samples(s, tables, time_model):
        k = wi.choose(p, time_model, "energy", 0.1)
        i = np.arange(len(p.rows))
        assert np.all(p.watts[i, k] * p.ratio[i, k] <= p.watts[i, p.at] * p.ratio[i, p.at] + 1e-9)


def test_a_job_that_measured_no_energy_has_no_energy_change(registry3, time_model):
    """A job whose power reads 0 W, or so little that the ratio overflows (5e-324 W), has no
    relative change to report: None (JSON null), not 0 and not inf, and no overflow warning."""
    uuid = next(iter(registry3.entries))
    frame = pd.DataFrame({"UUID": [uuid] * 3, "job": ["zero", "denormal", "real"],
                          "DCGM_FI_DEV_POWER_USAGE": [0.0, 5e-324, 150.0], "DCGM_FI_DEV_SM_CLOCK": [975.0] * 3,
                          "DCGM_FI_DEV_MEM_CLOCK": [3505.0] * 3, "DCGM_FI_PROF_SM_ACTIVE": [0.5] * 3,
                          "DCGM_FI_PROF_DRAM_ACTIVE": [0.5] * 3})
    sums = wi.whatif_frame(frame, wi.gpu_tables(registry3), time_model, wi.resolve_columns(list(frame.columns)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = wi.summarize(sums)
    assert r["jobs"]["zero"]["energy_change"] is None and r["jobs"]["denormal"]["energy_change"] is None
    assert isinstance(r["jobs"]["real"]["energy_change"], float) and np.isfinite(r["jobs"]["real"]["energy_change"])
    assert all(isinstance(j["time_change"], float) for j in r["jobs"].values())
    # The cluster measured 150 W in one sample: its change is finite, not swamped by the others.
    assert np.isfinite(r["cluster"]["energy_change"])


def test_bad_telemetry_is_refused_with_what_is_wrong(registry3, time_model, tmp_path):
    base = {"UUID": [next(iter(registry3.entries))], "job": ["a"], "DCGM_FI_DEV_POWER_USAGE": [150.0],
            "DCGM_FI_DEV_SM_CLOCK": [975.0], "DCGM_FI_DEV_MEM_CLOCK": [3505.0], "DCGM_FI_PROF_SM_ACTIVE": [0.5],
            "DCGM_FI_PROF_DRAM_ACTIVE": [0.5]}
    tables = wi.gpu_tables(registry3)

    def refused(changes, match, drop=None):
        frame = pd.DataFrame(base | changes).drop(columns=drop or [])
        with pytest.raises(InputError, match=match):
            wi.whatif_frame(frame, tables, time_model, wi.resolve_columns(list(frame.columns)))

    refused({"DCGM_FI_PROF_SM_ACTIVE": [1.5]}, "DCGM_FI_PROF_SM_ACTIVE.*outside")
    refused({"DCGM_FI_DEV_POWER_USAGE": [float("nan")]}, "POWER_USAGE")
    refused({"UUID": ["GPU-elsewhere"]}, "not in the registry")
    refused({}, "DRAM activity", drop=["DCGM_FI_PROF_DRAM_ACTIVE"])
    refused({}, "no job column", drop=["job"])
    for policy in ("fastest", "power-cap"):  # power-cap: a policy, but not one a what-if replays
        with pytest.raises(InputError, match="unknown policy"):
            wi.whatif_frame(pd.DataFrame(base), tables, time_model, wi.resolve_columns(list(base)), policy=policy)
    assert wi.WHATIF_POLICIES == ("energy", "edp", "deadline")
    # On Ray Data, a block's error reaches the caller as the same message.
    path = tmp_path / "t.csv"
    pd.DataFrame(base | {"UUID": ["GPU-elsewhere"]}).to_csv(path, index=False)
    with pytest.raises(InputError, match="GPU-elsewhere is not in the registry"):
        wi.whatif(str(path), registry3, time_model)
    for interval in (0, 1e-320, float("nan"), float("inf")):
        with pytest.raises(InputError, match="interval"):
            wi.whatif(str(path), registry3, time_model, interval_s=interval)


def test_fleet_whatif_commands(registry3, tmp_path):
    from click.testing import CliRunner

    from gpudvfs.cli.app import cli

    run = CliRunner().invoke
    tel, grid, model = tmp_path / "t.parquet", tmp_path / "g.csv", tmp_path / "tm.json"
    r = run(cli, ["fleet", "sample-telemetry", "--registry", str(registry3.root), "--rows", "3000", "-o", str(tel),
                  "--grid", str(grid)])
    assert r.exit_code == 0, r.output
    assert run(cli, ["time", "fit-dcgm", str(grid), "--reference", "975,3505", "-o", str(model)]).exit_code == 0
    r = run(cli, ["fleet", "whatif", str(tel), "--registry", str(registry3.root), "--time-model", str(model),
                  "--policy", "edp", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["cluster"]["samples"] == 3000 and out["policy"] == "edp" and len(out["jobs"]) == 3
    r = run(cli, ["fleet", "whatif", str(tel), "--registry", str(registry3.root), "--time-model", str(model),
                  "--interval-s", "1e-4"])
    assert r.exit_code == 2 and "--interval-s" in r.output
    # The command offers only the policies a what-if replays: power-cap is refused as it parses.
    r = run(cli, ["fleet", "whatif", str(tel), "--registry", str(registry3.root), "--time-model", str(model),
                  "--policy", "power-cap"])
    assert r.exit_code == 2 and "'power-cap' is not one of 'energy', 'edp', 'deadline'" in r.output


def _export(frame, path):
    """``frame`` as Prometheus would export it: one series per GPU and metric, labelled with the
    GPU's UUID, its job as `hpc_job`, and the scrape job as `job`."""
    result = []
    for (uuid, job), rows in frame.groupby(["UUID", "job"]):
        for metric in [c for c in frame.columns if c.startswith("DCGM_")]:
            result.append({"metric": {"__name__": metric, "UUID": uuid, "hpc_job": job, "job": "dcgm-exporter"},
                           "values": [[float(t), repr(float(v))] for t, v in zip(rows["timestamp"], rows[metric])]})
    path.write_text(json.dumps({"status": "success", "data": {"resultType": "matrix", "result": result}}))


def test_a_prometheus_export_gives_the_same_whatif(registry3, time_model, tmp_path):
    sample_telemetry(registry3, 300, tmp_path / "t.parquet")
    frame = pq.read_table(tmp_path / "t.parquet").to_pandas()
    _export(frame, tmp_path / "export.json")
    from_json = wi.whatif(str(tmp_path / "export.json"), registry3, time_model)
    local = wi.summarize(wi.whatif_frame(frame, wi.gpu_tables(registry3), time_model,
                                         wi.resolve_columns(list(frame.columns))))
    assert from_json["jobs"].keys() == local["jobs"].keys()  # by hpc_job, not the scrape job
    for key, value in local["cluster"].items():
        assert from_json["cluster"][key] == pytest.approx(value, rel=1e-6), key


def test_bad_prometheus_exports_are_refused(tmp_path):
    from gpudvfs.data.prometheus import read_range_export

    series = {"metric": {"__name__": "DCGM_FI_DEV_POWER_USAGE", "UUID": "GPU-a"}, "values": [[1, "100"]]}
    for doc, match in (({"data": {"resultType": "vector", "result": []}}, "matrix"),
                       ({"data": {"resultType": "matrix", "result": []}}, "no samples"),
                       ({"data": {"resultType": "matrix", "result": [{"metric": {}, "values": []}]}}, "__name__"),
                       ({"data": {"resultType": "matrix", "result": [series | {"values": [[1, "x"]]}]}}, "number"),
                       ({"data": {"resultType": "matrix", "result": [series, series]}}, "two values")):
        (tmp_path / "e.json").write_text(json.dumps(doc))
        with pytest.raises(InputError, match=match):
            read_range_export(tmp_path / "e.json")


def test_what_ray_prints_while_it_runs_stays_off_the_json(monkeypatch, tmp_path):
    """Ray's driver prints its raylet's warnings to stdout from a thread of its own (CI once got
    "(raylet) WARNING: 8 PYTHON worker processes have been started" ahead of the JSON). A
    stand-in for the what-if prints the same way while it runs: the JSON stays alone on stdout."""
    from click.testing import CliRunner

    import gpudvfs.fleet.whatif as whatif_module
    from gpudvfs.cli.app import cli

    def stand_in(*args, **kwargs):
        print("(raylet) WARNING: 8 PYTHON worker processes have been started")
        return {"jobs": {}}

    monkeypatch.setattr(whatif_module, "whatif", stand_in)
    for f in ("t.parquet", "m.json"):
        (tmp_path / f).write_text("")  # the options check they exist; the loaders are stood in for
    monkeypatch.setattr("gpudvfs.fleet.registry.Registry.load", staticmethod(lambda path: None))
    monkeypatch.setattr("gpudvfs.time.dcgm.DcgmTimeModel.load", classmethod(lambda cls, path: None))
    r = CliRunner().invoke(cli, ["fleet", "whatif", str(tmp_path / "t.parquet"), "--registry", str(tmp_path),
                                 "--time-model", str(tmp_path / "m.json"), "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout) == {"jobs": {}} and "(raylet) WARNING" in r.stderr


@pytest.mark.parametrize("kind", ["empty csv", "ncu csv", "truncated parquet", "foreign parquet", "missing"])
def test_unreadable_telemetry_is_one_line_naming_the_file_before_ray_starts(kind, registry3, time_model, tmp_path,
                                                                            monkeypatch):
    """Each file is refused by its header or schema, before Ray starts (the stand-in for
    `ray_session` fails the test if it is reached), with the file's name in the message."""
    import pandas as pd

    def no_ray(address):
        raise AssertionError("Ray was started for a file that cannot be read")

    monkeypatch.setattr(wi, "ray_session", no_ray)
    good = tmp_path / "good.parquet"
    pd.DataFrame({"a": range(1000), "b": [0.5] * 1000}).to_parquet(good)
    path = {"empty csv": tmp_path / "t.csv", "ncu csv": tmp_path / "app.ncu.csv",
            "truncated parquet": tmp_path / "t.parquet", "foreign parquet": good, "missing": tmp_path / "no.csv"}[kind]
    if kind == "empty csv":
        path.write_text("")
    elif kind == "ncu csv":
        path.write_text('==PROF== Connected to process 1 (./app)\n"ID","Process ID","Kernel Name"\n"0","1","k"\n')
    elif kind == "truncated parquet":
        path.write_bytes(good.read_bytes()[:200])
    expected = {"empty csv": "empty", "ncu csv": "no GPU UUID column", "truncated parquet": "not a readable Parquet",
                "foreign parquet": "no GPU UUID column", "missing": "no such file"}[kind]
    with pytest.raises(InputError, match=expected) as e:
        wi.whatif(str(path), registry3, time_model)
    assert str(e.value).startswith(str(path)) and "\n" not in str(e.value)
