"""Loading and launching a benchmark on a real GPU through CuPy."""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

from gpudvfs.hardware.kernels.errors import ManifestError, ToolchainMissing
from gpudvfs.hardware.kernels.manifest import _TYPES, Benchmark, Manifest, benchmark, load_manifest
from gpudvfs.hardware.kernels.nvrtc import render

# --------------------------------------------------------------------------------------------
# Real GPU: CuPy

# What a launch policy builds: grid, block, kernel arguments by name, buffer sizes, and what
# reads the last launch's measurement.
_Built = tuple[tuple[int, int, int], tuple[int, int, int], dict[str, Any], dict[str, int],
               Callable[[], dict[str, float]]]

_PARAM_KEYS = {
    "grid_stride": {"bytes", "elements", "reps", "blocks_per_sm", "a"},
    "chase": {"bytes", "stride_bytes", "steps", "warm"},
    "shared_chase": {"steps", "stride_words"},
    "idle": {"sleep_ms"},
}


@dataclass
class LoadedBenchmark:
    """A benchmark ready on the GPU; calling it launches the kernel once and waits for it.

    ``sizes`` are the buffers' sizes (elements, bytes, slots, words); ``_result`` reads what the last
    launch measured (None: nothing).
    """

    name: str
    launch_once: Callable[[], None]
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    sizes: Mapping[str, int] = field(default_factory=dict)
    _result: Callable[[], dict[str, float]] | None = None

    def __call__(self) -> None:
        """Launch once and wait."""
        self.launch_once()

    @property
    def measures(self) -> bool:
        """Whether `result` has readings: every benchmark but idle."""
        return self._result is not None

    def result(self) -> dict[str, float]:
        """What the last launch measured; `ValueError` where the benchmark measures nothing (idle).

        In-kernel, cycles per access and steps (latency benchmarks); by construction, the bytes it read
        and wrote (grid-stride benchmarks).
        """
        if self._result is None:
            raise ValueError(f"{self.name} measures nothing in-kernel; time its launches instead")
        return self._result()


def load(b: str | Benchmark, params: Mapping[str, Any] | None = None,
         manifest: Manifest | None = None) -> LoadedBenchmark:
    """Compile a benchmark with CuPy (NVRTC, for the current device) and allocate its buffers by its launch policy.

    ``params`` override launch settings (``bytes``, ``elements``, ``reps``, ``steps``, ...);
    ``manifest`` defaults to `load_manifest`. `ValueError` where ``params`` has keys the launch
    policy does not take; `ToolchainMissing` where CuPy is not installed.
    """
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
    spec = m.kernel_spec(b)
    if "reps" in params and "reps" not in spec.arg_names:
        raise ValueError(f"{b.name}: its kernel takes no 'reps' (it reads and writes its buffers once a launch)")
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


def _grid_stride(cp: Any, b: Benchmark, s: Mapping[str, Any], sms: int, l2: int) -> _Built:
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
    reps = int(s.get("reps", 1))
    values = {"in": src, "out": dst, "n": np.uint32(n), "reps": np.uint32(reps),
              "a": np.dtype(dtype).type(s.get("a", -1))}
    # Each repetition reads every element of `in` and writes every element of `out` once: the
    # bandwidth benchmark's DRAM traffic, from which the time device's DRAM delay is fitted.
    moved = {"bytes": float(2 * n * size * reps)}
    return grid, (block, 1, 1), values, {"elements": n, "bytes": n * size}, lambda: dict(moved)


def _chase(cp: Any, b: Benchmark, s: Mapping[str, Any], sms: int, l2: int) -> _Built:
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


def _shared_chase(cp: Any, b: Benchmark, s: Mapping[str, Any], sms: int, l2: int) -> _Built:
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
