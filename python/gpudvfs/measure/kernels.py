"""The CUDA microbenchmark suites: manifest, source rendering, NVRTC compilation, SASS checks,
and the CuPy loader for real GPUs.

The kernels live in ``kernels/`` as CUDA C templates; ``kernels/manifest.json`` lists every
benchmark (the power suite of Guerreiro et al. and the latency/bandwidth suite of Wang & Chu)
with its source, kernel, template arguments, launch policy, the components it is meant to
stress and what its disassembly must show. See ``kernels/README.md``.

Two ways to compile, for two purposes:

* ``compile_cubin`` / ``compile_source``: NVRTC through ``cuda-bindings`` (PyPI packages
  ``cuda-bindings`` and ``nvidia-cuda-nvrtc-cu12``) for a named architecture, no GPU needed.
  With ``disassemble`` (``nvdisasm`` from PyPI ``nvidia-cuda-nvdisasm``) and the SASS helpers
  below this checks, on any machine, that each kernel compiles to the instructions it is meant
  to exercise.
* ``load``: CuPy's ``RawModule`` for the GPU in the machine, returning a callable that launches
  the benchmark once and waits for it. This path needs a real GPU.

Nothing here needs the Rust extension.
"""

from __future__ import annotations

import functools
import importlib
import json
import math
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

MANIFEST_FORMAT = "gpudvfs-kernel-manifest"
MANIFEST_VERSION = 1

# Components of the power model (Guerreiro et al., Sec. III-B), in the manifest's order.
COMPONENTS = ("SP", "INT", "DP", "SFU", "L2", "Shared", "DRAM")
SUITES = ("power", "time")
POLICIES = ("grid_stride", "chase", "shared_chase", "idle")

# Template argument values a manifest may use, and their C spelling / element layout.
# (size in bytes of one element, numpy dtype name of one scalar, scalars per element)
_TYPES: dict[str, tuple[int, str, int]] = {
    "int": (4, "int32", 1),
    "float": (4, "float32", 1),
    "double": (8, "float64", 1),
    "float2": (8, "float32", 2),
    "float4": (16, "float32", 4),
}

# Instruction classes of the disassembly. The six "work" classes are what the benchmarks aim
# at; LOCAL is register spilling (never wanted in a measurement loop); the rest is overhead.
WORK_CLASSES = ("SP", "DP", "INT", "SFU", "SHARED", "GLOBAL")
SASS_CLASSES = WORK_CLASSES + ("LOCAL", "CONTROL", "OTHER")
MEMORY_CLASSES = ("SHARED", "GLOBAL", "LOCAL")

_OPCODE_CLASS: dict[str, str] = {}
for _cls, _ops in {
    "SP": "FFMA FADD FMUL FMNMX FSETP FSEL FSET FCHK FSWZADD",
    "DP": "DFMA DADD DMUL DSETP DMNMX",
    "INT": ("IMAD IADD3 IADD LOP3 LOP SHF SHL SHR LEA IMNMX ISETP IABS POPC FLO BREV PRMT SEL "
            "IMUL XMAD BMSK SGXT IDP ISCADD VIADD VIMNMX IMNMX3 ICMP"),
    "SFU": "MUFU",
    "SHARED": "LDS STS ATOMS LDSM",
    "GLOBAL": "LDG STG ATOMG RED ATOM",
    "LOCAL": "LDL STL",
    "CONTROL": ("BRA BRX JMP JMX CALL RET EXIT BAR BSSY BSYNC WARPSYNC YIELD NOP BPT KILL "
                "DEPBAR BREAK BMOV"),
}.items():
    for _op in _ops.split():
        _OPCODE_CLASS[_op] = _cls


class ManifestError(ValueError):
    """The manifest is malformed; the message names the file, the entry and what was expected."""


class ToolchainMissing(RuntimeError):
    """A compiler or disassembler package is not installed; the message says which to install."""


class CompileError(RuntimeError):
    """NVRTC rejected a source; ``log`` holds the compiler's messages."""

    def __init__(self, message: str, log: str = "") -> None:
        super().__init__(f"{message}\n{log}" if log else message)
        self.log = log


class DisassemblyError(RuntimeError):
    """nvdisasm failed on a CUBIN."""


class UnsupportedArchitecture(DisassemblyError):
    """The installed nvdisasm no longer handles this architecture (CUDA 13 dropped sm_70)."""


# --------------------------------------------------------------------------------------------
# Manifest

@dataclass(frozen=True)
class KernelSpec:
    """One ``__global__`` template in a source file: its template parameter names and its
    argument names in order (as ``name:type``)."""

    source: str
    name: str
    template: tuple[str, ...]
    args: tuple[str, ...]

    @property
    def arg_names(self) -> tuple[str, ...]:
        return tuple(a.split(":", 1)[0] for a in self.args)


@dataclass(frozen=True)
class SourceSpec:
    """One ``.cu`` file: NVRTC options it needs and the kernels it defines."""

    file: str
    options: tuple[str, ...]
    kernels: Mapping[str, KernelSpec]


