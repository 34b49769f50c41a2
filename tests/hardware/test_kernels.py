"""The CUDA microbenchmarks, checked without a GPU.

Every kernel of kernels/manifest.json is compiled with NVRTC (PyPI cuda-bindings +
nvidia-cuda-nvrtc-cu12) for sm_70, sm_80 and sm_90, and each CUBIN is disassembled with nvdisasm
(PyPI nvidia-cuda-nvdisasm). In the disassembly, the test finds each kernel's hot loop and checks
what the manifest's `sass` block says it must hold:

* the hot loop: a loop is a backward branch (a BRA whose target label is at or before it) and
  the instructions from its target to it; the hot loop is, among the innermost loops, the one
  with the most work-class instructions (`kernels.hot_loop`);
* "class C dominates the loop": the loop holds at least one C instruction and no other work
  class (SP, DP, INT, SFU, SHARED, GLOBAL) has more, except the classes the benchmark mixes in
  on purpose (`mixed_in`: the multiply-adds of the L2/DRAM streams);
* minimum counts of a class or opcode (e.g. 4*OPS FFMA for the SP sweep: nothing folded away),
  the mnemonics that must appear (e.g. LDG.E.128.STRONG.GPU: L1-bypassing 16-byte loads for L2),
  no local-memory spills anywhere in the kernel;
* along each sweep, the arithmetic intensity (numerator-class instructions per memory
  instruction in the hot loop) grows strictly with the sweep parameter.

CUDA 13's nvdisasm (the only one on PyPI) no longer reads sm_70 CUBINs, so sm_70 is checked for
compilation only; its disassembly tests skip and say so. The tests skip with the reason when the
NVRTC or nvdisasm packages are missing. The CuPy launch path needs a GPU and is not run here,
apart from its argument checking and the idle benchmark, which launches nothing.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import types
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from gpudvfs.hardware import kernels as K
from gpudvfs.hardware.kernels import nvrtc as nvrtc_module

REPO = Path(__file__).resolve().parents[2]
ARCHS = ("sm_70", "sm_80", "sm_90")
DISASM_ARCHS = ("sm_80", "sm_90")  # sm_70: see test_sm70_disassembly_when_nvdisasm_supports_it
MANIFEST = K.load_manifest()
KERNEL_BENCHMARKS = [b.name for b in MANIFEST if b.source is not None]


# ---------------------------------------------------------------------------------------------
# Manifest


def test_power_suite_has_the_papers_83_benchmarks_in_its_groups():
    power = MANIFEST.suite("power")
    assert len(power) == 83
    groups = defaultdict(int)
    for b in power:
        groups[b.group] += 1
    assert dict(groups) == {"INT": 11, "SP": 11, "DP": 11, "SF": 11, "Shared": 8, "L2": 8,
                            "DRAM": 11, "Mix": 11, "Idle": 1}


def test_time_suite_has_latencies_and_bandwidth():
    time = {b.name: b for b in MANIFEST.suite("time")}
    assert {"time_dram_latency", "time_l2_latency", "time_shared_latency",
            "time_dram_bandwidth"} <= set(time)
    # DRAM and L2 latency differ only in the ring the launcher builds: larger than L2 or inside it
    assert time["time_dram_latency"].launch["footprint"] == "dram"
    assert time["time_l2_latency"].launch["footprint"] == "l2"
    assert time["time_l2_latency"].launch["warm"] == "ring"


def test_manifest_is_what_make_manifest_writes():
    spec = importlib.util.spec_from_file_location("make_manifest", REPO / "kernels" / "make_manifest.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert (REPO / "kernels" / "manifest.json").read_text(encoding="utf-8") == mod.render(), \
        "kernels/manifest.json is stale: run python kernels/make_manifest.py"


def _sweep(group: str, param: str):
    bs = sorted(MANIFEST.group(group), key=lambda b: b.params[param])
    return [b.params[param] for b in bs], bs


# DP does not cross: on the nominal GPU (1/32-rate DP, like the paper's GTX Titan X) even one
# multiply-add per chain makes the kernel DP-bound; only its DRAM share falls along the sweep.
@pytest.mark.parametrize("group,param,component,crosses", [
    ("INT", "OPS", "INT", True), ("SP", "OPS", "SP", True), ("DP", "OPS", "DP", False),
    ("SF", "OPS", "SFU", True), ("Shared", "ITERS", "Shared", True)])
def test_design_stresses_move_from_dram_to_the_unit_along_each_sweep(group, param, component, crosses):
    values, bs = _sweep(group, param)
    assert len(set(values)) == len(values)
    unit = [b.stresses[component] for b in bs]
    dram = [b.stresses["DRAM"] for b in bs]
    assert all(x <= y for x, y in zip(unit, unit[1:])) and unit[-1] == 1.0
    assert all(x >= y for x, y in zip(dram, dram[1:])) and dram[0] > dram[-1]
    if crosses:
        assert dram[0] > unit[0] and unit[-1] > dram[-1], "should cross from memory- to unit-bound"


def test_every_kernel_benchmark_has_a_bottleneck_and_idle_stresses_nothing():
    for b in MANIFEST:
        if b.suite == "power" and b.group != "Idle":
            assert max(b.stress_vector) == 1.0, b.name
    assert MANIFEST["idle"].stress_vector == (0.0,) * 7
    assert MANIFEST["l2_ops00"].stresses["L2"] == 1.0 and MANIFEST["l2_ops00"].stresses["DRAM"] == 0.0


def test_render_gives_source_options_and_name_expression():
    r = K.render("sp_ops016")
    assert r.name_expression == "arith<float, 16>"
    assert "template <typename T, int OPS>" in r.code
    assert r.options == ()  # architecture is chosen by the caller (compile_cubin) or by CuPy
    assert K.render("l2_ops03").name_expression == "stream<float4, 3, true, 256, 4>"
    assert "-ftz=true" in K.render("mix_all_low").options
    with pytest.raises(ValueError, match="launches no kernel"):
        K.render("idle")
    with pytest.raises(KeyError, match="no benchmark 'nope'"):
        K.render("nope")


def _write_manifest(tmp_path: Path, mutate) -> Path:
    d = tmp_path / "kernels"
    shutil.copytree(REPO / "kernels", d, ignore=shutil.ignore_patterns("__pycache__"))
    raw = json.loads((d / "manifest.json").read_text())
    mutate(raw)
    (d / "manifest.json").write_text(json.dumps(raw))
    return d / "manifest.json"


def _set(path, value):
    def mutate(raw):
        obj = raw
        for k in path[:-1]:
            obj = obj[k]
        if value is _DELETE:
            del obj[path[-1]]
        else:
            obj[path[-1]] = value
    return mutate


_DELETE = object()


@pytest.mark.parametrize("mutate,message", [
    (_set(["version"], 99), r"'version': unsupported version 99"),
    (_set(["benchmarks", 3, "template", "T"], "half"),
     r"benchmarks\[3\] \(int_ops004\)\.template\.T: expected a type"),
    (_set(["benchmarks", 0, "stresses", "DRAM"], 1.5),
     r"benchmarks\[0\] \(int_ops001\)\.stresses\.DRAM: expected a number in \[0, 1\]"),
    (_set(["benchmarks", 0, "stresses", "L2"], _DELETE), r"stresses: expected exactly the components"),
    (_set(["benchmarks", 5, "kernel"], "nosuch"),
     r"benchmarks\[5\] \(int_ops008\)\.kernel: 'nosuch' is not a kernel of arith.cu"),
    (_set(["benchmarks", 1, "launch", "policy"], "warp"), r"\.launch: expected an object with 'policy'"),
    (_set(["benchmarks", 2, "sass", "dominant"], "FFMA"), r"\.sass\.dominant: expected one of"),
    (_set(["benchmarks", 2, "sass", "intensity", "sweep"], "N"), r"\.sass\.intensity: expected"),
    (_set(["benchmarks", 2, "colour"], "red"), r"unknown keys \['colour'\]"),
    (_set(["benchmarks", 2, "name"], "int_ops001"), r"duplicate name 'int_ops001'"),
    (_set(["sources", "arith.cu", "options"], ["-arch=sm_80"]), r"must not fix the architecture"),
    (_set(["sources", "gone.cu"], {"kernels": {"k": {"args": ["x:u32"]}}}), r"gone.cu does not exist"),
    (_set(["benchmarks", 40, "template"], {"OPS": 1, "T": "float"}), r"expected the parameters \['OPS'\]"),
    (_set(["benchmarks", 50, "launch", "block"], 128),
     r"\(shared_it128\)\.launch\.block: must equal the template's BLOCK=256"),
    (_set(["benchmarks", 0, "launch", "footprint"], _DELETE), r"policy 'grid_stride' needs \['footprint'\]"),
])
def test_malformed_manifest_names_file_entry_and_expectation(tmp_path, mutate, message):
    path = _write_manifest(tmp_path, mutate)
    with pytest.raises(K.ManifestError, match=message) as e:
        K.load_manifest(path)
    assert str(path.resolve()) in str(e.value)


def test_manifest_json_syntax_error_names_line_and_column(tmp_path):
    d = tmp_path / "k"
    d.mkdir()
    (d / "manifest.json").write_text('{\n  "format": "gpudvfs-kernel-manifest",\n  "version": 1,,\n}')
    with pytest.raises(K.ManifestError, match=r"manifest.json:3:\d+: invalid JSON"):
        K.load_manifest(d / "manifest.json")


def test_manifest_is_read_once_per_path(tmp_path, monkeypatch):
    """The lookups call load_manifest again and again: a path read once is neither read nor
    resolved again (a stand-in reader counts the reads), and each path keeps its own manifest."""
    from gpudvfs.hardware.kernels import manifest as mod

    reads: list[Path] = []
    monkeypatch.setattr(mod, "_read_json", lambda p: reads.append(p) or json.loads(p.read_text()))
    path = _write_manifest(tmp_path, _set(["benchmarks", 0, "description"], "the copy's"))
    m = K.load_manifest(path)
    assert reads == [path.resolve()] and m["int_ops001"].description == "the copy's"
    with monkeypatch.context() as no_files:  # a second call touches no file at all
        no_files.setattr(Path, "resolve", lambda *_: pytest.fail("resolved again"))
        no_files.setattr(Path, "stat", lambda *_: pytest.fail("stat again"))
        assert K.load_manifest(path) is m and K.load_manifest(str(path)) is m
    assert len(reads) == 1
    monkeypatch.setenv("GPUDVFS_KERNELS_DIR", str(path.parent))  # the default path follows the variable
    assert K.load_manifest() is m and len(reads) == 1
    monkeypatch.delenv("GPUDVFS_KERNELS_DIR")
    assert K.load_manifest() is MANIFEST and K.load_manifest()["int_ops001"].description != "the copy's"
    assert len(reads) == 1


def test_load_checks_parameters_before_touching_a_gpu():
    with pytest.raises(ValueError, match=r"unknown launch parameters \['bogus'\].*'elements'"):
        K.load("sp_ops001", {"bogus": 1})
    with pytest.raises(ValueError, match=r"policy 'chase' takes"):
        K.load("time_dram_latency", {"reps": 3})


def test_reps_refused_for_a_kernel_that_takes_none_before_touching_a_gpu():
    with pytest.raises(ValueError, match="takes no 'reps'"):
        K.load("sp_ops001", {"reps": 3})


def test_grid_stride_benchmark_reports_the_bytes_it_reads_and_writes():
    """The bandwidth benchmark's traffic, which the time device's DRAM delay is fitted from:
    NumPy stands in for CuPy's array module (the buffers only; nothing is launched)."""
    from gpudvfs.hardware.kernels.gpu import _grid_stride

    cp = types.SimpleNamespace(random=np.random, empty_like=np.empty_like)
    b = K.benchmark("time_dram_bandwidth")
    settings = {**{k: v for k, v in b.launch.items() if k != "policy"}, "elements": 10_000, "reps": 3}
    grid, block, values, sizes, result = _grid_stride(cp, b, settings, 4, 1 << 20)
    n = int(values["n"])
    assert n == 8192  # whole tiles of 256 threads x 8 float4 each
    assert sizes == {"elements": n, "bytes": 16 * n}
    assert result() == {"bytes": 2.0 * 16 * n * 3}


