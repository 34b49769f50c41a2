"""Fuzzing: arbitrary bytes and mutated real files go to every reader and loader, and to every
command that takes a file. The only outcomes allowed are a result or a `GpudvfsError` (in the
command line: exit status 0 or 2 and no traceback).

Seeds are real files of ../shared/data (their first lines, so each example stays small) and
files gpudvfs writes itself (a sweep with its record, model, device, workload and predictor
files). Mutations work on bytes (flips, insertions, cuts, NUL, invalid UTF-8, a 200 KB field,
odd number tokens) and, for JSON, on values (a random JSON value at a random place).

Examples run derandomized, so CI sees the same ones every time; GPUDVFS_FUZZ_RANDOM=1 explores
anew and GPUDVFS_FUZZ_EXAMPLES=N sets how many per target.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gpudvfs
from gpudvfs.cli.app import cli
from gpudvfs.data import profilers
from gpudvfs.errors import GpudvfsError
from gpudvfs.hardware import SimulatedDevice, Workload, run_sweep
from gpudvfs.hardware.sweep import load_record
from gpudvfs.hardware.workload_file import read_workloads
from gpudvfs.online import load_predictor, save_predictor
from gpudvfs.policy.choose import fit_power_model
from gpudvfs.time.device import TimeDevice

from conftest import data_dir

EXAMPLES = int(os.environ.get("GPUDVFS_FUZZ_EXAMPLES", "30"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize="GPUDVFS_FUZZ_RANDOM" not in os.environ,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                       HealthCheck.data_too_large])
SEED_LINES = 40  # lines of each real file that seed the mutations

GTX980_MICRO = "gpupowermodel/gtx980_micro.csv"
V100 = "nsfcac/v100_spec_dev.csv"
GTX980_TIME = "nv-dvfs-benchmark/gtx980_time_dev.csv"
GTX980_TIME_POWER = "nv-dvfs-benchmark/gtx980_time_power_dev.csv"
GPMTOOL_FILES = ["gpupowermodel/titanx_micro.csv", "gpupowermodel/k40c_micro.csv",
                 "gpupowermodel/titanx_hpca18_real_utils.csv"]
TOOL_FILES = ["tool-outputs/ncu_a100_learningnote4dev.csv", "tool-outputs/ncu_rtx5090_llm-perf-opt.csv",
              "tool-outputs/nvprof_gtx1080ti_magus.csv", "tool-outputs/nvidia-smi_h800_cuda-test.csv",
              "tool-outputs/ncu_gtx1080_microgpusim.txt"]
DATA_FILES = [*GPMTOOL_FILES, GTX980_MICRO, "gpuptxmodel/titanx_realbenchmarks.csv", V100, GTX980_TIME,
              GTX980_TIME_POWER, *TOOL_FILES]
NUMBER_TOKENS = [b"nan", b"NaN", b"inf", b"-inf", b"-1", b"1e308", b"1e400", b"-0", b"1e-320", b"abc", b"",
                 b"0x10", b"1_000", "\uff11".encode(), b"\"1,5\"", b"  7  "]


def _head(path: Path) -> bytes:
    with path.open("rb") as f:
        return b"".join(line for _, line in zip(range(SEED_LINES), f))


@pytest.fixture(scope="module")
def seeds(tmp_path_factory) -> dict[str, bytes]:
    """name -> content of every seed file: real data (where present) and gpudvfs's own files."""
    out: dict[str, bytes] = {}
    root = data_dir()
    d = tmp_path_factory.mktemp("seeds")
    for name in DATA_FILES:
        if (root / name).exists():
            out[name] = _head(root / name)
            out[f"full:{name}"] = (root / name).read_bytes()
    if (root / GTX980_TIME_POWER).exists():  # models fitted on real data, for the commands that apply them
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", gpudvfs.GpudvfsWarning)
            gpudvfs.PowerModel("per-domain").fit(gpudvfs.read_power_dataset(root / GTX980_MICRO)).save(d / "p.json")
            fit_power_model(gpudvfs.read(root / GTX980_TIME_POWER), (700.0, 700.0),
                            *TimeDevice.resolve("gtx980")).save(d / "s.json")
        out["gtx980-power.json"], out["select-power.json"] = (d / "p.json").read_bytes(), (d / "s.json").read_bytes()
    workloads = [Workload("a", counters={"util:SP": 0.5, "compute_ms": 1.0, "memory_ms": 0.2}),
                 Workload("b", counters={"util:DRAM": 0.7, "compute_ms": 0.2, "memory_ms": 1.0})]
    run_sweep(SimulatedDevice(), workloads, d / "sweep.csv", configs=[(975.0, 3505.0), (595.0, 810.0)])
    out["sweep.csv"] = (d / "sweep.csv").read_bytes()
    out["sweep.csv.sweep.json"] = (d / "sweep.csv.sweep.json").read_bytes()
    out["workloads.json"] = json.dumps({"workloads": [{"name": w.name, "counters": dict(w.counters)}
                                                      for w in workloads]}).encode()
    gpudvfs.TimeDevice.gtx980().save(d / "device.json")
    out["device.json"] = (d / "device.json").read_bytes()
    model = _small_power_model()
    model.save(d / "model.json")
    model.to_gpmtool(d / "model.gpm.csv")
    out["model.json"] = (d / "model.json").read_bytes()
    out["model.gpm.csv"] = (d / "model.gpm.csv").read_bytes()
    p = gpudvfs.OnlinePredictor(3, forgetting=0.95)
    p.update([1.0, 0.5, -0.2], 0.3)
    save_predictor(p, d / "predictor.json")
    out["predictor.json"] = (d / "predictor.json").read_bytes()
    return out