@dataclass(frozen=True)
class Benchmark:
    """One microbenchmark: a kernel template instantiated with fixed arguments, a launch
    policy, the components it stresses (design intent) and what its SASS must show."""

    name: str
    suite: str
    group: str
    source: str | None
    kernel: str | None
    template: tuple[tuple[str, str | int | bool], ...]
    launch: Mapping[str, Any]
    stresses: Mapping[str, float]
    sass: Mapping[str, Any]
    description: str

    @property
    def params(self) -> dict[str, str | int | bool]:
        """Template arguments by name."""
        return dict(self.template)

    @property
    def name_expression(self) -> str:
        """The C++ expression naming the instantiation, e.g. ``arith<float, 16>``."""
        if self.kernel is None:
            raise ValueError(f"benchmark {self.name!r} has no kernel")
        if not self.template:
            return self.kernel
        return f"{self.kernel}<{', '.join(_c_value(v) for _, v in self.template)}>"

    @property
    def stress_vector(self) -> tuple[float, ...]:
        """``stresses`` as a tuple in ``COMPONENTS`` order."""
        return tuple(self.stresses[c] for c in COMPONENTS)


@dataclass(frozen=True)
class Manifest:
    path: Path
    doc: str
    sources: Mapping[str, SourceSpec]
    benchmarks: Mapping[str, Benchmark]

    @property
    def directory(self) -> Path:
        return self.path.parent

    def __getitem__(self, name: str) -> Benchmark:
        try:
            return self.benchmarks[name]
        except KeyError:
            raise KeyError(f"no benchmark {name!r} in {self.path} "
                           f"({len(self.benchmarks)} benchmarks; see its 'benchmarks' list)") from None

    def __iter__(self):
        return iter(self.benchmarks.values())

    def __len__(self) -> int:
        return len(self.benchmarks)

    def suite(self, suite: str) -> list[Benchmark]:
        return [b for b in self.benchmarks.values() if b.suite == suite]

    def group(self, group: str) -> list[Benchmark]:
        return [b for b in self.benchmarks.values() if b.group == group]

    def kernel_spec(self, b: Benchmark) -> KernelSpec:
        assert b.source is not None and b.kernel is not None
        return self.sources[b.source].kernels[b.kernel]


def _c_value(v: str | int | bool) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def kernels_dir() -> Path:
    """Where the ``.cu`` files and the manifest are: ``$GPUDVFS_KERNELS_DIR``, else the
    package's ``kernels/`` folder (shipped in the wheel; ``kernels/`` at the repository root
    links to it)."""
    env = os.environ.get("GPUDVFS_KERNELS_DIR")
    return Path(env) if env else Path(__file__).resolve().parent.parent / "kernels"


def load_manifest(path: str | os.PathLike[str] | None = None) -> Manifest:
    """Read and validate the manifest (default: ``kernels_dir()/manifest.json``).

    Every problem raises `ManifestError` naming the file, the entry and what was expected.
    """
    p = Path(path) if path is not None else kernels_dir() / "manifest.json"
    return _load_manifest_cached(str(p.resolve()), p.stat().st_mtime_ns if p.exists() else 0)


@functools.lru_cache(maxsize=8)
def _load_manifest_cached(path: str, _mtime: int) -> Manifest:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise ManifestError(f"{p}: cannot read the kernel manifest ({e})") from None
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as e:
        raise ManifestError(f"{p}:{e.lineno}:{e.colno}: invalid JSON: {e.msg}") from None
    return _parse_manifest(p, raw)