def test_idle_benchmark_launches_nothing_and_waits():
    idle = K.load("idle", {"sleep_ms": 1})
    idle()  # sleeps 1 ms; no kernel, so this runs with or without a GPU
    with pytest.raises(ValueError, match="measures nothing in-kernel"):
        idle.result()


# ---------------------------------------------------------------------------------------------
# SASS helpers on hand-written disassembly (no toolchain needed)

_SASS = """
//--------------------- .text._Z1kv --------------------------
.text._Z1kv:
        /*0000*/                   MOV R1, c[0x0][0x28] ;
.L_x_0:
        /*0010*/                   IADD3 R2, R2, 0x1, RZ ;
.L_x_1:
        /*0020*/                   LDG.E R4, [R2.64] ;
        /*0030*/                   FFMA R5, R4, R4, R5 ;
        /*0040*/                   FFMA R6, R4, R4, R6 ;
        /*0050*/                   ISETP.NE.AND P1, PT, R2, RZ, PT ;
        /*0060*/              @P1 BRA `(.L_x_1) ;
        /*0070*/              @!P0 BRA `(.L_x_0) ;
        /*0080*/                   EXIT ;
.L_x_2:
        /*0090*/                   BRA `(.L_x_2);
"""


def test_sass_parser_finds_nested_loops_and_picks_the_inner_one():
    insns = K.parse_sass(_SASS)["_Z1kv"]
    assert [i.opcode for i in insns][:3] == ["MOV", "IADD3", "LDG.E"]
    assert insns[6].predicate == "@P1" and insns[6].target == 0x20
    loops = K.find_loops(insns)
    assert [(lp.start, lp.end) for lp in loops] == [(2, 6), (1, 7)]  # self-branch padding skipped
    hot = K.hot_loop(insns)
    assert (hot.start, hot.end) == (2, 6)
    assert hot.counts() == {"GLOBAL": 1, "SP": 2, "INT": 1, "CONTROL": 1}
    assert K.dominates(hot, "SP")
    assert not K.dominates(hot, "GLOBAL")             # 1 load < 2 FFMA
    assert K.dominates(hot, "GLOBAL", exempt=["SP"])  # unless SP is mixed in on purpose
    assert not K.dominates(hot, "SFU")                # absent classes never dominate
    assert K.intensity(hot, "SP", ["GLOBAL"]) == 2.0