def _small_power_model() -> gpudvfs.PowerModel:
    """A per-domain model fitted on a small synthetic gpmTOOL-style dataset."""
    rng = np.random.default_rng(0)
    cores, mems = [600.0, 800.0, 1000.0], [800.0, 3500.0]
    util = rng.uniform(0.05, 1.0, (6, 3))
    rows = [(b, c, m) for b in range(6) for c in cores for m in mems]
    u = np.array([util[b] for b, _, _ in rows])
    freqs = np.array([[c, m] for _, c, m in rows])
    watts = 30 + 60 * u[:, 0] * freqs[:, 0] / 1000 + 40 * u[:, 1] + 25 * u[:, 2] * freqs[:, 1] / 3500
    ds = gpudvfs.PowerDataset(path="<fuzz seed>", reference_mhz=(1000.0, 3500.0), domain_sizes=(2, 1),
                              components=("SP", "INT", "DRAM"), watts=watts, freqs_mhz=freqs, utilization=u,
                              row_names=None, benchmark=np.array([b for b, _, _ in rows]),
                              benchmarks=tuple(f"b{i}" for i in range(6)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", gpudvfs.GpudvfsWarning)  # voltages on a bound: fine for a seed
        return gpudvfs.PowerModel("per-domain").fit(ds)


# -- mutations -------------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**30, 10**30) | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6)


@st.composite
def mutated(draw, content: bytes) -> bytes:
    data = bytearray(content)
    for _ in range(draw(st.integers(0, 3))):  # none: the seed itself, which the command must take
        kind = draw(st.sampled_from(["digit", "flip", "insert", "cut", "line", "token", "nul", "utf8", "huge",
                                     "truncate"]))
        at = draw(st.integers(0, len(data)))
        digits = [i for i, b in enumerate(data) if 48 <= b <= 57] if kind == "digit" else []
        if digits:  # another digit: still a number, and the file often still valid
            data[draw(st.sampled_from(digits))] = draw(st.integers(48, 57))
        elif kind == "flip" and data:
            data[min(at, len(data) - 1)] = draw(st.integers(0, 255))
        elif kind == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=8))
        elif kind == "cut":
            del data[at:at + draw(st.integers(1, 64))]
        elif kind == "line":
            lines = bytes(data).split(b"\n")
            i, j = (draw(st.integers(0, len(lines) - 1)) for _ in range(2))
            lines.insert(j, lines[i])  # a duplicated (and displaced) line
            data = bytearray(b"\n".join(lines))
        elif kind == "token":
            fields = bytes(data).split(b",")
            i = draw(st.integers(0, len(fields) - 1))
            tail = fields[i].split(b"\n", 1)  # keep the line structure, change the value
            fields[i] = draw(st.sampled_from(NUMBER_TOKENS)) + (b"\n" + tail[1] if len(tail) > 1 else b"")
            data = bytearray(b",".join(fields))
        elif kind == "nul":
            data[at:at] = b"\x00"
        elif kind == "utf8":
            data[at:at] = b"\xff\xfe"
        elif kind == "huge":
            data[at:at] = b"x" * 200_000
        else:
            del data[at:]
    return bytes(data)