def _parse_manifest(p: Path, raw: Any) -> Manifest:
    def fail(where: str, msg: str) -> ManifestError:
        return ManifestError(f"{p}: {where}: {msg}")

    if not isinstance(raw, dict):
        raise fail("top level", f"expected an object, got {type(raw).__name__}")
    if raw.get("format") != MANIFEST_FORMAT:
        raise fail("'format'", f"expected {MANIFEST_FORMAT!r}, got {raw.get('format')!r}")
    if raw.get("version") != MANIFEST_VERSION:
        raise fail("'version'", f"unsupported version {raw.get('version')!r}; "
                                f"this gpudvfs reads version {MANIFEST_VERSION}")
    if tuple(raw.get("components", ())) != COMPONENTS:
        raise fail("'components'", f"expected {list(COMPONENTS)}, got {raw.get('components')!r}")
    doc = raw.get("doc", "")
    doc = "\n".join(doc) if isinstance(doc, list) else str(doc)

    sources: dict[str, SourceSpec] = {}
    raw_sources = raw.get("sources")
    if not isinstance(raw_sources, dict) or not raw_sources:
        raise fail("'sources'", "expected a non-empty object {file: {options, kernels}}")
    for file, spec in raw_sources.items():
        where = f"sources[{file!r}]"
        if not isinstance(spec, dict):
            raise fail(where, "expected an object")
        if not (p.parent / file).is_file():
            raise fail(where, f"source file {p.parent / file} does not exist")
        options = spec.get("options", [])
        if not (isinstance(options, list) and all(isinstance(o, str) for o in options)):
            raise fail(f"{where}.options", "expected a list of strings")
        if any(o.startswith(("-arch", "--gpu-architecture")) for o in options):
            raise fail(f"{where}.options", "must not fix the architecture (it is chosen at compile time)")
        kernels: dict[str, KernelSpec] = {}
        raw_kernels = spec.get("kernels")
        if not isinstance(raw_kernels, dict) or not raw_kernels:
            raise fail(f"{where}.kernels", "expected a non-empty object {kernel: {template, args}}")
        for kname, kspec in raw_kernels.items():
            kw = f"{where}.kernels[{kname!r}]"
            if not isinstance(kspec, dict):
                raise fail(kw, "expected an object")
            template = kspec.get("template", [])
            args = kspec.get("args")
            if not (isinstance(template, list) and all(isinstance(t, str) for t in template)):
                raise fail(f"{kw}.template", "expected a list of parameter names")
            if not (isinstance(args, list) and args and all(isinstance(a, str) and ":" in a for a in args)):
                raise fail(f"{kw}.args", "expected a non-empty list of 'name:type' strings")
            kernels[kname] = KernelSpec(file, kname, tuple(template), tuple(args))
        sources[file] = SourceSpec(file, tuple(options), MappingProxyType(kernels))

    benchmarks: dict[str, Benchmark] = {}
    raw_benchmarks = raw.get("benchmarks")
    if not isinstance(raw_benchmarks, list) or not raw_benchmarks:
        raise fail("'benchmarks'", "expected a non-empty list")
    for i, entry in enumerate(raw_benchmarks):
        b = _parse_benchmark(entry, f"benchmarks[{i}]", sources, fail)
        if b.name in benchmarks:
            raise fail(f"benchmarks[{i}]", f"duplicate name {b.name!r}")
        benchmarks[b.name] = b
    return Manifest(p, doc, MappingProxyType(sources), MappingProxyType(benchmarks))


_POLICY_KEYS = {
    "grid_stride": {"block", "blocks_per_sm", "footprint"},
    "chase": {"footprint", "stride_bytes", "steps"},
    "shared_chase": {"block", "steps"},
    "idle": set(),
}
_REQUIRED_KEYS = ("name", "suite", "group", "source", "kernel", "template", "launch",
                  "stresses", "sass", "description")


def _parse_benchmark(entry: Any, where: str, sources: Mapping[str, SourceSpec],
                     fail: Callable[[str, str], ManifestError]) -> Benchmark:
    if not isinstance(entry, dict):
        raise fail(where, "expected an object")
    missing = [k for k in _REQUIRED_KEYS if k not in entry]
    if missing:
        raise fail(where, f"missing keys {missing}")
    unknown = sorted(set(entry) - set(_REQUIRED_KEYS))
    if unknown:
        raise fail(where, f"unknown keys {unknown} (expected {list(_REQUIRED_KEYS)})")
    name = entry["name"]
    if not (isinstance(name, str) and re.fullmatch(r"[a-z0-9_]+", name)):
        raise fail(f"{where}.name", f"expected a lower-case identifier, got {name!r}")
    where = f"{where} ({name})"
    if entry["suite"] not in SUITES:
        raise fail(f"{where}.suite", f"expected one of {list(SUITES)}, got {entry['suite']!r}")
    if not isinstance(entry["group"], str):
        raise fail(f"{where}.group", "expected a string")

    launch = entry["launch"]
    if not isinstance(launch, dict) or launch.get("policy") not in POLICIES:
        raise fail(f"{where}.launch", f"expected an object with 'policy' in {list(POLICIES)}")
    for k, v in launch.items():
        if k != "policy" and not (isinstance(v, (int, float, str)) and not isinstance(v, bool)):
            raise fail(f"{where}.launch.{k}", f"expected a number or string, got {v!r}")

    need = _POLICY_KEYS[launch["policy"]] - set(launch)
    if need:
        raise fail(f"{where}.launch", f"policy {launch['policy']!r} needs {sorted(need)}")
    if launch.get("footprint", "dram") not in ("dram", "l2"):
        raise fail(f"{where}.launch.footprint", f"expected 'dram' or 'l2', got {launch['footprint']!r}")

    source, kernel, template = entry["source"], entry["kernel"], entry["template"]
    if launch["policy"] == "idle":
        if source is not None or kernel is not None or template:
            raise fail(where, "an idle benchmark has source, kernel and template null/empty")
        tmpl: tuple[tuple[str, str | int | bool], ...] = ()
    else:
        if source not in sources:
            raise fail(f"{where}.source", f"{source!r} is not listed in 'sources'")
        if kernel not in sources[source].kernels:
            raise fail(f"{where}.kernel", f"{kernel!r} is not a kernel of {source}")
        spec = sources[source].kernels[kernel]
        if not isinstance(template, dict) or list(template) != list(spec.template):
            raise fail(f"{where}.template",
                       f"expected the parameters {list(spec.template)} in that order, got {template!r}")
        for k, v in template.items():
            ok = (isinstance(v, bool) or (isinstance(v, int) and v >= 0)
                  or (isinstance(v, str) and v in _TYPES))
            if not ok:
                raise fail(f"{where}.template.{k}",
                           f"expected a type in {sorted(_TYPES)}, a non-negative integer or a bool, got {v!r}")
        tmpl = tuple(template.items())
        # kernels with a compile-time BLOCK size shared memory and offsets by it: the launch
        # block must be the same number
        if "BLOCK" in template and "block" in launch and launch["block"] != template["BLOCK"]:
            raise fail(f"{where}.launch.block",
                       f"must equal the template's BLOCK={template['BLOCK']}, got {launch['block']!r}")

    stresses = entry["stresses"]
    if not isinstance(stresses, dict) or set(stresses) != set(COMPONENTS):
        raise fail(f"{where}.stresses", f"expected exactly the components {list(COMPONENTS)}")
    for c, v in stresses.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not (0.0 <= v <= 1.0):
            raise fail(f"{where}.stresses.{c}", f"expected a number in [0, 1], got {v!r}")

    sass = entry["sass"]
    if not isinstance(sass, dict):
        raise fail(f"{where}.sass", "expected an object")
    _validate_sass(sass, f"{where}.sass", fail, template if isinstance(template, dict) else {})
    if launch["policy"] != "idle" and not sass:
        raise fail(f"{where}.sass", "a kernel benchmark must say what its disassembly shows")
    if not isinstance(entry["description"], str) or not entry["description"]:
        raise fail(f"{where}.description", "expected a non-empty string")

    return Benchmark(
        name=name, suite=entry["suite"], group=entry["group"], source=source, kernel=kernel,
        template=tmpl, launch=MappingProxyType(dict(launch)),
        stresses=MappingProxyType({c: float(stresses[c]) for c in COMPONENTS}),
        sass=MappingProxyType(dict(sass)), description=entry["description"])


