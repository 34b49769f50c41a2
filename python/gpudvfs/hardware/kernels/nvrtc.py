"""Rendering a benchmark's source and compiling it to CUBIN with NVRTC (no GPU needed)."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from gpudvfs.hardware.kernels.errors import CompileError, ToolchainMissing
from gpudvfs.hardware.kernels.manifest import Benchmark, Manifest, benchmark, load_manifest

# --------------------------------------------------------------------------------------------
# Rendering and NVRTC

# Options every source gets. Empty on purpose: the sources need nothing beyond NVRTC's defaults,
# and CuPy adds its own (architecture, include paths), which could clash with repeated ones.
BASE_OPTIONS: tuple[str, ...] = ()


@dataclass(frozen=True)
class Rendered:
    """What a compiler needs for one benchmark.

    ``options`` come without an architecture; ``name_expression`` is e.g. ``arith<float, 16>``.
    """

    benchmark: str
    source_path: Path
    code: str
    options: tuple[str, ...]
    name_expression: str


def render(b: str | Benchmark, manifest: Manifest | None = None) -> Rendered:
    """Source text, compile options and name expression of one benchmark; `ValueError` for the idle one (no kernel)."""
    m = manifest or load_manifest()
    b = benchmark(b, m)
    if b.source is None:
        raise ValueError(f"benchmark {b.name!r} launches no kernel (policy {b.launch['policy']!r})")
    path = m.directory / b.source
    return Rendered(b.name, path, path.read_text(encoding="utf-8"),
                    BASE_OPTIONS + m.sources[b.source].options, b.name_expression)


def _nvrtc() -> Any:
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


def _check(nvrtc: Any, result: tuple, what: str) -> Any:
    err = result[0]
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise CompileError(f"{what} failed: {err!r}")
    return result[1] if len(result) == 2 else result[1:]


@dataclass(frozen=True)
class CompiledSource:
    """A CUBIN of every requested instantiation of one source for ``arch`` (e.g. ``"sm_80"``), with NVRTC's ``log``.

    ``lowered`` maps each name expression to its mangled symbol.
    """

    source: str
    arch: str
    cubin: bytes
    lowered: Mapping[str, str]
    log: str


def compile_source(source: str, arch: str, name_expressions: Iterable[str],
                   manifest: Manifest | None = None) -> CompiledSource:
    """Compile one source of the manifest with NVRTC, every instantiation in one program (far faster than one each).

    Raises
    ------
    KeyError
        Where the manifest lists no such source.
    ValueError
        Where ``arch`` is not of the form ``sm_80``.
    ToolchainMissing
        Where NVRTC is not installed.
    CompileError
        Where NVRTC rejects the source.
    """
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
        for expr in exprs:
            _check(nvrtc, nvrtc.nvrtcAddNameExpression(prog, expr.encode()), f"adding {expr!r}")
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
        for expr in exprs:
            name = _check(nvrtc, nvrtc.nvrtcGetLoweredName(prog, expr.encode()), f"lowered name of {expr!r}")
            lowered[expr] = name.decode() if isinstance(name, bytes) else str(name)
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
    return CompiledSource(Path(path).name, arch, cubin, MappingProxyType(lowered), log)


def compile_cubin(b: str | Benchmark, arch: str = "sm_80", manifest: Manifest | None = None) -> bytes:
    """The CUBIN of one benchmark's kernel; `ValueError` where it launches none."""
    m = manifest or load_manifest()
    b = benchmark(b, m)
    if b.source is None:
        raise ValueError(f"benchmark {b.name!r} launches no kernel")
    return compile_source(b.source, arch, [b.name_expression], m).cubin