@st.composite
def json_mutated(draw, content: bytes) -> bytes:
    """A random JSON value at a random place of a JSON document."""
    doc = json.loads(content)
    parent, key, node = None, None, doc
    while isinstance(node, (dict, list)) and node and draw(st.booleans()):
        key = draw(st.sampled_from(list(node) if isinstance(node, dict) else range(len(node))))
        parent, node = node, node[key]
    value = draw(json_values)
    if parent is None:
        doc = value
    else:
        parent[key] = value
    return json.dumps(doc).encode()


def inputs(seeds: dict[str, bytes], names: list[str], any_seed: bool = False):
    """Arbitrary bytes, or one of the named seeds mutated (by bytes, or JSON values for JSON).
    ``full:NAME`` is a real file whole (a valid input the command gets far with), NAME its head.
    ``any_seed``: also every seed as it is, files of other kinds than the command reads."""
    available = [n for n in names if n in seeds]
    options = [st.binary(max_size=512)]
    if any_seed:
        options.append(st.sampled_from(sorted(seeds)).map(seeds.__getitem__))
    if available:
        options.append(st.sampled_from(available).flatmap(lambda n: mutated(seeds[n])))
        jsons = [n for n in available if n.endswith(".json")]
        if jsons:
            options.append(st.sampled_from(jsons).flatmap(lambda n: json_mutated(seeds[n])))
    return st.one_of(options)


# -- library readers and loaders -------------------------------------------------------------

ALL_CSV = DATA_FILES + ["sweep.csv", "model.gpm.csv"]
ALL_JSON = ["sweep.csv.sweep.json", "workloads.json", "device.json", "model.json", "predictor.json"]

READERS: dict[str, tuple[Callable[[Path], object], list[str]]] = {
    "read": (gpudvfs.read, ALL_CSV),
    "detect_format": (gpudvfs.detect_format, ALL_CSV),
    "read skip": (lambda p: gpudvfs.read(p, on_invalid="skip"), ALL_CSV),
    "read_power_dataset": (gpudvfs.read_power_dataset, GPMTOOL_FILES),
    "read_counters": (profilers.read_counters, TOOL_FILES),
    "PowerModel.load": (gpudvfs.PowerModel.load, ["model.json"]),
    "PowerModel.from_gpmtool": (gpudvfs.PowerModel.from_gpmtool, ["model.gpm.csv"]),
    "TimeDevice.load": (gpudvfs.TimeDevice.load, ["device.json"]),
    "read_workloads": (read_workloads, ["workloads.json"]),
    "load_predictor": (load_predictor, ["predictor.json"]),
    "load_record": (lambda p: load_record(p.with_name(p.name.removesuffix(".sweep.json"))),
                    ["sweep.csv.sweep.json"]),
}


def _file(tmp_path: Path, content: bytes, name: str = "input") -> Path:
    path = tmp_path / name
    path.write_bytes(content)
    return path


@pytest.mark.parametrize("target", sorted(READERS))
def test_readers_and_loaders_give_a_result_or_a_gpudvfs_error(target, seeds, tmp_path):
    read, names = READERS[target]

    @FUZZ
    @given(content=inputs(seeds, names))
    def check(content):
        name = "input.sweep.json" if target == "load_record" else "input"
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", gpudvfs.GpudvfsWarning)  # rows skipped, bounds hit: results
                read(_file(tmp_path, content, name))
        except GpudvfsError:
            pass

    check()


# -- commands that take a file ---------------------------------------------------------------