_SASS_KEYS = ("dominant", "mixed_in", "intensity", "min_counts", "opcodes")


def _validate_sass(sass: dict, where: str, fail: Callable[[str, str], ManifestError],
                   template: Mapping[str, Any]) -> None:
    unknown = sorted(set(sass) - set(_SASS_KEYS))
    if unknown:
        raise fail(where, f"unknown keys {unknown} (expected some of {list(_SASS_KEYS)})")
    if "dominant" in sass and sass["dominant"] not in WORK_CLASSES:
        raise fail(f"{where}.dominant", f"expected one of {list(WORK_CLASSES)}")
    mixed = sass.get("mixed_in", [])
    if not (isinstance(mixed, list) and all(m in WORK_CLASSES for m in mixed)):
        raise fail(f"{where}.mixed_in", f"expected a list of classes from {list(WORK_CLASSES)}")
    if "intensity" in sass:
        it = sass["intensity"]
        if not (isinstance(it, dict) and set(it) == {"sweep", "numerator", "denominator"}
                and it["sweep"] in template and it["numerator"] in WORK_CLASSES
                and isinstance(it["denominator"], list)
                and all(d in MEMORY_CLASSES for d in it["denominator"])):
            raise fail(f"{where}.intensity",
                       "expected {sweep: <template parameter>, numerator: <class>, "
                       "denominator: [<memory classes>]}")
    if "min_counts" in sass:
        mc = sass["min_counts"]
        if not (isinstance(mc, dict) and all(isinstance(v, int) and v >= 0 for v in mc.values())):
            raise fail(f"{where}.min_counts", "expected {class or opcode: minimum count}")
    if "opcodes" in sass:
        ops = sass["opcodes"]
        if not (isinstance(ops, list) and all(isinstance(o, str) for o in ops)):
            raise fail(f"{where}.opcodes", "expected a list of mnemonics")


def benchmark(name: str | Benchmark, manifest: Manifest | None = None) -> Benchmark:
    """Look a benchmark up by name (a `Benchmark` is returned as is)."""
    if isinstance(name, Benchmark):
        return name
    return (manifest or load_manifest())[name]


# --------------------------------------------------------------------------------------------
# Rendering and NVRTC

# Options every source gets. Empty on purpose: the sources need nothing beyond NVRTC's defaults,
# and CuPy adds its own (architecture, include paths), which could clash with repeated ones.
BASE_OPTIONS: tuple[str, ...] = ()


@dataclass(frozen=True)
class Rendered:
    """What a compiler needs for one benchmark: the source text, the options (without an
    architecture) and the name expression to instantiate and look up."""

    benchmark: str
    source_path: Path
    code: str
    options: tuple[str, ...]
    name_expression: str