def test_instruction_classes():
    cls = K.instruction_class
    assert [cls(o) for o in ("FFMA", "DFMA", "IMAD.WIDE.U32", "LOP3.LUT", "MUFU.EX2", "LDS.U.128",
                             "STG.E.128", "LDL", "BRA", "ULDC.64", "HFMA2.MMA")] == [
        "SP", "DP", "INT", "INT", "SFU", "SHARED", "GLOBAL", "LOCAL", "CONTROL", "OTHER", "OTHER"]


# ---------------------------------------------------------------------------------------------
# NVRTC + nvdisasm


@pytest.fixture(scope="session")
def toolchain():
    try:
        nvrtc_module._nvrtc()
        K.compile_source("chase.cu", "sm_80", ["global_chase<8>"])
    except K.ToolchainMissing as e:
        pytest.skip(f"NVRTC unavailable: {e}")
    return True


def _by_source():
    out = defaultdict(list)
    for name in KERNEL_BENCHMARKS:
        out[MANIFEST[name].source].append(MANIFEST[name])
    return out


@pytest.fixture(scope="session")
def compiled(toolchain):
    """(source, arch) -> CompiledSource: one NVRTC program per source and architecture."""
    cache: dict[tuple[str, str], K.CompiledSource] = {}

    def get(source: str, arch: str) -> K.CompiledSource:
        if (source, arch) not in cache:
            bs = _by_source()[source]
            cache[(source, arch)] = K.compile_source(source, arch, [b.name_expression for b in bs])
        return cache[(source, arch)]
    return get