# name -> (arguments: FILE is the fuzzed file, {key} a valid seed or real file, {tmp} a folder;
#          the seeds FILE is mutated from)
COMMANDS: dict[str, tuple[list[str], list[str]]] = {
    "data info": (["data", "info", "FILE", "--json"], ALL_CSV),
    "data info skip": (["data", "info", "FILE", "--skip-invalid"], ALL_CSV),
    "power fit": (["power", "fit", "FILE", "--variant", "per-domain", "--json"], [f"full:{GTX980_MICRO}"]),
    "power eval model": (["power", "eval", "FILE", "{gtx980_micro.csv}"], ["gtx980-power.json", "model.gpm.csv"]),
    "power eval data": (["power", "eval", "{gtx980-power.json}", "FILE"], [f"full:{GTX980_MICRO}"]),
    "power predict": (["power", "predict", "{gtx980-power.json}", "FILE"], [f"full:{GTX980_MICRO}"]),
    "power plot": (["power", "plot", "FILE", "-o", "{tmp}/p.png"], ["gtx980-power.json", "model.gpm.csv"]),
    "time eval": (["time", "eval", "--device", "gtx980", "FILE"], [f"full:{GTX980_TIME}", f"full:{GTX980_TIME_POWER}"]),
    "time eval device": (["time", "eval", "--device", "gtx980",
                          "{gtx980_time_dev.csv}", "--device", "FILE.json"], ["device.json"]),
    "time predict": (["time", "predict", "--device", "gtx980", "FILE", "--json"], [f"full:{GTX980_TIME}"]),
    "time cv": (["time", "cv", "--device", "gtx980", "FILE", "--json"], [f"full:{GTX980_TIME}"]),
    "select eval": (["select", "eval", "--device", "gtx980",
                     "FILE", "--json"], [f"full:{GTX980_TIME_POWER}"]),
    "select fit-power": (["select", "fit-power", "--device", "gtx980",
                          "FILE", "-o", "{tmp}/m.json"], [f"full:{GTX980_TIME_POWER}"]),
    "select choose": (["select", "choose", "--device", "gtx980",
                       "{gtx980_time_power_dev.csv}", "--power-model", "FILE"],
                      ["select-power.json"]),
    "online replay": (["online", "replay", "FILE", "--steps", "60", "--json"],
                      [f"full:{V100}", f"full:{GTX980_TIME}"]),
    "sweep workloads": (["sweep", "--workloads", "FILE", "-o", "{tmp}/s.csv", "--core-mhz", "975",
                         "--mem-mhz", "3505"], ["workloads.json"]),
    "sweep resume": (["sweep", "--workloads", "{workloads.json}", "-o", "FILE", "--resume", "--core-mhz", "975,595",
                      "--mem-mhz", "3505,810"], ["sweep.csv"]),
    "sweep resume record": (["sweep", "--workloads", "{workloads.json}", "-o", "{tmp}/r.csv", "--resume",
                             "--core-mhz", "975,595", "--mem-mhz", "3505,810"], ["sweep.csv.sweep.json"]),
}


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_commands_exit_0_or_2_without_a_traceback(name, seeds, tmp_path):
    args, names = COMMANDS[name]
    runner = CliRunner()
    fuzzed = tmp_path / ("input.json" if "FILE.json" in args else "input")
    if name == "sweep resume record":  # the record beside a valid sweep
        fuzzed = tmp_path / "r.csv.sweep.json"

    def resolve(arg: str) -> str:
        if arg in ("FILE", "FILE.json"):
            return str(fuzzed)
        if not (arg.startswith("{") and arg.endswith("}")):
            return arg.format(tmp=tmp_path)
        key = arg[1:-1]
        real = next((n for n in DATA_FILES if n.endswith("/" + key)), None)
        if real is not None:  # a valid real file, whole
            if not (data_dir() / real).exists():
                pytest.skip(f"real data absent: {real}")
            return str(data_dir() / real)
        if key not in seeds:
            pytest.skip(f"seed {key} needs the real data")
        return str(_file(tmp_path, seeds[key], key))

    argv = [resolve(a) for a in args]

    @FUZZ
    @given(content=inputs(seeds, names, any_seed=True))
    def check(content):
        if name == "sweep resume record":
            _file(tmp_path, seeds["sweep.csv"], "r.csv")
        fuzzed.write_bytes(content)
        r = runner.invoke(cli, argv)
        crashed = r.exception is not None and not isinstance(r.exception, SystemExit)
        assert not crashed and r.exit_code in (0, 2), (
            f"{name}: exit {r.exit_code}, {type(r.exception).__name__}: {r.exception}\n{r.output[-2000:]}")
        assert "Traceback" not in r.output

    check()