def render(b: str | Benchmark, manifest: Manifest | None = None) -> Rendered:
    """Source text + compile options + name expression for one benchmark."""
    m = manifest or load_manifest()
    b = benchmark(b, m)
    if b.source is None:
        raise ValueError(f"benchmark {b.name!r} launches no kernel (policy {b.launch['policy']!r})")
    path = m.directory / b.source
    return Rendered(b.name, path, path.read_text(encoding="utf-8"),
                    BASE_OPTIONS + m.sources[b.source].options, b.name_expression)


def _nvrtc():
    try:
        from cuda.bindings import nvrtc  # cuda-bindings >= 12.6
    except ImportError:
        try:
            from cuda import nvrtc  # older cuda-python layout
        except ImportError:
            raise ToolchainMissing(
                "NVRTC bindings not installed: pip install 'cuda-bindings>=12.9,<13' "
                "nvidia-cuda-nvrtc-cu12") from None
    return nvrtc


def _check(nvrtc, result: tuple, what: str):
    err = result[0]
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise CompileError(f"{what} failed: {err!r}")
    return result[1] if len(result) == 2 else result[1:]


@dataclass(frozen=True)
class CompiledSource:
    """A CUBIN holding every requested instantiation of one source."""

    source: str
    arch: str
    cubin: bytes
    lowered: Mapping[str, str]  # name expression -> mangled symbol
    log: str


def compile_source(source: str, arch: str, name_expressions: Iterable[str],
                   manifest: Manifest | None = None) -> CompiledSource:
    """Compile one source file for ``arch`` (e.g. ``"sm_80"``) with NVRTC, instantiating all
    ``name_expressions`` in one program (far faster than one program per benchmark)."""
    m = manifest or load_manifest()
    if source not in m.sources:
        raise KeyError(f"{source!r} is not a source of {m.path}")
    path = m.directory / source
    options = BASE_OPTIONS + m.sources[source].options
    return _compile_cached(str(path), path.read_text(encoding="utf-8"), arch, options,
                           tuple(name_expressions))


@functools.lru_cache(maxsize=64)
def _compile_cached(path: str, code: str, arch: str, options: tuple[str, ...],
                    exprs: tuple[str, ...]) -> CompiledSource:
    if not re.fullmatch(r"sm_\d+[a-z]?", arch):
        raise ValueError(f"arch must look like 'sm_80', got {arch!r}")
    nvrtc = _nvrtc()
    try:
        prog = _check(nvrtc, nvrtc.nvrtcCreateProgram(code.encode(), Path(path).name.encode(), 0, [], []),
                      "nvrtcCreateProgram")
    except RuntimeError as e:
        if isinstance(e, CompileError):
            raise
        # cuda-bindings raises RuntimeError when it cannot load libnvrtc itself
        raise ToolchainMissing(f"cannot load NVRTC ({e}): pip install nvidia-cuda-nvrtc-cu12") from None
    try:
        for e in exprs:
            _check(nvrtc, nvrtc.nvrtcAddNameExpression(prog, e.encode()), f"adding {e!r}")
        opts = [f"--gpu-architecture={arch}".encode()] + [o.encode() for o in options]
        result = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
        size = _check(nvrtc, nvrtc.nvrtcGetProgramLogSize(prog), "nvrtcGetProgramLogSize")
        log_buf = b" " * size
        _check(nvrtc, nvrtc.nvrtcGetProgramLog(prog, log_buf), "nvrtcGetProgramLog")
        log = log_buf.rstrip(b"\x00 ").decode(errors="replace")
        if result[0] != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            raise CompileError(f"NVRTC could not compile {path} for {arch} ({result[0]!r})", log)
        size = _check(nvrtc, nvrtc.nvrtcGetCUBINSize(prog), "nvrtcGetCUBINSize")
        cubin = b" " * size
        _check(nvrtc, nvrtc.nvrtcGetCUBIN(prog, cubin), "nvrtcGetCUBIN")
        lowered = {}
        for e in exprs:
            name = _check(nvrtc, nvrtc.nvrtcGetLoweredName(prog, e.encode()), f"lowered name of {e!r}")
            lowered[e] = name.decode() if isinstance(name, bytes) else str(name)
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
    return CompiledSource(Path(path).name, arch, cubin, MappingProxyType(lowered), log)


def compile_cubin(b: str | Benchmark, arch: str = "sm_80", manifest: Manifest | None = None) -> bytes:
    """The CUBIN of one benchmark's kernel for ``arch``."""
    m = manifest or load_manifest()
    b = benchmark(b, m)
    if b.source is None:
        raise ValueError(f"benchmark {b.name!r} launches no kernel")
    return compile_source(b.source, arch, [b.name_expression], m).cubin


# --------------------------------------------------------------------------------------------
# Disassembly