@pytest.fixture(scope="session")
def sass(compiled):
    """arch -> {benchmark name: instructions of its kernel}."""
    try:
        K.nvdisasm_path()
    except K.ToolchainMissing as e:
        pytest.skip(str(e))
    cache: dict[str, dict[str, list[K.Instruction]]] = {}
    refused: dict[str, str] = {}

    def get(arch: str) -> dict[str, list[K.Instruction]]:
        if arch in refused:
            pytest.skip(refused[arch])
        if arch not in cache:
            out = {}
            for source, bs in _by_source().items():
                c = compiled(source, arch)
                try:
                    text = K.disassemble(c.cubin)
                except K.UnsupportedArchitecture as e:
                    refused[arch] = (f"installed nvdisasm cannot disassemble {arch} "
                                     f"(compiled only): {e}")
                    pytest.skip(refused[arch])
                assert f"EF_CUDA_{arch.upper().replace('_', '')}" in text  # really that architecture
                funcs = K.parse_sass(text)
                for b in bs:
                    out[b.name] = funcs[c.lowered[b.name_expression]]
            cache[arch] = out
        return cache[arch]
    return get


@pytest.mark.parametrize("arch", ARCHS)
def test_every_kernel_compiles_with_nvrtc(compiled, arch):
    for source, bs in _by_source().items():
        c = compiled(source, arch)
        assert c.cubin[:4] == b"\x7fELF", f"{source} for {arch} is not a CUBIN"
        for b in bs:
            assert c.lowered[b.name_expression].startswith("_Z"), b.name
    one = K.compile_cubin("sp_ops001", arch)
    assert one[:4] == b"\x7fELF" and len(one) < len(compiled("arith.cu", arch).cubin)


