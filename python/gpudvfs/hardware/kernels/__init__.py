"""The CUDA microbenchmark suites and what builds and checks them.

Manifest, source rendering, NVRTC compilation, SASS checks, and the CuPy loader for real GPUs.

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

from gpudvfs.hardware.kernels.errors import (
    CompileError,
    DisassemblyError,
    ManifestError,
    ToolchainMissing,
    UnsupportedArchitecture,
)
from gpudvfs.hardware.kernels.gpu import LoadedBenchmark, load
from gpudvfs.hardware.kernels.manifest import (
    COMPONENTS,
    LAUNCH_POLICIES,
    SUITES,
    Benchmark,
    KernelSpec,
    Manifest,
    SourceSpec,
    benchmark,
    kernels_dir,
    load_manifest,
)
from gpudvfs.hardware.kernels.nvrtc import (
    BASE_OPTIONS,
    CompiledSource,
    Rendered,
    compile_cubin,
    compile_source,
    render,
)
from gpudvfs.hardware.kernels.sass import (
    MEMORY_CLASSES,
    SASS_CLASSES,
    WORK_CLASSES,
    Instruction,
    Loop,
    disassemble,
    dominates,
    find_loops,
    hot_loop,
    instruction_class,
    intensity,
    nvdisasm_path,
    parse_sass,
)

__all__ = [
    "BASE_OPTIONS", "COMPONENTS", "MEMORY_CLASSES", "LAUNCH_POLICIES", "SASS_CLASSES", "SUITES", "WORK_CLASSES",
    "Benchmark", "CompileError", "CompiledSource", "DisassemblyError", "Instruction", "KernelSpec", "LoadedBenchmark",
    "Loop", "Manifest", "ManifestError", "Rendered", "SourceSpec", "ToolchainMissing", "UnsupportedArchitecture",
    "benchmark", "compile_cubin", "compile_source", "disassemble", "dominates", "find_loops", "hot_loop",
    "instruction_class", "intensity", "kernels_dir", "load", "load_manifest", "nvdisasm_path", "parse_sass",
    "render",
]