def nvdisasm_path() -> Path:
    """The ``nvdisasm`` binary: ``$GPUDVFS_NVDISASM``, else the one shipped in the
    ``nvidia-cuda-nvdisasm`` wheel, else one on ``PATH``."""
    env = os.environ.get("GPUDVFS_NVDISASM")
    if env:
        if not Path(env).is_file():
            raise ToolchainMissing(f"GPUDVFS_NVDISASM={env} is not a file")
        return Path(env)
    from importlib import metadata
    for dist in ("nvidia-cuda-nvdisasm", "nvidia-cuda-nvdisasm-cu12"):
        try:
            files = metadata.files(dist) or []
        except metadata.PackageNotFoundError:
            continue
        for f in files:
            # the wheel's RECORD lists the binary (nvidia/cu13/bin/nvdisasm in CUDA 13)
            if f.name == "nvdisasm" and Path(str(f.locate())).is_file():
                return Path(str(f.locate())).resolve()
    found = shutil.which("nvdisasm")
    if found:
        return Path(found)
    raise ToolchainMissing("nvdisasm not found: pip install nvidia-cuda-nvdisasm "
                           "(or set GPUDVFS_NVDISASM)")


def disassemble(cubin: bytes) -> str:
    """SASS text of a CUBIN, from ``nvdisasm -c`` (code sections only)."""
    tool = nvdisasm_path()
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "module.cubin"
        f.write_bytes(cubin)
        try:
            proc = subprocess.run([str(tool), "-c", str(f)], capture_output=True, text=True, timeout=120)
        except PermissionError:
            raise ToolchainMissing(f"{tool} is not executable (chmod +x it)") from None
    if proc.returncode != 0:
        msg = proc.stderr.strip() or proc.stdout.strip()
        if "deprecated" in msg or "not supported" in msg.lower():
            raise UnsupportedArchitecture(f"{tool}: {msg}")
        raise DisassemblyError(f"{tool} failed ({proc.returncode}): {msg}")
    return proc.stdout


@dataclass(frozen=True)
class Instruction:
    address: int
    predicate: str          # "" or e.g. "@!P0"
    opcode: str             # full mnemonic with modifiers, e.g. "LDG.E.128.STRONG.GPU"
    operands: str
    target: int | None      # branch target address, for branches to a label

    @property
    def base(self) -> str:
        """The opcode without modifiers (``LDG`` for ``LDG.E.128``)."""
        return self.opcode.split(".", 1)[0]

    @property
    def cls(self) -> str:
        return instruction_class(self.opcode)


def instruction_class(opcode: str) -> str:
    """One of ``SASS_CLASSES`` for a mnemonic. Uniform-datapath instructions (``U...``:
    scalar per warp, their own pipeline) and moves/conversions/special registers are OTHER."""
    return _OPCODE_CLASS.get(opcode.split(".", 1)[0], "OTHER")


_INSN = re.compile(r"/\*([0-9a-f]+)\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*(?:\.[A-Za-z0-9_]+)*)\s*(.*?)\s*;")
_LABEL = re.compile(r"^\s*(\.L\w+):\s*$")
_FUNC = re.compile(r"^\s*\.text\.(\S+):\s*$")
_TARGET = re.compile(r"`\((\.L\w+)\)")


def parse_sass(text: str) -> dict[str, list[Instruction]]:
    """Instructions of every function in ``nvdisasm -c`` output, keyed by mangled name."""
    funcs: dict[str, list[tuple[int, str, str, str]]] = {}
    labels: dict[str, dict[str, int]] = {}
    current: str | None = None
    pending: list[str] = []
    for line in text.splitlines():
        fm = _FUNC.match(line)
        if fm:
            current = fm.group(1)
            funcs.setdefault(current, [])
            labels.setdefault(current, {})
            pending = []
            continue
        if current is None:
            continue
        lm = _LABEL.match(line)
        if lm:
            pending.append(lm.group(1))
            continue
        im = _INSN.search(line)
        if im:
            addr = int(im.group(1), 16)
            for lab in pending:
                labels[current][lab] = addr
            pending = []
            funcs[current].append((addr, (im.group(2) or "").strip(), im.group(3), im.group(4)))
    out: dict[str, list[Instruction]] = {}
    for name, insns in funcs.items():
        labs = labels[name]
        result = []
        for addr, pred, op, operands in insns:
            tm = _TARGET.search(operands)
            target = labs.get(tm.group(1)) if tm and op.split(".", 1)[0] in ("BRA", "JMP") else None
            result.append(Instruction(addr, pred, op, operands, target))
        out[name] = result
    return out


@dataclass(frozen=True)
class Loop:
    """Instructions ``body`` = indices [start, end] of a function: from a backward branch's
    target label to the branch itself."""

    start: int
    end: int
    body: tuple[Instruction, ...]

    def counts(self) -> Counter:
        """Instructions per class (see `instruction_class`)."""
        return Counter(i.cls for i in self.body)

    def opcode_counts(self) -> Counter:
        """Instructions per base opcode (``FFMA``, ``LDG``, ...)."""
        return Counter(i.base for i in self.body)