def test_compile_error_carries_the_nvrtc_log(toolchain, tmp_path):
    path = _write_manifest(tmp_path, lambda raw: None)
    (path.parent / "arith.cu").write_text("template <int N> __global__ void arith() { undeclared(); }")
    m = K.load_manifest(path)
    with pytest.raises(K.CompileError, match="undeclared") as e:
        K.compile_source("arith.cu", "sm_80", ["arith<1>"], m)
    assert "undeclared" in e.value.log


def _count(loop: K.Loop, key: str) -> int:
    return loop.counts()[key] if key in K.SASS_CLASSES else loop.opcode_counts()[key]


def check_sass(b: K.Benchmark, insns: list[K.Instruction]) -> list[str]:
    """Problems with a kernel's disassembly against its manifest entry (empty: none)."""
    problems = []
    spills = [i.opcode for i in insns if i.cls == "LOCAL"]
    if spills:
        problems.append(f"local-memory spills {spills}")
    loop = K.hot_loop(insns)
    s = b.sass
    if "dominant" in s and not K.dominates(loop, s["dominant"], s.get("mixed_in", [])):
        problems.append(f"{s['dominant']} does not dominate the hot loop: {dict(loop.counts())}")
    for key, n in s.get("min_counts", {}).items():
        if _count(loop, key) < n:
            problems.append(f"{key}: {_count(loop, key)} in the hot loop, expected >= {n}")
    present = {i.opcode for i in loop.body}
    for op in s.get("opcodes", []):
        if op not in present:
            problems.append(f"{op} absent from the hot loop ({sorted(present)})")
    return problems


@pytest.mark.parametrize("arch", DISASM_ARCHS)
@pytest.mark.parametrize("name", KERNEL_BENCHMARKS)
def test_hot_loop_holds_what_the_benchmark_targets(sass, arch, name):
    b = MANIFEST[name]
    assert check_sass(b, sass(arch)[name]) == []


SWEEPS = sorted({(b.group, b.sass["intensity"]["sweep"]) for b in MANIFEST if "intensity" in b.sass})


def _intensity_problems(sass_of_arch, group: str, param: str) -> list[str]:
    _, bs = _sweep(group, param)
    spec = bs[0].sass["intensity"]
    ratios = [K.intensity(K.hot_loop(sass_of_arch[b.name]), spec["numerator"], spec["denominator"])
              for b in bs]
    if all(x < y for x, y in zip(ratios, ratios[1:])):
        return []
    return [f"{group}: {spec['numerator']} per {spec['denominator']} along {param}: {ratios}"]


@pytest.mark.parametrize("arch", DISASM_ARCHS)
@pytest.mark.parametrize("group,param", SWEEPS)
def test_arithmetic_intensity_grows_along_each_sweep(sass, arch, group, param):
    assert _intensity_problems(sass(arch), group, param) == []


def test_sm70_disassembly_when_nvdisasm_supports_it(sass):
    """CUDA 13's nvdisasm refuses sm_70 (this test then skips and says so); an older nvdisasm
    given through GPUDVFS_NVDISASM gets the same checks as the other architectures."""
    insns = sass("sm_70")
    problems = [f"{name}: {p}" for name in KERNEL_BENCHMARKS for p in check_sass(MANIFEST[name], insns[name])]
    for group, param in SWEEPS:
        problems += _intensity_problems(insns, group, param)
    assert problems == []


def test_checks_fail_when_the_compiler_drops_the_work(sass, tmp_path):
    """Control: the same checks on a kernel whose chains never reach memory. The compiler deletes
    the multiply-adds, and the checks must say so."""
    path = _write_manifest(tmp_path, lambda raw: None)
    src = path.parent / "arith.cu"
    src.write_text(src.read_text().replace("out[i] = (r0 + r1) + (r2 + r3);", "out[i] = x;"))
    m = K.load_manifest(path)
    b = m["sp_ops016"]
    c = K.compile_source("arith.cu", "sm_80", [b.name_expression], m)
    insns = K.parse_sass(K.disassemble(c.cubin))[c.lowered[b.name_expression]]
    problems = check_sass(b, insns)
    assert any("SP does not dominate" in p for p in problems), problems
    assert any(p.startswith("FFMA: 0 in the hot loop") for p in problems), problems
