"""The manifest of the microbenchmarks: loading, validation and lookup."""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from gpudvfs.data.counters import COMPONENTS
from gpudvfs.hardware.kernels.errors import ManifestError
from gpudvfs.hardware.kernels.sass import MEMORY_CLASSES, WORK_CLASSES
from gpudvfs.limits import is_count, is_number

MANIFEST_FORMAT = "gpudvfs-kernel-manifest"
MANIFEST_VERSION = 1

SUITES = ("power", "time")
LAUNCH_POLICIES = ("grid_stride", "chase", "shared_chase", "idle")

# Template argument values a manifest may use, and their C spelling / element layout.
# (size in bytes of one element, numpy dtype name of one scalar, scalars per element)
_TYPES: dict[str, tuple[int, str, int]] = {
    "int": (4, "int32", 1),
    "float": (4, "float32", 1),
    "double": (8, "float64", 1),
    "float2": (8, "float32", 2),
    "float4": (16, "float32", 4),
}


# --------------------------------------------------------------------------------------------
# Manifest

@dataclass(frozen=True)
class KernelSpec:
    """One ``__global__`` template in a ``.cu`` file, its arguments in order as ``name:type``."""

    source: str
    name: str
    template: tuple[str, ...]
    args: tuple[str, ...]

    @property
    def arg_names(self) -> tuple[str, ...]:
        """The arguments' names, in order."""
        return tuple(a.split(":", 1)[0] for a in self.args)


@dataclass(frozen=True)
class SourceSpec:
    """One ``.cu`` file: the NVRTC options it needs (never an architecture) and the kernels it defines."""

    file: str
    options: tuple[str, ...]
    kernels: Mapping[str, KernelSpec]


@dataclass(frozen=True)
class Benchmark:
    """One microbenchmark: a kernel template instantiated with fixed arguments.

    ``name`` is a lower-case identifier; ``group`` its group within its suite (e.g. ``SP``,
    ``Latency``); ``source`` and ``kernel`` are None for the idle benchmark; ``template`` holds
    (name, value) in order; ``launch`` the launch policy (one of `LAUNCH_POLICIES`) and its
    settings; ``stresses`` the components it stresses, in [0, 1] (design intent, not a
    measurement); ``sass`` what its disassembly must show.
    """

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
    """Every benchmark of both suites (by name, in the file's order) and the sources they compile from."""

    path: Path
    doc: str
    sources: Mapping[str, SourceSpec]
    benchmarks: Mapping[str, Benchmark]

    @property
    def directory(self) -> Path:
        """The folder of the manifest and its sources."""
        return self.path.parent

    def __getitem__(self, name: str) -> Benchmark:
        """A benchmark by name; a KeyError that says how many there are otherwise."""
        try:
            return self.benchmarks[name]
        except KeyError:
            raise KeyError(f"no benchmark {name!r} in {self.path} "
                           f"({len(self.benchmarks)} benchmarks; see its 'benchmarks' list)") from None

    def __iter__(self) -> Iterator[Benchmark]:
        """The benchmarks, in the file's order."""
        return iter(self.benchmarks.values())

    def __len__(self) -> int:
        """The number of benchmarks."""
        return len(self.benchmarks)

    def suite(self, suite: str) -> list[Benchmark]:
        """The benchmarks of one of `SUITES`, in the file's order."""
        return [b for b in self.benchmarks.values() if b.suite == suite]

    def group(self, group: str) -> list[Benchmark]:
        """The benchmarks of one group (e.g. ``SP``), in the file's order."""
        return [b for b in self.benchmarks.values() if b.group == group]

    def kernel_spec(self, b: Benchmark) -> KernelSpec:
        """The kernel template a benchmark instantiates; `ValueError` for the idle one, which launches none."""
        if b.source is None or b.kernel is None:
            raise ValueError(f"benchmark {b.name!r} launches no kernel")
        return self.sources[b.source].kernels[b.kernel]


def _c_value(v: str | int | bool) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


#: This module's folder, resolved once: the manifest and sources shipped in the wheel.
_PACKAGED = Path(__file__).resolve().parent


def kernels_dir() -> Path:
    """``$GPUDVFS_KERNELS_DIR``, else this module's folder (in the wheel; the repository's ``kernels/`` links to it)."""
    env = os.environ.get("GPUDVFS_KERNELS_DIR")
    return Path(env) if env else _PACKAGED


def load_manifest(path: str | os.PathLike[str] | None = None) -> Manifest:
    """Read and validate the manifest (default ``kernels_dir()/manifest.json``), once per path in a process.

    The sweeps, the NVML device and the compiler look benchmarks up call after call; the manifest
    ships with the package and does not change under a running process. `ManifestError` at every
    problem, naming the file, the entry and what was expected.
    """
    return _load_manifest(Path(path) if path is not None else kernels_dir() / "manifest.json")


@functools.cache
def _load_manifest(path: Path) -> Manifest:
    p = path.resolve()
    return _parse_manifest(p, _read_json(p))


def _read_json(p: Path) -> Any:
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise ManifestError(f"{p}: cannot read the kernel manifest ({e})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ManifestError(f"{p}:{e.lineno}:{e.colno}: invalid JSON: {e.msg}") from None


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
    if not isinstance(launch, dict) or launch.get("policy") not in LAUNCH_POLICIES:
        raise fail(f"{where}.launch", f"expected an object with 'policy' in {list(LAUNCH_POLICIES)}")
    for k, v in launch.items():
        if k != "policy" and not (is_number(v) or isinstance(v, str)):
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
            ok = isinstance(v, bool) or is_count(v) or (isinstance(v, str) and v in _TYPES)
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
        if not (is_number(v) and 0.0 <= v <= 1.0):
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
        if not (isinstance(mc, dict) and all(is_count(v) for v in mc.values())):
            raise fail(f"{where}.min_counts", "expected {class or opcode: minimum count}")
    if "opcodes" in sass:
        ops = sass["opcodes"]
        if not (isinstance(ops, list) and all(isinstance(o, str) for o in ops)):
            raise fail(f"{where}.opcodes", "expected a list of mnemonics")


def benchmark(name: str | Benchmark, manifest: Manifest | None = None) -> Benchmark:
    """Look a benchmark up by name (a `Benchmark` is returned as is) in ``manifest`` (default: `load_manifest`).

    `KeyError` where the manifest has no such benchmark.
    """
    if isinstance(name, Benchmark):
        return name
    return (manifest or load_manifest())[name]