def find_loops(insns: list[Instruction]) -> list[Loop]:
    """Every loop of a function: a branch whose target lies at or before it closes a loop over
    the instructions in between. Branches to themselves (the padding after EXIT) are skipped."""
    index = {ins.address: k for k, ins in enumerate(insns)}
    loops = []
    for k, ins in enumerate(insns):
        if ins.target is not None and ins.target < ins.address and ins.target in index:
            s = index[ins.target]
            loops.append(Loop(s, k, tuple(insns[s:k + 1])))
    return loops


def hot_loop(insns: list[Instruction]) -> Loop:
    """The measurement loop of a benchmark kernel: among the innermost loops (those whose range
    holds no other loop), the one with the most work-class instructions (ties: the first).

    This is what "the loop" means in the SASS checks: the code that repeats during the
    measurement, unaffected by set-up code before it or by loops that enclose it.
    """
    loops = find_loops(insns)
    if not loops:
        raise ValueError("no loop (no backward branch) in this function")
    inner = [lp for lp in loops
             if not any(o is not lp and lp.start <= o.start and o.end <= lp.end for o in loops)]
    return max(inner, key=lambda lp: sum(1 for i in lp.body if i.cls in WORK_CLASSES))


def dominates(loop: Loop, cls: str, exempt: Iterable[str] = ()) -> bool:
    """``cls`` dominates ``loop`` when the loop holds at least one ``cls`` instruction and no
    other work class (except the ``exempt`` ones, deliberately mixed in) has more."""
    c = loop.counts()
    skip = set(exempt) | {cls}
    return c[cls] > 0 and all(c[cls] >= c[k] for k in WORK_CLASSES if k not in skip)


def intensity(loop: Loop, numerator: str, denominator: Iterable[str]) -> float:
    """Instructions of class ``numerator`` per instruction of the ``denominator`` classes."""
    c = loop.counts()
    den = sum(c[d] for d in denominator)
    return math.inf if den == 0 else c[numerator] / den


# --------------------------------------------------------------------------------------------
# Real GPU: CuPy

_PARAM_KEYS = {
    "grid_stride": {"bytes", "elements", "reps", "blocks_per_sm", "a"},
    "chase": {"bytes", "stride_bytes", "steps", "warm"},
    "shared_chase": {"steps", "stride_words"},
    "idle": {"sleep_ms"},
}


@dataclass
class LoadedBenchmark:
    """A benchmark ready on the GPU. Calling it launches the kernel once and waits for it."""

    name: str
    launch_once: Callable[[], None]
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    sizes: Mapping[str, int] = field(default_factory=dict)
    _result: Callable[[], dict[str, float]] | None = None

    def __call__(self) -> None:
        self.launch_once()

    def result(self) -> dict[str, float]:
        """What the last launch measured in-kernel (latency benchmarks: cycles per access)."""
        if self._result is None:
            raise ValueError(f"{self.name} measures nothing in-kernel; time its launches instead")
        return self._result()


def load(b: str | Benchmark, params: Mapping[str, Any] | None = None,
         manifest: Manifest | None = None) -> LoadedBenchmark:
    """Compile ``b`` with CuPy (NVRTC for the current device), allocate its buffers following
    its launch policy and return a `LoadedBenchmark`. ``params`` override launch settings
    (``bytes``, ``elements``, ``reps``, ``steps``, ...; unknown keys are an error)."""
    m = manifest or load_manifest()
    b = benchmark(b, m)
    params = dict(params or {})
    policy = b.launch["policy"]
    unknown = sorted(set(params) - _PARAM_KEYS[policy])
    if unknown:
        raise ValueError(f"{b.name}: unknown launch parameters {unknown}; "
                         f"policy {policy!r} takes {sorted(_PARAM_KEYS[policy])}")
    settings = {**{k: v for k, v in b.launch.items() if k != "policy"}, **params}
    if policy == "idle":
        return _load_idle(b, settings)
    try:
        cp = importlib.import_module("cupy")
    except ImportError:
        raise ToolchainMissing("running kernels needs CuPy: pip install 'gpudvfs[measure]'") from None
    r = render(b, m)
    module = cp.RawModule(code=r.code, options=r.options, name_expressions=(r.name_expression,))
    fn = module.get_function(r.name_expression)
    dev = cp.cuda.Device()
    sms = int(dev.attributes["MultiProcessorCount"])
    l2 = int(dev.attributes["L2CacheSize"])
    spec = m.kernel_spec(b)
    builder = {"grid_stride": _grid_stride, "chase": _chase, "shared_chase": _shared_chase}[policy]
    grid, block, values, sizes, result = builder(cp, b, settings, sms, l2)
    missing = [a for a in spec.arg_names if a not in values]
    if missing:
        raise ManifestError(f"{b.name}: policy {policy!r} cannot supply kernel arguments {missing}")
    args = tuple(values[a] for a in spec.arg_names)
    stream = cp.cuda.get_current_stream()

    def launch_once() -> None:
        fn(grid, block, args)
        stream.synchronize()

    return LoadedBenchmark(b.name, launch_once, grid, block, MappingProxyType(sizes), result)


def _load_idle(b: Benchmark, settings: Mapping[str, Any]) -> LoadedBenchmark:
    # The paper's Idle benchmark: the GPU is awake (a context exists) but runs nothing.
    sleep_s = float(settings.get("sleep_ms", 50)) / 1000.0
    try:
        cp = importlib.import_module("cupy")
        cp.cuda.Device().synchronize()  # creates the context: the GPU leaves its deepest idle
    except ImportError:
        pass
    return LoadedBenchmark(b.name, lambda: time.sleep(sleep_s), (0, 0, 0), (0, 0, 0))


def _footprint(kind: str, l2: int) -> int:
    # "dram": 4x L2 (at least 64 MiB) so each pass streams from DRAM; "l2": a quarter of L2,
    # which stays resident after the first pass.
    if kind == "dram":
        return max(4 * l2, 64 << 20)
    if kind == "l2":
        return max(l2 // 4, 64 << 10)
    raise ManifestError(f"unknown footprint {kind!r} (expected 'dram' or 'l2')")


def _elem(b: Benchmark) -> tuple[int, str, int]:
    p = b.params
    t = p.get("T", p.get("V", "float"))
    return _TYPES[str(t)]


def _grid_stride(cp, b: Benchmark, s: Mapping[str, Any], sms: int, l2: int):
    import numpy as np
    size, dtype, width = _elem(b)
    block = int(b.params.get("BLOCK", s["block"]))
    granule = block * int(b.params.get("UNROLL", 1))  # stream kernels have no tail handling
    n = int(s["elements"]) if "elements" in s else int(s.get("bytes", _footprint(str(s["footprint"]), l2))) // size
    n = (n // granule) * granule
    if n <= 0:
        raise ValueError(f"{b.name}: buffer smaller than one tile of {granule} elements")
    src = cp.random.default_rng(1).random(n * width, dtype=np.float64)
    src = (src * 1000).astype(dtype) if dtype == "int32" else src.astype(dtype)
    dst = cp.empty_like(src)
    grid = (sms * int(s["blocks_per_sm"]), 1, 1)
    values = {"in": src, "out": dst, "n": np.uint32(n), "reps": np.uint32(int(s.get("reps", 1))),
              "a": np.dtype(dtype).type(s.get("a", -1))}
    return grid, (block, 1, 1), values, {"elements": n, "bytes": n * size}, None


def _chase(cp, b: Benchmark, s: Mapping[str, Any], sms: int, l2: int):
    import numpy as np
    footprint = int(s.get("bytes", _footprint(str(s["footprint"]), l2)))
    stride = int(s["stride_bytes"])
    if stride % 8 or stride <= 0:
        raise ValueError(f"{b.name}: stride_bytes must be a positive multiple of 8")
    slots = footprint // stride
    ring = cp.zeros(footprint // 8, dtype=np.uint64)
    base = ring.data.ptr
    idx = cp.arange(slots, dtype=np.uint64)
    # slot i points at slot i+1 (cyclically): consecutive accesses one stride apart
    ring[idx * (stride // 8)] = base + ((idx + 1) % slots) * stride
    unroll = int(b.params["UNROLL"])
    steps = max(unroll, int(s["steps"]) // unroll * unroll)
    warm = slots if s.get("warm") == "ring" else int(s.get("warm", 0))
    sink = cp.zeros(1, dtype=np.uint64)
    cycles = cp.zeros(1, dtype=np.int64)
    values = {"start": ring, "warm": np.uint32(warm), "steps": np.uint32(steps),
              "sink": sink, "cycles": cycles}

    def result() -> dict[str, float]:
        return {"cycles_per_access": float(cycles.get()[0]) / steps, "steps": float(steps)}

    return (1, 1, 1), (1, 1, 1), values, {"bytes": footprint, "slots": slots}, result


def _shared_chase(cp, b: Benchmark, s: Mapping[str, Any], sms: int, l2: int):
    import numpy as np
    words = int(b.params["WORDS"])
    stride = int(s.get("stride_words", 1))
    ring = ((cp.arange(words, dtype=np.uint32) + stride) % words) * 4  # byte offsets
    unroll = int(b.params["UNROLL"])
    steps = max(unroll, int(s["steps"]) // unroll * unroll)
    sink = cp.zeros(1, dtype=np.uint32)
    cycles = cp.zeros(1, dtype=np.int64)
    values = {"ring": ring, "steps": np.uint32(steps), "sink": sink, "cycles": cycles}

    def result() -> dict[str, float]:
        return {"cycles_per_access": float(cycles.get()[0]) / steps, "steps": float(steps)}

    return (1, 1, 1), (int(s["block"]), 1, 1), values, {"words": words}, result
